package stream_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/schemas"
)

// pure runs the transcript commands that exercise the pure functions beyond the adapter.
func (r *runner) pure(t *testing.T, cmd string, a map[string]string) string {
	frame := func() (stream.Frame, bool) {
		f, ok := r.byCur[num(a["cur"])]
		return f, ok
	}
	switch cmd {
	case "append":
		r.n++
		spec := stream.Spec{Kind: stream.Kind(a["kind"]), Turn: num(a["turn"]), Message: a["message"], Author: a["author"]}
		if d, ok := a["data"]; ok {
			spec.Data = json.RawMessage(d)
		}
		f, err := r.l.Append(spec, t0.Add(time.Duration(r.n)*time.Millisecond))
		if errors.Is(err, stream.ErrNotLogged) {
			return "error: not logged"
		} else if err != nil {
			t.Fatalf("append: %v", err)
		}
		r.byCur[f.Cur] = f
		if a["unchecked"] == "true" {
			// A frame made by hand to show what the pure functions do with bad input: say
			// whether the schema takes it instead of requiring that it does.
			if schemaErr(t, f) != nil {
				return show([]stream.Frame{f}) + "\n(the frame schema rejects it)"
			}
			return show([]stream.Frame{f})
		}
		return r.show([]stream.Frame{f})
	case "ephemeral":
		r.n++
		spec := stream.Spec{Kind: stream.Kind(a["kind"]), Author: a["author"]}
		if d, ok := a["data"]; ok {
			spec.Data = json.RawMessage(d)
		}
		f, err := stream.EphemeralFrame(spec, "c1", t0.Add(time.Duration(r.n)*time.Millisecond))
		if errors.Is(err, stream.ErrNotEphemeral) {
			return "error: not ephemeral"
		} else if err != nil {
			t.Fatalf("ephemeral: %v", err)
		}
		return r.show([]stream.Frame{f}) + " id=" + f.ID
	case "block":
		b := stream.BlockOf(a["tool"], []byte(a["result"]))
		if p, ok := a["people"]; ok {
			b = stream.NoteShared(b, int(num(p)))
		}
		out, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("block: %v", err)
		}
		if err := schemas.Validate("stream-block", out); err != nil {
			t.Errorf("a block does not match stream-block: %v", err)
		}
		return string(out)
	case "render":
		f, ok := frame()
		if !ok {
			return "(no such frame)"
		}
		before, _ := json.Marshal(f)
		g := stream.Render(f, viewer(a))
		if after, _ := json.Marshal(f); !bytes.Equal(before, after) {
			t.Errorf("render changed the frame it was given:\n%s\n%s", before, after)
		}
		return r.show([]stream.Frame{g})
	case "asker":
		f, ok := frame()
		if !ok {
			return "(no such frame)"
		}
		err := stream.AssertAskerCanRead(f, viewer(a))
		var ue *stream.UnreadableError
		switch {
		case err == nil:
			return "ok"
		case errors.As(err, &ue):
			return "unreadable " + ue.Field
		}
		t.Fatalf("asker: an error of another type: %v", err)
	case "expire", "expire-replay":
		now := t0.Add(dur(t, strings.TrimPrefix(a["now"], "+")))
		retain := stream.DefaultRetain
		if v, ok := a["retain"]; ok {
			retain = dur(t, v)
		}
		var frames []stream.Frame
		if cmd == "expire" {
			f, ok := frame()
			if !ok {
				return "(no such frame)"
			}
			frames = []stream.Frame{f}
		} else {
			var reset bool
			frames, reset = r.l.Replay(num(a["from"]))
			if reset {
				return "reset"
			}
		}
		var out []stream.Frame
		for _, f := range frames {
			out = append(out, stream.Expire(f, now, retain))
		}
		return r.show(out)
	case "logged":
		f, ok := frame()
		if !ok {
			return "(no such frame)"
		}
		rec, err := stream.LoggedShape(f.Data)
		if err != nil {
			return "error: " + userMessageError(t, err)
		}
		return string(rec)
	case "validate":
		if err := stream.ValidateUserMessage([]byte(a["data"])); err != nil {
			return "error: " + userMessageError(t, err)
		}
		return "ok"
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

func viewer(a map[string]string) stream.Viewer {
	v := stream.Viewer{ID: a["viewer"]}
	if r := a["roles"]; r != "" {
		v.ReadRoles = strings.Split(r, ",")
	}
	return v
}

func dur(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("bad duration %q: %v", s, err)
	}
	return d
}

// userMessageError names a ValidateUserMessage error by its identity, never by its text.
func userMessageError(t *testing.T, err error) string {
	var ee *stream.EncError
	if errors.As(err, &ee) {
		return "enc " + ee.Field
	}
	for name, e := range map[string]error{"not-object": stream.ErrNotObject, "no-message": stream.ErrNoMessage,
		"unknown-state": stream.ErrUnknownState, "text-and-enc": stream.ErrTextAndEnc, "no-body": stream.ErrNoBody} {
		if errors.Is(err, e) {
			return name
		}
	}
	t.Fatalf("an error of no known identity: %v", err)
	return ""
}

// checkSchema fails the test when f does not match the frame schema.
func checkSchema(t *testing.T, f stream.Frame) {
	t.Helper()
	if err := schemaErr(t, f); err != nil {
		t.Errorf("a frame does not match stream-frame: %v", err)
	}
}

// schemaErr is the schema's verdict on f: nil, or the *schemas.ValidationError.
func schemaErr(t *testing.T, f stream.Frame) error {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	err = schemas.Validate("stream-frame", b)
	var verr *schemas.ValidationError
	if err != nil && !errors.As(err, &verr) {
		t.Fatalf("the frame schema: %v", err)
	}
	return err
}
