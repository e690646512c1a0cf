package gateway

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// approvalRule reads needsApproval or requireApproval (spec/http.md, Approvals and human tools):
// true, false, or an object of a boolean per tool name. ok is false for anything else.
func approvalRule(raw json.RawMessage) (all bool, tools map[string]bool, ok bool) {
	switch string(raw) {
	case "true":
		return true, nil, true
	case "false":
		return false, nil, true
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return false, nil, false
	}
	tools = map[string]bool{}
	for name, v := range m {
		switch string(v) {
		case "true":
			tools[name] = true
		case "false":
			tools[name] = false
		default:
			return false, nil, false
		}
	}
	return false, tools, true
}

// approvalOptions sets opt's approval rule from the body, or names the option that is wrong:
// both spellings at once are refused naming the deprecated one.
func approvalOptions(b runBody, opt *run.Options) string {
	switch {
	case len(b.NeedsApproval) > 0 && len(b.RequireApproval) > 0:
		return "requireApproval"
	case len(b.NeedsApproval) > 0:
		all, tools, ok := approvalRule(b.NeedsApproval)
		if !ok {
			return "needsApproval"
		}
		opt.Approval = run.NeedsApprovalRule(all, tools)
	case len(b.RequireApproval) > 0:
		all, tools, ok := approvalRule(b.RequireApproval)
		if !ok {
			return "requireApproval"
		}
		opt.Approval, opt.RequireApproval = run.RequireApprovalRule(all, tools), true
	}
	return ""
}

// approvalBody is the body of POST /runs/{id}/approvals/{gate}.
type approvalBody struct {
	Decision *string `json:"decision"`
}

// humanBody is the body of POST /runs/{id}/human/{call}.
type humanBody struct {
	Result json.RawMessage `json:"result"`
}

// answerRun answers a parked call: authorization first (the one 404), then the rate limit, then
// the body; 200 and the run, or 409 conflict "not pending".
func (g *Gateway) answerRun(human bool) func(http.ResponseWriter, *http.Request, loomtype.Identity) {
	return func(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
		id := r.PathValue("id")
		if _, err := g.cfg.Runs.Get(r.Context(), who, id); err != nil {
			g.fail(w, err)
			return
		}
		if !g.limitPost(w, r, who) {
			return
		}
		var v run.View
		var err error
		if human {
			var b humanBody
			if !g.readBody(w, r, &b, false) {
				return
			}
			if len(b.Result) == 0 || string(b.Result) == "null" {
				writeError(w, http.StatusBadRequest, "bad request", "result")
				return
			}
			v, err = g.cfg.Runs.AnswerHuman(r.Context(), who, id, r.PathValue("call"), b.Result)
		} else {
			var b approvalBody
			if !g.readBody(w, r, &b, false) {
				return
			}
			if b.Decision == nil || *b.Decision != "approve" && *b.Decision != "deny" {
				writeError(w, http.StatusBadRequest, "bad request", "decision")
				return
			}
			v, err = g.cfg.Runs.Approve(r.Context(), who, id, r.PathValue("gate"), *b.Decision == "approve")
		}
		if errors.Is(err, run.ErrNotPending) {
			writeError(w, http.StatusConflict, "conflict", "not pending")
			return
		}
		if err != nil {
			g.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}
