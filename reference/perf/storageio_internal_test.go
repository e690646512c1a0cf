package perf

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseWriteBytes(t *testing.T) {
	text := "rchar: 6976\nwchar: 12\nsyscr: 10\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 454656\ncancelled_write_bytes: 8192\n"
	n, ok := parseWriteBytes(strings.NewReader(text))
	require.True(t, ok)
	require.Equal(t, int64(454656), n, "write_bytes, not wchar nor cancelled_write_bytes")
	for name, in := range map[string]string{
		"no such line":      "rchar: 1\nwchar: 2\n",
		"empty":             "",
		"not a count":       "write_bytes: many\n",
		"negative":          "write_bytes: -4096\n",
		"a longer name":     "write_bytes_total: 7\n",
		"cancelled only":    "cancelled_write_bytes: 8192\n",
		"no value at all":   "write_bytes\n",
		"an empty value":    "write_bytes:\n",
		"two counts in one": "write_bytes: 1 2\n",
	} {
		n, ok := parseWriteBytes(strings.NewReader(in))
		require.False(t, ok, name)
		require.Zero(t, n, name)
	}
	n, ok = parseWriteBytes(strings.NewReader("write_bytes:0\n"))
	require.True(t, ok)
	require.Zero(t, n)
}

func TestWrittenPerTurn(t *testing.T) {
	w, ok := writtenPerTurn(1000, true, 1000+4*8192, true, 4)
	require.True(t, ok)
	require.Equal(t, 8192.0, w)
	w, ok = writtenPerTurn(1000, true, 1000+8192, true, 1)
	require.True(t, ok)
	require.Equal(t, 8192.0, w, "one turn")
	w, ok = writtenPerTurn(1000, true, 1000, true, 3)
	require.True(t, ok)
	require.Zero(t, w)
	for name, c := range map[string]struct {
		before   int64
		beforeOK bool
		after    int64
		afterOK  bool
		turns    int
	}{
		"the first reading missing":  {1000, false, 9000, true, 4},
		"the second reading missing": {1000, true, 9000, false, 4},
		"both missing":               {1000, false, 9000, false, 4},
		"no turns":                   {1000, true, 9000, true, 0},
		"backwards":                  {9000, true, 1000, true, 4},
	} {
		w, ok := writtenPerTurn(c.before, c.beforeOK, c.after, c.afterOK, c.turns)
		require.False(t, ok, name)
		require.Zero(t, w, name)
	}
}

func TestAddWritten(t *testing.T) {
	row := writtenRow("1 conversation", "bare")
	require.Equal(t, "bytes written to storage per turn, 1 conversation", row.Measure)
	require.Equal(t, "bare", row.BaselineName)
	addWritten(&row, turnLoad{written: 1, writtenOK: true}, turnLoad{written: 3, writtenOK: true})
	addWritten(&row, turnLoad{written: 5, writtenOK: false}, turnLoad{written: 7, writtenOK: true})
	addWritten(&row, turnLoad{written: 9, writtenOK: true}, turnLoad{written: 11, writtenOK: false})
	addWritten(&row, turnLoad{written: 13, writtenOK: true}, turnLoad{written: 15, writtenOK: true})
	require.Equal(t, []float64{1, 13}, row.Baseline, "a round is kept only when both sides were counted")
	require.Equal(t, []float64{3, 15}, row.Measured)
}

// TestStorageWrittenCountsASyncedWrite: on Linux the count grows by at least what a synced
// file write put on the disk.
func TestStorageWrittenCountsASyncedWrite(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counted on Linux only")
	}
	if !countsWrites() {
		t.Skip("this kernel does not count a process's writes")
	}
	before, ok := storageWritten()
	require.True(t, ok, "/proc/self/io has write_bytes: it is read")
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer f.Close()
	const size = 64 << 10
	_, err = f.Write(make([]byte, size))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	after, ok := storageWritten()
	require.True(t, ok)
	require.GreaterOrEqual(t, after-before, int64(size))
}

// countsWrites reports whether /proc/self/io can be read and has a write_bytes line, read here
// without the code under test.
func countsWrites() bool {
	b, err := os.ReadFile("/proc/self/io")
	return err == nil && strings.Contains("\n"+string(b), "\nwrite_bytes:")
}
