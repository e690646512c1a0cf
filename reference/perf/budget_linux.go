//go:build linux

package perf

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// cpuBudget holds each of a few processes to a share of one core without cgroups: every period it
// lets a process run until the CPU time it used in the period reaches share × period, then stops it
// (SIGSTOP) until the period ends and lets it go on (SIGCONT). Time used past the share (the
// sampling is not instant) is owed and taken off the next period, so that over many periods a
// process gets its share and no more. A process that used less gets nothing back: an idle node
// banks no credit.
//
// The CPU time is read from the process's CPU-time clock (clock_gettime of the process clock,
// the sum over its threads, in nanoseconds): it is the same count as utime + stime of
// /proc/<pid>/stat, which the kernel publishes in clock ticks of 10 ms, coarser than a share of
// a period of 20 ms.
type cpuBudget struct {
	share  float64
	period time.Duration
	sample time.Duration
	done   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	stopped map[int]int // periods in which each process was stopped, by pid
	periods map[int]int
}

// budgetSupported reports whether this system can hold a process to a CPU budget (it can: Linux).
func budgetSupported() bool { return true }

// startBudget holds every pid to share of a core, in periods of period, sampling its CPU time
// every sample, until stop.
func startBudget(pids []int, share float64, period, sample time.Duration) (*cpuBudget, error) {
	for _, pid := range pids {
		if _, err := processCPU(pid); err != nil {
			return nil, err
		}
	}
	b := &cpuBudget{share: share, period: period, sample: sample, done: make(chan struct{}),
		stopped: map[int]int{}, periods: map[int]int{}}
	for _, pid := range pids {
		b.wg.Go(func() { b.hold(pid) })
	}
	return b, nil
}

// hold is one process's loop: a period at a time until the budget stops or the process ends.
func (b *cpuBudget) hold(pid int) {
	allowed := time.Duration(b.share * float64(b.period))
	var owed time.Duration
	tick := time.NewTicker(b.sample)
	defer tick.Stop()
	for {
		start := time.Now()
		c0, err := processCPU(pid)
		if err != nil {
			return
		}
		stopped := false
		for !stopped && time.Since(start) < b.period {
			select {
			case <-b.done:
				return
			case <-tick.C:
			}
			c, err := processCPU(pid)
			if err != nil {
				return
			}
			if used := c - c0; used >= allowed-owed {
				_ = syscall.Kill(pid, syscall.SIGSTOP)
				stopped = true
			}
		}
		if stopped {
			select {
			case <-b.done:
			case <-time.After(b.period - time.Since(start)):
			}
			c, err := processCPU(pid)
			_ = syscall.Kill(pid, syscall.SIGCONT)
			if err != nil {
				return
			}
			owed = max(0, c-c0-(allowed-owed))
		} else {
			owed = 0
		}
		b.mu.Lock()
		b.periods[pid]++
		if stopped {
			b.stopped[pid]++
		}
		b.mu.Unlock()
		select {
		case <-b.done:
			return
		default:
		}
	}
}

// stoppedShare is the share of periods in which pid used up its budget.
func (b *cpuBudget) stoppedShare(pid int) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.periods[pid] == 0 {
		return 0
	}
	return float64(b.stopped[pid]) / float64(b.periods[pid])
}

// stop ends the budget and lets every process it held run (SIGCONT).
func (b *cpuBudget) stop() {
	select {
	case <-b.done:
		return
	default:
	}
	close(b.done)
	b.wg.Wait()
}

// processCPU is the CPU time process pid used so far, all its threads, from its CPU-time clock
// (clockid ((^pid) << 3) | CPUCLOCK_SCHED, as clock_getcpuclockid makes it).
func processCPU(pid int) (time.Duration, error) {
	const cpuclockSched = 2
	id := (^int32(pid))<<3 | cpuclockSched
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(id), uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, fmt.Errorf("CPU clock of process %d: %w", pid, errno)
	}
	return time.Duration(ts.Nano()), nil
}

// clockTicks is the unit of utime and stime in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

// statCPU is utime + stime of /proc/<pid>/stat: the CPU time process pid used so far, to the
// clock tick (10 ms).
func statCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces: count from after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errors.New("/proc stat: too few fields")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// statFields are the fields of /proc/<pid>/stat after the command name: f[0] is field 3.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil, errors.New("/proc stat: too few fields")
	}
	return f, nil
}

// ticks sums the fields of f at the given indices (clock ticks) into a duration.
func ticks(f []string, idx ...int) (time.Duration, error) {
	var sum int64
	for _, i := range idx {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		sum += v
	}
	return time.Duration(sum) * time.Second / clockTicks, nil
}

// parentOf is the parent process of pid (field 4 of /proc/<pid>/stat).
func parentOf(pid int) (int, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[1])
}

// treeCPU is the CPU time of process root and of its children: root's utime + stime, the
// cutime + cstime of the children it reaped, and utime + stime of those alive. Over a span, a
// child that ends moves from the live sum to the reaped one, so differences stay whole. (The
// server's main process of PostgreSQL forks a process per connection and reaps them.)
func treeCPU(root int) (time.Duration, error) {
	f, err := statFields(root)
	if err != nil {
		return 0, err
	}
	total, err := ticks(f, 11, 12, 13, 14)
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	want := strconv.Itoa(root)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := statFields(pid)
		if err != nil || f[1] != want {
			continue // gone, or another's child
		}
		if t, err := ticks(f, 11, 12); err == nil {
			total += t
		}
	}
	return total, nil
}

// machineBusy is the CPU time every core of the machine spent busy so far (/proc/stat, the
// first line: user, nice, system, irq, softirq and steal; not idle or iowait).
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("/proc/stat: no cpu line")
	}
	return ticks(f, 1, 2, 3, 6, 7, 8)
}
