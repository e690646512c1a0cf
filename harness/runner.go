package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/features"
	"github.com/loomcheck/loomcheck/harness/contract"
	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/harness/steps"
	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// KitVersion is the version of the conformance kit.
const KitVersion = "0.1.0"

// Options configure a run. Exactly one of Factory, Command and Target chooses the driver.
type Options struct {
	// Factory runs the SUT in-process.
	Factory Factory
	// Command runs the SUT as a process: `sh -c Command` with LOOM_CONFIG naming the
	// configuration file; the kit SIGKILLs and relaunches it to crash and restart it.
	Command string
	// Target is the URL of a running SUT the kit cannot configure or crash.
	Target string
	// World is the world a remote target was configured with (see `loomcheck world`).
	World *world.World
	// RemoteConfig is the configuration document the remote target was started with (see
	// RemoteConfig); the run needs its signing key and settings.
	RemoteConfig *sutconfig.SUTConfig
	// Describe names the target in the report (default: the command, URL or "in-process").
	Describe string
	// Tags filters scenarios with a godog tag expression.
	Tags string
	// Profiles narrows the run to these profiles (of those the SUT claims).
	Profiles []string
	// Concurrency is how many scenarios run at once. The default is 8, or the number of CPUs
	// when that is more, for the in-process and process drivers (a scenario mostly waits on its
	// system, the model and the peer, so more scenarios than CPUs keep the CPUs busy); twice the
	// number of CPUs for several nodes (each scenario runs several processes and a database, and
	// still mostly waits); the number of CPUs in a kit built with the race detector (its
	// scenarios are bound by CPU); always 1 for a remote target, which shares one world.
	Concurrency int
	// StepTimeout bounds every wait of a step. The default is DefaultStepTimeout: 10 s, four
	// times that in a kit built with the race detector, or LOOMCHECK_STEP_TIMEOUT (a Go
	// duration) when it is set.
	StepTimeout time.Duration
	// Progress receives a progress line while the run goes (nil: none).
	Progress io.Writer
	// Features replaces the embedded features (tests of the kit itself).
	Features fs.FS
	// TestingT runs each scenario as a subtest of t.
	TestingT *testing.T
	// Databases, when set, gives every scenario a server database of its own: the kit creates
	// one before the scenario starts, names it in the configuration's storage.url, and drops it
	// when the scenario ends. Scenarios that damage or delete the data directory's files are then
	// not applicable (the state is not there).
	Databases Databases
	// Nodes runs a process SUT (Command) as this many nodes sharing the scenario's database
	// (Databases is required) behind one address (spec/nodes.md): each connection goes to the next
	// node in turn, and a crash kills the node that holds the lease. 0 or 1: one process.
	Nodes int
	// NodeLease is the lease the nodes are configured with (default 1s: a crash's takeover then
	// fits the few seconds the timing scenarios allow a restart).
	NodeLease time.Duration
	// Partitions is the nodes' node.partitions (0: not set, the system's default).
	Partitions int
}

// runner is the state of one run.
type runner struct {
	opt     Options
	cat     *spec.Catalogue
	claimed map[string]bool
	impl    string
	// shared is what the scenarios share: the driver, the contract, what discovery claimed.
	shared *steps.Run
	// unstarted is why the system could not be started or answer discovery ("": it did).
	unstarted string

	mu            sync.Mutex
	results       map[string]*report.Scenario
	total         int
	judgeable     int // selected scenarios of a claimed profile
	done          int
	failed        int
	harness       int
	contractStats report.Contract
	findings      map[findingKey]*report.ContractFinding
	lines         map[string]int    // ast node id -> line
	keywords      map[string]string // step ast node id -> keyword
	features      map[string]string // uri -> feature name
}

