package reference

import (
	"context"
	"fmt"
	"maps"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// assemble builds the engine's parts on e.st and starts the recovery of every open execution
// (lazy: see kernel.Open). On an error it has closed what it made, and leaves the store to the
// caller.
func (e *Engine) assemble(ctx context.Context, opt Options) error {
	st := e.st
	hub := live.NewHub(opt.Gateway.MaxSubscribers)
	dl, err := conversation.New(opt.Conversation, opt.Deps, hub)
	if err != nil {
		return err
	}
	// Every recovered flow reaches the kernel through its own context, so the client is made
	// after the kernel is open, with nothing for a recovered flow to wait for. An execution refused for damaged storage is reported through the error hook, with an
	// errorId of its own, as a 500 would be.
	var onCorrupt func(string, error)
	if hook := opt.Gateway.OnError; hook != nil {
		onCorrupt = func(id string, err error) {
			hook(loomtype.NewErrorID(), fmt.Errorf("execution %s refused: %w", id, err))
		}
	}
	runs := newRuns(opt)
	flows := dl.Flows()
	maps.Copy(flows, runs.Flows())
	if e.owns != nil && !e.owns(threadsProbe) {
		opt.Threads = nil // profile threads lives in one partition, another engine's
	}
	th, err := newThreads(opt, flows)
	if err != nil {
		return err
	}
	var prepare func(context.Context, *kernel.Kernel) error
	if th != nil {
		prepare = th.Prepare
	}
	root, holder := e.root, e.holder
	if root == nil {
		root = st
	}
	if holder == "" {
		holder = leaseName
	}
	gk, quotas, err := e.openBounds(ctx, root, holder, opt)
	if err != nil {
		if th != nil {
			th.Close()
		}
		return err
	}
	opt.Gateway.Quotas, opt.Stream.Quotas = quotas, quotas
	// The branches' keys are kept beside the shared counts, where every partition sees them (nil
	// for an engine alone on its store: with its own records).
	opt.Stream.Shared = gk
	if err := e.shareCache(ctx, opt, gk, runs); err != nil {
		if th != nil {
			th.Close()
		}
		closeKernel(gk)
		return err
	}
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: flows, Divergence: opt.Divergence, Logger: opt.Logger,
		OnCorrupt: onCorrupt, BeforeRecovery: runs.Bind, Prepare: prepare, Owns: e.owns})
	if err != nil {
		if th != nil {
			th.Close()
		}
		closeKernel(gk)
		return err
	}
	// Installed before the parts, so that a stopParts from now on closes it (Close twice is
	// harmless).
	e.mu.Lock()
	e.gk = gk
	e.mu.Unlock()
	if err := e.startParts(ctx, opt, k, dl, runs, th); err != nil {
		closeKernel(gk)
		return err
	}
	return nil
}

// threadsProbe is an execution id of profile threads: the partition that owns it is the one
// every execution and record of the profile lives in (partition.KeyOf).
const threadsProbe = "thr:"

// shareCache moves the runs' response cache, when opt turns it on and e runs one partition of
// several, into the store's global namespace through gk, the kernel of the shared counts: a
// principal's runs share their answers whatever partition (and node) their ids put them in,
// where a cache in the process would answer from one partition's runs alone.
func (e *Engine) shareCache(ctx context.Context, opt Options, gk *kernel.Kernel, runs *run.Runs) error {
	if !opt.ResponseCache || e.owns == nil {
		return nil
	}
	c, err := run.OpenStoredCache(ctx, gk, 0)
	if err != nil {
		return err
	}
	runs.UseCache(c)
	return nil
}

// newRuns makes the runs' service of opt: its flow is in the kernel's flows, so it is made before
// the kernel opens.
func newRuns(opt Options) *run.Runs {
	onError := opt.Deps.OnError
	var cache run.Cache // a nil *ResponseCache here would be a cache that is on
	if opt.ResponseCache {
		cache = run.NewResponseCache(0)
	}
	return run.New(run.Deps{Cache: cache, Provider: opt.Deps.Provider, Model: opt.Conversation.Model, Tools: opt.Conversation.Tools,
		Runner: opt.Deps.Tools, Allowed: opt.Deps.Allowed, Memory: opt.Deps.Memory, NotIdempotent: opt.NotIdempotentTools, MaxIterations: opt.RunMaxIterations, OnError: func(id string, err error) {
			onError(hostio.ErrorReport{ErrorID: id, Error: err.Error()})
		}, Human: opt.HumanTools})
}

// newThreads makes the threads' service when opt configures one, its defaults taken from the rest
// of opt, and adds its flows to flows; nil when threads are off.
func newThreads(opt Options, flows map[string]kernel.Flow) (*threads.Service, error) {
	if opt.Threads == nil {
		return nil, nil
	}
	tc := *opt.Threads
	if tc.Provider == nil {
		tc.Provider = opt.Deps.Provider
	}
	if tc.Model == "" {
		tc.Model = opt.Conversation.Model
	}
	if tc.Logger == nil {
		tc.Logger = opt.Logger
	}
	th, err := threads.New(tc)
	if err != nil {
		return nil, err
	}
	maps.Copy(flows, th.Flows())
	return th, nil
}

// startParts starts what runs on the open kernel k (the threads' service when th is not nil, the
// sessions, the gateway) and installs every part on e. On an error it has closed them and k.
func (e *Engine) startParts(ctx context.Context, opt Options, k *kernel.Kernel, dl *conversation.Dialogue, runs *run.Runs, th *threads.Service) error {
	closeThreads := func() {
		if th != nil {
			th.Close()
		}
	}
	if th != nil {
		if err := th.Resume(ctx); err != nil {
			closeThreads()
			k.Close()
			return err
		}
		opt.Gateway.Threads = th
	}
	cv := dl.Client(k)
	opt.Gateway.Runs = runs
	if opt.Stream.Logger == nil {
		opt.Stream.Logger = opt.Logger
	}
	ss := sessions.New(k, cv, opt.Stream)
	if err := ss.Resume(ctx); err != nil {
		ss.Close()
		closeThreads()
		k.Close()
		return err
	}
	opt.Gateway.Sessions = ss
	gw, err := gateway.New(cv, opt.Gateway)
	if err != nil {
		ss.Close()
		closeThreads()
		k.Close()
		return err
	}
	e.mu.Lock()
	if e.partsStopped {
		// The lease was lost while the executions were being recovered.
		e.mu.Unlock()
		gw.Shutdown()
		ss.Close()
		closeThreads()
		k.Close()
		return errLostWhileOpening
	}
	e.k, e.cv, e.runs, e.gw, e.ss, e.th = k, cv, runs, gw, ss, th
	e.mu.Unlock()
	return nil
}
