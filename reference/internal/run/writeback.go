package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// WriteBack is the run option that remembers a completed run: its prompt and its answer are
// written to the owner's memory scope as one user and one assistant entry, in that order, each
// under an id derived from the run (so a repeated write stores nothing twice). A run that is
// aborted, fails or is canceled writes nothing.
//
// ToolID makes the write a journaled step that goes through the tool of that name (the tool
// server receives {"scope","entries"}): a replay serves the step and never writes again. Unless,
// when set, is the host's verdict that this run must not be remembered (a forked or simulated
// run); it is recorded as a decision before anything is written, so a resume takes the verdict
// recorded. With neither, AllowDirect must be true: the write is then a direct call outside the
// journal, idempotent by its ids.
//
//	opt := run.Options{Prompt: "check pump 3", WriteBack: &run.WriteBack{AllowDirect: true}}
type WriteBack struct {
	ToolID      string `json:"toolId,omitempty"`
	Unless      *bool  `json:"unless,omitempty"`
	AllowDirect bool   `json:"allowDirect,omitempty"`
}

// Journal ids of the write-back, after the run's loop id.
const (
	idWriteBackSkip  = "#writeback:skip"  // the recorded verdict of Unless
	idWriteBackStep  = "#writeback"       // the journaled write of ToolID
	idWriteBackGrant = "#writeback:grant" // the recorded verdict of ToolID's grant check, around the write
)

// checkWriteBack refuses a write-back the system cannot honour, naming the option "writeBack":
// no memory configured, neither toolId nor unless without allowDirect, an unknown toolId.
func (rs *Runs) checkWriteBack(wb *WriteBack) error {
	if wb == nil {
		return nil
	}
	if rs.deps.Memory == nil {
		return loomtype.BadRequest("writeBack", "") // no memory is configured
	}
	if wb.ToolID == "" && wb.Unless == nil && !wb.AllowDirect {
		return loomtype.BadRequest("writeBack", "") // a direct write-back must say allowDirect: true
	}
	if wb.ToolID != "" && !rs.knows(wb.ToolID) {
		return loomtype.BadRequest("writeBack", "") // an unknown toolId
	}
	return nil
}

// memoryEntryID is the id of one write-back entry: the run, its loop and the text it derives
// from, so every repetition of the write repeats it.
func memoryEntryID(execID, text string) string {
	h := sha256.Sum256([]byte(execID + "\x00" + loopID + "\x00" + text))
	return hex.EncodeToString(h[:12])
}

// writeBack writes a completed run's prompt and answer to its owner's memory scope, as the
// run's WriteBack option says. Only a kernel error is returned; a write that fails is lost (the
// run's answer stands). A write through a tool the owner is not granted is an authority denial
// (writeThroughTool): nothing is written and res becomes a run failed with reason "denied".
func (rs *Runs) writeBack(c *kernel.Context, cfg agent.Config, owner loomtype.Identity, opt Options, res *agent.Result) error {
	wb := opt.WriteBack
	if wb == nil || res.Status != agent.Complete || rs.deps.Memory == nil {
		return nil
	}
	if wb.Unless != nil {
		raw, err := c.Decide(loopID+idWriteBackSkip, func() (json.RawMessage, error) { return json.Marshal(*wb.Unless) })
		if err != nil {
			return err
		}
		var skip bool
		_ = json.Unmarshal(raw, &skip)
		if skip {
			return nil
		}
	}
	tainted := false
	for _, call := range res.Calls {
		tainted = tainted || !call.OK
	}
	entries := []hostio.MemoryEntry{
		{ID: memoryEntryID(c.ID(), opt.Prompt), Role: model.RoleUser, Text: opt.Prompt},
		{ID: memoryEntryID(c.ID(), opt.Prompt+"\x00"+res.Text), Role: model.RoleAssistant, Text: res.Text, Tainted: tainted},
	}
	scope := owner.Key()
	if wb.ToolID == "" {
		_ = rs.deps.Memory.Write(c.Ctx(), scope, entries) // idempotent by the entries' ids
		return nil
	}
	if rs.deps.Runner == nil {
		return nil
	}
	return rs.writeThroughTool(c, cfg, wb.ToolID, scope, entries, res)
}

// writeVerdict is the recorded verdict of a write-back through a tool: the grant check's, and
// the error id of a denial.
type writeVerdict struct {
	Denied  bool   `json:"denied,omitempty"`
	ErrorID string `json:"errorId,omitempty"`
}

// writeThroughTool makes the write-back a journaled call of tool, authorized as every tool call
// of the run is (agent.Authorize against the grants of cfg, the owner's as the run recorded
// them). The verdict is a recorded decision around the call's step, so a replay serves it: a
// denial is reported to the error hook once, under the error id recorded, and a completed call
// is never made again. A denied write calls nothing and ends the run failed with reason
// "denied" and that error id, its answer withheld (an authority denial is terminal). The
// decision wraps the step, so a journal written before the verdict was recorded, which holds
// the step alone, replays it and records the verdict after it.
func (rs *Runs) writeThroughTool(c *kernel.Context, cfg agent.Config, tool, scope string, entries []hostio.MemoryEntry, res *agent.Result) error {
	key := memoryEntryID(c.ID(), idWriteBackStep)
	raw, err := c.DecideValue(loopID+idWriteBackGrant, func() (any, error) {
		if err := agent.Authorize(cfg, tool); err != nil {
			v := writeVerdict{Denied: true, ErrorID: agent.NewErrorID()}
			if cfg.OnError != nil {
				cfg.OnError(v.ErrorID, err)
			}
			return v, nil
		}
		_, err := c.Execute(loopID+idWriteBackStep, func(ctx context.Context) (json.RawMessage, error) {
			body, _ := json.Marshal(struct {
				Scope   string               `json:"scope"`
				Entries []hostio.MemoryEntry `json:"entries"`
			}{scope, entries})
			return rs.deps.Runner.Call(ctx, tool, body, key)
		})
		var se *kernel.StepError
		if err != nil && !errors.As(err, &se) {
			return nil, err
		}
		return writeVerdict{}, nil
	})
	if err != nil {
		return err
	}
	var v writeVerdict
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("run: recorded write-back verdict: %w", err)
	}
	if v.Denied {
		res.Status, res.Reason, res.ErrorID, res.Text = agent.Failed, loomtype.ReasonDenied, v.ErrorID, ""
	}
	return nil
}
