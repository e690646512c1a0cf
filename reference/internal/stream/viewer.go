package stream

import (
	"encoding/json"
	"slices"
	"sort"
	"strconv"
)

// Viewer is who a frame is drawn for: their id and the roles they are cleared to read.
//
//	v := stream.Viewer{ID: "person:hana", ReadRoles: []string{"hr"}}
type Viewer struct {
	ID        string
	ReadRoles []string
}

func (v Viewer) holds(role string) bool { return slices.Contains(v.ReadRoles, role) }

// UnreadableError says a frame holds a value its asker could not read; Field is the JSON pointer
// of that value inside the frame's data ("/block/fields/salary").
//
//	var ue *stream.UnreadableError
//	if errors.As(stream.AssertAskerCanRead(f, asker), &ue) { log.Print(ue.Field) }
type UnreadableError struct{ Field string }

func (e *UnreadableError) Error() string { return "stream: the asker cannot read " + e.Field }

// Render is frame f as viewer v receives it. In the block of f's data (a tool-finished frame):
//
//   - a record block with read_roles of which v holds none makes the whole frame Hidden(f);
//   - a record field {"role": r, "value": x} is x when v holds r, else the placeholder
//     {"hidden": "role", "kind": <x's JSON kind>, "present": <x is not null>};
//   - a sealed field is its placeholder {"sealed", "class", "present"} (one that is already a
//     placeholder passes as it is).
//
// Any other frame, and a private user-message, comes back as it is. f is never changed: the
// result's data is always a copy. Pure and safe for concurrent use.
//
//	g := stream.Render(f, stream.Viewer{ID: "person:bob", ReadRoles: []string{"hr"}})
func Render(f Frame, v Viewer) Frame {
	out := f
	out.Data = append(json.RawMessage(nil), f.Data...)
	if IsEncrypted(f) {
		return out
	}
	data, block, ok := blockOfFrame(f)
	if !ok {
		return out
	}
	if block.Kind() == BlockRecord {
		if roles, ok := block["read_roles"].([]any); ok && len(roles) > 0 {
			cleared := false
			for _, r := range roles {
				if s, _ := r.(string); v.holds(s) {
					cleared = true
				}
			}
			if !cleared {
				return Hidden(f)
			}
		}
	}
	changed := false
	for k, val := range block {
		if k == "kind" {
			continue
		}
		if k == "fields" && block.Kind() == BlockRecord {
			fields, ok := val.(map[string]any)
			if !ok {
				continue
			}
			for name, fv := range fields {
				fo, ok := fv.(map[string]any)
				if !ok {
					continue
				}
				if role, inner, ok := roleField(fo); ok {
					if v.holds(role) {
						fields[name], _ = seal(inner)
					} else {
						fields[name] = map[string]any{"hidden": "role", "kind": jsonKind(inner), "present": inner != nil}
					}
					changed = true
					continue
				}
			}
		}
		var c bool
		block[k], c = seal(block[k])
		changed = changed || c
	}
	if !changed {
		return out
	}
	data["block"] = block
	out.Data, _ = json.Marshal(data)
	return out
}

// AssertAskerCanRead checks a frame built as a reply to asker: it fails when the frame's block
// holds something the asker could not read: a sealed field's value or reference (a placeholder
// is fine), a record field of a role the asker does not hold, or a record whose read_roles the
// asker holds none of. Fields are checked in name order, so the first one reported is stable.
//
// Errors: *UnreadableError naming the first such value.
//
//	if err := stream.AssertAskerCanRead(f, stream.Viewer{ID: "person:alice"}); err != nil { ... }
func AssertAskerCanRead(f Frame, asker Viewer) error {
	if IsEncrypted(f) {
		return nil
	}
	_, block, ok := blockOfFrame(f)
	if !ok {
		return nil
	}
	if block.Kind() == BlockRecord {
		if roles, ok := block["read_roles"].([]any); ok && len(roles) > 0 {
			cleared := false
			for _, r := range roles {
				if s, _ := r.(string); asker.holds(s) {
					cleared = true
				}
			}
			if !cleared {
				return &UnreadableError{Field: "/block/read_roles"}
			}
		}
	}
	keys := make([]string, 0, len(block))
	for k := range block {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "fields" && block.Kind() == BlockRecord {
			if fields, ok := block[k].(map[string]any); ok {
				names := make([]string, 0, len(fields))
				for n := range fields {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					at := "/block/fields/" + escapeToken(n)
					if fo, ok := fields[n].(map[string]any); ok {
						if role, inner, ok := roleField(fo); ok {
							if !asker.holds(role) {
								return &UnreadableError{Field: at}
							}
							if p := rawSealed(inner, at+"/value"); p != "" {
								return &UnreadableError{Field: p}
							}
							continue
						}
					}
					if p := rawSealed(fields[n], at); p != "" {
						return &UnreadableError{Field: p}
					}
				}
				continue
			}
		}
		if p := rawSealed(block[k], "/block/"+escapeToken(k)); p != "" {
			return &UnreadableError{Field: p}
		}
	}
	return nil
}

// rawSealed is the pointer (under at) of the first sealed field in v that carries a value or a
// reference, or "".
func rawSealed(v any, at string) string {
	switch x := v.(type) {
	case map[string]any:
		if isSealedLike(x) {
			if _, ok := x["value"]; ok {
				return at
			}
			if _, ok := x["ref"]; ok {
				return at
			}
			return ""
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p := rawSealed(x[k], at+"/"+escapeToken(k)); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range x {
			if p := rawSealed(e, at+"/"+strconv.Itoa(i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// blockOfFrame decodes f's data (a fresh copy) and its block, when it has one.
func blockOfFrame(f Frame) (map[string]any, Block, bool) {
	if f.Kind() != KindToolFinished {
		return nil, nil, false
	}
	var data map[string]any
	if decodeJSON(f.Data, &data) != nil || data == nil {
		return nil, nil, false
	}
	b, ok := data["block"].(map[string]any)
	if !ok {
		return nil, nil, false
	}
	return data, Block(b), true
}

// roleField reads a record field marked with the role that may read it: exactly the members
// role (a non-empty string) and value.
func roleField(o map[string]any) (role string, value any, ok bool) {
	role, _ = o["role"].(string)
	value, has := o["value"]
	if role == "" || !has || len(o) != 2 {
		return "", nil, false
	}
	return role, value, true
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case []any:
		return "array"
	}
	return "object"
}

func escapeToken(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, s[i])
		}
	}
	return string(out)
}
