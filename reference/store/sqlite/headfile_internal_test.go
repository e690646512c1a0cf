package sqlite

import (
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHeadRecordsAreTheDocumentedText: the records of the head and newest files are the text
// their comments give (fmt's %020d numbers, the stream in hex, the spaces up to newestLen-10
// bytes, the body's checksum as %08x), for counts, generations and sequences of every sign and
// width, a stream named and one too long to name; each parses back to what it records.
func TestHeadRecordsAreTheDocumentedText(t *testing.T) {
	withSum := func(body string) string {
		return fmt.Sprintf("%s %08x\n", body, uint32(sumOf([]byte(body))))
	}
	nums := []int64{0, 1, 7, 41, 1 << 40, math.MaxInt64, -1, math.MinInt64}
	for _, n := range nums {
		want := withSum(fmt.Sprintf("loom head %020d", n))
		require.Equal(t, want, string(headRecord(n)))
		require.Len(t, want, headLen)
		if n >= 0 {
			got, ok := parseHead([]byte(want))
			require.True(t, ok)
			require.Equal(t, n, got)
		}
	}
	long := strings.Repeat("s", (newestLen-10-75)/2+1) // its hex no longer fits
	for _, n := range nums {
		for _, ev := range []newestEvent{
			{},
			{k: headKey{"x/append/0", 0}, seq: 1, ok: true},
			{k: headKey{"conv/c_1 é", 3}, seq: n, ok: true},
			{k: headKey{long[1:], 2}, seq: 9, ok: true},
			{k: headKey{long, 2}, seq: 9, ok: true},
		} {
			body := fmt.Sprintf("loom newest %020d -", n)
			if named := fmt.Sprintf("loom newest %020d %020d %020d %s", n, ev.k.gen, ev.seq, hex.EncodeToString([]byte(ev.k.stream))); ev.ok && len(named) <= newestLen-10 {
				body = named
			}
			body += strings.Repeat(" ", newestLen-10-len(body))
			want := withSum(body)
			require.Equal(t, want, string(newestRecord(n, ev)), "n %d, stream of %d bytes", n, len(ev.k.stream))
			require.Len(t, want, newestLen)
			if n >= 0 && ev.seq >= 0 {
				gotN, gotEv, ok := parseNewest([]byte(want))
				require.True(t, ok)
				require.Equal(t, n, gotN)
				if ev.ok && ev.k.stream != long {
					require.Equal(t, ev, gotEv)
				} else {
					require.False(t, gotEv.ok)
				}
			}
		}
	}
}

// TestWriteHeadWritesTheNewestFileWhenItNoLongerStands: recording the count after a commit
// allocates nothing; while every event appended is the named stream's, the newest file is left as
// it is (what it records still names the newest event at the new count), and it is written again
// once another stream takes an event, and when the newest event is another stream's.
func TestWriteHeadWritesTheNewestFileWhenItNoLongerStands(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	head, err := os.Create(headPath(path))
	require.NoError(t, err)
	defer head.Close()
	newest, err := os.Create(newestPath(path))
	require.NoError(t, err)
	defer newest.Close()
	a, b := headKey{"x/append/0", 0}, headKey{"x/append/1", 0}
	s := &SQLite{head: head, newestF: newest, events: 12, newest: newestEvent{k: a, seq: 12, ok: true}}
	onDisk := func() (int64, int64, newestEvent) {
		n, ok := parseHead(mustRead(t, headPath(path)))
		require.True(t, ok)
		nn, ev, ok := parseNewest(mustRead(t, newestPath(path)))
		require.True(t, ok)
		return n, nn, ev
	}
	s.writeHead()
	allocs := testing.AllocsPerRun(100, func() {
		s.events++
		s.newest.seq++
		s.writeHead()
	})
	require.Zero(t, allocs)
	n, nn, ev := onDisk()
	require.Equal(t, s.events, n)
	require.Equal(t, int64(12), nn, "written once, for the first count")
	require.Equal(t, newestEvent{k: a, seq: 12, ok: true}, ev)

	s.events += 2 // one event of b, then one of a: a's head is one ahead, the count two
	s.newest.seq++
	s.writeHead()
	n, nn, ev = onDisk()
	require.Equal(t, s.events, n)
	require.Equal(t, s.events, nn, "written again")
	require.Equal(t, s.newest, ev)

	s.events++
	s.newest = newestEvent{k: b, seq: 1, ok: true}
	s.writeHead()
	_, nn, ev = onDisk()
	require.Equal(t, s.events, nn)
	require.Equal(t, s.newest, ev)
}
