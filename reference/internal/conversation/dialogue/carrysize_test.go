package dialogue

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// countedSize is what the bound on a carry counts, computed the plain way: the state with its
// turns' texts taken out, encoded as the carry is, plus the texts' UTF-8 bytes.
func countedSize(t testing.TB, s state) int {
	t.Helper()
	texts := 0
	strip := func(ts []turnMem) []turnMem {
		out := append([]turnMem(nil), ts...)
		for i := range out {
			texts += len(out[i].User) + len(out[i].Prompt) + len(out[i].Reply)
			out[i].User, out[i].Prompt, out[i].Reply = "", "", ""
		}
		return out
	}
	s.Window, s.Evicted = strip(s.Window), strip(s.Evicted)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return len(b) + texts
}

// TestTheSizerCountsEveryTrimAsTheCarryIsEncoded: for states of 0 to 7 turns split every way
// between the evicted and the window turns, with texts, askers and classes that JSON spells
// longer than their bytes (HTML characters, control characters, multi-byte and astral letters),
// with and without a summary, the sizer's count of every trim (any number of the oldest evicted
// and window turns dropped) is the plain count of that trim.
func TestTheSizerCountsEveryTrimAsTheCarryIsEncoded(t *testing.T) {
	texts := []string{"", "a", "<&>", "é\u2028", "😀\x01\"", "\\n"}
	askers := []loomtype.Identity{{Tenant: "t1", Actor: "alice"}, {Tenant: "t<1>", Actor: "b&b", OnBehalfOf: "é"}}
	for n := 0; n <= 7; n++ {
		for split := 0; split <= n; split++ {
			for _, summary := range []string{"", "sum <mary>"} {
				s := sampleState(0)
				s.Summary = summary
				for i := 1; i <= n; i++ {
					tm := turnMem{Ord: int64(i), Turn: int64(i), UserRec: int64(2*i - 1), Asker: askers[i%2],
						User: texts[i%len(texts)], Prompt: texts[(i+2)%len(texts)], Reply: texts[(i+4)%len(texts)],
						Status: loomtype.StatusComplete, Tokens: i % 3}
					if i%2 == 0 {
						tm.Classes = []string{"c<" + fmt.Sprint(i) + ">"}
					}
					if i <= split {
						s.Evicted = append(s.Evicted, tm)
					} else {
						s.Window = append(s.Window, tm)
					}
				}
				z := s.sizer()
				for ke := 0; ke <= len(s.Evicted); ke++ {
					for kw := 0; kw <= len(s.Window); kw++ {
						c := *s
						c.Evicted, c.Window = s.Evicted[ke:], s.Window[kw:]
						if got, want := z.size(ke, kw), countedSize(t, c); got != want {
							t.Fatalf("%d turns, %d evicted, summary %q, dropped %d and %d: sizer %d, plain %d", n, split, summary, ke, kw, got, want)
						}
					}
				}
			}
		}
	}
}

// BenchmarkCarryTrim: a carry of 64 window and 64 evicted turns of about 1 KiB of text each,
// trimmed to a bound that keeps a third of them: the sizer against the plain count of each trim
// (the state encoded again for every turn dropped), in the same run.
func BenchmarkCarryTrim(b *testing.B) {
	s := sampleState(0)
	text := strings.Repeat("word ", 200)
	for i := 1; i <= 128; i++ {
		tm := turnMem{Ord: int64(i), Turn: int64(i), UserRec: int64(2*i - 1), Asker: s.Owner,
			User: text, Reply: text, Status: loomtype.StatusComplete, Tokens: 7}
		if i <= 64 {
			s.Evicted = append(s.Evicted, tm)
		} else {
			s.Window = append(s.Window, tm)
		}
	}
	bound := 128 * 2 * len(text) / 3
	b.Run("sizer", func(b *testing.B) {
		for b.Loop() {
			_ = s.carry(bound)
		}
	})
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			c := *s
			for countedSize(b, c) > bound && len(c.Evicted)+len(c.Window) > 0 {
				if len(c.Evicted) > 0 {
					c.Evicted = c.Evicted[1:]
				} else {
					c.Window = c.Window[1:]
				}
			}
			_, _ = json.Marshal(c)
		}
	})
}
