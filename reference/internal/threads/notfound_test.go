package threads_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// countingStore counts the metadata reads of record tables (the threads records): those that found a row, those
// that found none, and the prefix reads.
type countingStore struct {
	store.Store
	mu                   sync.Mutex
	hits, misses, ranges int
}

type reads struct{ hits, misses, ranges int }

func (c *countingStore) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	b, ok, err := c.Store.Meta(ctx, key)
	if strings.HasPrefix(key, "tbl/") {
		c.mu.Lock()
		if ok {
			c.hits++
		} else {
			c.misses++
		}
		c.mu.Unlock()
	}
	return b, ok, err
}

func (c *countingStore) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	c.mu.Lock()
	c.ranges++
	c.mu.Unlock()
	return c.Store.MetaPrefix(ctx, prefix)
}

// during returns the reads fn made.
func (c *countingStore) during(fn func()) reads {
	c.mu.Lock()
	before := reads{c.hits, c.misses, c.ranges}
	c.mu.Unlock()
	fn()
	c.mu.Lock()
	defer c.mu.Unlock()
	return reads{c.hits - before.hits, c.misses - before.misses, c.ranges - before.ranges}
}

// TestNotFoundDoesTheWorkOfOneFound: the uniform 404 of an agent conversation (read, stop, by its
// thread), a task or a task run that exists and is not the caller's makes the same store reads,
// rows found and rows not found alike, as that of one that does not exist (spec/peer.md, Reading),
// so that its time does not tell them apart.
func TestNotFoundDoesTheWorkOfOneFound(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{AllowEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	st := &countingStore{Store: sq}
	cfg := threads.Config{Roles: []threads.Role{{Name: "planner"}}, Members: []loomtype.Identity{olga}, Provider: scriptmodel.Fixed("ok"),
		Connections: []threads.Connection{{ID: "lab", URL: "http://127.0.0.1:1", Send: "to-lab", Accept: "from-lab", Owner: olga}}}
	svc, err := threads.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: svc.Flows(), Prepare: svc.Prepare})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := svc.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	thread := "t_countcountcountcount"
	body, _ := json.Marshal(threads.Text{V: 1, Thread: thread, Message: "m1", From: "scout", To: "planner", Text: "hello"})
	if _, err := svc.Receive(ctx, "from-lab", body); err != nil {
		t.Fatal(err)
	}
	ac, err := svc.Find(ctx, olga, "lab", thread)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := svc.CreateTask(ctx, dana, "Survey", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	run, err := svc.StartRun(ctx, dana, tk.ID, "planner", "go")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the turn and the run to end", func() bool {
		v, err1 := svc.Get(ctx, olga, ac.ID)
		r, err2 := svc.Run(ctx, dana, run)
		return err1 == nil && err2 == nil && len(v.Turns) == 1 && v.Turns[0].Status == "completed" && r.Status == "completed"
	})

	cases := []struct {
		name           string
		exists, absent func() error
	}{
		{"agent conversation", func() error { _, err := svc.Get(ctx, eve, ac.ID); return err },
			func() error { _, err := svc.Get(ctx, eve, "ac_AAAAAAAAAAAAAAAA"); return err }},
		{"stop", func() error { _, err := svc.Stop(ctx, eve, ac.ID); return err },
			func() error { _, err := svc.Stop(ctx, eve, "ac_AAAAAAAAAAAAAAAA"); return err }},
		{"thread", func() error { _, err := svc.Find(ctx, eve, "lab", thread); return err },
			func() error { _, err := svc.Find(ctx, eve, "lab", "t_nothingnothingnothing"); return err }},
		{"task", func() error { _, err := svc.Task(ctx, eve, tk.ID); return err },
			func() error { _, err := svc.Task(ctx, eve, "tk_AAAAAAAAAAAAAAAA"); return err }},
		{"task run", func() error { _, err := svc.Run(ctx, eve, run); return err },
			func() error { _, err := svc.Run(ctx, eve, "tr_AAAAAAAAAAAAAAAA"); return err }},
	}
	for _, c := range cases {
		var errE, errA error
		exists := st.during(func() { errE = c.exists() })
		absent := st.during(func() { errA = c.absent() })
		if !errors.Is(errE, threads.ErrNotFound) || !errors.Is(errA, threads.ErrNotFound) {
			t.Fatalf("%s: %v and %v, want the uniform 404 for both", c.name, errE, errA)
		}
		if exists != absent {
			t.Errorf("%s: one that exists reads %+v, one that does not %+v", c.name, exists, absent)
		}
	}
}
