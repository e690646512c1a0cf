package steps

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/harness/contract"
	"github.com/loomcheck/loomcheck/harness/oracle"
	"github.com/loomcheck/loomcheck/harness/sutclient"
	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// The principals every scenario knows, by the name steps use for them.
var principals = map[string]sutconfig.Principal{
	"alice":            {Tenant: "acme", Actor: "alice"},
	"bob":              {Tenant: "acme", Actor: "bob"},
	"carol":            {Tenant: "acme", Actor: "carol"},
	"dave":             {Tenant: "acme", Actor: "dave"},
	"erin":             {Tenant: "acme", Actor: "erin"},
	"mallory":          {Tenant: "evil", Actor: "mallory"},
	"alice's delegate": {Tenant: "acme", Actor: "assistant", OnBehalfOf: "alice"},
	"nobody":           {Tenant: "acme"},
	"the service":      {Tenant: "acme", Actor: "loom-service"},

	// Look-alikes: each differs from alice (or bob) in one identity field alone, so a rule that
	// compares identities by actor alone admits them. "... other token" is another token mapped
	// to the very same identity: it IS that principal.
	"alice at evil":                   {Tenant: "evil", Actor: "alice"},
	"alice at globex":                 {Tenant: "globex", Actor: "alice"},
	"alice without a tenant":          {Actor: "alice"},
	"alice for bob":                   {Tenant: "acme", Actor: "alice", OnBehalfOf: "bob"},
	"alice's other token":             {Tenant: "acme", Actor: "alice"},
	"bob at evil":                     {Tenant: "evil", Actor: "bob"},
	"bob without a tenant":            {Actor: "bob"},
	"bob for carol":                   {Tenant: "acme", Actor: "bob", OnBehalfOf: "carol"},
	"bob's other token":               {Tenant: "acme", Actor: "bob"},
	"the assistant":                   {Tenant: "acme", Actor: "assistant"},
	"the service's other token":       {Tenant: "acme", Actor: "loom-service"},
	"the service at evil":             {Tenant: "evil", Actor: "loom-service"},
	"the service without a tenant":    {Actor: "loom-service"},
	"the service for alice":           {Tenant: "acme", Actor: "loom-service", OnBehalfOf: "alice"},
	"the assistant for bob":           {Tenant: "acme", Actor: "assistant", OnBehalfOf: "bob"},
	"the assistant at evil for alice": {Tenant: "evil", Actor: "assistant", OnBehalfOf: "alice"},
	"nobody at all":                   {},
	"nobody for alice":                {Tenant: "acme", OnBehalfOf: "alice"},

	// Separators inside a field: joined as tenant/actor~onBehalfOf without escaping, "alice tilde
	// bob" would be "alice for bob", and "x slash y" would be "y at acme slash x".
	"alice tilde bob":   {Tenant: "acme", Actor: "alice~bob"},
	"x slash y":         {Tenant: "acme", Actor: "x/y"},
	"y at acme slash x": {Tenant: "acme/x", Actor: "y"},
}

// standardTools are declared to every system under test, so scenarios can script them at any
// point; others must be scripted before the system starts.
var standardTools = []string{"lookup", "slow", "transfer", "north", "south"}

func tokenOf(name string) string {
	return "tok-" + strings.NewReplacer(" ", "-", "'", "").Replace(name)
}

func identityOf(name string) oracle.Identity {
	p := principals[name]
	return oracle.Identity{Tenant: p.Tenant, Actor: p.Actor, OnBehalfOf: p.OnBehalfOf}
}

// conv is a conversation a scenario knows.
type conv struct {
	name  string
	id    string
	owner string
}

