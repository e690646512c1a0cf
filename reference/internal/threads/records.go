package threads

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// table is one of the service's record tables in the kernel. Its records are JSON values whose
// type the table's comment names; get and put decode and encode them.
type table = kernel.Table[json.RawMessage]

// The service's record tables, each at schema version 1 (a change of a record's shape that an
// older engine cannot read takes the table's version up).
var (
	tabAC      = kernel.NewTable[json.RawMessage]("threads.ac", 1)      // agent conversation id -> acRec
	tabThread  = kernel.NewTable[json.RawMessage]("threads.thread", 1)  // connection/thread -> agent conversation id
	tabTopic   = kernel.NewTable[json.RawMessage]("threads.topic", 1)   // connection/root/role/peer role -> open agent conversation id
	tabRecvd   = kernel.NewTable[json.RawMessage]("threads.recvd", 1)   // connection/message -> thread (texts received)
	tabSent    = kernel.NewTable[json.RawMessage]("threads.sent", 1)    // connection/message -> agent conversation id (texts queued)
	tabConn    = kernel.NewTable[json.RawMessage]("threads.conn", 1)    // connection id -> connRec
	tabPC      = kernel.NewTable[json.RawMessage]("threads.pc", 1)      // person's conversation id -> pcRec
	tabPCIndex = kernel.NewTable[json.RawMessage]("threads.pcindex", 1) // role/person -> person's conversation id
	tabTask    = kernel.NewTable[json.RawMessage]("threads.task", 1)    // task id -> taskRec
	tabRun     = kernel.NewTable[json.RawMessage]("threads.run", 1)     // task run id -> runRec
	tabTurnIn  = kernel.NewTable[json.RawMessage]("threads.turnin", 1)  // turn execution id -> turnInput
	tabText    = kernel.NewTable[json.RawMessage]("threads.text", 1)    // agent conversation id/index of the text -> the text (a string)
	tabIdem    = kernel.NewTable[json.RawMessage]("threads.idem", 1)    // idemKey -> the first answer of a creating route
	tabStandIn = kernel.NewTable[json.RawMessage]("threads.standin", 1) // kind -> the stand-in record of that kind
)

// tables are every table of the service, opened by Prepare.
var tables = []table{tabAC, tabThread, tabTopic, tabRecvd, tabSent, tabConn, tabPC, tabPCIndex, tabTask, tabRun,
	tabTurnIn, tabText, tabIdem, tabStandIn}

const (
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
// put moves it to a record of its own in tabText (a record written before texts had records
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

// get reads the record under key of t into v; false when there is none.
func get(tx *kernel.Tx, t table, key string, v any) (bool, error) {
	b, ok, err := t.Get(context.Background(), tx, key)
	if err != nil || !ok {
		return false, err
	}
	return true, decode(t, key, b, v)
}

func decode(t table, key string, b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("threads: record %s %s: %w", t.Name(), key, err)
	}
	return nil
}

func put(tx *kernel.Tx, t table, key string, v any) error {
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
	return t.Put(tx, key, b)
}

func del(tx *kernel.Tx, t table, key string) error { return t.Delete(tx, key) }

// read reads one record outside a transaction.
func (s *Service) read(ctx context.Context, t table, key string, v any) (bool, error) {
	b, ok, err := t.Get(ctx, s.k, key)
	if err != nil || !ok {
		return false, err
	}
	if err := decode(t, key, b, v); err != nil {
		return false, err
	}
	if a, ok := v.(*acRec); ok {
		a.load = s.loader(ctx, a.ID)
	}
	return true, nil
}

// all reads every record of t.
func all[T any](ctx context.Context, k *kernel.Kernel, t table) ([]T, error) {
	rows, err := t.All(ctx, k, "")
	if err != nil {
		return nil, err
	}
	var out []T
	for _, r := range rows {
		var v T
		if err := decode(t, r.Key, r.Value, &v); err != nil {
			return nil, err
		}
		if a, ok := any(&v).(*acRec); ok {
			a.load = textLoader(ctx, k, a.ID)
		}
		out = append(out, v)
	}
	return out, nil
}

// textKey is the key of the text at index i of agent conversation id (an id holds no '/', and
// the index is the last part, so two pairs never share a key).
func textKey(id string, i int) string { return id + "/" + strconv.Itoa(i) }

// putAC stores an agent conversation: each text not yet in a record of its own is written to
// one, once, and the conversation's record keeps only what describes the texts. a is not
// changed.
func putAC(tx *kernel.Tx, key string, a *acRec) error {
	c := *a
	c.Texts = make([]textRec, len(a.Texts))
	for i, t := range a.Texts {
		if t.Text != "" {
			b, err := json.Marshal(t.Text)
			if err != nil {
				return err
			}
			if err := tabText.Put(tx, textKey(a.ID, i), b); err != nil {
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
	return tabAC.Put(tx, key, b)
}

// text is the text at index i: the one the record holds, or the one of its own record.
func (a *acRec) text(i int) (string, error) {
	if t := a.Texts[i].Text; t != "" || a.load == nil {
		return t, nil
	}
	return a.load(i)
}

func (s *Service) loader(ctx context.Context, id string) func(int) (string, error) {
	return textLoader(ctx, s.k, id)
}

func textLoader(ctx context.Context, k *kernel.Kernel, id string) func(int) (string, error) {
	return func(i int) (string, error) {
		b, ok, err := tabText.Get(ctx, k, textKey(id, i))
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
