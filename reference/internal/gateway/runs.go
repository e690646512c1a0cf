package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// runBody is the body of POST /runs (spec/http.md, Runs). Every option is optional but the
// prompt; an unknown member or one of the wrong type is a 400 naming it.
type runBody struct {
	ID            *string            `json:"id,omitempty"`
	Prompt        *string            `json:"prompt"`
	History       []run.HistoryEntry `json:"history,omitempty"`
	Tools         []string           `json:"tools,omitempty"`
	ParallelTools json.RawMessage    `json:"parallelTools,omitempty"`
	ToolErrors    *string            `json:"toolErrors,omitempty"`
	MaxIterations json.RawMessage    `json:"maxIterations,omitempty"`
	WriteBack     json.RawMessage    `json:"writeBack,omitempty"`
	Recall        json.RawMessage    `json:"recall,omitempty"`
	CacheScope    *string            `json:"cacheScope,omitempty"`
	TurnTimeoutMs json.RawMessage    `json:"turnTimeoutMs,omitempty"`
	ToolTimeoutMs json.RawMessage    `json:"toolTimeoutMs,omitempty"`
	// Runner and AcceptAtLeastOnce choose the runner (spec/http.md, Runs: the single-frame runner).
	Runner            *string `json:"runner,omitempty"`
	AcceptAtLeastOnce *bool   `json:"acceptAtLeastOnce,omitempty"`
	// needsApproval and the deprecated requireApproval (approvals.go).
	NeedsApproval   json.RawMessage `json:"needsApproval,omitempty"`
	RequireApproval json.RawMessage `json:"requireApproval,omitempty"`
}

// positive reads a positive integer member; ok is false for anything else.
func positive(raw json.RawMessage) (int, bool) {
	var n int
	if err := json.Unmarshal(raw, &n); err != nil || n < 1 {
		return 0, false
	}
	return n, true
}

// runOptions turns the body into the run's options, or names the member that is wrong.
func runOptions(b runBody) (run.Options, string) {
	if b.ID != nil && *b.ID == "" {
		return run.Options{}, "id"
	}
	if b.Prompt == nil {
		return run.Options{}, "prompt"
	}
	opt := run.Options{ID: deref(b.ID), Prompt: *b.Prompt, History: b.History, Tools: b.Tools, ToolErrors: deref(b.ToolErrors)}
	if b.ToolErrors != nil && *b.ToolErrors == "" {
		return run.Options{}, "toolErrors"
	}
	switch p := string(b.ParallelTools); p {
	case "", "false":
	case "true":
		opt.Parallel = -1
	default:
		n, ok := positive(b.ParallelTools)
		if !ok {
			return run.Options{}, "parallelTools"
		}
		opt.Parallel = n
	}
	if len(b.MaxIterations) > 0 {
		n, ok := positive(b.MaxIterations)
		if !ok {
			return run.Options{}, "maxIterations"
		}
		opt.MaxIterations = n
	}
	if len(b.WriteBack) > 0 {
		wb, ok := writeBackOption(b.WriteBack)
		if !ok {
			return run.Options{}, "writeBack"
		}
		opt.WriteBack = wb
	}
	if len(b.Recall) > 0 {
		recall, ok := recallOption(b.Recall)
		if !ok {
			return run.Options{}, "recall"
		}
		opt.Recall = recall
	}
	if b.CacheScope != nil {
		if *b.CacheScope == "" {
			return run.Options{}, "cacheScope"
		}
		opt.CacheScope = *b.CacheScope
	}
	for _, t := range []struct {
		name string
		raw  json.RawMessage
		to   *int64
	}{{"turnTimeoutMs", b.TurnTimeoutMs, &opt.TurnTimeoutMs}, {"toolTimeoutMs", b.ToolTimeoutMs, &opt.ToolTimeoutMs}} {
		if len(t.raw) > 0 {
			n, ok := positive(t.raw)
			if !ok || n > run.MaxTimeoutMs {
				return run.Options{}, t.name
			}
			*t.to = int64(n)
		}
	}
	if b.Runner != nil {
		if *b.Runner == "" {
			return run.Options{}, "runner"
		}
		opt.Runner = *b.Runner
	}
	opt.AcceptAtLeastOnce = b.AcceptAtLeastOnce != nil && *b.AcceptAtLeastOnce
	if bad := approvalOptions(b, &opt); bad != "" {
		return run.Options{}, bad
	}
	return opt, ""
}

func (g *Gateway) startRun(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if !g.limitPost(w, r, who) {
		return
	}
	var b runBody
	if !g.readBody(w, r, &b, false) {
		return
	}
	opt, bad := runOptions(b)
	if bad != "" {
		writeError(w, http.StatusBadRequest, "bad request", bad)
		return
	}
	v, created, err := g.cfg.Runs.Start(r.Context(), who, opt)
	if err != nil {
		g.fail(w, err)
		return
	}
	writeStarted(w, created, "/runs/"+v.ID, v)
}

func (g *Gateway) getRun(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	v, err := g.cfg.Runs.Get(r.Context(), who, r.PathValue("id"))
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// steerRun answers abort and cancel: authorization first (the one 404), then the rate limit,
// then the body (none, or an empty object).
func (g *Gateway) steerRun(op func(*run.Runs) func(r *http.Request, who loomtype.Identity, id string) error) func(http.ResponseWriter, *http.Request, loomtype.Identity) {
	return func(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
		id := r.PathValue("id")
		if _, err := g.cfg.Runs.Get(r.Context(), who, id); err != nil {
			g.fail(w, err)
			return
		}
		if !g.limitPost(w, r, who) {
			return
		}
		var b closeBody
		if !g.readBody(w, r, &b, true) {
			return
		}
		if err := op(g.cfg.Runs)(r, who, id); err != nil {
			g.fail(w, err)
			return
		}
		v, err := g.cfg.Runs.Get(r.Context(), who, id)
		if err != nil {
			g.fail(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, v)
	}
}

func abortOp(rs *run.Runs) func(*http.Request, loomtype.Identity, string) error {
	return func(r *http.Request, who loomtype.Identity, id string) error { return rs.Abort(r.Context(), who, id) }
}

func cancelOp(rs *run.Runs) func(*http.Request, loomtype.Identity, string) error {
	return func(r *http.Request, who loomtype.Identity, id string) error { return rs.Cancel(r.Context(), who, id) }
}
