package threads_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// recordsConfig is the box of the records fixtures (testdata/legacy, testdata/golden-tables).
func recordsConfig() threads.Config {
	return threads.Config{Roles: []threads.Role{{Name: "planner"}}, Members: []loomtype.Identity{olga, dana, eve}, Provider: scriptmodel.Fixed("ok"),
		Connections: []threads.Connection{{ID: "lab", URL: "http://127.0.0.1:1", Send: "to-lab", Accept: "from-lab", Owner: olga}}}
}

// writeRecords makes the records of the fixtures in box b (of recordsConfig): an agent
// conversation a peer opened, a person's conversation, a task with a run, a task given a client
// key, a deleted task and a deleted person's conversation, a paused connection. It returns their
// ids. (testdata/legacy/writer_test.go.txt did the same with the engine before the tables.)
func writeRecords(t *testing.T, b *box) legacyIDs {
	t.Helper()
	ctx := context.Background()
	thread := "t_legacylegacylegacy"
	body, _ := json.Marshal(threads.Text{V: 1, Thread: thread, Message: "m1", From: "scout", To: "planner", Text: "hello"})
	if _, err := b.svc.Receive(ctx, "from-lab", body); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.svc.Converse(ctx, dana, "planner", "book a van"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.svc.Converse(ctx, eve, "planner", "forget me"); err != nil {
		t.Fatal(err)
	}
	tk, err := b.svc.CreateTask(ctx, dana, "Survey", []loomtype.Identity{olga}, "")
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.svc.StartRun(ctx, dana, tk.ID, "planner", "go")
	if err != nil {
		t.Fatal(err)
	}
	keyed, err := b.svc.CreateTaskOnce(ctx, dana, "Keyed", nil, "", "retry-1")
	if err != nil {
		t.Fatal(err)
	}
	gone, err := b.svc.CreateTask(ctx, dana, "Gone", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "every turn to end", func() bool {
		ac, err1 := b.svc.Find(ctx, olga, "lab", thread)
		r, err2 := b.svc.Run(ctx, dana, run)
		c1, err3 := b.svc.Conversation(ctx, dana, "planner")
		c2, err4 := b.svc.Conversation(ctx, eve, "planner")
		return err1 == nil && err2 == nil && err3 == nil && err4 == nil && len(ac.Turns) == 1 && ac.Turns[0].Status == "completed" &&
			r.Status == "completed" && len(c1.Turns) == 1 && c1.Turns[0].Status == "completed" && len(c2.Turns) == 1 && c2.Turns[0].Status == "completed"
	})
	if err := b.svc.DeleteTask(ctx, dana, gone.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.DeleteConversation(ctx, eve, "planner"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Pause(ctx, olga, "lab"); err != nil {
		t.Fatal(err)
	}
	ids := legacyIDs{Thread: thread, Task: tk.ID, Run: run, Keyed: keyed.ID, Gone: gone.ID}
	return ids
}

// legacyIDs are the ids of what a records fixture holds.
type legacyIDs struct {
	Thread string `json:"thread"`
	Task   string `json:"task"`
	Run    string `json:"run"`
	Keyed  string `json:"keyed"`
	Gone   string `json:"gone"`
}

// legacyAnswer is one answer of the box: its value, or the refusal by its kind.
type legacyAnswer struct {
	Value any    `json:"value,omitempty"`
	Error string `json:"error,omitempty"`
}

// observeLegacy asks svc what testdata/legacy/writer_test.go.txt asked the engine that wrote the
// fixture, and returns the answers by name. (The same function, in the writer's commit, made
// answers.json.)
func observeLegacy(t *testing.T, svc *threads.Service, ids legacyIDs) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	note := func(name string, v any, err error) {
		switch {
		case err == nil:
			out[name] = legacyAnswer{Value: v}
		case errors.Is(err, threads.ErrNotFound):
			out[name] = legacyAnswer{Error: "not-found"}
		default:
			t.Fatalf("%s: %v", name, err)
		}
	}
	ac, err := svc.Find(ctx, olga, "lab", ids.Thread)
	note("find", ac, err)
	v, err := svc.Get(ctx, olga, ac.ID)
	note("get", v, err)
	l, err := svc.List(ctx, olga)
	note("list", l, err)
	c, err := svc.Conversation(ctx, dana, "planner")
	note("conversation.dana", c, err)
	c, err = svc.Conversation(ctx, eve, "planner")
	note("conversation.eve", c, err)
	tk, err := svc.Task(ctx, dana, ids.Task)
	note("task", tk, err)
	tk, err = svc.Task(ctx, olga, ids.Task)
	note("task.olga", tk, err)
	tk, err = svc.Task(ctx, dana, ids.Gone)
	note("task.gone", tk, err)
	tk, err = svc.CreateTaskOnce(ctx, dana, "Keyed", nil, "", "retry-1")
	note("task.keyed.again", tk.ID == ids.Keyed, err)
	r, err := svc.Run(ctx, dana, ids.Run)
	note("run", r, err)
	cv, err := svc.Connection(ctx, olga, "lab")
	note("connection", cv, err)
	return out
}
