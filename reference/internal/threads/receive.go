package threads

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/internal/strictjson"
	"github.com/loomcheck/loomcheck/reference/kernel"
)

// Text is one text on the wire (schemas/peer-text.schema.json).
type Text struct {
	V       int    `json:"v"`
	Thread  string `json:"thread"`
	Message string `json:"message"`
	From    string `json:"from"`
	To      string `json:"to"`
	Text    string `json:"text"`
}

// Ack is the receiver's answer to a text it stored (schemas/peer-ack.schema.json).
type Ack struct {
	Ack     bool   `json:"ack"`
	Thread  string `json:"thread"`
	Message string `json:"message"`
}

// Reasons of the wire's rejections.
const (
	ReasonBadRequest = "bad-request"
	ReasonConnection = "connection"
	ReasonRole       = "role"
	ReasonPaused     = "paused"
	ReasonThread     = "thread"
	ReasonRoles      = "roles"
	ReasonBusy       = "busy"
	// ReasonBudget: the agent conversation has stored as many bytes of text as its budget.
	ReasonBudget = "budget"
	// ReasonRate: the peer presented more texts on the connection than its rate allows.
	ReasonRate = "rate"
)

func reject(status int, reason, detail string) *Rejection {
	return &Rejection{Status: status, Reason: reason, Detail: detail}
}

// ParseText checks a text's body member by member, in the order of spec/peer.md, and returns
// the first that is missing, of the wrong type or out of bounds as a 400 bad-request Rejection
// whose Detail names it ("body" when the body is no JSON object). It decodes strictly: a member
// named twice (or holding bytes that are no UTF-8) is named before anything else, trailing data is
// "body", and a member the wire does not have is named after the others are checked. Pure.
//
//	t, rej := threads.ParseText([]byte(`{"v":1,"thread":"t_0123456789abcdef","message":"m1","from":"scout","to":"planner","text":"hi"}`))
func ParseText(body []byte) (Text, *Rejection) {
	bad := func(member string) (Text, *Rejection) {
		return Text{}, reject(http.StatusBadRequest, ReasonBadRequest, member)
	}
	var se *strictjson.Error
	if err := strictjson.Check(body); errors.As(err, &se) && se.Field != "" {
		return bad(se.Field)
	}
	var m map[string]json.RawMessage
	if !utf8.Valid(body) || json.Unmarshal(body, &m) != nil || m == nil {
		return bad("body")
	}
	var t Text
	if raw, ok := m["v"]; !ok || string(raw) != "1" {
		return bad("v")
	}
	t.V = 1
	str := func(member string, ok func(string) bool) (string, bool) {
		raw, present := m[member]
		var v string
		if !present || len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &v) != nil || !ok(v) {
			return "", false
		}
		return v, true
	}
	var ok bool
	if t.Thread, ok = str("thread", validThread); !ok {
		return bad("thread")
	}
	if t.Message, ok = str("message", validMessage); !ok {
		return bad("message")
	}
	if t.From, ok = str("from", ValidName); !ok {
		return bad("from")
	}
	if t.To, ok = str("to", ValidName); !ok {
		return bad("to")
	}
	if t.Text, ok = str("text", func(s string) bool { return len(s) >= 1 && len(s) <= MaxText && utf8.ValidString(s) }); !ok {
		return bad("text")
	}
	if extra := unknownMember(m); extra != "" {
		return bad(extra)
	}
	return t, nil
}

// unknownMember is the first member of m, in byte order, that the wire does not have.
func unknownMember(m map[string]json.RawMessage) string {
	first := ""
	for k := range m {
		switch k {
		case "v", "thread", "message", "from", "to", "text":
		default:
			if first == "" || k < first {
				first = k
			}
		}
	}
	return first
}

// Receive takes a text the peer presents with token (its bearer token), making the checks of
// spec/peer.md in the order of its table. It returns the Ack once the text is stored durably;
// a message id the connection already delivered gets the same Ack and adds nothing.
//
// Errors: a *Rejection carrying the status and reason to answer; store errors.
//
//	ack, err := svc.Receive(ctx, token, body)
//	var rej *threads.Rejection
//	if errors.As(err, &rej) { answer(rej.Status, rej.Reason) }
func (s *Service) Receive(ctx context.Context, token string, body []byte) (Ack, error) {
	t, rej := ParseText(body)
	if rej != nil {
		return Ack{}, rej
	}
	cid, known := s.byToken[token]
	if token == "" || !known {
		return Ack{}, reject(http.StatusUnauthorized, ReasonConnection, "")
	}
	if rej, err := s.limit(ctx, cid); err != nil || rej != nil {
		if rej != nil {
			return Ack{}, rej
		}
		return Ack{}, err
	}
	s.mu.Lock()
	var next []startReq
	var ack Ack
	var stored bool
	err := s.k.Update(ctx, func(tx *kernel.Tx) error {
		next, stored = nil, false
		var err error
		ack, next, err = s.receive(tx, cid, t, &stored)
		return err
	})
	if err == nil {
		if stored {
			s.waiting[cid]++
		}
		s.afterCommit(next)
	}
	s.mu.Unlock()
	if err != nil {
		return Ack{}, err
	}
	s.launch(s.ctx, next...)
	return ack, nil
}