// Execute runs the features against the SUT Options choose and returns the report. An error
// means the run could not happen at all (a usage or harness fault); the report then may be nil.
//
//	rep, err := harness.Execute(ctx, harness.Options{Command: "loomcheck serve"})
//	if err != nil { log.Fatal(err) }
//	os.Exit(rep.ExitCode)
func Execute(ctx context.Context, opt Options) (*report.Report, error) {
	started := time.Now()
	// The filter is parsed here, never by the scenario runner first: a malformed one is a usage
	// error naming the position, and the runner gets the canonical form of what we parsed.
	expr, err := ParseTagExpr(opt.Tags)
	if err != nil {
		return nil, err
	}
	opt.Tags = expr.String()
	r, err := newRunner(opt)
	if err != nil {
		return nil, err
	}
	defer r.cleanup()
	if err := r.probe(ctx); err != nil {
		var se *steps.StartError
		if !errors.As(err, &se) && !errors.Is(err, steps.ErrNoDiscovery) {
			return nil, err
		}
		// The system's failure, not the kit's: a report that says so, every format written.
		r.unstarted = err.Error()
		return r.build(started), nil
	}
	fsys := opt.Features
	if fsys == nil {
		fsys = features.FS
	}
	if err := r.index(fsys); err != nil {
		return nil, err
	}
	if err := r.selected(); err != nil {
		return nil, err
	}
	suite := godog.TestSuite{
		Name:                "loomcheck",
		ScenarioInitializer: r.initScenario,
		Options: &godog.Options{
			Format: "progress", Output: io.Discard, NoColors: true, FS: fsys, Paths: []string{"."},
			Tags: opt.Tags, Concurrency: r.opt.Concurrency, TestingT: opt.TestingT, DefaultContext: ctx,
		},
	}
	suite.Run()
	if r.opt.Progress != nil && isTerminal(r.opt.Progress) {
		fmt.Fprintln(r.opt.Progress)
	}
	return r.build(started), nil
}

func newRunner(opt Options) (*runner, error) {
	if opt.StepTimeout <= 0 {
		opt.StepTimeout = DefaultStepTimeout()
	}
	r := &runner{opt: opt, results: map[string]*report.Scenario{}, lines: map[string]int{},
		keywords: map[string]string{}, features: map[string]string{}}
	r.shared = &steps.Run{StepTimeout: opt.StepTimeout, Databases: opt.Databases}
	switch {
	case opt.Factory != nil && opt.Command == "" && opt.Target == "":
		r.shared.Kind = steps.InProcess(opt.Factory)
	case opt.Command != "" && opt.Factory == nil && opt.Target == "" && opt.Nodes > 1:
		if opt.Databases == nil {
			return nil, fmt.Errorf("%w: several nodes need a database they share (--store)", ErrUsage)
		}
		lease := opt.NodeLease
		if lease <= 0 {
			lease = time.Second
		}
		r.shared.Kind = steps.Nodes(opt.Command, opt.Nodes, lease, opt.Partitions)
	case opt.Command != "" && opt.Factory == nil && opt.Target == "":
		r.shared.Kind = steps.Process(opt.Command)
	case opt.Target != "" && opt.Factory == nil && opt.Command == "":
		if opt.Databases != nil {
			return nil, fmt.Errorf("%w: a remote target keeps its own database; --store is for a system the kit starts", ErrUsage)
		}
		r.shared.Kind = steps.Remote(strings.TrimRight(opt.Target, "/"))
		r.shared.Kind.Describe = opt.Target
		if opt.World == nil || opt.RemoteConfig == nil {
			return nil, fmt.Errorf("%w: a remote target needs the world and the configuration it was started with", ErrUsage)
		}
		r.shared.SharedWorld, r.shared.RemoteCfg = opt.World, opt.RemoteConfig
		r.opt.Concurrency = 1
	default:
		return nil, fmt.Errorf("%w: choose exactly one of an in-process factory, a command or a target", ErrUsage)
	}
	if opt.Describe != "" {
		r.shared.Kind.Describe = opt.Describe
	}
	if r.opt.Concurrency <= 0 {
		r.opt.Concurrency = defaultConcurrency(opt.Nodes > 1)
	}
	var err error
	if r.shared.Contract, err = contract.New(); err != nil {
		return nil, harnessErr("load the contract: %v", err)
	}
	if r.cat, err = spec.LoadCatalogue(); err != nil {
		return nil, harnessErr("load the catalogue: %v", err)
	}
	for _, p := range opt.Profiles {
		if !slices.ContainsFunc(r.cat.Profiles, func(cp spec.Profile) bool { return cp.Name == p }) {
			return nil, fmt.Errorf("%w: --profile %q is not a profile of the catalogue%s", ErrUsage, p, DidYouMean(p, r.cat.ProfileNames()))
		}
	}
	if r.shared.Tmp, err = os.MkdirTemp("", "loomcheck-*"); err != nil {
		return nil, harnessErr("temporary directory: %v", err)
	}
	r.shared.ID = steps.NewRunID()
	return r, nil
}

