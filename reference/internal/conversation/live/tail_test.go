package live

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// feed is a source a test drives by hand: Follow's start hands it the tail's add.
type feed struct {
	add     func([]Record)
	starts  int
	stopped int
}

func (s *feed) start(add func([]Record)) func() {
	s.add, s.starts = add, s.starts+1
	return func() { s.stopped++ }
}

func at(gen, seq int64) loomtype.Cursor { return loomtype.Cursor{Gen: gen, Seq: seq} }

// entry is a record holding a transcript entry of the given text; other is one holding none.
func entry(gen, seq int64, text string) Record {
	c := at(gen, seq)
	return Record{At: c, Entry: &loomtype.Entry{Cursor: c.String(), Role: loomtype.RoleUser, Text: &text}}
}

func other(gen, seq int64) Record { return Record{At: at(gen, seq)} }

func texts(entries []loomtype.Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, *e.Text)
	}
	return out
}

// TestTailServesWhatCommitsAddedAfterACursorWithinIt: a cursor at the tail's start (the position
// before its first record) or at any record reads what follows, entries only, with next at the
// last record read; a cursor before the start, past the end, or of a tail that holds nothing is
// not served; limit stops at that many entries.
func TestTailServesWhatCommitsAddedAfterACursorWithinIt(t *testing.T) {
	h := NewHub(0)
	src := &feed{}
	f := h.Follow("c1", src.start)
	defer f.Close()

	_, _, _, ok := f.Read(at(0, 0), 0)
	require.False(t, ok, "an empty tail serves nothing")

	src.add([]Record{other(0, 4), entry(0, 5, "a")})
	src.add([]Record{other(0, 6), entry(0, 7, "b"), other(0, 8)})
	select {
	case <-f.Wake():
	default:
		t.Fatal("no wake-up after a commit")
	}

	got, next, done, ok := f.Read(at(0, 3), 0)
	require.True(t, ok, "the position before the first record is the tail's start")
	require.Equal(t, []string{"a", "b"}, texts(got))
	require.Equal(t, at(0, 8), next)
	require.True(t, done)

	got, next, done, ok = f.Read(at(0, 5), 0)
	require.True(t, ok)
	require.Equal(t, []string{"b"}, texts(got))
	require.Equal(t, at(0, 8), next)
	require.True(t, done)

	got, next, done, ok = f.Read(at(0, 8), 0)
	require.True(t, ok, "the tail's end")
	require.Empty(t, got)
	require.Equal(t, at(0, 8), next)
	require.True(t, done)

	got, next, done, ok = f.Read(at(0, 3), 1)
	require.True(t, ok)
	require.Equal(t, []string{"a"}, texts(got))
	require.Equal(t, at(0, 5), next)
	require.False(t, done, "stopped at the limit before the end")

	for _, c := range []loomtype.Cursor{at(0, 2), at(0, 9), at(1, 0), at(1, 5)} {
		_, next, _, ok := f.Read(c, 0)
		require.False(t, ok, "cursor %v lies outside the tail", c)
		require.Equal(t, c, next)
	}
}

