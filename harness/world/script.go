package world

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// ErrBadScript is wrapped by the error of LoadScript and Apply for a script that is not the JSON
// document described at Script, or that names something the World cannot take.
var ErrBadScript = errors.New("world: bad script")

// PathControl is the root of the control API that ControlHandler serves.
const PathControl = "/control/"

// Script is a world set up by hand, as a JSON document: what `loomcheck world --script FILE` loads
// at start and POST /control/script adds while it runs (spec/world.md, Scripting the world by hand).
// Every member is optional; unknown members are refused.
//
//	{
//	  "model": [{"chunks": ["Hel", "lo"], "keepAlive": true}, {"match": "weather", "toolCalls": [{"name": "lookup", "arguments": "{}"}]}],
//	  "tools": {"lookup": [{"result": {"temp": 3}}, {"fail": {"status": 502, "message": "down"}}]},
//	  "toolDefaults": {"clock": {"result": {"now": "noon"}}},
//	  "declare": [{"name": "pay", "idempotent": false}, {"name": "ask", "kind": "human"}],
//	  "memory": {"acme/alice": [{"id": "m1", "role": "assistant", "text": "earlier", "tainted": true}]},
//	  "identities": {"tok-alice": {"tenant": "acme", "actor": "alice"}},
//	  "clearance": {"alice": ["finance"]}
//	}
//
// Model replies are queued in order (a reply with "match" only for requests whose last user
// message contains it, see Model.EnqueueFor); each tool's list is its queue and toolDefaults its
// answer once the queue is empty; declare declares tools (Tools.Declare); memory seeds scopes
// (Memory.SeedEntries); identities are tokens the identity service knows; clearance
// clears actors for classes.
//
//	s, err := world.LoadScript(b)
//	if err == nil { err = w.Apply(s) }
type Script struct {
	Model        []ScriptReply                  `json:"model,omitempty"`
	Tools        map[string][]ScriptTool        `json:"tools,omitempty"`
	ToolDefaults map[string]ScriptTool          `json:"toolDefaults,omitempty"`
	Declare      []sutconfig.ToolDef            `json:"declare,omitempty"`
	Memory       map[string][]MemoryEntry       `json:"memory,omitempty"`
	Identities   map[string]sutconfig.Principal `json:"identities,omitempty"`
	Clearance    map[string][]string            `json:"clearance,omitempty"`
}

// ScriptReply is one model reply of a Script: the fields of Reply that can be written down, with
// Match the text the last user message must contain ("" for any request). Fill is Reply.Fill.
//
//	world.ScriptReply{Chunks: []string{"Hel", "lo"}, MultiLine: true}
//	world.ScriptReply{Text: "long: ", Fill: 300000}
type ScriptReply struct {
	Match        string           `json:"match,omitempty"`
	Text         string           `json:"text,omitempty"`
	Fill         int              `json:"fill,omitempty"`
	Chunks       []string         `json:"chunks,omitempty"`
	ToolCalls    []ScriptToolCall `json:"toolCalls,omitempty"`
	FinishReason string           `json:"finishReason,omitempty"`
	Fail         *ScriptFailure   `json:"fail,omitempty"`
	Drop         bool             `json:"drop,omitempty"`
	KeepAlive    bool             `json:"keepAlive,omitempty"`
	MultiLine    bool             `json:"multiLine,omitempty"`
	UsageChunk   bool             `json:"usageChunk,omitempty"`
	Plain        bool             `json:"plain,omitempty"`
}

// ScriptToolCall is a tool call a scripted reply makes; Arguments is JSON text, and Fill is
// ToolCall.Fill (Arguments must then be a JSON object, "{}" when empty).
//
//	world.ScriptToolCall{Name: "lookup", Arguments: `{"q":"x"}`}
type ScriptToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Fill      int    `json:"fill,omitempty"`
}