// receive is Receive inside its transaction, with s.mu held.
func (s *Service) receive(tx *kernel.Tx, cid string, t Text, stored *bool) (Ack, []startReq, error) {
	state, err := s.connState(tx, cid)
	if err != nil {
		return Ack{}, nil, err
	}
	if state == connRevoked {
		return Ack{}, nil, reject(http.StatusUnauthorized, ReasonConnection, "")
	}
	if _, ok := s.roles[t.To]; !ok {
		return Ack{}, nil, reject(http.StatusNotFound, ReasonRole, "")
	}
	if state == connPaused {
		return Ack{}, nil, reject(http.StatusConflict, ReasonPaused, "")
	}
	var seen string
	if ok, err := get(tx, tabRecvd, cid+"/"+t.Message, &seen); err != nil {
		return Ack{}, nil, err
	} else if ok {
		return Ack{Ack: true, Thread: seen, Message: t.Message}, nil, nil
	}
	var rec acRec
	var id string
	ok, err := get(tx, tabThread, cid+"/"+t.Thread, &id)
	if err != nil {
		return Ack{}, nil, err
	}
	if ok {
		if ok, err := get(tx, tabAC, id, &rec); err != nil {
			return Ack{}, nil, err
		} else if !ok {
			return Ack{}, nil, reject(http.StatusConflict, ReasonThread, "")
		}
		if rec.Closed {
			return Ack{}, nil, reject(http.StatusConflict, ReasonThread, "")
		}
		if rec.Role != t.To || rec.PeerRole != t.From {
			return Ack{}, nil, reject(http.StatusConflict, ReasonRoles, "")
		}
	}
	if rec.Bytes+int64(len(t.Text)) > s.budget(cid) {
		return Ack{}, nil, reject(http.StatusConflict, ReasonBudget, "")
	}
	if s.waiting[cid] >= s.conns[cid].Queue || len(rec.Texts) >= MaxTexts {
		return Ack{}, nil, reject(http.StatusTooManyRequests, ReasonBusy, "")
	}
	if !ok {
		id = randomID("ac_", 12)
		rec = acRec{ID: id, Conn: cid, Thread: t.Thread, Role: t.To, PeerRole: t.From, StartedBy: startPeer,
			Root: Root{Kind: rootAgent, ID: id}, Texts: []textRec{}, Turns: []turnRec{}}
		if err := put(tx, tabThread, cid+"/"+t.Thread, id); err != nil {
			return Ack{}, nil, err
		}
		if err := put(tx, tabTopic, topicKey(cid, rec.Root, rec.Role, rec.PeerRole), id); err != nil {
			return Ack{}, nil, err
		}
	}
	rec.Texts = append(rec.Texts, textRec{Dir: dirIn, Message: t.Message, Text: t.Text, State: txReceived})
	rec.Bytes += int64(len(t.Text))
	var next []startReq
	if rec.running() == nil {
		r, err := s.nextAgentTurn(tx, &rec)
		if err != nil {
			return Ack{}, nil, err
		}
		if r != nil {
			next = append(next, *r)
		}
	}
	if err := put(tx, tabAC, id, rec); err != nil {
		return Ack{}, nil, err
	}
	if err := put(tx, tabRecvd, cid+"/"+t.Message, t.Thread); err != nil {
		return Ack{}, nil, err
	}
	*stored = true
	return Ack{Ack: true, Thread: t.Thread, Message: t.Message}, next, nil
}

func topicKey(cid string, root Root, role, peerRole string) string {
	return cid + "/" + root.key() + "/" + role + "/" + peerRole
}

// nextAgentTurn stages the next turn of rec when texts wait for one: it takes every waiting
// text, in order, and the notices due. It changes rec (the caller stores it).
func (s *Service) nextAgentTurn(tx *kernel.Tx, rec *acRec) (*startReq, error) {
	if rec.Closed || rec.running() != nil {
		return nil, nil
	}
	var take []int
	for i, x := range rec.Texts {
		if x.Dir == dirIn && x.Taken == 0 {
			take = append(take, i)
		}
	}
	if len(take) == 0 {
		return nil, nil
	}
	n := len(rec.Turns) + 1
	var failed []Failure
	for _, m := range rec.Failed {
		for _, x := range rec.Texts {
			if x.Dir == dirOut && x.Message == m {
				failed = append(failed, Failure{Message: m, Reason: x.Reason})
			}
		}
	}
	desc, err := s.rootDesc(tx, rec.Root)
	if err != nil {
		return nil, err
	}
	in := agentInput(rec, s.roles[rec.Role].Prompt, desc, failed, take)
	turn := turnRec{Turn: n, Status: stRunning, Texts: []string{}}
	for _, i := range take {
		rec.Texts[i].Taken = n
		turn.Texts = append(turn.Texts, rec.Texts[i].Message)
	}
	turn.Exec = execID(kindAgent, rec.ID, n)
	rec.Turns = append(rec.Turns, turn)
	rec.Stopped, rec.Failed = false, nil
	r := startReq{kind: kindAgent, ref: rec.ID, exec: turn.Exec, conn: rec.Conn, took: len(take),
		in: turnInput{Kind: kindAgent, Ref: rec.ID, Turn: n, Role: rec.Role, Root: rec.Root, Agent: in}}
	return &r, stage(tx, r)
}

// rootDesc describes a root for the system message of an agent conversation's turn.
func (s *Service) rootDesc(tx *kernel.Tx, root Root) (string, error) {
	switch root.Kind {
	case rootConv:
		var pc pcRec
		if ok, err := get(tx, tabPC, root.ID, &pc); err != nil || !ok {
			return "a conversation that is gone", err
		}
		return "the conversation of " + pc.Person.Actor, nil
	case rootTask:
		var tk taskRec
		if ok, err := get(tx, tabTask, root.ID, &tk); err != nil || !ok {
			return "a task that is gone", err
		}
		return "task " + tk.ID + ": " + tk.Title, nil
	}
	return "itself", nil
}

// connState is the connection's state (open when nothing was recorded).
func (s *Service) connState(tx *kernel.Tx, cid string) (string, error) {
	var c connRec
	ok, err := get(tx, tabConn, cid, &c)
	if err != nil || !ok {
		return connOpen, err
	}
	return c.State, nil
}