// TestTailStartsOverAfterAGap: a commit that does not follow the tail's end (one went missing)
// starts the tail over from it, so a cursor in the old stretch reads the log; a new generation
// is taken only inside the commit that ends the one before.
func TestTailStartsOverAfterAGap(t *testing.T) {
	h := NewHub(0)
	src := &feed{}
	f := h.Follow("c1", src.start)
	defer f.Close()

	src.add([]Record{entry(0, 1, "a"), entry(0, 2, "b")})
	src.add([]Record{entry(0, 4, "d")}) // 3 went missing
	_, _, _, ok := f.Read(at(0, 2), 0)
	require.False(t, ok, "a cursor before the gap reads the log")
	got, _, _, ok := f.Read(at(0, 3), 0)
	require.True(t, ok)
	require.Equal(t, []string{"d"}, texts(got))

	// A continue-as-new: the end of generation 0 and the start of 1 in one commit.
	src.add([]Record{other(0, 5), other(1, 1), entry(1, 2, "e")})
	got, next, _, ok := f.Read(at(0, 4), 0)
	require.True(t, ok)
	require.Equal(t, []string{"e"}, texts(got))
	require.Equal(t, at(1, 2), next)

	// A commit that starts a generation on its own follows nothing the tail knows.
	src.add([]Record{other(2, 1), entry(2, 2, "f")})
	_, _, _, ok = f.Read(at(1, 2), 0)
	require.False(t, ok)
	_, _, _, ok = f.Read(at(2, 0), 0)
	require.False(t, ok, "what comes before a generation's first event is not known here")
	got, _, _, ok = f.Read(at(2, 1), 0)
	require.True(t, ok)
	require.Equal(t, []string{"f"}, texts(got))
	got, next, done, ok := f.Read(at(2, 1), 1)
	require.True(t, ok)
	require.Equal(t, []string{"f"}, texts(got))
	require.Equal(t, at(2, 2), next)
	require.False(t, done, "a read that stops at its limit is not done, even on the last record, as a read of the log")
}

// TestTailRecordBound: a tail of N records holds N (its start unchanged); the record N+1 drops
// the oldest, and a cursor at the dropped start reads the log while one at the new start is
// served.
func TestTailRecordBound(t *testing.T) {
	const n = 8
	h := NewHub(0)
	h.SetTailLimits(TailLimits{Records: n})
	src := &feed{}
	f := h.Follow("c1", src.start)
	defer f.Close()
	for i := int64(1); i <= n; i++ {
		src.add([]Record{entry(0, i, "x")})
	}
	fig, ok := h.Tail("c1")
	require.True(t, ok)
	require.Equal(t, n, fig.Records)
	require.Equal(t, at(0, 1), fig.First)
	got, _, _, ok := f.Read(at(0, 0), 0)
	require.True(t, ok, "N records: the start is still served")
	require.Len(t, got, n)

	src.add([]Record{entry(0, n+1, "x")})
	fig, _ = h.Tail("c1")
	require.Equal(t, n, fig.Records, "N+1 records: the oldest went")
	require.Equal(t, at(0, 2), fig.First)
	_, _, _, ok = f.Read(at(0, 0), 0)
	require.False(t, ok, "a cursor before the tail's start reads the log")
	got, _, _, ok = f.Read(at(0, 1), 0)
	require.True(t, ok, "the dropped record's position is the new start")
	require.Len(t, got, n)
}

// TestTailByteBound: records of exactly Bytes bytes are held; one byte more drops the oldest;
// the newest record stays however big; the hub's total bound holds across tails.
func TestTailByteBound(t *testing.T) {
	one := entry(0, 1, "").Size()
	h := NewHub(0)
	h.SetTailLimits(TailLimits{Bytes: 3*one + 1})
	src := &feed{}
	f := h.Follow("c1", src.start)
	defer f.Close()
	src.add([]Record{entry(0, 1, ""), entry(0, 2, ""), entry(0, 3, "x")}) // exactly the bound
	fig, _ := h.Tail("c1")
	require.Equal(t, 3, fig.Records, "N bytes are held")
	require.Equal(t, 3*one+1, fig.Bytes)

	src.add([]Record{entry(0, 4, "")})
	fig, _ = h.Tail("c1")
	require.Equal(t, 3, fig.Records, "N+1 bytes: the oldest went")
	require.Equal(t, at(0, 2), fig.First)

	big := strings.Repeat("y", 10*one)
	src.add([]Record{entry(0, 5, big)})
	fig, _ = h.Tail("c1")
	require.Equal(t, 1, fig.Records, "the newest record stays, however big")
	got, _, _, ok := f.Read(at(0, 4), 0)
	require.True(t, ok)
	require.Equal(t, []string{big}, texts(got))

	// All tails together: a second tail's commit that passes the total drops its own oldest.
	h2 := NewHub(0)
	h2.SetTailLimits(TailLimits{TotalBytes: 4 * one})
	a, b := &feed{}, &feed{}
	fa, fb := h2.Follow("a", a.start), h2.Follow("b", b.start)
	defer fa.Close()
	defer fb.Close()
	a.add([]Record{entry(0, 1, ""), entry(0, 2, "")})
	b.add([]Record{entry(0, 1, ""), entry(0, 2, "")})
	require.Equal(t, 4*one, h2.Memory().TailBytes, "N bytes in all")
	b.add([]Record{entry(0, 3, "")})
	m := h2.Memory()
	require.Equal(t, 4*one, m.TailBytes, "N+1 bytes in all: b's oldest went")
	figA, _ := h2.Tail("a")
	figB, _ := h2.Tail("b")
	require.Equal(t, 2, figA.Records)
	require.Equal(t, at(0, 2), figB.First)
}

