package harness

import (
	"context"
	"runtime"
	"testing"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// TestDefaultConcurrency: unset, an in-process or process run takes 8 scenarios at once (or the
// number of CPUs when that is more, twice the CPUs with several nodes, and the CPUs alone under
// the race detector); a value set is kept.
func TestDefaultConcurrency(t *testing.T) {
	want, nodes := max(8, runtime.NumCPU()), 2*runtime.NumCPU()
	if raceBuild {
		want, nodes = runtime.NumCPU(), runtime.NumCPU()
	}
	factory := func(context.Context, sutconfig.SUTConfig) (Instance, error) { return nil, nil }
	cases := []struct {
		name string
		opt  Options
		want int
	}{
		{"in-process", Options{Factory: factory}, want},
		{"process", Options{Command: "true"}, want},
		{"nodes", Options{Command: "true", Nodes: 3, Databases: noDatabases{}}, nodes},
		{"set", Options{Factory: factory, Concurrency: 3}, 3},
	}
	for _, c := range cases {
		r, err := newRunner(c.opt)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r.cleanup()
		if r.opt.Concurrency != c.want {
			t.Errorf("%s: concurrency %d, want %d", c.name, r.opt.Concurrency, c.want)
		}
	}
}

// noDatabases is a Databases that is never asked for one.
type noDatabases struct{}

func (noDatabases) Create(context.Context, string) (string, error) { return "", nil }
func (noDatabases) Drop(context.Context, string) error             { return nil }