// ScriptFailure is a Failure written down.
//
//	world.ScriptFailure{Status: 503, Message: "overloaded"}
type ScriptFailure struct {
	Status  int    `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Body    string `json:"body,omitempty"`
}

// ScriptTool is one answer of a tool: Result (any JSON, {} when absent), Fail, or a typed Failure
// (Behavior.Error) answered with Fail's status (500 without Fail). WrapDepth buries Failure at
// that depth of a chain of WrapperClass failures (WrapAt).
//
//	world.ScriptTool{Result: json.RawMessage(`{"temp":3}`)}
//	world.ScriptTool{Failure: &world.ToolError{Class: world.ClassCapabilityDenied}, WrapDepth: 6}
type ScriptTool struct {
	Result    json.RawMessage `json:"result,omitempty"`
	Fail      *ScriptFailure  `json:"fail,omitempty"`
	Failure   *ToolError      `json:"failure,omitempty"`
	WrapDepth int             `json:"wrapDepth,omitempty"`
}

func (f *ScriptFailure) failure() *Failure {
	if f == nil {
		return nil
	}
	return &Failure{Status: f.Status, Message: f.Message, Body: f.Body}
}

func (t ScriptTool) behavior() Behavior {
	b := Behavior{Fail: t.Fail.failure()}
	if t.Failure != nil {
		b.Error = WrapAt(t.Failure, t.WrapDepth)
	}
	if len(t.Result) > 0 {
		b.Result = t.Result
	}
	return b
}

func (r ScriptReply) reply() Reply {
	out := Reply{Text: r.Text, Chunks: r.Chunks, Fill: r.Fill, FinishReason: r.FinishReason, Fail: r.Fail.failure(),
		Drop: r.Drop, KeepAlive: r.KeepAlive, MultiLine: r.MultiLine, UsageChunk: r.UsageChunk, Plain: r.Plain}
	for _, tc := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall(tc))
	}
	return out
}

// LoadScript decodes a Script from JSON, refusing unknown members, trailing data, a tool call
// without a name or whose arguments are not JSON (or not a JSON object that fits Fill), a tool
// result that is not JSON, a typed failure without a class or too deep (MaxCauseDepth, counting
// WrapDepth), a typed failure with a 2xx status, a WrapDepth without a failure, and a declared
// tool of an unknown kind. Its error wraps ErrBadScript.
//
//	s, err := world.LoadScript([]byte(`{"model": [{"text": "Hello!"}]}`))
func LoadScript(b []byte) (Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("%w: %v", ErrBadScript, err)
	}
	if dec.More() {
		return Script{}, fmt.Errorf("%w: data after the script", ErrBadScript)
	}
	for i, r := range s.Model {
		for k, tc := range r.ToolCalls {
			if tc.Name == "" || !json.Valid([]byte(tc.Arguments)) {
				return Script{}, fmt.Errorf("%w: model[%d].toolCalls[%d] needs a name and JSON arguments", ErrBadScript, i, k)
			}
			if tc.Fill != 0 {
				if _, err := FillArguments(tc.Arguments, tc.Fill); err != nil {
					return Script{}, fmt.Errorf("%w: model[%d].toolCalls[%d]: %w", ErrBadScript, i, k, err)
				}
			}
		}
		if r.Fill < 0 {
			return Script{}, fmt.Errorf("%w: model[%d].fill is negative", ErrBadScript, i)
		}
	}
	checkTool := func(what string, a ScriptTool) error {
		if a.WrapDepth < 0 || a.WrapDepth > 0 && a.Failure == nil {
			return fmt.Errorf("%w: %s: wrapDepth needs a failure and is not negative", ErrBadScript, what)
		}
		if a.Failure != nil && a.WrapDepth > MaxCauseDepth {
			return fmt.Errorf("%w: %s: wrapDepth over %d", ErrBadScript, what, MaxCauseDepth)
		}
		if err := a.behavior().check(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrBadScript, what, err)
		}
		return nil
	}
	for name, answers := range s.Tools {
		for i, a := range answers {
			if err := checkTool(fmt.Sprintf("tools.%s[%d]", name, i), a); err != nil {
				return Script{}, err
			}
		}
	}
	for name, a := range s.ToolDefaults {
		if err := checkTool("toolDefaults."+name, a); err != nil {
			return Script{}, err
		}
	}
	for i, d := range s.Declare {
		if d.Kind != "" && d.Kind != KindHuman {
			return Script{}, fmt.Errorf("%w: declare[%d] has kind %q", ErrBadScript, i, d.Kind)
		}
	}
	return s, nil
}

// Apply adds s to what the World is scripted with: model replies after those already queued,
// tool answers after each tool's queue, tool defaults, tool declarations, memory entries, tokens
// and clearances. It stops at the
// first part the World refuses (ErrScriptFull, wrapped with ErrBadScript and the part's name);
// what was added before stays.
//
//	err := w.Apply(world.Script{Model: []world.ScriptReply{{Text: "Hello!"}}})
func (w *World) Apply(s Script) error {
	bad := func(what string, err error) error { return fmt.Errorf("%w: %s: %w", ErrBadScript, what, err) }
	for i, r := range s.Model {
		var err error
		if r.Match != "" {
			err = w.model.EnqueueFor(r.Match, r.reply())
		} else {
			err = w.model.Enqueue(r.reply())
		}
		if err != nil {
			return bad(fmt.Sprintf("model[%d]", i), err)
		}
	}
	for name, answers := range s.Tools {
		bs := make([]Behavior, len(answers))
		for i, a := range answers {
			bs[i] = a.behavior()
		}
		if err := w.tools.Enqueue(name, bs...); err != nil {
			return bad("tools."+name, err)
		}
	}
	for name, a := range s.ToolDefaults {
		if err := w.tools.Define(name, a.behavior()); err != nil {
			return bad("toolDefaults."+name, err)
		}
	}
	if len(s.Declare) > 0 {
		if err := w.tools.Declare(s.Declare...); err != nil {
			return bad("declare", err)
		}
	}
	for scope, entries := range s.Memory {
		if err := w.memory.SeedEntries(scope, entries...); err != nil {
			return bad("memory."+scope, err)
		}
	}
	for token, p := range s.Identities {
		if err := w.identity.Add(token, p); err != nil {
			return bad("identities", err)
		}
	}
	for actor, classes := range s.Clearance {
		if err := w.clearance.Allow(actor, classes...); err != nil {
			return bad("clearance."+actor, err)
		}
	}
	return nil
}

// ControlHandler serves the control API of w under PathControl, for scripting a World by hand
// (spec/world.md, Scripting the world by hand):
//
//   - POST /control/script: a Script, added as Apply adds it; 204, or 400 {"error"} for a bad one.
//   - POST /control/reset: Reset; 204.
//   - GET /control/model/requests, /control/tools/calls, /control/tools/definitions,
//     /control/memory/log, /control/rejections, /control/errors: what the World recorded (or was
//     told) since the last reset, as JSON lists.
//
// Any other path under it is 404, any other method 405. It is safe for concurrent use.
//
//	mux.Handle(world.PathControl, world.ControlHandler(w))
//	mux.Handle("/", w.Handler())
func ControlHandler(w *World) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathControl+"script", func(rw http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, w.opts.MaxBodyBytes))
		if err != nil {
			_ = writeJSON(rw, http.StatusRequestEntityTooLarge, map[string]string{"error": "script too large"})
			return
		}
		s, err := LoadScript(b)
		if err == nil {
			err = w.Apply(s)
		}
		if err != nil {
			_ = writeJSON(rw, http.StatusBadRequest, map[string]string{"error": strings.TrimPrefix(err.Error(), "world: ")})
			return
		}
		rw.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST "+PathControl+"reset", func(rw http.ResponseWriter, r *http.Request) {
		w.Reset()
		rw.WriteHeader(http.StatusNoContent)
	})
	list := func(get func() any) http.HandlerFunc {
		return func(rw http.ResponseWriter, r *http.Request) { _ = writeJSON(rw, http.StatusOK, get()) }
	}
	mux.HandleFunc("GET "+PathControl+"model/requests", list(func() any { return nonNil(w.model.Requests()) }))
	mux.HandleFunc("GET "+PathControl+"tools/calls", list(func() any { return nonNil(w.tools.Calls()) }))
	mux.HandleFunc("GET "+PathControl+"rejections", list(func() any { return nonNil(w.Rejections()) }))
	mux.HandleFunc("GET "+PathControl+"errors", list(func() any { return nonNil(w.errorHook.Errors()) }))
	mux.HandleFunc("GET "+PathControl+"memory/log", list(func() any { return nonNil(w.memory.Log()) }))
	mux.HandleFunc("GET "+PathControl+"tools/definitions", list(func() any { return nonNil(w.tools.Definitions()) }))
	return mux
}

// nonNil makes an empty recording encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
