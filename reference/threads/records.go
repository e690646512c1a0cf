package threads

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

// Keys of the records in the store's metadata.
const (
	keyAC       = "thr/ac/"   // agent conversation id -> acRec
	keyThread   = "thr/th/"   // connection/thread -> agent conversation id
	keyTopic    = "thr/key/"  // connection/root/role/peer role -> open agent conversation id
	keyRecvd    = "thr/rm/"   // connection/message -> thread (texts received)
	keySent     = "thr/sm/"   // connection/message -> agent conversation id (texts queued)
	keyConn     = "thr/conn/" // connection id -> connRec
	keyPC       = "thr/pc/"   // person's conversation id -> pcRec
	keyPCIndex  = "thr/pcx/"  // role/person -> person's conversation id
	keyTask     = "thr/task/" // task id -> taskRec
	keyRun      = "thr/run/"  // task run id -> runRec
	keyTurnIn   = "thr/in/"   // turn execution id -> turnInput
	keyText     = "thr/tx/"   // agent conversation id/index of the text -> the text (a JSON string)
	tombstone   = "null"
	rootConv    = "conversation"
	rootTask    = "task"
	rootAgent   = "agent"
	rootGone    = "gone"
	startLocal  = "local"
	startPeer   = "peer"
	dirIn       = "in"
	dirOut      = "out"
	txReceived  = "received"
	txQueued    = "queued"
	txSent      = "sent"
	txFailed    = "failed"
	stRunning   = "running"
	stCompleted = "completed"
	stStopped   = "stopped"
	stFailed    = "failed"
	stEnded     = "ended"
	stQueued    = "queued"
	connOpen    = "open"
	connPaused  = "paused"
	connRevoked = "revoked"
)

// Root is what a run works on: kind conversation, task or agent, and its id.
type Root struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

func (r Root) key() string { return r.Kind + ":" + r.ID }

