package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/run"
)

// TestRoutesNotFoundTiming measures, as TestThreadsNotFoundTiming does for the threads routes,
// whether a stranger can tell by the time of the uniform 404 a conversation, a session's stream
// or a run that exists and is not theirs from one that does not exist: each route's median on
// both paths and the AUC of the two samples (0.5: they cannot be told apart). It runs only with
// LOOM_TIMING set (samples per path, default 1000) and asserts nothing but the 404 itself.
//
//	LOOM_TIMING=1000 go test ./reference/internal/gateway -run TestRoutesNotFoundTiming -v
func TestRoutesNotFoundTiming(t *testing.T) {
	n := timingSamples(t)
	fe := openFuzzEngine(t)
	conv, noConv := fe.conversation(t, false), "c_000000000000000000000000" // alice's; bob is the stranger
	rv, _, err := fe.eng.Runs().Start(context.Background(), fuzzAlice, run.Options{Prompt: "check pump 3"})
	if err != nil {
		t.Fatal(err)
	}
	noRun := "run:000000000000000000000000"
	routes := []struct{ name, method, here, missing, body string }{
		{"status", "GET", "/conversations/" + conv, "/conversations/" + noConv, ""},
		{"history", "GET", "/conversations/" + conv + "/history", "/conversations/" + noConv + "/history", ""},
		{"participants", "GET", "/conversations/" + conv + "/participants", "/conversations/" + noConv + "/participants", ""},
		{"events", "GET", "/conversations/" + conv + "/events", "/conversations/" + noConv + "/events", ""},
		{"turn", "POST", "/conversations/" + conv + "/turns", "/conversations/" + noConv + "/turns", `{"text":"hi"}`},
		{"stream open", "POST", "/sessions/" + conv + "/stream/open", "/sessions/" + noConv + "/stream/open", `{}`},
		{"stream", "GET", "/sessions/" + conv + "/stream", "/sessions/" + noConv + "/stream", ""},
		{"run", "GET", "/runs/" + rv.ID, "/runs/" + noRun, ""},
		{"run abort", "POST", "/runs/" + rv.ID + "/abort", "/runs/" + noRun + "/abort", ""},
	}
	for _, rt := range routes {
		probe := func(path string) time.Duration {
			req := httptest.NewRequest(rt.method, path, strings.NewReader(rt.body))
			req.Header.Set("Authorization", "Bearer bob")
			if rt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			rec := httptest.NewRecorder()
			start := time.Now()
			fe.h.ServeHTTP(rec, req)
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
		t.Logf("%-13s exists %9v  missing %9v  AUC %.3f  (n=%d each)", rt.name, median(foreign), median(absent), auc(foreign, absent), n)
	}
}
