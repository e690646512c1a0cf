//go:build linux

package perf

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatCPUReadsThisProcess: utime + stime of /proc/self/stat agrees with the process CPU
// clock to the clock tick, and both grow with work.
func TestStatCPUReadsThisProcess(t *testing.T) {
	pid := os.Getpid()
	c0, err := processCPU(pid)
	require.NoError(t, err)
	s0, err := statCPU(pid)
	require.NoError(t, err)
	spin(50 * time.Millisecond)
	c1, err := processCPU(pid)
	require.NoError(t, err)
	s1, err := statCPU(pid)
	require.NoError(t, err)
	require.GreaterOrEqual(t, c1-c0, 50*time.Millisecond)
	require.Greater(t, s1, s0)
	require.InDelta(t, float64(c1), float64(s1), float64(2*time.Second/clockTicks))
}

// spin burns CPU until this process's CPU clock advanced by d.
func spin(d time.Duration) {
	c0, _ := processCPU(os.Getpid())
	for {
		c, _ := processCPU(os.Getpid())
		if c-c0 >= d {
			return
		}
	}
}

// TestABudgetHoldsAProcessToItsShare: a process that would use a whole core, held to 0.25 of
// one, uses at most about a quarter of the wall time that passes (a busy machine may give it
// less, never more).
func TestABudgetHoldsAProcessToItsShare(t *testing.T) {
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	b, err := startBudget([]int{pid}, 0.25, 20*time.Millisecond, 2*time.Millisecond)
	require.NoError(t, err)
	c0, err := processCPU(pid)
	require.NoError(t, err)
	start := time.Now()
	// Until the process used 250 ms of CPU: at a quarter of a core, about a second of wall time.
	for {
		c, err := processCPU(pid)
		require.NoError(t, err)
		if c-c0 >= 250*time.Millisecond {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	wall := time.Since(start)
	b.stop()
	require.LessOrEqual(t, (250*time.Millisecond).Seconds()/wall.Seconds(), 0.3,
		"250 ms of CPU at a quarter of a core takes a second of wall time")
	require.Greater(t, b.stoppedShare(pid), 0.0)
}
