package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/harness/resume"
)

// readerScript loads streamclient.js into node (no browser: only its Reader is used) and feeds
// it each sequence of frames read from standard input, answering, for every frame, the verdict,
// last after it and the frame it delivered.
const readerScript = `
const fs = require('node:fs');
const vm = require('node:vm');
const sandbox = { globalThis: {} };
vm.runInNewContext(fs.readFileSync('streamclient.js', 'utf8'), sandbox);
const LoomStream = sandbox.globalThis.LoomStream;
const cases = JSON.parse(fs.readFileSync(0, 'utf8'));
const out = cases.map((c) => {
  const r = new LoomStream.Reader(c.from);
  return c.frames.map((f) => {
    const t = r.take(f);
    return { verdict: t.verdict, last: r.last, span: t.frame ? t.frame.span || 0 : 0, data: t.frame ? t.frame.data : null };
  });
});
process.stdout.write(JSON.stringify(out));
`

type readerCase struct {
	From   int64            `json:"from"`
	Frames []map[string]any `json:"frames"`
}

type readerStep struct {
	Verdict string          `json:"verdict"`
	Last    int64           `json:"last"`
	Span    int             `json:"span"`
	Data    json.RawMessage `json:"data"`
}

// TestStreamClientReaderMatchesResume runs streamclient.js's Reader and the kit's resume.Reader
// over the same random sequences of frames (repeats, gaps, merged frames that overlap what the
// reader holds, heartbeats) and wants the same verdict, the same last and the same trimmed frame
// at every step; and a reset frame sets last to its floor - 1.
func TestStreamClientReaderMatchesResume(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node not on PATH")
		}
		t.Skip("needs node on PATH")
	}
	rng := rand.New(rand.NewPCG(52, 1))
	var cases []readerCase
	for range 200 {
		c := readerCase{From: int64(rng.IntN(4))}
		head := c.From
		for range 1 + rng.IntN(12) {
			switch rng.IntN(6) {
			case 0:
				c.Frames = append(c.Frames, map[string]any{"cur": 0, "type": "session.heartbeat", "data": map[string]any{}})
				continue
			case 1: // a merged frame, overlapping what was delivered or not
				span := 2 + rng.IntN(4)
				cur := max(int64(span), head+int64(rng.IntN(4)-1))
				parts := make([]string, span)
				for i := range parts {
					parts[i] = string(rune('a' + i))
				}
				c.Frames = append(c.Frames, map[string]any{"cur": cur, "span": span, "type": "session.text-delta", "data": map[string]any{"parts": parts}})
				head = max(head, cur)
			default: // the next frame, a repeat or a gap
				cur := max(1, head+int64(rng.IntN(4)-1))
				c.Frames = append(c.Frames, map[string]any{"cur": cur, "type": "session.status", "data": map[string]any{"state": "working"}})
				head = max(head, cur)
			}
		}
		cases = append(cases, c)
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "-e", readerScript)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var got [][]readerStep
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("node answered %d cases (%v): %s", len(got), err, out)
	}
	for i, c := range cases {
		r := resume.Reader{Last: c.From}
		var trail []string
		for j, raw := range c.Frames {
			b, _ := json.Marshal(raw)
			var f resume.Frame
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatal(err)
			}
			want, verdict := r.Take(f)
			js := got[i][j]
			trail = append(trail, string(b)+" -> "+js.Verdict)
			wv := verdict.String()
			if verdict == resume.Deliver || verdict == resume.Trim || verdict == resume.Pass {
				if js.Span != want.Span || !sameJSON(js.Data, want.Data) {
					t.Errorf("case %d step %d: the page delivered span %d %s, the kit %d %s\n%s",
						i, j, js.Span, js.Data, want.Span, want.Data, strings.Join(trail, "\n"))
				}
			}
			if js.Verdict != wv || js.Last != r.Last {
				t.Fatalf("case %d (from %d) step %d: the page says %s with last %d, the kit %s with last %d\n%s",
					i, c.From, j, js.Verdict, js.Last, wv, r.Last, strings.Join(trail, "\n"))
			}
		}
	}

	// A reset frame: the reader starts again from the floor.
	reset := []readerCase{{From: 7, Frames: []map[string]any{
		{"cur": 0, "type": "session.reset", "data": map[string]any{"floor": 40, "head": 90}},
		{"cur": 40, "type": "session.status", "data": map[string]any{}},
	}}}
	in, _ = json.Marshal(reset)
	cmd = exec.CommandContext(ctx, "node", "-e", readerScript)
	cmd.Stdin = bytes.NewReader(in)
	if out, err = cmd.Output(); err != nil {
		t.Fatalf("node: %v", err)
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got) != 1 || len(got[0]) != 2 {
		t.Fatalf("node answered %s (%v)", out, err)
	}
	if s := got[0]; s[0].Verdict != "reset" || s[0].Last != 39 || s[1].Verdict != "deliver" || s[1].Last != 40 {
		t.Errorf("after a reset at floor 40: %+v, want reset with last 39, then frame 40 delivered", s)
	}
}
