package stream

import (
	"encoding/json"
	"strings"
	"time"
)

// DefaultRetain is how long the log keeps assistant text deltas and terminal output when the
// configuration names no other time.
const DefaultRetain = 24 * time.Hour

// Expire is frame f as the log serves it at now when it keeps assistant text and terminal
// output for retain. A text-delta whose author is not a person (no author, "assistant:",
// "model:" or any other than "person:") and every term-chunk, logged more than retain before now
// (strictly: now - time > retain), come back expired: Expired true, the same cursor, span, id,
// type and envelope, and data {} — or, for a merged replay frame (span > 1), data {"parts":
// [...]} with one empty part per cursor it covers, so that a reader's trim still finds its parts.
// A text-delta of a person stays: a group chat's words are its record. Every other kind, a frame
// already expired and a frame whose time does not parse come back as they are (data copied).
// f is never changed. Pure.
//
//	g := stream.Expire(f, now, stream.DefaultRetain)
func Expire(f Frame, now time.Time, retain time.Duration) Frame {
	out := f
	out.Data = append(json.RawMessage(nil), f.Data...)
	if f.Expired {
		return out
	}
	switch f.Kind() {
	case KindTermChunk:
	case KindTextDelta:
		if strings.HasPrefix(f.Author, "person:") {
			return out
		}
	default:
		return out
	}
	at, err := time.Parse(time.RFC3339Nano, f.Time)
	if err != nil || now.Sub(at) <= retain {
		return out
	}
	out.Expired = true
	if f.Span > 1 {
		out.Data, _ = json.Marshal(map[string][]string{"parts": make([]string, f.Span)})
	} else {
		out.Data = json.RawMessage("{}")
	}
	return out
}
