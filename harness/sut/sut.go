// Package sut holds what the kit asks of a system under test it runs: an in-process Instance and
// the Factory that opens one, the optional Server and WriteCrasher, and the Databases a run may
// give each scenario. Package harness names the same types (harness.Instance is sut.Instance).
package sut

import (
	"context"
	"net"
	"net/http"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// Instance is one running instance of a system under test, served in-process.
type Instance interface {
	// Handler is the instance's HTTP surface (spec/openapi.yaml).
	Handler() http.Handler
	// Crash abandons the instance as SIGKILL would: nothing it does afterwards may reach its
	// durable state, and the data directory must be openable again at once.
	Crash()
	// Close shuts the instance down cleanly.
	Close() error
}

// WriteCrasher is an Instance that can crash itself right after a chosen durable write; the
// crash exploration (harness/explore) needs it, the rest of the kit does not. A durable write is
// one committed change to the instance's durable state (a committed append or transaction).
//
// DurableWrites returns how many the instance committed since it was opened. CrashAfterWrite
// arms a crash right after the n-th durable write from now (n >= 1): that write is durable, and
// nothing the instance does afterwards is (its write path fails or blocks). The returned channel is
// closed when that point is reached; the kit then abandons the instance with Crash, without Close.
// The hook is off until CrashAfterWrite is called; both methods are safe for concurrent use.
//
//	if wc, ok := inst.(harness.WriteCrasher); ok {
//		crashed := wc.CrashAfterWrite(3)
//		<-crashed
//		inst.Crash()
//	}
type WriteCrasher interface {
	DurableWrites() int64
	CrashAfterWrite(n int64) <-chan struct{}
}

// Server is an Instance that serves its HTTP surface itself, on a listener the kit opens, with
// the connection handling its configuration sets: the request and header deadlines and the
// connection cap (spec/http.md, Connections). The in-process driver uses it when an instance
// offers it; otherwise the driver serves Handler with a plain http.Server of its own, and the
// scenarios that judge those limits are not applicable (never passed).
//
// Serve serves ln until the instance is crashed or closed, then returns (the kit ignores what it
// returns). Crash and Close must close ln and every connection accepted from it. Serve is called
// at most once per instance.
//
//	if srv, ok := inst.(harness.Server); ok {
//		go srv.Serve(ln)
//	}
type Server interface {
	Serve(ln net.Listener) error
}

// Factory opens an instance on a configuration. The harness calls it once per scenario with a
// fresh data directory, and again with the same configuration to restart after a crash.
type Factory func(ctx context.Context, cfg sutconfig.SUTConfig) (Instance, error)

// Databases makes and removes the server databases of Options.Databases. Names are lower-case
// letters, digits and underscores. An implementation may hand out, under a new name, a database
// it emptied after an earlier scenario (loomcheck run --store does: making a database costs the
// server far more), so long as what Create returns holds nothing and no one is connected to it.
//
//	opt.Databases = myDatabases{admin: "postgres://loom@127.0.0.1/postgres"}
type Databases interface {
	// Create gives the scenario an empty database under name and returns the URL a system opens
	// it with.
	Create(ctx context.Context, name string) (url string, err error)
	// Drop is done with the database given under name, whoever is still connected to it: it is
	// removed, or emptied for a later Create.
	Drop(ctx context.Context, name string) error
}
