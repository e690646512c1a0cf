package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// ErrKeyReused: an idempotency key already used for another branch (of another session or from
// another message) by the same caller.
var ErrKeyReused = errors.New("sessions: the idempotency key was used for another branch")

// maxBranchEntries bounds the entries a branch reads, from the start of its session, to find
// its message and the exchanges before it.
const maxBranchEntries = 1000

// Branched is what Branch answers: the new session, the session it was branched from and the
// message it was branched at.
type Branched struct {
	Session string `json:"session"`
	From    string `json:"from"`
	Message string `json:"message"`
}

// branchRecord is a branch as it is kept under its caller's idempotency key.
type branchRecord struct {
	From    string `json:"from"`
	Message string `json:"message"`
	Session string `json:"session"`
}

// Branch starts a new conversation of who's from message, a person's accepted message of
// session id who may read (anyone's: a branch changes nothing of the original). The new
// conversation starts with the exchanges before message that who may read, each as it was
// asked and answered, and message's text is then sent there as its next turn, under key, so the
// model answers it afresh. Session id is not changed. The same key again (from the same message
// of the same session) answers the same and makes nothing more; the key used for another
// branch is ErrKeyReused. Everything is checked before anything is made.
//
// Errors: loomtype.ErrNotFound (a session who may not read, or no such message among its first
// 1000 entries), conversation.ErrDelegation (a delegated caller:
// branching is a person's own act), ErrNoKey, ErrKeyReused, ErrBadText, errors of
// conversation.Start and SendTurn, store errors.
//
//	b, err := svc.Branch(ctx, alice, "c1", "m2", "branch-1")
func (s *Service) Branch(ctx context.Context, who loomtype.Identity, id, message, key string) (Branched, error) {
	if err := s.authorize(ctx, who, id); err != nil {
		return Branched{}, err
	}
	if who.OnBehalfOf != "" {
		return Branched{}, conversation.ErrDelegation
	}
	if key == "" {
		return Branched{}, ErrNoKey
	}
	rk := branchKey(who, key)
	rec, seen, err := branches.Get(ctx, s.keys(), rk)
	if err != nil {
		return Branched{}, err
	}
	if seen && (rec.From != id || rec.Message != message) {
		return Branched{}, ErrKeyReused
	}
	text, seed, err := s.branchSeed(ctx, who, id, message)
	if err != nil {
		return Branched{}, err
	}
	if strings.TrimSpace(text) == "" || len([]rune(text)) > s.cv.Config().MaxTurnChars {
		return Branched{}, ErrBadText
	}
	chosen := branchChosen(id, key)
	out := Branched{Session: conversation.ChosenID(who, chosen), From: id, Message: message}
	if !seen {
		// The key is bound to this branch before anything is made: a retry after a crash
		// finishes this branch, and the key cannot make another.
		if err := s.bindKey(ctx, rk, branchRecord{From: id, Message: message, Session: out.Session}); err != nil {
			return Branched{}, err
		}
	}
	if s.cfg.Elsewhere != nil && !s.k.Owns(out.Session) {
		if err := s.cfg.Elsewhere(ctx, BranchStart{Who: who, Chosen: chosen, Seed: seed, Text: text, MessageID: key}); err != nil {
			return Branched{}, err
		}
		return out, nil
	}
	if _, _, err := s.cv.Start(ctx, who, conversation.StartOptions{ID: chosen, Seed: seed}); err != nil {
		return Branched{}, err
	}
	if _, err := s.cv.SendTurn(ctx, who, out.Session, text, conversation.SendOptions{MessageID: key}); err != nil {
		return Branched{}, err
	}
	return out, nil
}

// keys is the kernel the branches' keys are kept in: the store's global namespace when the
// service has one (Config.Shared), else its own.
func (s *Service) keys() *kernel.Kernel {
	if s.cfg.Shared != nil {
		return s.cfg.Shared
	}
	return s.k
}

// bindKey binds the branch key rk to rb, in one transaction that reads it first: a key another
// branch took meanwhile (a request on another partition's engine, racing this one) is
// ErrKeyReused, the same branch's is left as it is.
func (s *Service) bindKey(ctx context.Context, rk string, rb branchRecord) error {
	reused := false
	err := s.keys().Update(ctx, func(tx *kernel.Tx) error {
		rec, seen, err := branches.Get(ctx, tx, rk)
		if err != nil || seen {
			reused = seen && (rec.From != rb.From || rec.Message != rb.Message)
			return err
		}
		reused = false
		return branches.Put(tx, rk, rb)
	})
	if err == nil && reused {
		return ErrKeyReused
	}
	return err
}

