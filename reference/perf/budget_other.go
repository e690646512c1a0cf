//go:build !linux

package perf

import (
	"errors"
	"time"
)

// errNoBudget: holding a process to a CPU budget needs Linux (its process CPU clocks and
// /proc/<pid>/stat).
var errNoBudget = errors.New("a CPU budget per process needs Linux")

type cpuBudget struct{}

func budgetSupported() bool { return false }

func startBudget([]int, float64, time.Duration, time.Duration) (*cpuBudget, error) {
	return nil, errNoBudget
}

func (b *cpuBudget) stoppedShare(int) float64 { return 0 }

func (b *cpuBudget) stop() {}

func processCPU(int) (time.Duration, error) { return 0, errNoBudget }

func statCPU(int) (time.Duration, error) { return 0, errNoBudget }

func parentOf(int) (int, error) { return 0, errNoBudget }

func treeCPU(int) (time.Duration, error) { return 0, errNoBudget }

func machineBusy() (time.Duration, error) { return 0, errNoBudget }