// scenario is the state of one running scenario.
type scenario struct {
	run      *Run
	ctx      context.Context
	id       string
	name     string
	tags     []string
	profile  string
	reqs     []string
	world    *world.World
	contract *contract.Validator
	cl       *client
	dir      string
	// databases are the scenario's own server databases (Options.Databases), dropped at the end.
	databases []string
	transport *http.Transport
	// streamTr carries the long reads (SSE, WebSocket): it keeps no connection once a stream
	// ends, so a stream the system ended as it stopped never lends its connection, closed by
	// then, to a request made after the restart.
	streamTr *http.Transport
	// answers keeps the node that served the newest answer (Loom-Node), which a crash of
	// several nodes kills: the owner of the scenario's execution.
	answers *answerLog
	// via is the address of the one node of several that the scenario's requests go to
	// straight, not through the address in front of them ("": that address); under mu.
	via string
	// waits are the deadlines of the current step's bounded waits (wait, stepDeadline), kept
	// under mu: a step that fails after one of them passed ran out of the step timeout.
	waits []time.Time

	// nonce is what own appends to the ids and keys the scenario chooses against a system other
	// scenarios share ("" when the kit starts a system for the scenario alone).
	nonce string

	cfg     sutconfig.SUTConfig
	drv     driver
	started bool
	startEr error

	// convs are the conversations the scenario knows by name, current the one steps without
	// a name mean, last the last answer (a step that expects an answer reads it).
	convs   map[string]*conv
	current *conv
	last    *response
	// prev is the answer before last, as request keeps it.
	prev *response
	// msgSeq numbers the message ids the kit chooses; saved are values a step kept by name
	// for a later one (a cursor, an error id, a token).
	msgSeq int
	saved  map[string]string

	// turns counts the turns the kit has had answered; turnNo is the last turn the kit sent,
	// turnText what the kit sent as each turn.
	turns    int
	turnNo   int64
	turnText map[int64]string
	closers  []io.Closer

	// acked are the messages the system acknowledged (202) with a message id, oldest first.
	acked []ackedMsg

	// areas are the step areas, each with the state its steps keep.
	areas areas

	mu       sync.Mutex
	streams  []*stream
	asyncErr error
	named    map[string]*stream
}

func randomKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func (s *scenario) setup() error {
	dir, err := os.MkdirTemp(s.run.Tmp, "scenario-*")
	if err != nil {
		return harnessErr("scenario directory: %v", err)
	}
	s.dir = dir
	s.convs, s.saved, s.named = map[string]*conv{}, map[string]string{}, map[string]*stream{}
	s.turnText = map[int64]string{}
	s.contract = s.run.Contract
	s.transport = &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 10 * time.Second}
	s.streamTr = &http.Transport{DisableKeepAlives: true}
	s.answers = &answerLog{}
	s.cl = sutclient.New(sutclient.Config{URL: s.sutURL, Token: s.token, Contract: s.contract, Context: s.ctx,
		HTTP:            &http.Client{Timeout: 30 * time.Second, Transport: recordingTransport{s.transport, s.answers}},
		StreamTransport: recordingTransport{s.streamTr, s.answers},
		JudgesContract:  s.judgesContract, AsyncFailure: s.asyncFailure, Opened: s.addStream})
	if s.run.RemoteCfg != nil {
		s.run.mu.Lock()
		s.run.scenarios++
		s.nonce = fmt.Sprintf("%s%d", s.run.ID, s.run.scenarios)
		s.run.mu.Unlock()
	}
	if s.run.SharedWorld != nil {
		s.world = s.run.SharedWorld
		s.world.Reset()
	} else {
		s.world = world.New(world.Options{})
		if _, err := s.world.Start(""); err != nil {
			return harnessErr("start the world: %v", err)
		}
	}
	for name := range principals {
		p, _ := s.principal(name)
		if err := s.world.Identity().Add(tokenOf(name)+s.ownPeople(), p); err != nil {
			return harnessErr("register %s: %v", name, err)
		}
	}
	if s.run.RemoteCfg != nil {
		s.cfg = *s.run.RemoteCfg
	} else {
		s.cfg = baseConfig(s.world, sutconfig.SUTConfig{DataDir: dir + "/data", Signing: sutconfig.SigningConfig{Key: randomKey()}})
	}
	if err := s.ownDatabase(&s.cfg); err != nil {
		return err
	}
	s.drv = s.newDriver(dir)
	return nil
}

// own is an id or a key the scenario chooses (a conversation's, a run's, an Idempotency-Key),
// made the scenario's own. A system the kit starts for the scenario alone holds nothing else, so
// there it is id as written. A remote target serves every scenario of every run, so there it
// is id, "-" and the scenario's nonce (the run's random id, then the scenario's number): no
// other scenario, of this run or of another against the same system, chooses the same. The
// suffix is letters and digits after a "-", so a well-formed id stays well-formed and a
// malformed one stays malformed; an empty id (none chosen) stays empty. An id whose length is
// what a scenario tests (near the bounds of a run id, 96, and of a conversation id, 128: longer
// than ownKeepsLength once suffixed) keeps its length instead: the suffix takes the place of its
// last bytes, when those are letters, digits, '.', '_' or '-' (else it is appended as above).
func (s *scenario) own(id string) string {
	if id == "" || s.nonce == "" {
		return id
	}
	suffix := "-" + s.nonce
	if n := len(id) - len(suffix); len(id)+len(suffix) > ownKeepsLength && n > 0 && idTail(id[n:]) {
		return id[:n] + suffix
	}
	return id + suffix
}

