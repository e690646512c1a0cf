package kernel

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Version 5 keeps a decision in the row of the command written right before it when the flow asks
// for it (DecideThen) and the two are committed together: the row of the command before (a
// decision, or a consumed event, with or without the decision version 4 keeps in it) gains a last
// member "then" holding the decision as encodeDecision writes it,
// {"id":"a","value":1,"then":{"id":"b","value":2}} (mergeThen). A reader splits the row back
// into its commands (splitThen), each at the row's own place. One row holds one "then" at most.

// thenMember is what mergeThen puts between a row and the decision it keeps.
const thenMember = `,"then":`

// mergeThen is the row of data (a decision or consumed row as this kernel writes it) and the
// decision data that follows it (as encodeDecision writes it, without inner steps); ok is false
// when either is of another shape or data already keeps a decision after it.
func mergeThen(data, decision []byte) (_ []byte, ok bool) {
	if len(data) < 2 || data[0] != '{' || data[len(data)-1] != '}' || !bytes.HasPrefix(decision, []byte(`{"id":`)) ||
		decision[len(decision)-1] != '}' || bytes.HasSuffix(decision, []byte("]}")) {
		return nil, false
	}
	if _, _, holds := splitThen(data); holds {
		return nil, false
	}
	out := make([]byte, 0, len(data)+len(thenMember)+len(decision))
	out = append(out, data[:len(data)-1]...)
	out = append(out, thenMember...)
	out = append(out, decision...)
	return append(out, '}'), true
}

// splitThen splits a row that mergeThen made into the row it extended and the decision it keeps,
// byte for byte; ok is false for any other data.
func splitThen(data []byte) (row, then []byte, ok bool) {
	if !bytes.HasSuffix(data, []byte("}}")) || !bytes.Contains(data, []byte(thenMember+`{"id":`)) {
		return nil, nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, false
	}
	for dec.More() {
		before := dec.InputOffset() // the end of the previous member, before its comma
		key, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		if key != "then" {
			continue
		}
		if dec.More() || !bytes.HasPrefix(data[before:], []byte(thenMember)) {
			return nil, nil, false // "then" is the last member, as mergeThen writes it
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('}') {
			return nil, nil, false
		}
		if _, err := dec.Token(); err != io.EOF || dec.InputOffset() != int64(len(data)) {
			return nil, nil, false
		}
		row = append(data[:before:before], '}')
		return row, data[int(before)+len(thenMember) : len(data)-1], true
	}
	return nil, nil, false
}

// DecideThen is DecideValue for a decision kept in the row of the command the flow wrote right
// before it (journal version 5, mergeThen) when nothing was committed between the two and that
// row keeps no other: one row where there were two. A generation begun in an earlier version
// (its start names none) keeps a row for each decision to its end. It is committed and replayed
// exactly as DecideValue's decision is.
//
// Errors: those of DecideValue.
//
//	raw, err := c.DecideValue("model", callModel)
//	raw, err = c.DecideThen("reply", func() (any, error) { return replyOf(raw), nil })
func (c *Context) DecideThen(id string, fn func() (any, error)) (json.RawMessage, error) {
	c.mu.Lock()
	c.thenID = id
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.thenID = ""
		c.mu.Unlock()
	}()
	return c.DecideValue(id, fn)
}

// joinThen keeps decision b in the last pending row when DecideThen asked for it and the row can
// take it; false when b is to be appended as a row of its own (c.mu held).
func (c *Context) joinThen(id string, b []byte, inner []string) bool {
	if c.thenID != id {
		return false
	}
	c.thenID = ""
	n := len(c.pend)
	if !c.joins || n == 0 || len(inner) > 0 || (c.pend[n-1].Kind != kindDecision && c.pend[n-1].Kind != kindConsumed) {
		return false
	}
	row, ok := mergeThen(c.pend[n-1].Data, b)
	if ok {
		c.pend[n-1].Data = row
	}
	return ok
}

// commandsOf are the commands row ev holds, in order: itself, or (version 4) a consumed event
// and the decision it keeps, and (version 5) the decision kept after them.
func commandsOf(ev store.Event) []store.Event {
	var then []byte
	if ev.Kind == kindDecision || ev.Kind == kindConsumed {
		if row, t, ok := splitThen(ev.Data); ok {
			ev.Data, then = row, t
		}
	}
	out := []store.Event{ev}
	if ev.Kind == kindConsumed {
		if cd, dd, ok := splitConsumed(ev.Data); ok {
			dec := ev
			out[0].Data, dec.Kind, dec.Data = cd, kindDecision, dd
			out = append(out, dec)
		}
	}
	if then != nil {
		t := ev
		t.Kind, t.Data = kindDecision, then
		out = append(out, t)
	}
	return out
}
