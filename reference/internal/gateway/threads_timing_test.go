package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestThreadsNotFoundTiming measures whether a stranger can tell, by the time of the uniform 404
// of the threads routes, an agent conversation, a thread, a task or a task run that exists and is
// not theirs from one that does not exist. It interleaves the samples of both paths and prints
// each path's median and the AUC of the two samples (0.5: they cannot be told apart). It runs only
// with LOOM_TIMING set (samples per path, default 1000) and asserts nothing but the 404 itself.
//
//	LOOM_TIMING=1000 go test ./reference/internal/gateway -run TestThreadsNotFoundTiming -v
func TestThreadsNotFoundTiming(t *testing.T) {
	n := timingSamples(t)
	alice, olga, bob := loomtype.Identity{Tenant: "acme", Actor: "alice"}, loomtype.Identity{Tenant: "acme", Actor: "olga"},
		loomtype.Identity{Tenant: "acme", Actor: "bob"}
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tx threads.Text
		_ = json.NewDecoder(r.Body).Decode(&tx)
		_ = json.NewEncoder(w).Encode(threads.Ack{Ack: true, Thread: tx.Thread, Message: tx.Message})
	}))
	defer peer.Close()
	eng := reftest.Open(t, reftest.Provider(scriptmodel.Fixed("ok")),
		reftest.Tokens(map[string]loomtype.Identity{"alice": alice, "olga": olga, "bob": bob}),
		reftest.With(func(o *reference.Options) {
			o.Gateway.PostsPerMinute = 1 << 30
			o.Threads = &threads.Config{Roles: []threads.Role{{Name: "planner"}}, Members: []loomtype.Identity{olga},
				Connections: []threads.Connection{{ID: "lab", URL: peer.URL, Send: "to-lab", Accept: "from-lab", Owner: olga}}}
		}))
	h := eng.Handler()
	do := func(method, path, token, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	thread := "t_timingtimingtiming"
	b, _ := json.Marshal(threads.Text{V: 1, Thread: thread, Message: "m1", From: "scout", To: "planner", Text: "hello"})
	if rec := do("POST", "/peer/v1/texts", "from-lab", string(b)); rec.Code != 200 {
		t.Fatalf("peer text: %d %s", rec.Code, rec.Body)
	}
	ac, err := eng.Threads().Find(context.Background(), olga, "lab", thread)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := eng.Threads().CreateTask(context.Background(), alice, "Survey", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	run, err := eng.Threads().StartRun(context.Background(), alice, tk.ID, "planner", "go")
	if err != nil {
		t.Fatal(err)
	}
	routes := []struct{ name, method, here, missing string }{
		{"agent conversation", "GET", "/agent-conversations/" + ac.ID, "/agent-conversations/ac_AAAAAAAAAAAAAAAA"},
		{"stop", "POST", "/agent-conversations/" + ac.ID + "/stop", "/agent-conversations/ac_AAAAAAAAAAAAAAAA/stop"},
		{"thread", "GET", "/agent-conversations?connection=lab&thread=" + thread, "/agent-conversations?connection=lab&thread=t_nothingnothingnothing"},
		{"task", "GET", "/tasks/" + tk.ID, "/tasks/tk_AAAAAAAAAAAAAAAA"},
		{"task run", "GET", "/threads/runs/" + run, "/threads/runs/tr_AAAAAAAAAAAAAAAA"},
	}
	for _, rt := range routes {
		probe := func(path string) time.Duration {
			start := time.Now()
			rec := do(rt.method, path, "bob", "")
			d := time.Since(start)
			if rec.Code != http.StatusNotFound {
				t.Fatalf("%s %s as a stranger: %d %s", rt.name, path, rec.Code, rec.Body)
			}
			return d
		}
		for range 50 {
			probe(rt.here)
			probe(rt.missing)
		}
		foreign, absent := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
		for i := range 2 * n {
			if i%2 == 0 {
				foreign = append(foreign, probe(rt.here))
			} else {
				absent = append(absent, probe(rt.missing))
			}
		}
		t.Logf("%-18s exists %8v  missing %8v  AUC %.3f  (n=%d each)", rt.name, median(foreign), median(absent), auc(foreign, absent), n)
	}
}

// auc is the probability that a sample of a is slower than one of b, ties counting half
// (the Mann-Whitney statistic over len(a)*len(b)).
func auc(a, b []time.Duration) float64 {
	sb := slices.Clone(b)
	slices.Sort(sb)
	var wins float64
	for _, x := range a {
		lo, _ := slices.BinarySearch(sb, x)
		hi := lo
		for hi < len(sb) && sb[hi] == x {
			hi++
		}
		wins += float64(lo) + float64(hi-lo)/2
	}
	return wins / float64(len(a)*len(b))
}