// ownKeepsLength: own keeps the length of an id that would be longer than this once suffixed.
const ownKeepsLength = 96

// idTail reports whether b holds only bytes an id may hold after its first.
func idTail(b string) bool {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// principal is the principal a name of the scenario's steps stands for: principals[name], its
// actor followed by ownPeople.
func (s *scenario) principal(name string) (sutconfig.Principal, bool) {
	p, ok := principals[name]
	if ok {
		p.Actor += s.ownPeople()
	}
	return p, ok
}

// ownPeople is what makes the kit's common people (alice, bob, ...) the scenario's own, appended
// to their actors and their tokens: on a shared target, in a threads scenario, "-" and the
// scenario's nonce, since a person has one conversation with each role, which would otherwise
// hold the turns and threads of every scenario before (and a system may keep what a token
// stood for a while, so the token changes with the actor). Elsewhere nothing.
func (s *scenario) ownPeople() string {
	if s.nonce == "" || s.profile != "threads" {
		return ""
	}
	return "-" + s.nonce
}

// newDriver is a driver of the run's kind that keeps its files (configuration, logs) in dir.
func (s *scenario) newDriver(dir string) driver {
	d := s.run.Kind.newDriver()
	switch d := d.(type) {
	case *process:
		d.dir = dir
	case *nodes:
		d.dir = dir
	}
	return d
}

// ownDatabase gives cfg a server database of its own when the run makes them
// (Options.Databases); the scenario drops it when it ends.
func (s *scenario) ownDatabase(cfg *sutconfig.SUTConfig) error {
	dbs := s.run.Databases
	if dbs == nil {
		return nil
	}
	name := s.run.databaseName()
	u, err := dbs.Create(s.ctx, name)
	if err != nil {
		return harnessErr("create the scenario's database %s: %v", name, err)
	}
	s.mu.Lock()
	s.databases = append(s.databases, name)
	s.mu.Unlock()
	cfg.Storage.URL = u
	return nil
}

func (s *scenario) addCloser(c io.Closer) {
	s.mu.Lock()
	s.closers = append(s.closers, c)
	s.mu.Unlock()
}

func (s *scenario) teardown() {
	s.mu.Lock()
	streams := s.streams
	closers := s.closers
	s.mu.Unlock()
	for _, c := range closers {
		_ = c.Close()
	}
	for _, st := range streams {
		st.Close()
	}
	if s.drv != nil && s.started {
		_ = s.drv.Stop()
	}
	if s.run.SharedWorld == nil && s.world != nil {
		s.world.Close()
	}
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
	for _, name := range s.databases {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = s.run.Databases.Drop(ctx, name)
		cancel()
	}
}

func (s *scenario) token(who string) (string, error) {
	if _, ok := principals[who]; !ok {
		if strings.HasPrefix(who, "tok-") {
			return who, nil
		}
		return "", harnessErr("unknown principal %q", who)
	}
	return tokenOf(who) + s.ownPeople(), nil
}

// configure changes the configuration before the SUT starts.
func (s *scenario) configure(f func(*sutconfig.SUTConfig)) error {
	if s.started {
		return harnessErr("the configuration must be set before the system starts (move this Given up)")
	}
	if !s.run.Kind.Configurable {
		return &HarnessError{Err: fmt.Errorf("%w: the target's configuration cannot be chosen", ErrNotApplicable)}
	}
	f(&s.cfg)
	return nil
}

// sut makes sure the SUT is running.
func (s *scenario) sut() error {
	if s.started {
		return s.startEr
	}
	s.started = true
	s.startEr = s.drv.Start(s.ctx, s.cfg)
	var se *StartError
	if errors.As(s.startEr, &se) {
		s.startEr = harnessErr("%w%s", se, logsOf(s.drv))
	}
	return s.startEr
}

func logsOf(d driver) string {
	if l := d.Logs(); l != "" {
		return "; it printed: " + tail(l, 600)
	}
	return ""
}

// sutURL is where the scenario's requests go: the system's address, or the address of the node
// they are sent to straight (via), while a step sets one.
func (s *scenario) sutURL() string {
	s.mu.Lock()
	via := s.via
	s.mu.Unlock()
	if via != "" {
		return via
	}
	return s.drv.URL()
}

func (s *scenario) addStream(st *stream) {
	s.mu.Lock()
	s.streams = append(s.streams, st)
	s.mu.Unlock()
}

// asyncFailure keeps a failure noticed off the step's path (an SSE event out of contract); the
// next step reports it.
func (s *scenario) asyncFailure(err error) {
	s.mu.Lock()
	if s.asyncErr == nil {
		s.asyncErr = err
	}
	s.mu.Unlock()
}

func (s *scenario) takeAsync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.asyncErr
	s.asyncErr = nil
	return err
}

