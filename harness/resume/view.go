package resume

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Holdback is how many characters (Unicode code points) at the end of a streaming reply a
// client treats as provisional: it shows them only once the reply's text-done arrives, and never
// when a text-cut withdraws them first (spec/stream.md, "The rendering view").
const Holdback = 40

// Row states of the rendering view.
const (
	RowStreaming = "streaming" // deltas arrived, no text-done yet: the last Holdback characters are held back
	RowDone      = "done"      // the text-done arrived: the whole text is shown
	RowCut       = "cut"       // a text-cut withdrew the held-back tail: its note is shown instead
)

// Row is what a client shows for one message of a reply.
type Row struct {
	Message string `json:"message"`
	State   string `json:"state"`
	Text    string `json:"text"`
	Note    string `json:"note"`
}

type viewRow struct {
	Row
	deltas string // every delta's text, in order
}

// View is the rendering view of a session: delivered frames in, one row per message out. It is
// fed only what a Reader delivered (trimmed frames included), in order. Not safe for concurrent
// use.
//
//	var v resume.View
//	v.Take(frame)
//	rows := v.Rows()
type View struct {
	rows  []*viewRow
	index map[string]*viewRow
}

type viewData struct {
	Text    *string  `json:"text"`
	Parts   []string `json:"parts"`
	State   string   `json:"state"`
	Message string   `json:"message"`
	Note    string   `json:"note"`
}

// Take folds one delivered frame into its message's row. A text-delta, text-done or text-cut
// names its message by the frame's message (else its data's); a status restarted with a
// message voids that row; every other frame leaves the view as it is.
func (v *View) Take(f Frame) {
	var d viewData
	_ = json.Unmarshal(f.Data, &d)
	kind := strings.TrimPrefix(f.Type, "session.")
	key := f.Message
	if key == "" {
		key = d.Message
	}
	if key == "" {
		return
	}
	switch kind {
	case "text-delta", "text-done", "text-cut":
	case "status":
		if r := v.index[key]; r != nil && d.State == "restarted" {
			*r = viewRow{Row: Row{Message: key, State: RowStreaming}}
		}
		return
	default:
		return
	}
	r := v.index[key]
	if r == nil {
		if v.index == nil {
			v.index = map[string]*viewRow{}
		}
		r = &viewRow{Row: Row{Message: key, State: RowStreaming}}
		v.index[key] = r
		v.rows = append(v.rows, r)
	}
	if r.State == RowCut {
		return // withdrawn: nothing after the cut is shown until the reply starts again
	}
	switch kind {
	case "text-delta":
		if r.State == RowDone {
			return
		}
		if d.Text != nil {
			r.deltas += *d.Text
		}
		for _, p := range d.Parts {
			r.deltas += p
		}
		r.Text = shown(r.deltas)
	case "text-done":
		r.State = RowDone
		r.Text = r.deltas
		if d.Text != nil && r.deltas == "" {
			r.Text = *d.Text // the reply's words never reached this viewer as deltas
		}
	case "text-cut":
		r.State, r.Note = RowCut, d.Note
		r.Text = shown(r.deltas)
	}
}

// shown is s without its last Holdback code points.
func shown(s string) string {
	n := utf8.RuneCountInString(s) - Holdback
	if n <= 0 {
		return ""
	}
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// Rows is what the view shows, one row per message in the order each first appeared.
func (v *View) Rows() []Row {
	out := make([]Row, len(v.rows))
	for i, r := range v.rows {
		out[i] = r.Row
	}
	return out
}
