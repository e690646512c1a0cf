package threads

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// FlowName is the kernel flow of every turn.
const FlowName = "threads.turn"

// Kinds of turn.
const (
	kindAgent  = "agent"
	kindPerson = "person"
	kindTask   = "task"
)

// MaxIterations bounds the model calls of one turn.
const MaxIterations = 8

// turnInput is what a turn execution starts with: everything it needs, so that a replay needs
// nothing else. Messages is the request itself, in inputs stored before they named their texts;
// Agent or Person names what the request is composed of (window.go).
type turnInput struct {
	Kind     string          `json:"kind"`
	Ref      string          `json:"ref"`
	Turn     int             `json:"turn"`
	Role     string          `json:"role"`
	Root     Root            `json:"root"`
	Messages []model.Message `json:"messages,omitempty"`
	Agent    *agentIn        `json:"agent,omitempty"`
	Person   *personIn       `json:"person,omitempty"`
}

type turnOutput struct {
	Status string `json:"status"`
	Text   string `json:"text"`
}

func execID(kind, ref string, n int) string { return "thr:" + kind + ":" + ref + ":" + strconv.Itoa(n) }

// flow runs one turn: the agent loop over the composed messages with peer.send.
func (s *Service) flow(c *kernel.Context, raw json.RawMessage) (json.RawMessage, error) {
	var in turnInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("threads: turn input: %w", err)
	}
	cfg := agent.Config{LoopID: "turn", Provider: s.cfg.Provider, Model: s.cfg.Model, Tools: []model.Tool{PeerSend},
		Runner: &sender{s: s, role: in.Role, root: in.Root}, MaxIterations: MaxIterations}
	msgs, err := s.messages(c.Ctx(), in)
	if err != nil {
		return nil, err
	}
	res, err := agent.Run(c, cfg, msgs)
	if err != nil {
		return nil, err
	}
	return json.Marshal(turnOutput{Status: string(res.Status), Text: res.Text})
}

// startReq is a turn to start once its record is committed.
type startReq struct {
	kind, ref, exec string
	// conn and took: the connection of an agent turn and how many waiting texts it took.
	conn string
	took int
	in   turnInput
}

// stage stores a turn's input beside its record (in tx), so that a crash before the execution
// starts leaves what Resume needs to start it.
func stage(tx *kernel.Tx, r startReq) error { return put(tx, tabTurnIn, r.exec, r.in) }

// launch starts the staged turns and waits for each to end. Call without s.mu.
func (s *Service) launch(ctx context.Context, reqs ...startReq) {
	for _, r := range reqs {
		if r.exec == "" {
			continue
		}
		in, _ := json.Marshal(r.in)
		// The start and a stop (or an end) of the same turn are serialised: a turn stopped
		// before its execution started is never started.
		s.mu.Lock()
		due, err := s.due(ctx, r)
		if err == nil && due {
			_, err = s.k.Start(ctx, kernel.StartRequest{ID: r.exec, Flow: FlowName, Input: in,
				Principal: loomtype.Identity{Actor: "role:" + r.in.Role}})
		}
		s.mu.Unlock()
		if err == nil && !due {
			continue
		}
		if err != nil && !errors.Is(err, loomtype.ErrAlreadyStarted) {
			s.cfg.Logger.Error("threads: a turn did not start", "execution", r.exec, "err", err)
			continue
		}
		s.await(r.kind, r.ref, r.exec)
	}
}

// due reports whether the turn r is still recorded as running (s.mu held).
func (s *Service) due(ctx context.Context, r startReq) (bool, error) {
	switch r.kind {
	case kindAgent:
		var rec acRec
		ok, err := s.read(ctx, tabAC, r.ref, &rec)
		if err != nil || !ok {
			return false, err
		}
		t := rec.turnByExec(r.exec)
		return t != nil && t.Status == stRunning, nil
	case kindPerson:
		var pc pcRec
		ok, err := s.read(ctx, tabPC, r.ref, &pc)
		if err != nil || !ok {
			return false, err
		}
		for _, t := range pc.Turns {
			if t.Exec == r.exec {
				return t.Status == stRunning, nil
			}
		}
		return false, nil
	}
	var run runRec
	ok, err := s.read(ctx, tabRun, r.ref, &run)
	return ok && run.Status == stRunning, err
}

// await waits, in the background, for the turn execution to end and records how it ended.
func (s *Service) await(kind, ref, exec string) {
	s.mu.Lock()
	if s.closed || s.awaiting[exec] {
		s.mu.Unlock()
		return
	}
	s.awaiting[exec] = true
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		info, err := s.k.Await(s.ctx, exec)
		s.mu.Lock()
		delete(s.awaiting, exec)
		s.mu.Unlock()
		if err != nil {
			return
		}
		status, output := ended(info)
		if err := s.finish(s.ctx, kind, ref, exec, status, output); err != nil && s.ctx.Err() == nil {
			s.cfg.Logger.Error("threads: a turn's end was not recorded", "execution", exec, "err", err)
		}
	}()
}

// ended maps a turn execution's end to a turn status and its answer.
func ended(info kernel.Info) (string, *string) {
	switch info.State {
	case kernel.StateCompleted:
		var out turnOutput
		if json.Unmarshal(info.Output, &out) == nil && out.Status == string(agent.Complete) {
			return stCompleted, &out.Text
		}
		return stFailed, nil
	case kernel.StateCanceled:
		return stStopped, nil
	default:
		return stFailed, nil
	}
}

// finish records the end of a turn (unless something else ended it already) and starts the
// next turn when one is due.
func (s *Service) finish(ctx context.Context, kind, ref, exec, status string, output *string) error {
	s.mu.Lock()
	var next []startReq
	err := s.k.Update(ctx, func(tx *kernel.Tx) error {
		next = nil
		switch kind {
		case kindAgent:
			return s.finishAgent(tx, ref, exec, status, output, &next)
		case kindPerson:
			return s.finishPerson(tx, ref, exec, status, output, &next)
		case kindTask:
			return s.finishRun(tx, ref, exec, status, output)
		}
		return nil
	})
	if err == nil {
		s.afterCommit(next)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.launch(ctx, next...)
	return nil
}

// afterCommit applies the in-memory counts of staged agent turns (s.mu held).
func (s *Service) afterCommit(reqs []startReq) {
	for _, r := range reqs {
		if r.kind == kindAgent {
			s.waiting[r.conn] -= r.took
		}
	}
}

func (s *Service) finishAgent(tx *kernel.Tx, id, exec, status string, output *string, next *[]startReq) error {
	var rec acRec
	ok, err := get(tx, tabAC, id, &rec)
	if err != nil || !ok {
		return err
	}
	t := rec.turnByExec(exec)
	if t == nil || t.Status != stRunning {
		return nil
	}
	t.Status, t.Output = status, output
	if status == stStopped {
		rec.Stopped = true
	} else if r, err := s.nextAgentTurn(tx, &rec); err != nil {
		return err
	} else if r != nil {
		*next = append(*next, *r)
	}
	return put(tx, tabAC, id, rec)
}

func (a *acRec) turnByExec(exec string) *turnRec {
	for i := range a.Turns {
		if a.Turns[i].Exec == exec {
			return &a.Turns[i]
		}
	}
	return nil
}