// wait returns a context for one bounded wait: it ends after the step timeout. A step that
// fails after it ended reports that the kit's timeout ran out (Failure.Timeout).
func (s *scenario) wait() (context.Context, context.CancelFunc) {
	return context.WithDeadline(s.ctx, s.stepDeadline())
}

// stepDeadline is the instant one bounded wait of the current step gives up (a read deadline on
// a raw connection); it is remembered like wait's.
func (s *scenario) stepDeadline() time.Time {
	d := time.Now().Add(s.run.StepTimeout)
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return d
}

// stepBegins forgets the previous step's waits.
func (s *scenario) stepBegins() {
	s.mu.Lock()
	s.waits = s.waits[:0]
	s.mu.Unlock()
}

// markTimeout sets Failure.Timeout on err's failure when one of the step's waits ran out before
// the step ended: the failure is then told apart from a plain breach of a rule.
func (s *scenario) markTimeout(err error) {
	var f *Failure
	if !errors.As(err, &f) || f.Timeout > 0 {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.waits {
		if !now.Before(d) {
			f.Timeout = s.run.StepTimeout
			return
		}
	}
}

func (s *scenario) conv(name string) (*conv, error) {
	if name == "" {
		if s.current == nil {
			return nil, harnessErr("no conversation has been started in this scenario")
		}
		return s.current, nil
	}
	c, ok := s.convs[name]
	if !ok {
		return nil, harnessErr("unknown conversation %q", name)
	}
	return c, nil
}

func (s *scenario) nextMessageID() string {
	s.msgSeq++
	return fmt.Sprintf("m%d", s.msgSeq)
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// baseConfig is the configuration every scenario starts from: the world's endpoints, the
// standard tools, the service principal, short polls, no memory.
func baseConfig(w *world.World, base sutconfig.SUTConfig) sutconfig.SUTConfig {
	cfg := w.Config(base)
	cfg.Gateway.PollMs = 200
	cfg.Memory.URL = "" // a scenario turns memory on when it needs it
	svc := principals["the service"]
	cfg.Shared.ServicePrincipal = &svc
	cfg.Tools.Definitions = nil
	for _, name := range standardTools {
		cfg.Tools.Definitions = append(cfg.Tools.Definitions, sutconfig.ToolDef{Name: name, Description: "the " + name + " tool",
			Parameters: map[string]any{"type": "object"}})
	}
	return cfg
}

// RemoteConfig is the configuration a remote target must be started with to be judged by a run
// whose world is w: the configuration every scenario starts from, with a fresh signing key. Give
// the same document to the run (Options.RemoteConfig), so it knows the key and the settings.
//
//	cfg := harness.RemoteConfig(w, sutconfig.SUTConfig{Listen: "127.0.0.1:8080", DataDir: "loom-data"})
func RemoteConfig(w *world.World, base sutconfig.SUTConfig) sutconfig.SUTConfig {
	base.Signing = sutconfig.SigningConfig{Key: randomKey()}
	cfg := baseConfig(w, base)
	// One long-lived system serves every scenario of the run: limits meant for one scenario
	// would otherwise add up across all of them (a caller's posts; the stream tickets and held
	// streams of the kit's callers, which the scenarios before hold for up to a ticket's life).
	// The scenarios that judge these limits configure them, and so are not run remotely.
	cfg.Gateway.PostsPerMinute = 1_000_000
	cfg.Stream.PrincipalTickets = 4096
	cfg.Stream.ResidentBytes = 1 << 40
	cfg.Stream.PrincipalResidentBytes = 1 << 40
	return cfg
}

// Secrets lists the credentials the kit uses, for redaction in reports.
func Secrets() []string {
	out := make([]string, 0, len(principals))
	for name := range principals {
		out = append(out, tokenOf(name))
	}
	return out
}
