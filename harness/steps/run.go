package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/contract"
	"github.com/loomcheck/loomcheck/harness/sut"
	"github.com/loomcheck/loomcheck/harness/sutclient"
	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// What the runner (package harness) sees of the steps: the Run its scenarios share, a Scenario
// per pickle (made, bound to godog, set up, told when each step begins, read when it ends and torn
// down), Discover for the system's discovery document, and Vocabulary.

// Run is what the scenarios of one run share. The runner fills it before the first scenario
// begins (Door and Extensions from Discover) and changes it no more; the scenarios only count
// themselves in it.
type Run struct {
	// Kind is how each scenario runs its system.
	Kind DriverKind
	// Contract judges every exchange against spec/openapi.yaml.
	Contract *contract.Validator
	// Door and Extensions are what the system claims in discovery: the runtime door, and the
	// optional behaviours ("chosen-id").
	Door       bool
	Extensions map[string]bool
	// Tmp is the directory the scenarios keep their files under.
	Tmp string
	// SharedWorld and RemoteCfg are, for a remote target, the world and the configuration it was
	// started with (nil otherwise: each scenario has a world and a configuration of its own).
	SharedWorld *world.World
	RemoteCfg   *sutconfig.SUTConfig
	// ID is the run's random id: it makes the scenarios' ids on a shared target and the names of
	// their databases the run's own.
	ID string
	// StepTimeout bounds every wait of a step.
	StepTimeout time.Duration
	// Databases, when set, gives each scenario a server database of its own.
	Databases sut.Databases

	mu        sync.Mutex
	databases int // scenario databases made (Databases)
	scenarios int // scenarios set up, numbering their nonces (scenario.own)
}

// NewRunID is a fresh random id for a run: eight letters and digits.
func NewRunID() string {
	id := strings.TrimPrefix(randomKey()[:8], "+")
	return strings.NewReplacer("+", "a", "/", "b", "=", "c").Replace(id)
}

// databaseName is a fresh name for a scenario's database: the run's id and a counter.
func (r *Run) databaseName() string {
	r.mu.Lock()
	r.databases++
	n := r.databases
	r.mu.Unlock()
	id := strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			return c
		case c >= 'A' && c <= 'Z':
			return c + 'a' - 'A'
		}
		return '_'
	}, r.ID)
	return fmt.Sprintf("loomcheck_%s_%d", id, n)
}

// Scenario is one pickle's scenario as the runner holds it.
type Scenario struct{ s *scenario }

// NewScenario is a scenario of run, not yet begun.
func NewScenario(run *Run) *Scenario { return &Scenario{s: &scenario{run: run}} }

// Register binds to sc the steps of the vocabulary that match one of texts, the pickle's step
// texts, each area with its state empty.
func (sc *Scenario) Register(gc *godog.ScenarioContext, texts []string) { sc.s.register(gc, texts) }

// Begin names the scenario: its context (the scenario's steps end with it), id, name, tags, its
// profile and the requirements it judges.
func (sc *Scenario) Begin(ctx context.Context, id, name string, tags []string, profile string, reqs []string) {
	s := sc.s
	s.ctx, s.id, s.name, s.tags, s.profile, s.reqs = ctx, id, name, tags, profile, reqs
}

// Setup gives the scenario its directory, world, configuration and driver (the system starts
// when a step first needs it).
func (sc *Scenario) Setup() error { return sc.s.setup() }

// Teardown closes what the scenario opened and stops its system.
func (sc *Scenario) Teardown() { sc.s.teardown() }

// StepBegins forgets the previous step's bounded waits.
func (sc *Scenario) StepBegins() { sc.s.stepBegins() }

// TakeAsync is the failure noticed off the steps' path since it was last taken, or nil.
func (sc *Scenario) TakeAsync() error { return sc.s.takeAsync() }

// MarkTimeout sets Failure.Timeout on err's failure when one of the step's waits ran out.
func (sc *Scenario) MarkTimeout(err error) { sc.s.markTimeout(err) }

// Logs is the last n bytes of what the scenario's system printed ("" when it printed nothing or
// never had a driver).
func (sc *Scenario) Logs(n int) string {
	if sc.s.drv == nil {
		return ""
	}
	return tail(sc.s.drv.Logs(), n)
}

// Observed is what a scenario's client saw (sutclient.Observed).
type Observed = sutclient.Observed

// Observed is what the scenario's client saw so far; ok is false when it never had a client.
func (sc *Scenario) Observed() (o Observed, ok bool) {
	if sc.s.cl == nil {
		return Observed{}, false
	}
	return sc.s.cl.Observed(), true
}

// ErrNoDiscovery is a system that started but did not answer GET /.well-known/loom with its
// discovery document.
var ErrNoDiscovery = errors.New("the system under test did not answer its discovery document (GET /.well-known/loom)")

// Discovery is what a system's discovery document claims.
type Discovery struct {
	Profiles       []string
	RuntimeDoor    bool
	Extensions     []string
	Implementation string // name and version
}

// Discover starts one system of run and reads its discovery document. A system that does not
// start is a *StartError, one that does not answer ErrNoDiscovery; a remote target that cannot be
// reached is a harness error (the address may be wrong).
func Discover(ctx context.Context, run *Run) (*Discovery, error) {
	s := &scenario{run: run, ctx: ctx}
	if err := s.setup(); err != nil {
		return nil, err
	}
	defer s.teardown()
	if err := s.sut(); err != nil {
		return nil, err
	}
	resp, err := s.cl.Do(ctx, "", http.MethodGet, "/.well-known/loom", nil, reqOpts{})
	var f *Failure
	if err != nil && !(errors.As(err, &f) && resp != nil) {
		// No answer at all: the run cannot be made. An answer that breaks the contract is
		// read anyway; the scenarios that check the contract report it.
		if run.Kind.Name == "remote" {
			// A running system the kit was pointed at and never reached: the address may be
			// wrong, which is the caller's to fix, not the system's failure.
			return nil, harnessErr("discovery: %v", err)
		}
		return nil, fmt.Errorf("%w: %v", ErrNoDiscovery, err)
	}
	var d struct {
		SpecVersion    string   `json:"specVersion"`
		Profiles       []string `json:"profiles"`
		RuntimeDoor    bool     `json:"runtimeDoor"`
		Extensions     []string `json:"extensions"`
		Implementation struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"implementation"`
	}
	if resp.Status != http.StatusOK || json.Unmarshal(resp.Body, &d) != nil {
		return nil, fmt.Errorf("%w: it answered %d: %s", ErrNoDiscovery, resp.Status, clip(string(resp.Body), 200))
	}
	return &Discovery{Profiles: d.Profiles, RuntimeDoor: d.RuntimeDoor, Extensions: d.Extensions,
		Implementation: strings.TrimSpace(d.Implementation.Name + " " + d.Implementation.Version)}, nil
}