// TestTailLivesWithItsFollowers: the tail is made, and its source started, once for its first
// follower; it goes, its source stopped and its bytes let go, with its last; a commit the source
// still reports after that adds nothing.
func TestTailLivesWithItsFollowers(t *testing.T) {
	h := NewHub(0)
	src := &feed{}
	f1 := h.Follow("c1", src.start)
	f2 := h.Follow("c1", func(func([]Record)) func() { t.Fatal("a second start"); return nil })
	require.Equal(t, 1, src.starts)
	add := src.add
	add([]Record{entry(0, 1, "a")})
	m := h.Memory()
	require.Equal(t, 1, m.Tails)
	require.Equal(t, 2, m.Followers)
	require.Equal(t, 1, m.TailRecords)
	require.Positive(t, m.TailBytes)
	got, _, _, ok := f2.Read(at(0, 0), 0)
	require.True(t, ok)
	require.Equal(t, []string{"a"}, texts(got))

	f1.Close()
	f1.Close()
	require.Zero(t, src.stopped, "a follower is left")
	f2.Close()
	require.Equal(t, 1, src.stopped)
	add([]Record{entry(0, 2, "b")})
	require.Equal(t, Memory{}, h.Memory(), "nothing is held for a conversation nobody follows")
	_, ok = h.Tail("c1")
	require.False(t, ok)

	f3 := h.Follow("c1", src.start)
	defer f3.Close()
	require.Equal(t, 2, src.starts, "a new first follower makes a new tail")
	_, _, _, ok = f3.Read(at(0, 1), 0)
	require.False(t, ok, "the new tail starts empty")
}

// TestTailLeavesOutACommitItCannotHold: a commit added with no records (its feeder could not give
// them) empties the tail and wakes the followers, so that one at the tail's end, or anywhere in
// it, reads the log instead of being told it is at the head; the next commit starts the tail over.
func TestTailLeavesOutACommitItCannotHold(t *testing.T) {
	h := NewHub(0)
	src := &feed{}
	f := h.Follow("c1", src.start)
	defer f.Close()

	src.add([]Record{other(0, 1), entry(0, 2, "a")})
	<-f.Wake()
	got, _, done, ok := f.Read(at(0, 2), 0)
	require.True(t, ok)
	require.Empty(t, got)
	require.True(t, done)

	src.add(nil) // the commit at 0.3, left out
	select {
	case <-f.Wake():
	default:
		t.Fatal("no wake-up after a commit left out")
	}
	for _, c := range []loomtype.Cursor{at(0, 1), at(0, 2)} {
		_, next, _, ok := f.Read(c, 0)
		require.False(t, ok, "cursor %v: the tail no longer knows what follows it", c)
		require.Equal(t, c, next)
	}
	fig, live := h.Tail("c1")
	require.True(t, live)
	require.Zero(t, fig.Records)
	require.Zero(t, fig.Bytes)
	require.Zero(t, h.tailBytes.Load(), "the hub's count lets go of what the tail held")

	src.add([]Record{entry(0, 4, "b")})
	_, _, _, ok = f.Read(at(0, 2), 0)
	require.False(t, ok, "the commit left out lies between")
	got, _, _, ok = f.Read(at(0, 3), 0)
	require.True(t, ok)
	require.Equal(t, []string{"b"}, texts(got))
}
