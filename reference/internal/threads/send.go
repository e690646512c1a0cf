package threads

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/kernel"
)

// Answers of peer.send the model reads (spec/peer.md, Sending).
const (
	SendConnection = "connection"
	SendPaused     = "paused"
	SendQueueFull  = "queue-full"
	SendBadRequest = "bad-request"
	// SendBudget: the agent conversation has stored as many bytes of text as its budget.
	SendBudget = "budget"
)

// Sent is what peer.send answers once the text is stored to be sent.
type Sent struct {
	Sent              bool   `json:"sent"`
	AgentConversation string `json:"agentConversation"`
}

// SendError is what peer.send answers when nothing was queued.
type SendError struct {
	Error string `json:"error"`
}

// sender is the ToolRunner of one turn: it knows the sending role and the run's root.
type sender struct {
	s    *Service
	role string
	root Root
}

// Call runs peer.send. The message id of the text derives from key, so a step that runs again
// (a replay of a call a crash cut off) finds the text it queued and queues nothing more.
func (r *sender) Call(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	if name != PeerSend.Name {
		return nil, &agent.ToolError{Status: http.StatusNotFound, Message: "no such tool"}
	}
	v, err := r.s.Send(ctx, r.role, r.root, args, "m_"+digest(key)[:40])
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Send queues a text of role, for the run working on root, with the tool arguments args
// ({"to": "connection/role", "text"}) under message id mid, in the agent conversation keyed by
// (connection, root, role, recipient role), made on first use with a new random thread id. A
// message id already queued answers as it did then. It answers Sent, or a SendError naming
// why nothing was queued (connection, paused, queue-full, bad-request).
//
// Errors: store errors only; every refusal is an answer.
//
//	v, err := svc.Send(ctx, "planner", root, json.RawMessage(`{"to":"lab/scout","text":"hi"}`), "m_1")
func (s *Service) Send(ctx context.Context, role string, root Root, args json.RawMessage, mid string) (any, error) {
	var a struct {
		To   *string `json:"to"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(args, &a) != nil || a.To == nil || a.Text == nil {
		return SendError{SendBadRequest}, nil
	}
	cid, peerRole, ok := strings.Cut(*a.To, "/")
	if !ok || !ValidName(cid) || !ValidName(peerRole) || *a.Text == "" || len(*a.Text) > MaxText {
		return SendError{SendBadRequest}, nil
	}
	conn := s.conns[cid]
	if conn == nil {
		return SendError{SendConnection}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var answer any
	var acid string
	queued := false
	err := s.k.Update(ctx, func(tx *kernel.Tx) error {
		answer, acid, queued = nil, "", false
		var err error
		if answer, err = s.sendRefused(tx, conn, cid, mid, *a.Text); answer != nil || err != nil {
			return err
		}
		var rec acRec
		if rec, acid, err = s.sendTo(tx, cid, root, role, peerRole); err != nil {
			return err
		}
		if len(rec.Texts) >= MaxTexts {
			answer = SendError{SendQueueFull}
			return nil
		}
		if rec.Bytes+int64(len(*a.Text)) > s.budget(cid) {
			answer = SendError{SendBudget}
			return nil
		}
		rec.Bytes += int64(len(*a.Text))
		rec.Texts = append(rec.Texts, textRec{Dir: dirOut, Message: mid, Text: *a.Text, State: txQueued})
		if err := put(tx, tabAC, acid, rec); err != nil {
			return err
		}
		answer, queued = Sent{Sent: true, AgentConversation: acid}, true
		return put(tx, tabSent, cid+"/"+mid, acid)
	})
	if err != nil {
		return nil, err
	}
	if queued {
		s.queued[cid]++
		s.kick(acid)
	}
	return answer, nil
}

// sendRefused, in transaction tx, is the answer to a send of text under message id mid to
// connection cid (conn) when it queues nothing: the answer mid already had, or a refusal; nil when
// the text is to be queued (s.mu held).
func (s *Service) sendRefused(tx *kernel.Tx, conn *Connection, cid, mid, text string) (any, error) {
	var acid string
	if ok, err := get(tx, tabSent, cid+"/"+mid, &acid); err != nil {
		return nil, err
	} else if ok {
		return Sent{Sent: true, AgentConversation: acid}, nil
	}
	state, err := s.connState(tx, cid)
	if err != nil {
		return nil, err
	}
	switch {
	case state == connRevoked:
		return SendError{SendConnection}, nil
	case state == connPaused:
		return SendError{SendPaused}, nil
	case s.queued[cid] >= conn.Queue:
		return SendError{SendQueueFull}, nil
	case int64(len(text)) > s.budget(cid):
		return SendError{SendBudget}, nil
	}
	return nil, nil
}

// sendTo, in transaction tx, is the open agent conversation (and its id) keyed by (connection
// cid, root, role, peerRole), made with a new random thread id when there is none or it is
// closed (s.mu held).
func (s *Service) sendTo(tx *kernel.Tx, cid string, root Root, role, peerRole string) (acRec, string, error) {
	var rec acRec
	var acid string
	tk := topicKey(cid, root, role, peerRole)
	found, err := get(tx, tabTopic, tk, &acid)
	if err != nil {
		return rec, acid, err
	}
	if found {
		if found, err = get(tx, tabAC, acid, &rec); err != nil {
			return rec, acid, err
		}
	}
	if !found || rec.Closed {
		acid = randomID("ac_", 12)
		rec = acRec{ID: acid, Conn: cid, Thread: randomID("t_", 18), Role: role, PeerRole: peerRole, StartedBy: startLocal,
			Root: root, Texts: []textRec{}, Turns: []turnRec{}}
		if err := put(tx, tabThread, cid+"/"+rec.Thread, acid); err != nil {
			return rec, acid, err
		}
		if err := put(tx, tabTopic, tk, acid); err != nil {
			return rec, acid, err
		}
	}
	return rec, acid, nil
}

// kick makes sure the outbox of agent conversation id is being delivered (s.mu held).
func (s *Service) kick(id string) {
	if s.pumps[id] || s.closed {
		return
	}
	s.pumps[id] = true
	s.wg.Add(1)
	go s.pump(id)
}

// pump delivers the queued texts of one agent conversation, in order, each under its one
// message id, until none is left: a 200 is delivered, a 429, a 5xx or a failed connection is
// tried again after a backoff, every other answer fails the text with its reason.
func (s *Service) pump(id string) {
	defer s.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		s.mu.Lock()
		var rec acRec
		ok, err := s.read(s.ctx, tabAC, id, &rec)
		var t *textRec
		var text string
		if err == nil && ok {
			for i := range rec.Texts {
				if rec.Texts[i].Dir == dirOut && rec.Texts[i].State == txQueued {
					t = &rec.Texts[i]
					text, err = rec.text(i)
					break
				}
			}
		}
		if t == nil || err != nil || s.closed {
			delete(s.pumps, id)
			s.mu.Unlock()
			if err != nil && s.ctx.Err() == nil {
				s.cfg.Logger.Error("threads: outbox unreadable", "agentConversation", id, "err", err)
			}
			return
		}
		s.mu.Unlock()
		conn := s.conns[rec.Conn]
		body, _ := json.Marshal(Text{V: 1, Thread: rec.Thread, Message: t.Message, From: rec.Role, To: rec.PeerRole, Text: text})
		status, reason, retryAfter := s.post(conn, body)
		switch {
		case status == http.StatusOK:
			backoff = 50 * time.Millisecond
			s.settle(id, t.Message, "")
		case status == 0 || status == http.StatusTooManyRequests || status >= 500:
			wait := max(backoff, retryAfter)
			wait = min(wait, s.cfg.MaxBackoff)
			backoff = min(backoff*2, s.cfg.MaxBackoff)
			select {
			case <-time.After(wait):
			case <-s.ctx.Done():
				s.mu.Lock()
				delete(s.pumps, id)
				s.mu.Unlock()
				return
			}
		default:
			backoff = 50 * time.Millisecond
			if reason == "" {
				reason = "status-" + strconv.Itoa(status)
			}
			s.settle(id, t.Message, reason)
		}
	}
}

// post sends one text; status 0 is a failed connection.
func (s *Service) post(conn *Connection, body []byte) (status int, reason string, retryAfter time.Duration) {
	ctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(conn.URL, "/")+"/peer/v1/texts", bytes.NewReader(body))
	if err != nil {
		return 0, "", 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+conn.Send)
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, "", 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var rej struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(b, &rej)
	if sec, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && sec > 0 {
		retryAfter = time.Duration(sec) * time.Second
	}
	return resp.StatusCode, rej.Reason, retryAfter
}

// settle records the answer to a text: delivered (reason "") or failed with reason. A thread
// failure closes this side of the agent conversation: its key is freed and what still waits in
// it fails too.
func (s *Service) settle(id, mid, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rec acRec
	dropped := 0
	err := s.k.Update(s.ctx, func(tx *kernel.Tx) error {
		dropped = 0
		if ok, err := get(tx, tabAC, id, &rec); err != nil || !ok {
			return err
		}
		for i := range rec.Texts {
			t := &rec.Texts[i]
			if t.Dir != dirOut || t.Message != mid {
				continue
			}
			if t.State == txQueued {
				dropped++
			}
			if reason == "" {
				// Delivered, even if a pause failed it while it was on its way: the peer has it.
				if t.State == txFailed {
					rec.Failed = slices.DeleteFunc(rec.Failed, func(m string) bool { return m == mid })
				}
				t.State, t.Reason = txSent, ""
			} else if t.State == txQueued {
				t.State, t.Reason = txFailed, reason
				rec.Failed = append(rec.Failed, mid)
			}
		}
		if reason == ReasonThread {
			n, err := s.closeSide(tx, &rec, ReasonThread)
			if err != nil {
				return err
			}
			dropped += n
		}
		return put(tx, tabAC, id, rec)
	})
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.cfg.Logger.Error("threads: a text's answer was not recorded", "agentConversation", id, "err", err)
		}
		return
	}
	s.queued[rec.Conn] -= dropped
}

// closeSide closes rec on this side: its key is freed (the next send from its root opens a new
// agent conversation) and every text still queued in it fails with reason. It returns how many
// texts it failed.
func (s *Service) closeSide(tx *kernel.Tx, rec *acRec, reason string) (int, error) {
	rec.Closed = true
	tk := topicKey(rec.Conn, rec.Root, rec.Role, rec.PeerRole)
	var cur string
	if ok, err := get(tx, tabTopic, tk, &cur); err != nil {
		return 0, err
	} else if ok && cur == rec.ID {
		if err := del(tx, tabTopic, tk); err != nil {
			return 0, err
		}
	}
	return failQueued(rec, reason), nil
}

// failQueued fails every text of rec waiting to be sent and returns how many.
func failQueued(rec *acRec, reason string) int {
	n := 0
	for i := range rec.Texts {
		t := &rec.Texts[i]
		if t.Dir == dirOut && t.State == txQueued {
			t.State, t.Reason = txFailed, reason
			rec.Failed = append(rec.Failed, t.Message)
			n++
		}
	}
	return n
}
