package resume

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// holdbackTranscript is the transcript the kit's two clients are both judged on (the browser
// test feeds it to streamclient.js too).
func holdbackTranscript(t *testing.T) []Frame {
	t.Helper()
	b, err := os.ReadFile("testdata/holdback.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Frames []Frame `json:"frames"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Frames
}

// TestViewHoldsBackTheLast40Characters feeds the transcript through a Reader into a View and
// checks every row after each frame: a streaming reply shows all but its last 40 code points
// (nothing when it has 40 or fewer), its text-done shows it whole, a text-cut drops the tail it
// held back and shows the note, and a restarted reply starts from nothing.
func TestViewHoldsBackTheLast40Characters(t *testing.T) {
	forty := strings.Repeat("0123456789", 4)
	const note = "the reply failed; what it streamed is not kept"
	s := func(m, text string) Row { return Row{Message: m, State: RowStreaming, Text: text} }
	d := func(m, text string) Row { return Row{Message: m, State: RowDone, Text: text} }
	hiDone, twoDone := d("a:1", "Hi there"), d("a:2", forty+"!")
	cut := Row{Message: "a:3", State: RowCut, Text: "üüüüü", Note: note}
	// want[cur] is every row after the frame at cur.
	want := map[int64][]Row{
		1:  {},
		2:  {s("a:1", "")}, // 8 characters: all provisional
		3:  {hiDone},
		4:  {hiDone, s("a:2", "")},  // exactly 40: all provisional
		5:  {hiDone, s("a:2", "0")}, // 41: the first one shows
		6:  {hiDone, twoDone},
		7:  {hiDone, twoDone, s("a:3", "")},      // 30 two-byte characters
		8:  {hiDone, twoDone, s("a:3", "üüüüü")}, // 45 code points, 120 bytes, 60 UTF-16 units
		9:  {hiDone, twoDone, cut},
		10: {hiDone, twoDone, cut}, // the failed text-done after the cut shows nothing more
		12: {hiDone, twoDone, cut, s("a:4", "abc")},
		13: {hiDone, twoDone, cut, s("a:4", "")},
		14: {hiDone, twoDone, cut, s("a:4", "")},
		15: {hiDone, twoDone, cut, s("a:4", ""), s("a:5", "")},
		16: {hiDone, twoDone, cut, s("a:4", ""), s("a:5", "")},
		17: {hiDone, twoDone, cut, s("a:4", ""), s("a:5", "y")},
		18: {hiDone, twoDone, cut, d("a:4", "fresh start"), s("a:5", "y")},
		19: {hiDone, twoDone, cut, d("a:4", "fresh start"), s("a:5", "y")},
		20: {hiDone, twoDone, cut, d("a:4", "fresh start"), s("a:5", "y"), d("a:6", "whole")},
	}
	var r Reader
	var v View
	frames := holdbackTranscript(t)
	for _, f := range frames {
		out, verdict := r.Take(f)
		if verdict != Deliver {
			t.Fatalf("frame %d: %s, want it delivered", f.Cur, verdict)
		}
		v.Take(out)
		w, ok := want[f.Cur]
		if !ok {
			t.Fatalf("frame %d: no expectation", f.Cur)
		}
		if got := v.Rows(); !reflect.DeepEqual(got, w) {
			t.Errorf("after frame %d:\n got %+v\nwant %+v", f.Cur, got, w)
		}
	}
	if len(frames) != len(want) {
		t.Errorf("%d frames, %d expectations", len(frames), len(want))
	}
}

// TestViewTrimmedFrame: a merged frame trimmed by the reader adds only the parts after Last.
func TestViewTrimmedFrame(t *testing.T) {
	r := Reader{Last: 1}
	var v View
	parts, _ := json.Marshal(map[string][]string{"parts": {"seen", strings.Repeat("é", 42)}})
	out, verdict := r.Take(Frame{Cur: 2, Span: 2, Type: "session.text-delta", Message: "a:1", Data: parts})
	if verdict != Trim {
		t.Fatalf("verdict %s, want trim", verdict)
	}
	v.Take(out)
	if got, want := v.Rows(), []Row{{Message: "a:1", State: RowStreaming, Text: "éé"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("rows %+v, want %+v", got, want)
	}
}