// textRec is one text of an agent conversation. Text is the text until the record is stored:
// put moves it to a record of its own under keyText (a record written before texts had records
// of their own keeps it here).
type textRec struct {
	Dir     string `json:"dir"`
	Message string `json:"message"`
	Text    string `json:"text,omitempty"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	// Taken is the turn that took an incoming text (0: waiting).
	Taken int `json:"taken,omitempty"`
}

type turnRec struct {
	Turn   int      `json:"turn"`
	Status string   `json:"status"`
	Texts  []string `json:"texts"`
	Output *string  `json:"output,omitempty"`
	Exec   string   `json:"exec"`
}

type acRec struct {
	ID        string    `json:"id"`
	Conn      string    `json:"connection"`
	Thread    string    `json:"thread"`
	Role      string    `json:"role"`
	PeerRole  string    `json:"peerRole"`
	StartedBy string    `json:"startedBy"`
	Root      Root      `json:"root"`
	Gone      bool      `json:"gone,omitempty"`
	Closed    bool      `json:"closed,omitempty"`
	Texts     []textRec `json:"texts"`
	Turns     []turnRec `json:"turns"`
	// Stopped: the last turn was stopped, and the next is to be told. Failed: the texts that
	// failed since the last turn began, to be told to the next.
	Stopped bool     `json:"stopped,omitempty"`
	Failed  []string `json:"failed,omitempty"`
	// Bytes is the bytes of text the conversation stores, both ways (its budget's count).
	Bytes int64 `json:"bytes,omitempty"`
	// load reads the text at an index from its own record (set by read and all).
	load func(i int) (string, error)
}

func (a *acRec) running() *turnRec {
	if n := len(a.Turns); n > 0 && a.Turns[n-1].Status == stRunning {
		return &a.Turns[n-1]
	}
	return nil
}

type connRec struct {
	State string `json:"state"`
}

type pcTurn struct {
	Turn   int     `json:"turn"`
	Text   string  `json:"text"`
	Status string  `json:"status"`
	Output *string `json:"output,omitempty"`
	Exec   string  `json:"exec"`
}

type pcRec struct {
	ID     string            `json:"id"`
	Role   string            `json:"role"`
	Person loomtype.Identity `json:"person"`
	Turns  []pcTurn          `json:"turns"`
}

type taskRec struct {
	ID      string              `json:"id"`
	Title   string              `json:"title"`
	Owner   loomtype.Identity   `json:"owner"`
	Members []loomtype.Identity `json:"members"`
	Parent  string              `json:"parent,omitempty"`
	State   string              `json:"state"`
	// Subtasks are the ids of the task's subtasks.
	Subtasks []string `json:"subtasks,omitempty"`
}

type runRec struct {
	ID     string  `json:"id"`
	Task   string  `json:"task"`
	Role   string  `json:"role"`
	Prompt string  `json:"prompt"`
	Status string  `json:"status"`
	Output *string `json:"output,omitempty"`
	Exec   string  `json:"exec"`
}

// get reads the record under key into v; false when there is none (or a tombstone).
func get(tx store.Tx, key string, v any) (bool, error) {
	b, ok, err := tx.Meta(key)
	if err != nil || !ok || string(b) == tombstone || len(b) == 0 {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("threads: record %s: %w", key, err)
	}
	return true, nil
}

func put(tx store.Tx, key string, v any) error {
	switch a := v.(type) {
	case acRec:
		return putAC(tx, key, &a)
	case *acRec:
		return putAC(tx, key, a)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.PutMeta(key, b)
}

func del(tx store.Tx, key string) error { return tx.PutMeta(key, []byte(tombstone)) }

// read reads one record outside a transaction.
func (s *Service) read(ctx context.Context, key string, v any) (bool, error) {
	b, ok, err := s.st.Meta(ctx, key)
	if err != nil || !ok || string(b) == tombstone || len(b) == 0 {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("threads: record %s: %w", key, err)
	}
	if a, ok := v.(*acRec); ok {
		a.load = s.loader(ctx, a.ID)
	}
	return true, nil
}

// all reads every record under prefix.
func all[T any](ctx context.Context, st store.Store, prefix string) ([]T, error) {
	kvs, err := st.MetaPrefix(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, kv := range kvs {
		if string(kv.Val) == tombstone || len(kv.Val) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(kv.Val, &v); err != nil {
			return nil, fmt.Errorf("threads: record %s: %w", kv.Key, err)
		}
		if a, ok := any(&v).(*acRec); ok {
			a.load = textLoader(ctx, st, a.ID)
		}
		out = append(out, v)
	}
	return out, nil
}

// textKey is the key of the text at index i of agent conversation id (an id holds no '/', and
// the index is the last part, so two pairs never share a key).
func textKey(id string, i int) string { return keyText + id + "/" + strconv.Itoa(i) }

// putAC stores an agent conversation: each text not yet in a record of its own is written to
// one, once, and the conversation's record keeps only what describes the texts. a is not
// changed.
func putAC(tx store.Tx, key string, a *acRec) error {
	c := *a
	c.Texts = make([]textRec, len(a.Texts))
	for i, t := range a.Texts {
		if t.Text != "" {
			b, err := json.Marshal(t.Text)
			if err != nil {
				return err
			}
			if err := tx.PutMeta(textKey(a.ID, i), b); err != nil {
				return err
			}
			t.Text = ""
		}
		c.Texts[i] = t
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return tx.PutMeta(key, b)
}

// text is the text at index i: the one the record holds, or the one of its own record.
func (a *acRec) text(i int) (string, error) {
	if t := a.Texts[i].Text; t != "" || a.load == nil {
		return t, nil
	}
	return a.load(i)
}

func (s *Service) loader(ctx context.Context, id string) func(int) (string, error) {
	return textLoader(ctx, s.st, id)
}

func textLoader(ctx context.Context, st store.Store, id string) func(int) (string, error) {
	return func(i int) (string, error) {
		b, ok, err := st.Meta(ctx, textKey(id, i))
		if err != nil || !ok {
			return "", err
		}
		var t string
		if err := json.Unmarshal(b, &t); err != nil {
			return "", fmt.Errorf("threads: text %d of %s: %w", i, id, err)
		}
		return t, nil
	}
}
