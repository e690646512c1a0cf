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

// TestWriteHeadAllocatesNothing: recording the count after a commit formats both records in a
// buffer the store keeps.
func TestWriteHeadAllocatesNothing(t *testing.T) {
	dir := t.TempDir()
	head, err := os.Create(filepath.Join(dir, "x.db.head"))
	require.NoError(t, err)
	defer head.Close()
	newest, err := os.Create(filepath.Join(dir, "x.db.newest"))
	require.NoError(t, err)
	defer newest.Close()
	s := &SQLite{head: head, newestF: newest, events: 12, newest: newestEvent{k: headKey{"x/append/0", 0}, seq: 12, ok: true}}
	s.writeHead() // the buffer grows to the longer record once
	allocs := testing.AllocsPerRun(100, func() {
		s.events++
		s.newest.seq++
		s.writeHead()
	})
	require.Zero(t, allocs)
	b, err := os.ReadFile(headPath(filepath.Join(dir, "x.db")))
	require.NoError(t, err)
	require.Equal(t, string(headRecord(s.events)), string(b))
	b, err = os.ReadFile(newestPath(filepath.Join(dir, "x.db")))
	require.NoError(t, err)
	require.Equal(t, string(newestRecord(s.events, s.newest)), string(b))
}
