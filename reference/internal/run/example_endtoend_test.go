package run_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// zonesModel looks up two zones at once, asks again for a lookup that failed together with a
// transfer, and then answers. It decides by the tool results it has been sent.
type zonesModel struct{ calls atomic.Int64 }

func (m *zonesModel) Complete(_ context.Context, req model.Request, _ func(string)) (model.Response, error) {
	m.calls.Add(1)
	results := 0
	for _, msg := range req.Messages {
		if msg.Role == model.RoleTool {
			results++
		}
	}
	call := func(id, name, args string) model.ToolCall { return model.ToolCall{ID: id, Name: name, Arguments: args} }
	switch results {
	case 0:
		return model.Response{ToolCalls: []model.ToolCall{call("a", "north", `{"zone":"n"}`), call("b", "south", `{"zone":"s"}`)}}, nil
	case 2:
		return model.Response{ToolCalls: []model.ToolCall{call("c", "south", `{"zone":"s"}`), call("d", "transfer", `{"amount":500}`)}}, nil
	}
	return model.Response{Content: "North is at 7, south at 4; 500 transferred.", FinishReason: model.FinishStop}, nil
}

// zoneTools answers the lookups (south fails the first time) and the transfer, counting calls.
type zoneTools struct {
	mu    sync.Mutex
	calls map[string]int
}

func (t *zoneTools) Call(_ context.Context, name string, _ json.RawMessage, _ string) (json.RawMessage, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls[name]++
	switch {
	case name == "north":
		return json.RawMessage(`{"level":7}`), nil
	case name == "south" && t.calls[name] == 1:
		return nil, &agent.ToolError{Status: 503, Message: "try again"}
	case name == "south":
		return json.RawMessage(`{"level":4}`), nil
	}
	return json.RawMessage(`{"done":true}`), nil
}

// notes is an agent memory kept in the process.
type notes struct {
	mu      sync.Mutex
	entries map[string][]hostio.MemoryEntry
}

func (n *notes) Recall(_ context.Context, scope, _ string) ([]hostio.MemoryEntry, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]hostio.MemoryEntry(nil), n.entries[scope]...), nil
}

func (n *notes) Write(_ context.Context, scope string, es []hostio.MemoryEntry) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range es {
		dup := false
		for _, old := range n.entries[scope] {
			dup = dup || old.ID == e.ID
		}
		if !dup {
			n.entries[scope] = append(n.entries[scope], e)
		}
	}
	return nil
}

// One run end to end: two lookups at once, one of which fails and is fed back, asked again
// with a transfer that waits for its owner's approval; the process is killed while it waits,
// the run waits at the same gate after the restart, the owner approves, the model is asked
// once more, and the answer is remembered (marked tainted: the run saw a tool's error text).
func Example_endToEnd() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "run-end-to-end-*")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "loom.db")
	llm, tools, mem := &zonesModel{}, &zoneTools{calls: map[string]int{}}, &notes{entries: map[string][]hostio.MemoryEntry{}}
	open := func() (*sqlite.SQLite, *kernel.Kernel, *run.Runs) {
		st, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			log.Fatal(err)
		}
		rs := run.New(run.Deps{Provider: llm, Runner: tools, Memory: mem,
			Tools: []model.Tool{{Name: "north"}, {Name: "south"}, {Name: "transfer"}}})
		k, err := kernel.Open(ctx, st, kernel.Options{Flows: rs.Flows(), BeforeRecovery: rs.Bind})
		if err != nil {
			log.Fatal(err)
		}
		return st, k, rs
	}
	waitFor := func(rs *run.Runs, who loomtype.Identity, id string, done func(run.View) bool) run.View {
		for {
			v, err := rs.Get(ctx, who, id)
			if err != nil {
				log.Fatal(err)
			}
			if done(v) {
				return v
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	st, k, rs := open()
	v, _, err := rs.Start(ctx, alice, run.Options{ID: "level-zones", Prompt: "level the zones", Parallel: -1,
		Approval:  &run.ApprovalRule{Tools: map[string]bool{"transfer": true}},
		WriteBack: &run.WriteBack{AllowDirect: true}})
	if err != nil {
		log.Fatal(err)
	}
	v = waitFor(rs, alice, v.ID, func(v run.View) bool { return v.Status != run.StatusRunning })
	fmt.Println(v.Status, v.Pending[0].ID, v.Pending[0].Name, "- transfer called", tools.calls["transfer"], "times")

	st.Kill() // the process dies while the run waits
	k.Close()
	<-st.Released()
	before := llm.calls.Load()
	st, k, rs = open()
	defer st.Close()
	defer k.Close()
	v = waitFor(rs, alice, v.ID, func(v run.View) bool { return v.Status == run.StatusWaiting })
	fmt.Println("after the restart:", v.Status, v.Pending[0].ID)

	if _, err := rs.Approve(ctx, alice, v.ID, v.Pending[0].ID, true); err != nil {
		log.Fatal(err)
	}
	v = waitFor(rs, alice, v.ID, func(v run.View) bool { return v.Status != run.StatusWaiting && v.Status != run.StatusRunning })
	fmt.Println(v.Status+":", *v.Output)
	for _, c := range v.ToolCalls {
		fmt.Println(" ", c.Name, string(c.Arguments), c.OK, string(c.Output)+c.Error)
	}
	fmt.Println("model calls after the restart:", llm.calls.Load()-before)
	for _, e := range mem.entries[alice.String()] {
		fmt.Printf("  remembered %s %q tainted=%v\n", e.Role, e.Text, e.Tainted)
	}
	// Output:
	// waiting t2-c1 transfer - transfer called 0 times
	// after the restart: waiting t2-c1
	// completed: North is at 7, south at 4; 500 transferred.
	//   north {"zone":"n"} true {"level":7}
	//   south {"zone":"s"} false try again
	//   south {"zone":"s"} true {"level":4}
	//   transfer {"amount":500} true {"done":true}
	// model calls after the restart: 1
	//   remembered user "level the zones" tainted=false
	//   remembered assistant "North is at 7, south at 4; 500 transferred." tainted=true
}
