package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// Block is a tool result as the stream shows it: a JSON object whose "kind" says which block it
// is and whose other members are that kind's own (spec/stream.md, "Blocks"). It marshals to the
// block's JSON. A Block from BlockOf holds no sealed value or reference.
//
//	b := stream.Block{"kind": "text", "text": "done"}
type Block map[string]any

// BlockKind names a kind of block.
//
//	if b.Kind() == stream.BlockRecord { ... }
type BlockKind string

// The block kinds.
const (
	BlockTerminal   BlockKind = "terminal"
	BlockDiff       BlockKind = "diff"
	BlockFiles      BlockKind = "files"
	BlockRecord     BlockKind = "record"
	BlockTask       BlockKind = "task"
	BlockDraft      BlockKind = "draft"
	BlockFlowChange BlockKind = "flow-change"
	BlockAnswer     BlockKind = "answer"
	BlockScreen     BlockKind = "screen"
	BlockText       BlockKind = "text"
)

// Kind is the block's kind ("" when it has none).
func (b Block) Kind() BlockKind { s, _ := b["kind"].(string); return BlockKind(s) }

// SharedNote is the note a terminal, diff or files block carries in a chat of more than one
// person.
const SharedNote = "visible to everyone in this chat"

// member is one member of a block kind: its name, whether it must be there, and what it holds.
type member struct {
	name     string
	required bool
	shape    shape
}

type shape int

const (
	shapeString   shape = iota // a string
	shapeInteger               // an integral number
	shapeStrings               // an array of strings
	shapeSealable              // a string, or a sealed field
	shapeFields                // an object of record fields
	shapeRoles                 // an array of non-empty strings
)

// blockMembers are the members each block kind keeps; any other member of a tool's block is
// dropped.
var blockMembers = map[BlockKind][]member{
	BlockTerminal:   {{"command", true, shapeString}, {"output", true, shapeString}, {"exit", true, shapeInteger}, {"note", false, shapeString}},
	BlockDiff:       {{"path", true, shapeString}, {"patch", true, shapeString}, {"note", false, shapeString}},
	BlockFiles:      {{"paths", true, shapeStrings}, {"detail", false, shapeString}, {"note", false, shapeString}},
	BlockRecord:     {{"type", true, shapeString}, {"fields", true, shapeFields}, {"read_roles", false, shapeRoles}},
	BlockTask:       {{"id", true, shapeString}, {"title", true, shapeString}, {"state", true, shapeString}},
	BlockDraft:      {{"body", true, shapeSealable}, {"to", false, shapeSealable}, {"subject", false, shapeSealable}},
	BlockFlowChange: {{"flow", true, shapeString}, {"change", true, shapeString}},
	BlockAnswer:     {{"text", true, shapeSealable}},
	BlockScreen:     {{"title", true, shapeString}, {"text", true, shapeString}},
	BlockText:       {{"text", true, shapeString}},
}

// BlockOf is the block of a tool's result. A result that is a JSON object with a member "block"
// whose "kind" is a block kind and which has that kind's required members, each of its shape, is
// that block, keeping only the kind's members. Anything else (a result of another shape, an
// unknown kind, a missing or ill-typed member, a sealed field without a class, bytes that are
// not JSON) is a text block of the result's text. A text block's text, the tool's own or the
// degraded one, is at most MaxBlockText characters, with an ellipsis when cut. The tool's name does
// not choose the block: a result says what it is.
//
// A sealed field ({"sealed": true, "class": ..., "value" or "ref": ...}) anywhere in the block,
// or in the text of a degraded one, is replaced by its placeholder {"sealed": true, "class": ...,
// "present": ...}: no block ever carries a sealed value or reference. Pure; result is not kept.
//
//	b := stream.BlockOf("shell.run", []byte(`{"block":{"kind":"terminal","command":"ls","output":"a\n","exit":0}}`))
func BlockOf(tool string, result []byte) Block {
	_ = tool
	var doc any
	if err := decodeJSON(result, &doc); err != nil {
		return Block(textBlock(strings.TrimSpace(string(result))))
	}
	if obj, ok := doc.(map[string]any); ok {
		if raw, ok := obj["block"].(map[string]any); ok {
			if b, ok := typedBlock(raw); ok {
				return b
			}
		}
	}
	if s, ok := doc.(string); ok {
		return Block(textBlock(s))
	}
	text := strings.TrimSpace(string(result))
	if sealed, changed := seal(doc); changed {
		out, _ := json.Marshal(sealed)
		text = string(out)
	}
	return Block(textBlock(text))
}