// BranchStart is what makes a branch's conversation: its owner, its chosen id, the exchanges it
// starts with and its first turn.
type BranchStart struct {
	Who       loomtype.Identity `json:"who"`
	Chosen    string            `json:"chosen"`
	Seed      []record.SeedTurn `json:"seed"`
	Text      string            `json:"text"`
	MessageID string            `json:"messageId"`
}

// BranchElsewhere makes a branch's conversation where it runs (Config.Elsewhere).
type BranchElsewhere func(ctx context.Context, b BranchStart) error

// StartBranch starts b's conversation on cv (or finds it started) and sends its first turn
// (once: under its message id), as Branch does for a branch of its own partition. Both are
// idempotent, so a retry finishes a branch.
//
// Errors: those of conversation.Start and SendTurn.
func StartBranch(ctx context.Context, cv *conversation.Conversations, b BranchStart) error {
	if _, _, err := cv.Start(ctx, b.Who, conversation.StartOptions{ID: b.Chosen, Seed: b.Seed}); err != nil {
		return err
	}
	_, err := cv.SendTurn(ctx, b.Who, conversation.ChosenID(b.Who, b.Chosen), b.Text, conversation.SendOptions{MessageID: b.MessageID})
	return err
}

// branchSeed reads session id as who sees it, from its start, up to message: its text and the
// exchanges before it, each a person's accepted message with its reply. An exchange of which
// who may not read a record is left out.
func (s *Service) branchSeed(ctx context.Context, who loomtype.Identity, id, message string) (string, []record.SeedTurn, error) {
	type exchange struct {
		user, reply *loomtype.Entry
		hidden      bool
	}
	turns := map[int64]*exchange{}
	var order []int64
	at := func(t int64) *exchange {
		x := turns[t]
		if x == nil {
			x = &exchange{}
			turns[t] = x
			order = append(order, t)
		}
		return x
	}
	cursor := ""
	for read := 0; read < maxBranchEntries; {
		p, err := s.cv.History(ctx, who, id, conversation.HistoryOptions{Cursor: cursor, Direction: "forward", Limit: 500})
		if err != nil {
			return "", nil, err
		}
		for i := range p.Entries {
			e := p.Entries[i]
			read++
			if e.Turn == 0 {
				continue // a rejected message, the close
			}
			if e.Status == loomtype.StatusRestricted {
				at(e.Turn).hidden = true
				continue
			}
			switch e.Role {
			case loomtype.RoleUser:
				if e.Status != loomtype.StatusAccepted {
					continue
				}
				if stream.UserMessage(e) == message {
					text := ""
					if e.Text != nil {
						text = *e.Text
					}
					return text, seedOf(order, func(t int64) (user, reply *loomtype.Entry, hidden bool) {
						x := turns[t]
						return x.user, x.reply, x.hidden
					}), nil
				}
				at(e.Turn).user = &e
			case loomtype.RoleAssistant:
				at(e.Turn).reply = &e
			}
		}
		if p.Done || len(p.Entries) == 0 || p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	return "", nil, loomtype.ErrNotFound
}

// seedOf makes the seed of the exchanges of turns, in order: each whole one who may read.
func seedOf(turns []int64, get func(int64) (user, reply *loomtype.Entry, hidden bool)) []record.SeedTurn {
	var out []record.SeedTurn
	for _, t := range turns {
		u, r, hidden := get(t)
		if hidden || u == nil || r == nil || u.Text == nil || u.Asker == nil {
			continue
		}
		st := record.SeedTurn{Asker: *u.Asker, MessageID: u.MessageID, User: *u.Text, Status: r.Status}
		if r.Text != nil {
			st.Reply = *r.Text
		}
		out = append(out, st)
	}
	return out
}

// branchKey is the key of the branch of who's idempotency key in its table.
func branchKey(who loomtype.Identity, key string) string {
	k, _ := json.Marshal([]string{who.Key(), key})
	return string(k)
}

// branchChosen is the id a branch of session id under key is chosen under (the new
// conversation's id is the caller's conversation.ChosenID of it).
func branchChosen(id, key string) string {
	b, _ := json.Marshal([]string{"loom branch v1", id, key})
	sum := sha256.Sum256(b)
	return "branch-" + hex.EncodeToString(sum[:12])
}