// DefaultStepTimeout is the bound on every wait of a step when Options leave it unset: the
// duration in LOOMCHECK_STEP_TIMEOUT when that parses, otherwise 10 s, or 40 s in a kit built
// with the race detector (a loaded machine under -race runs several times slower).
//
//	LOOMCHECK_STEP_TIMEOUT=1m go test -race ./reference/
func DefaultStepTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("LOOMCHECK_STEP_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	if raceBuild {
		return 40 * time.Second
	}
	return 10 * time.Second
}

// latencyBound is how many scenarios the in-process and process drivers run at once by default.
// A scenario spends most of its time waiting (for turns, the peer, stream frames, timers), so
// the suite needs more scenarios at once than CPUs to use them: against the reference on 2 CPUs
// shared with other work, the whole suite took 195 s at 2 and 81 s at 8, with the same verdict.
const latencyBound = 8

// defaultConcurrency is how many scenarios run at once when Options leave Concurrency unset (a
// remote target always runs 1): latencyBound or the number of CPUs, whichever is more; twice the
// number of CPUs for a system run as several nodes (each scenario runs several processes and a
// shared database, yet mostly waits: on 2 CPUs shared with other work, 143 scenarios of the
// threads, durability and barge-in profiles on two nodes took 69 to 74 s at 2 and 45 s at 4,
// with the same verdict and the same CPU); the number of CPUs in a kit built with the race
// detector (it makes every scenario bound by CPU).
func defaultConcurrency(nodes bool) int {
	switch {
	case raceBuild:
		return runtime.NumCPU()
	case nodes:
		return nodesPerCPU * runtime.NumCPU()
	}
	return max(latencyBound, runtime.NumCPU())
}

// nodesPerCPU is how many scenarios on several nodes run at once per CPU by default.
const nodesPerCPU = 2

// ErrUsage is a run that was asked for wrongly.
var ErrUsage = errors.New("usage")

func (r *runner) cleanup() {
	_ = os.RemoveAll(r.shared.Tmp)
}

// probe starts one instance to read the discovery document: which profiles the SUT claims. A
// SUT that cannot be started or does not answer is a harness error, not a failure.
func (r *runner) probe(ctx context.Context) error {
	d, err := steps.Discover(ctx, r.shared)
	if err != nil {
		return err
	}
	r.claimed = map[string]bool{}
	for _, p := range d.Profiles {
		if len(r.opt.Profiles) == 0 || slices.Contains(r.opt.Profiles, p) {
			r.claimed[p] = true
		}
	}
	r.impl = d.Implementation
	r.shared.Door = d.RuntimeDoor
	r.shared.Extensions = map[string]bool{}
	for _, e := range d.Extensions {
		r.shared.Extensions[e] = true
	}
	return nil
}

// build assembles the report.
func (r *runner) build(started time.Time) *report.Report {
	rep := &report.Report{
		Kit:         report.Kit{Name: "loomcheck", Version: KitVersion},
		SpecVersion: r.cat.Version,
		Target:      report.Target{Driver: r.shared.Kind.Name, Description: r.shared.Kind.Describe, Implementation: r.impl, Profiles: []string{}},
		StartedAt:   started.UTC().Truncate(time.Millisecond), // what a reader needs; no nanoseconds
		DurationMs:  time.Since(started).Milliseconds(),
		Scenarios:   []report.Scenario{},
		Contract:    r.contractStats,
		Unstarted:   r.unstarted,
	}
	rep.Contract.Findings = r.sortedFindings()
	for p := range r.claimed {
		rep.Target.Profiles = append(rep.Target.Profiles, p)
	}
	sort.Strings(rep.Target.Profiles)
	ids := slices.Sorted(maps.Keys(r.results))
	sort.SliceStable(ids, func(i, j int) bool { return idLess(ids[i], ids[j]) })
	for _, id := range ids {
		rep.Scenarios = append(rep.Scenarios, *r.results[id])
	}
	return Judge(rep, r.cat, nil)
}

func idLess(a, b string) bool {
	fa, la, _ := strings.Cut(a, ":")
	fb, lb, _ := strings.Cut(b, ":")
	if fa != fb {
		return fa < fb
	}
	na, _ := strconv.Atoi(la)
	nb, _ := strconv.Atoi(lb)
	return na < nb
}

// isTerminal reports whether w is a terminal (the progress line then rewrites itself).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
