package steps

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// TestHelperSUT is not a test: it is the system the process driver's tests launch (the test
// binary run again with LOOMCHECK_HELPER_SUT=1). It listens where LOOM_CONFIG says, exits with
// status 3 when it cannot, and answers every request with 200 and its pid in X-Helper-Pid.
func TestHelperSUT(t *testing.T) {
	if os.Getenv("LOOMCHECK_HELPER_SUT") != "1" {
		t.Skip("the system the process driver's tests launch")
	}
	b, err := os.ReadFile(os.Getenv("LOOM_CONFIG"))
	if err != nil {
		os.Exit(2)
	}
	var cfg sutconfig.SUTConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(3)
	}
	pid := strconv.Itoa(os.Getpid())
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Helper-Pid", pid)
	}))
	os.Exit(0)
}

// helperProcess is a process driver that launches TestHelperSUT.
func helperProcess(t *testing.T) *process {
	t.Helper()
	bin, err := os.Executable()
	require.NoError(t, err)
	return &process{
		command: "LOOMCHECK_HELPER_SUT=1 exec '" + bin + "' -test.run='^TestHelperSUT$'",
		dir:     t.TempDir(),
		cfg:     sutconfig.SUTConfig{DataDir: t.TempDir() + "/data"},
		logs:    newRingBuffer(64 << 10),
	}
}

// testHolds makes this test's port reservations abstract sockets of its own, so that another kit
// process on the machine (another run of these tests) neither sees nor disturbs them.
func testHolds(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("port reservations between processes are abstract Unix sockets, which only Linux has")
	}
	portMu.Lock()
	prev := portHoldPrefix
	portHoldPrefix = "@loomcheck-test-" + strconv.Itoa(os.Getpid()) + "-port-"
	portMu.Unlock()
	t.Cleanup(func() {
		portMu.Lock()
		portHoldPrefix = prev
		portMu.Unlock()
	})
}

// holdOf holds port p's reservation as another kit process would, or fails the test.
func holdOf(t *testing.T, p int) net.Listener {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	h, err := holdPort(p)
	require.NoError(t, err, "port %d", p)
	return h
}

// unusedPorts is a window [lo, hi) of n ports of the kit's range that this run has not handed out.
func unusedPorts(t *testing.T, n int) (lo, hi int) {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for lo := 32000 - n; lo >= 20000; lo -= n {
		used := false
		for p := lo; p < lo+n; p++ {
			used = used || portUsed[p]
		}
		if !used {
			return lo, lo + n
		}
	}
	t.Fatalf("every window of %d ports has one this run handed out", n)
	return 0, 0
}

// TestAReservedPortIsNotHandedOutAgain: a port another kit process reserved is never handed
// out, a reservation is held until it is released, and a port is handed out once per run.
func TestAReservedPortIsNotHandedOutAgain(t *testing.T) {
	testHolds(t)
	lo, hi := unusedPorts(t, 40)
	for p := lo; p < hi; p += 2 {
		h := holdOf(t, p)
		t.Cleanup(func() { h.Close() })
	}
	seen := map[string]bool{}
	for range 10 {
		r, err := reservePortIn(lo, hi)
		require.NoError(t, err)
		p, err := strconv.Atoi(r.port)
		require.NoError(t, err)
		require.Equal(t, 1, p%2, "port %d is reserved by another process", p)
		require.False(t, seen[r.port], "port %s handed out twice", r.port)
		seen[r.port] = true

		portMu.Lock()
		_, err = holdPort(p)
		portMu.Unlock()
		require.Error(t, err, "port %d: another process cannot reserve it while it is held", p)
		r.release()
		h := holdOf(t, p) // released: another process may take it again
		h.Close()
	}
}

// TestAProcessWhosePortWasTakenMovesToAnother: when another program takes the port of a process
// SUT before the SUT binds it, the SUT fails to start there; the driver sees the port held, says
// so in the logs and launches the SUT again on another port, where the SUT itself answers. Stop
// releases the port. A SUT that exits by itself on a free port is a start error, tried once.
func TestAProcessWhosePortWasTakenMovesToAnother(t *testing.T) {
	testHolds(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	d := helperProcess(t)
	require.NoError(t, d.newPort())
	taken := d.cfg.Listen
	// Another program listens on the port first (and never answers a request).
	stranger, err := net.Listen("tcp", taken)
	require.NoError(t, err)
	defer stranger.Close()

	require.NoError(t, d.launchHeld(ctx))
	require.NotEqual(t, taken, d.cfg.Listen)
	require.Equal(t, "http://"+d.cfg.Listen, d.URL())
	require.Contains(t, d.Logs(), "launching again on another port")
	require.Contains(t, d.Logs(), "("+taken+")")
	resp, err := http.Get(d.URL() + "/.well-known/loom")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, strconv.Itoa(d.cmd.Process.Pid), resp.Header.Get("X-Helper-Pid"), "the SUT the driver launched answers")

	// A restart keeps the port; Stop releases it.
	port := d.port.port
	require.NoError(t, d.Restart(ctx))
	require.Equal(t, "127.0.0.1:"+port, d.cfg.Listen)
	require.NoError(t, d.Stop())
	require.Nil(t, d.port)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	holdOf(t, p).Close()

	// A SUT that exits by itself on a free port is a start error, not a port taken.
	bare := helperProcess(t)
	bare.command = "echo 'no configuration for me' >&2; exit 3"
	err = bare.Start(ctx, bare.cfg)
	var se *StartError
	require.ErrorAs(t, err, &se)
	require.False(t, errors.Is(err, errPortTaken))
	require.Equal(t, 1, strings.Count(bare.Logs(), "no configuration for me"), "launched once")
	require.Nil(t, bare.port, "a failed start releases its port")
}