func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

var errTrailing = errors.New("stream: bytes after the JSON value")

func typedBlock(raw map[string]any) (Block, bool) {
	k, _ := raw["kind"].(string)
	members, ok := blockMembers[BlockKind(k)]
	if !ok {
		return nil, false
	}
	b := Block{"kind": k}
	for _, m := range members {
		v, present := raw[m.name]
		if !present {
			if m.required {
				return nil, false
			}
			continue
		}
		if !fits(m.shape, v) || !wellSealed(v) {
			return nil, false
		}
		sealed, _ := seal(v)
		b[m.name] = sealed
	}
	if b.Kind() == BlockText {
		return textBlock(b["text"].(string)), true
	}
	return b, true
}

// wellSealed reports whether every object in v that claims to be a sealed field has a class.
func wellSealed(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		if isSealedLike(x) {
			return isSealed(x)
		}
		for _, e := range x {
			if !wellSealed(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !wellSealed(e) {
				return false
			}
		}
	}
	return true
}

func fits(s shape, v any) bool {
	switch s {
	case shapeString:
		_, ok := v.(string)
		return ok
	case shapeInteger:
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	case shapeStrings, shapeRoles:
		a, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range a {
			str, ok := e.(string)
			if !ok || (s == shapeRoles && str == "") {
				return false
			}
		}
		return true
	case shapeSealable:
		if _, ok := v.(string); ok {
			return true
		}
		o, ok := v.(map[string]any)
		return ok && isSealed(o)
	case shapeFields:
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

// isSealedLike is an object that claims to be a sealed field ("sealed": true).
func isSealedLike(o map[string]any) bool { b, _ := o["sealed"].(bool); return b }

// isSealed is a well-formed sealed field: sealed true and a non-empty class.
func isSealed(o map[string]any) bool {
	c, _ := o["class"].(string)
	return isSealedLike(o) && c != ""
}

// placeholder is the typed placeholder of sealed field o: its class and whether it holds
// something, never the value or the reference.
func placeholder(o map[string]any) map[string]any {
	present := false
	if v, ok := o["value"]; ok && v != nil {
		present = true
	} else if r, ok := o["ref"]; ok && r != nil {
		present = true
	} else if p, ok := o["present"].(bool); ok {
		present = p
	}
	c, _ := o["class"].(string)
	return map[string]any{"sealed": true, "class": c, "present": present}
}

// seal returns v with every sealed field in it replaced by its placeholder (a copy where any was
// found) and whether one was.
func seal(v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		if isSealedLike(x) {
			return placeholder(x), true
		}
		out := make(map[string]any, len(x))
		changed := false
		for k, e := range x {
			var c bool
			out[k], c = seal(e)
			changed = changed || c
		}
		return out, changed
	case []any:
		out := make([]any, len(x))
		changed := false
		for i, e := range x {
			var c bool
			out[i], c = seal(e)
			changed = changed || c
		}
		return out, changed
	}
	return v, false
}

// NoteShared is block b as a chat of people persons shows it: in a chat of more than one person a
// terminal, diff or files block carries note SharedNote, since what it shows is not filtered per
// viewer; a files block's own note moves to its detail first (joined after the detail it already
// has, with "; "). In a chat of one, and for every other kind, the block is returned as it is.
// b is not changed; the result is a copy.
//
//	b = stream.NoteShared(b, 3) // b["note"] == stream.SharedNote for a terminal block
func NoteShared(b Block, people int) Block {
	out := make(Block, len(b)+1)
	for k, v := range b {
		out[k] = v
	}
	if people <= 1 {
		return out
	}
	switch b.Kind() {
	case BlockFiles:
		if own, ok := out["note"].(string); ok && own != "" {
			if d, ok := out["detail"].(string); ok && d != "" {
				out["detail"] = d + "; " + own
			} else {
				out["detail"] = own
			}
		}
		out["note"] = SharedNote
	case BlockTerminal, BlockDiff:
		out["note"] = SharedNote
	}
	return out
}
