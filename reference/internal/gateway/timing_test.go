package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestNotFoundTiming measures whether a stranger can tell, by the time of the uniform 404, a
// conversation that does not exist from one that exists and is not theirs. It interleaves the
// samples of both paths on each route and prints each path's median and the accuracy of the best
// threshold classifier (50% means the two cannot be told apart). Timings depend on the machine,
// so it runs only with LOOM_TIMING set (to the number of samples per path, default 1000) and
// asserts nothing but the uniform 404 itself; TestNotFoundSameStoreWork in the conversation
// package is the check that always runs.
//
//	LOOM_TIMING=1000 go test ./reference/internal/gateway -run TestNotFoundTiming -v
func TestNotFoundTiming(t *testing.T) {
	n := timingSamples(t)
	fe := openFuzzEngine(t)
	id := fe.conversation(t, false) // alice's; bob is the stranger
	missing := "c_000000000000000000000000"
	routes := []struct{ name, method, suffix string }{
		{"status", http.MethodGet, ""},
		{"history", http.MethodGet, "/history"},
		{"participants", http.MethodGet, "/participants"},
		{"runtime log", http.MethodGet, "/log"},
	}
	srv := httptest.NewServer(fe.h)
	defer srv.Close()
	client := srv.Client()
	for _, rt := range routes {
		for _, loopback := range []bool{false, true} {
			probe := func(target string) time.Duration {
				if loopback {
					req, _ := http.NewRequest(rt.method, srv.URL+prefix(rt.suffix)+target+rt.suffix, nil)
					req.Header.Set("Authorization", "Bearer bob")
					start := time.Now()
					res, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					d := time.Since(start)
					if res.StatusCode != http.StatusNotFound {
						t.Fatalf("%s %s as a stranger: %d", rt.name, target, res.StatusCode)
					}
					return d
				}
				req := httptest.NewRequest(rt.method, prefix(rt.suffix)+target+rt.suffix, nil)
				req.Header.Set("Authorization", "Bearer bob")
				rec := httptest.NewRecorder()
				start := time.Now()
				fe.h.ServeHTTP(rec, req)
				d := time.Since(start)
				if rec.Code != http.StatusNotFound {
					t.Fatalf("%s %s as a stranger: %d %s", rt.name, target, rec.Code, rec.Body)
				}
				return d
			}
			for range 50 { // warm both paths
				probe(id)
				probe(missing)
			}
			foreign, absent := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
			for i := range 2 * n {
				if i%2 == 0 {
					foreign = append(foreign, probe(id))
				} else {
					absent = append(absent, probe(missing))
				}
			}
			how := map[bool]string{false: "in-process", true: "loopback"}[loopback]
			t.Logf("%-12s %-10s p50 missing %v, foreign %v; a stranger tells them apart %.1f%% of the time (%d samples each)",
				rt.name, how, median(absent), median(foreign), 100*bestThreshold(absent, foreign), n)
		}
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// bestThreshold is the accuracy of the best rule "at or below x it is one path, above it the
// other", over both orientations.
func bestThreshold(a, b []time.Duration) float64 {
	type sample struct {
		d time.Duration
		a bool
	}
	var all []sample
	for _, d := range a {
		all = append(all, sample{d, true})
	}
	for _, d := range b {
		all = append(all, sample{d, false})
	}
	slices.SortFunc(all, func(x, y sample) int { return int(x.d - y.d) })
	best := 0.5
	belowA, belowB := 0, 0
	for i, s := range all {
		if s.a {
			belowA++
		} else {
			belowB++
		}
		if i+1 < len(all) && all[i+1].d == s.d {
			continue
		}
		// "below is a": correct = belowA + (len(b) - belowB)
		acc := float64(belowA+len(b)-belowB) / float64(len(all))
		best = max(best, acc, 1-acc)
	}
	return best
}

// prefix is where a route of the timing test lives: the runtime door's log under
// /runtime/executions, the others under /conversations.
func prefix(suffix string) string {
	if suffix == "/log" {
		return "/runtime/executions/"
	}
	return "/conversations/"
}

// timingSamples is the number of samples per path the timing tests take, from LOOM_TIMING
// (default 1000 when it is not a number of at least 10); without LOOM_TIMING they skip.
func timingSamples(t *testing.T) int {
	env := os.Getenv("LOOM_TIMING")
	if env == "" {
		t.Skip("set LOOM_TIMING (samples per path) to measure")
	}
	n, err := strconv.Atoi(env)
	if err != nil || n < 10 {
		n = 1000
	}
	return n
}
