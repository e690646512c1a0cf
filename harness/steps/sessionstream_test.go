package steps

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/harness/sutclient"
)

// fakeConn hands out frames given as JSON, then ends.
type fakeConn struct{ frames []string }

func (c *fakeConn) Next(context.Context) (sframe, error) {
	if len(c.frames) == 0 {
		return sframe{}, io.EOF
	}
	b := c.frames[0]
	c.frames = c.frames[1:]
	return sutclient.ParseFrame("test", []byte(b))
}

func (c *fakeConn) Close() {}

// The follower's reading of two connections, as a transcript: each frame's row and the reader's
// verdict, then the problems it saw and the text it folded. The first connection ends at the
// gap (the frame after it is never read); the second starts with a reset, after which the reader
// holds floor - 1.
func TestFollowerReadsAndFolds(t *testing.T) {
	conns := [][]string{{
		`{"cur":1,"type":"session.user-message","message":"m1","data":{"state":"sent","text":"hi"}}`,
		`{"cur":2,"type":"session.text-delta","message":"a:1","data":{"text":"Pumps "}}`,
		`{"cur":0,"type":"session.heartbeat","data":{}}`,
		`{"cur":3,"span":2,"type":"session.text-delta","message":"a:1","data":{"parts":["Pumps ","are "]}}`,
		`{"cur":3,"type":"session.text-delta","message":"a:1","data":{"text":"are "}}`,
		`{"cur":4,"type":"session.status","data":{"state":"restarted","message":"a:1"}}`,
		`{"cur":6,"type":"session.text-delta","message":"a:1","data":{"text":"lost"}}`,
		`{"cur":5,"type":"session.text-delta","message":"a:1","data":{"text":"never seen"}}`,
	}, {
		`{"cur":0,"type":"session.reset","data":{"floor":4,"head":6}}`,
		`{"cur":4,"type":"session.status","data":{"state":"restarted","message":"a:1"}}`,
		`{"cur":6,"span":2,"type":"session.text-delta","message":"a:1","data":{"parts":["All ","fine"]}}`,
		`{"cur":7,"type":"session.text-done","message":"a:1","data":{"status":"complete","text":"All fine"}}`,
	}}
	want := `1  user-message m1 "hi" deliver
2  text-delta a:1 "Pumps " deliver
3 2 text-delta a:1 "Pumps " + "are " trim
3  text-delta a:1 "are " drop
4  status  restarted deliver
6  text-delta a:1 "lost" gap
0  reset  floor 4, head 6 pass
4  status  restarted deliver
6 2 text-delta a:1 "All " + "fine" deliver
7  text-done a:1 "All fine" deliver
problems: stream repeat: frame 3..3 after cursor 3; stream gap: frame 6..6 after cursor 4
folded a:1: "All fine" after deltas "All fine"`
	f := &follower{fold: map[string]*folded{}, notify: make(chan struct{}, 1)}
	for _, c := range conns {
		f.read(context.Background(), &fakeConn{frames: c})
	}
	fw := f.snapshot()
	var got []string
	for i, r := range fw.raw {
		if r.Kind() == "heartbeat" {
			continue
		}
		got = append(got, strings.Join(append(frameRow(r), fw.verdicts[i].String()), " "))
	}
	var ps []string
	for _, p := range fw.problems {
		ps = append(ps, p.Error())
	}
	got = append(got, "problems: "+strings.Join(ps, "; "))
	m := fw.fold["a:1"]
	got = append(got, "folded a:1: "+quote(m.done)+" after deltas "+quote(&m.deltas))
	if g := strings.Join(got, "\n"); g != want {
		t.Fatalf("got\n%s\nwant\n%s", g, want)
	}
	if fw.last != 7 {
		t.Fatalf("last %d, want 7", fw.last)
	}
}

func quote(s *string) string {
	if s == nil {
		return "none"
	}
	return `"` + *s + `"`
}
