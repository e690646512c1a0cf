package threads

import (
	"context"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/model"
)

// Window is the most earlier turns the request of a turn shows (spec/peer.md, Receiving): in
// an agent conversation and in a person's conversation with a role, the newest Window earlier
// turns; those before them are left out, and a note says so.
const Window = 8

// leftOut is the note that stands for the earlier turns a request leaves out: turns 1 to n.
func leftOut(n int) model.Message {
	return model.Message{Role: model.RoleSystem, Content: fmt.Sprintf("Turns 1 to %d of this conversation are left out.", n)}
}

// agentIn is the input of a turn in an agent conversation by reference: the turns and the texts
// it shows are named by their number and their index in the conversation, whose records never
// change once written, so the request is composed again the same on a replay.
type agentIn struct {
	Prompt string `json:"prompt,omitempty"`
	// Root describes the root as the system message names it.
	Root    string      `json:"rootDesc"`
	Left    int         `json:"left,omitempty"`
	Earlier []earlierIn `json:"earlier,omitempty"`
	Stopped bool        `json:"stopped,omitempty"`
	Failed  []Failure   `json:"failed,omitempty"`
	Texts   []int       `json:"texts"`
}

// earlierIn is an earlier turn the request shows and the indexes of the texts it took.
type earlierIn struct {
	Turn  int   `json:"turn"`
	Texts []int `json:"texts"`
}

// personIn is the input of a turn in a person's conversation by reference: the earlier turns it
// shows, by number (the turn's own text is that of its number).
type personIn struct {
	Prompt  string `json:"prompt,omitempty"`
	Left    int    `json:"left,omitempty"`
	Earlier []int  `json:"earlier,omitempty"`
}

// agentInput names what turn n of rec shows: the window of its earlier turns (the texts of each
// by index) and the texts at take.
func agentInput(rec *acRec, prompt, root string, failed []Failure, take []int) *agentIn {
	in := &agentIn{Prompt: prompt, Root: root, Stopped: rec.Stopped, Failed: failed, Texts: take}
	index := map[string]int{}
	for i, x := range rec.Texts {
		if x.Dir == dirIn {
			index[x.Message] = i
		}
	}
	from := max(0, len(rec.Turns)-Window)
	in.Left = from
	for _, t := range rec.Turns[from:] {
		e := earlierIn{Turn: t.Turn, Texts: []int{}}
		for _, m := range t.Texts {
			if i, ok := index[m]; ok {
				e.Texts = append(e.Texts, i)
			}
		}
		in.Earlier = append(in.Earlier, e)
	}
	return in
}

// personInput names what turn n of a person's conversation shows: the window of the turns
// before it.
func personInput(_ *pcRec, prompt string, n int) *personIn {
	in := &personIn{Prompt: prompt, Left: max(0, n-1-Window)}
	for k := in.Left + 1; k < n; k++ {
		in.Earlier = append(in.Earlier, k)
	}
	return in
}

// errGone: the record a turn's input refers to is not there (or not as the input names it).
var errGone = fmt.Errorf("threads: the turn's conversation is gone")

// agentMessages composes the request of a turn in an agent conversation from its input.
func (s *Service) agentMessages(ctx context.Context, in turnInput) ([]model.Message, error) {
	var rec acRec
	if ok, err := s.read(ctx, tabAC, in.Ref, &rec); err != nil {
		return nil, err
	} else if !ok {
		return nil, errGone
	}
	a := in.Agent
	text := func(i int) (string, error) {
		if i < 0 || i >= len(rec.Texts) {
			return "", errGone
		}
		return rec.text(i)
	}
	at := AgentTurn{Prompt: a.Prompt, Role: rec.Role, ID: rec.ID, Connection: rec.Conn, PeerRole: rec.PeerRole, Root: a.Root,
		Left: a.Left, Stopped: a.Stopped, Failed: a.Failed}
	for _, e := range a.Earlier {
		if e.Turn < 1 || e.Turn > len(rec.Turns) {
			return nil, errGone
		}
		var ee Earlier
		if t := rec.Turns[e.Turn-1]; t.Status == stCompleted {
			ee.Output = t.Output
		}
		for _, i := range e.Texts {
			x, err := text(i)
			if err != nil {
				return nil, err
			}
			ee.Texts = append(ee.Texts, x)
		}
		at.Earlier = append(at.Earlier, ee)
	}
	for _, i := range a.Texts {
		x, err := text(i)
		if err != nil {
			return nil, err
		}
		at.Texts = append(at.Texts, x)
	}
	return AgentRequest(at), nil
}

// personMessages composes the request of a turn in a person's conversation from its input.
func (s *Service) personMessages(ctx context.Context, in turnInput) ([]model.Message, error) {
	var pc pcRec
	if ok, err := s.read(ctx, tabPC, in.Ref, &pc); err != nil {
		return nil, err
	} else if !ok || in.Turn < 1 || in.Turn > len(pc.Turns) {
		return nil, errGone
	}
	p := in.Person
	var earlier []Exchange
	for _, n := range p.Earlier {
		if n < 1 || n >= in.Turn {
			return nil, errGone
		}
		t := pc.Turns[n-1]
		e := Exchange{Text: t.Text}
		if t.Status == stCompleted {
			e.Output = t.Output
		}
		earlier = append(earlier, e)
	}
	msgs := PersonRequest(p.Prompt, earlier, pc.Turns[in.Turn-1].Text)
	if p.Left > 0 {
		at := 0
		if p.Prompt != "" {
			at = 1
		}
		msgs = append(msgs[:at], append([]model.Message{leftOut(p.Left)}, msgs[at:]...)...)
	}
	return msgs, nil
}

// messages is the request a turn starts with: composed from the records its input names, or the
// request itself for an input stored before inputs named their texts.
func (s *Service) messages(ctx context.Context, in turnInput) ([]model.Message, error) {
	switch {
	case in.Agent != nil:
		return s.agentMessages(ctx, in)
	case in.Person != nil:
		return s.personMessages(ctx, in)
	}
	return in.Messages, nil
}

// budget is the byte budget of each agent conversation of connection cid.
func (s *Service) budget(cid string) int64 {
	if c := s.conns[cid]; c != nil && c.Budget > 0 {
		return c.Budget
	}
	return DefaultBudget
}
