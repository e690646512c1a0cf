// Package explore is the kit's crash exploration. For each canonical dialogue (plain turns,
// barge-in, rotation with a pending message, a turn that calls a tool, a rolling-summary fold, a
// message steered to a session while a turn runs, a shared-mode dialogue and an envelope flood
// through the runtime door) it runs the system under test once uncrashed, counting its durable
// writes and recording the outcome, then once per chosen write N with a crash right
// after write N and a restart on the same data directory, while the clients retry what was not
// acknowledged (with the same message id). Each crashed run is judged against the uncrashed one:
//
//   - every acknowledged turn is in the history exactly once and answered exactly once;
//   - the whole history, as each viewer reads it, and the status equal the uncrashed run's,
//     record by record, ignoring only times and minted ids (time, errorId, turnExecutionId);
//   - after the restart the model is never asked for a turn whose reply was already recorded
//     (the world's model request log, with model requests held until the restarted instance's
//     history has been read; a request held during that read counts against a complete reply
//     only, since the instance may record an interrupted or failed reply itself, with no answer,
//     after sending it), and every model request is one the uncrashed run made too;
//   - no tool call is redone after a restart that found no turn in flight, and every tool call
//     (tool, arguments, idempotency key) is one the uncrashed run made;
//   - the restarted instance reports no error (a replay divergence among them) that the
//     uncrashed run did not.
//
// The system is driven over HTTP with the kit's world (harness/world); the crash is the
// instance's own hook, reached through harness.WriteCrasher. Nothing here computes an expected
// value from an implementation: the uncrashed run is the reference.
//
//	rep, err := explore.Run(ctx, explore.Options{Factory: factory})
//	if err != nil { return err } // a harness error
//	if rep.Findings > 0 { /* the system lost, duplicated or diverged */ }
package explore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/world"
)

// DefaultWait bounds each step of a dialogue (a POST, a wait for a reply).
const DefaultWait = 10 * time.Second

// ErrUsage marks options that make no sense (an unknown dialogue name, a negative bound).
var ErrUsage = errors.New("explore: usage")

// Options configure Run.
//
// Factory opens an instance of the system under test (called again, with the same data directory,
// to restart it); its instances must implement harness.WriteCrasher. Dialogues names the dialogues
// to explore (all when empty; see DialogueNames). Every explores every K-th crash point only (1,
// 1+K, ...; the last one always); MaxPoints caps the points per dialogue, spread evenly over its
// writes (0: no cap). Wait bounds each step (DefaultWait when zero). Progress, when set, gets a line
// per dialogue and per finding. Dir is where scratch data directories go (the system's temporary
// directory when empty).
//
//	opt := explore.Options{Factory: f, MaxPoints: 20}
type Options struct {
	Factory   harness.Factory
	Dialogues []string
	Every     int
	MaxPoints int
	Wait      time.Duration
	Progress  io.Writer
	Dir       string
	// CompareLog also compares the conversation's raw execution log (runtime door), event kind by
	// event kind and position by position, with the uncrashed run's: a replay that took another
	// branch shows there even when the transcript does not. It is stricter than the records (an
	// implementation may write recovery events of its own), so it is off unless asked; the
	// reference engine's log is deterministic and `loomcheck explore` turns it on.
	CompareLog bool
	// Points, when set, are the crash points to explore in every chosen dialogue, instead of
	// those Every and MaxPoints choose (points past a dialogue's writes are left out): to
	// reproduce a finding.
	Points []int64
	// Then, when positive, crashes the restarted instance too, right after its Then-th durable
	// write (its recovery's, or a retry's): a crash during recovery. It restarts once more.
	Then int64
}

// Finding is one thing a crashed run got wrong: which dialogue, after a crash at which write, which
// record (1-based; for a log finding, which event; 0 when the finding is not about one), and what
// was wanted and got.
type Finding struct {
	Dialogue string `json:"dialogue"`
	// Point is the write the crash followed; 0 is the uncrashed run.
	Point int64 `json:"point"`
	// Kind is lost, duplicated, reasked, history, status, request, tool, log, error or stuck.
	Kind   string `json:"kind"`
	Viewer string `json:"viewer,omitempty"`
	Record int    `json:"record,omitempty"`
	What   string `json:"what"`
	Want   string `json:"want"`
	Got    string `json:"got"`
}

func (f Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, crash after write %d: %s", f.Dialogue, f.Point, f.What)
	if f.Record > 0 {
		unit := "record"
		if f.Kind == "log" {
			unit = "event"
		}
		fmt.Fprintf(&b, " (%s %d", unit, f.Record)
		if f.Viewer != "" {
			fmt.Fprintf(&b, " as %s sees it", f.Viewer)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": got %s, want %s", f.Got, f.Want)
	return b.String()
}

// DialogueResult is what the exploration of one dialogue found.
type DialogueResult struct {
	Name  string `json:"name"`
	About string `json:"about"`
	// Writes is the number of durable writes of the uncrashed run.
	Writes int64 `json:"writes"`
	// Points are the crash points explored; Fired counts those the run reached (a point can be
	// past the end of a crashed run that wrote less).
	Points []int64 `json:"points"`
	Fired  int     `json:"fired"`
	// Unreached are the points whose crashed run ended before it made that many writes (the
	// system's writes past a dialogue's last answer, such as a stream's frames, may come in fewer
	// writes under load).
	Unreached []int64 `json:"unreached,omitempty"`
	// FiredTwice counts the runs whose restarted instance crashed too (Options.Then).
	FiredTwice  int       `json:"firedTwice,omitempty"`
	Lost        int       `json:"lost"`
	Duplicated  int       `json:"duplicated"`
	Divergences int       `json:"divergences"`
	Findings    []Finding `json:"findings"`
	Millis      int64     `json:"millis"`
}

// Report is the whole exploration.
type Report struct {
	Started   time.Time `json:"started"`
	Millis    int64     `json:"millis"`
	Every     int       `json:"every"`
	MaxPoints int       `json:"maxPoints"`
	// Then is Options.Then: the write of the restarted instance a second crash follows (0: none).
	Then      int64            `json:"then,omitempty"`
	Dialogues []DialogueResult `json:"dialogues"`
	// Findings counts every finding of every dialogue.
	Findings int `json:"findings"`
}

// outcome is what one run left: the histories per viewer, the status, the world's logs.
type outcome struct {
	writes   int64
	fired    bool
	hist     map[string][]entry
	status   entry
	acks     []ack
	recorded map[int]map[string][]entry
	requests []world.ModelRequest
	tools    []world.Invocation
	calls    []toolCall
	hooks    []hookReport
	epochs   int
	stuck    *Finding
	log      []string
}

// Run explores the dialogues of opt. It returns a harness error (matching harness.ErrHarness) when
// the kit itself failed or the instance offers no crash hook, and an error matching ErrUsage for
// bad options; what the system got wrong is in the report's findings, not in the error. It stops
// early when ctx ends, returning ctx's error.
//
//	rep, err := explore.Run(ctx, explore.Options{Factory: f, Dialogues: []string{"plain"}})
func Run(ctx context.Context, opt Options) (*Report, error) {
	if opt.Factory == nil {
		return nil, fmt.Errorf("%w: a factory is required", ErrUsage)
	}
	if opt.Every < 0 || opt.MaxPoints < 0 {
		return nil, fmt.Errorf("%w: --every and --max-points must not be negative", ErrUsage)
	}
	if opt.Every == 0 {
		opt.Every = 1
	}
	if opt.Wait <= 0 {
		opt.Wait = DefaultWait
	}
	all := dialogues()
	chosen := all
	if len(opt.Dialogues) > 0 {
		chosen = nil
		for _, name := range opt.Dialogues {
			i := slices.IndexFunc(all, func(d *dialogue) bool { return d.name == name })
			if i < 0 {
				return nil, fmt.Errorf("%w: no dialogue %q (there are %s)", ErrUsage, name, strings.Join(DialogueNames(), ", "))
			}
			chosen = append(chosen, all[i])
		}
	}
	for _, p := range opt.Points {
		if p < 1 {
			return nil, fmt.Errorf("%w: a crash point is a write number, 1 or more (got %d)", ErrUsage, p)
		}
	}
	if opt.Then < 0 {
		return nil, fmt.Errorf("%w: --then must not be negative", ErrUsage)
	}
	rep := &Report{Started: time.Now().UTC(), Every: opt.Every, MaxPoints: opt.MaxPoints, Then: opt.Then}
	for _, d := range chosen {
		res, err := exploreDialogue(ctx, &opt, d)
		if err != nil {
			return rep, err
		}
		rep.Dialogues = append(rep.Dialogues, *res)
		rep.Findings += len(res.Findings)
	}
	rep.Millis = time.Since(rep.Started).Milliseconds()
	return rep, nil
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

func exploreDialogue(ctx context.Context, opt *Options, d *dialogue) (*DialogueResult, error) {
	began := time.Now()
	res := &DialogueResult{Name: d.name, About: d.about, Findings: []Finding{}, Points: []int64{}}
	base, err := runOnce(ctx, opt, d, 0)
	if err != nil {
		return nil, err
	}
	if base.stuck != nil {
		// The uncrashed run itself did not complete: there is nothing to compare with.
		res.Findings = append(res.Findings, *base.stuck)
		res.Divergences++
		res.Millis = time.Since(began).Milliseconds()
		opt.progress("%s: the uncrashed run did not complete: %s", d.name, base.stuck)
		return res, nil
	}
	if fs := exactlyOnce(d, 0, base); len(fs) > 0 {
		// The uncrashed run already lost or doubled a message: nothing to compare with.
		res.Findings = append(res.Findings, fs...)
		res.Divergences += len(fs)
		res.Millis = time.Since(began).Milliseconds()
		for _, f := range fs {
			opt.progress("  FINDING %s", f)
		}
		return res, nil
	}
	res.Writes = base.writes
	res.Points = choosePoints(base.writes, opt.Every, opt.MaxPoints)
	if len(opt.Points) > 0 {
		res.Points = []int64{}
		for _, p := range opt.Points {
			if p >= 1 && p <= base.writes {
				res.Points = append(res.Points, p)
			}
		}
	}
	opt.progress("%s: %d durable writes uncrashed; exploring %d crash points", d.name, base.writes, len(res.Points))
	for _, n := range res.Points {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		o, err := runOnce(ctx, opt, d, n)
		if err != nil {
			return nil, err
		}
		if o.fired {
			res.Fired++
		} else {
			res.Unreached = append(res.Unreached, n)
		}
		if o.epochs > 2 {
			res.FiredTwice++
		}
		for _, f := range judge(d, n, base, o) {
			res.Findings = append(res.Findings, f)
			switch f.Kind {
			case "lost":
				res.Lost++
			case "duplicated", "reasked":
				res.Duplicated++
			default:
				res.Divergences++
			}
			opt.progress("  FINDING %s", f)
		}
	}
	res.Millis = time.Since(began).Milliseconds()
	twice := ""
	if opt.Then > 0 {
		twice = fmt.Sprintf(", %d crashed again after restart write %d", res.FiredTwice, opt.Then)
	}
	opt.progress("%s: %d points explored (%d reached%s), %d lost, %d duplicated, %d divergences, %.1fs",
		d.name, len(res.Points), res.Fired, twice, res.Lost, res.Duplicated, res.Divergences, float64(res.Millis)/1000)
	return res, nil
}

// choosePoints is 1..writes, every every-th (the last always), capped at max spread evenly.
func choosePoints(writes int64, every, max int) []int64 {
	var pts []int64
	for n := int64(1); n <= writes; n += int64(every) {
		pts = append(pts, n)
	}
	if len(pts) > 0 && pts[len(pts)-1] != writes {
		pts = append(pts, writes)
	}
	if max > 0 && len(pts) > max {
		picked := make([]int64, 0, max)
		for i := range max {
			idx := 0
			if max > 1 {
				idx = i * (len(pts) - 1) / (max - 1)
			}
			if len(picked) == 0 || picked[len(picked)-1] != pts[idx] {
				picked = append(picked, pts[idx])
			}
		}
		pts = picked
	}
	if pts == nil {
		pts = []int64{}
	}
	return pts
}

// runOnce runs dialogue d, crashing right after write point (0: never) and restarting once.
func runOnce(ctx context.Context, opt *Options, d *dialogue, point int64) (*outcome, error) {
	s, err := newSession(ctx, opt, d)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if d.prepare != nil {
		if err := d.prepare(s); err != nil {
			return nil, fmt.Errorf("%w: script the world for %s: %v", harness.ErrHarness, d.name, err)
		}
	}
	if err := s.open(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", harness.ErrHarness, d.name, err)
	}
	wc, err := s.writeCrasher()
	if err != nil {
		return nil, err
	}
	from := wc.DurableWrites()
	if point > 0 {
		s.arm(wc, point)
	}
	o := &outcome{}
	if what, err := runSteps(s, d, point, o); err != nil {
		return stuck(s, d, point, o, what, err), nil
	}
	if what, err := readFinal(s, o); err != nil {
		return stuck(s, d, point, o, what, err), nil
	}
	if point == 0 {
		o.writes = wc.DurableWrites() - from
	}
	o.acks = s.acks
	o.recorded = s.recorded
	o.requests = s.w.Model().Requests()
	o.tools = s.w.Tools().Calls()
	o.calls = s.fr.toolCalls()
	o.hooks = s.fr.reports()
	o.epochs = s.epoch + 1
	if point == 0 && d.exercised != nil {
		if err := d.exercised(s, o); err != nil {
			return nil, fmt.Errorf("%w: the uncrashed %s dialogue does not do what it is about (%s): %v", harness.ErrHarness, d.name, d.about, err)
		}
	}
	return o, nil
}

// stuck is the outcome of a run that could not go on: a finding saying what it was doing, and
// what the clients were told so far.
func stuck(s *session, d *dialogue, point int64, o *outcome, what string, err error) *outcome {
	o.stuck = &Finding{Dialogue: d.name, Point: point, Kind: "stuck", What: what,
		Want: "it completes", Got: err.Error() + " (" + strings.Join(lastN(s.events, 4), "; ") + ")"}
	// What the clients were told so far is still judged: a turn acknowledged and then never
	// answered is lost, whatever else went wrong.
	o.acks = s.acks
	if s.inst != nil && s.created && s.readOutcome(o) != nil {
		o.hist = nil
	}
	return o
}

// restartAfterCrash notes in o that the crash fired and restarts the system.
func restartAfterCrash(s *session, o *outcome) error {
	o.fired = true
	return s.restart()
}

// runSteps runs the dialogue's steps, restarting after the crash and running again the step it
// interrupted. On failure it returns what it was doing and the error.
func runSteps(s *session, d *dialogue, point int64, o *outcome) (string, error) {
	for i := 0; i < len(d.steps); {
		if fired(s.crashed) {
			if err := restartAfterCrash(s, o); err != nil {
				return "restart after the crash", err
			}
			continue
		}
		st := d.steps[i]
		err := s.runStep(st)
		if err != nil && fired(s.crashed) {
			continue // the crash interrupted the step: restart, then run it again
		}
		if err != nil {
			if point == 0 {
				return fmt.Sprintf("step %d (%s) of the uncrashed run", i+1, st.name), err
			}
			return fmt.Sprintf("step %d (%s), after the restart", i+1, st.name), err
		}
		i++
	}
	return "", nil
}

// readFinal reads the final history into o, restarting first when the crash fired, until a read
// completes with no crash. On failure it returns what it was doing and the error.
func readFinal(s *session, o *outcome) (string, error) {
	for {
		if fired(s.crashed) {
			if err := restartAfterCrash(s, o); err != nil {
				return "restart after the crash", err
			}
		}
		if err := s.readOutcome(o); err != nil {
			if fired(s.crashed) {
				continue
			}
			return "read the final history", err
		}
		if !fired(s.crashed) {
			return "", nil
		}
	}
}

// runStep runs one step, bounded by opt.Wait and cut short when the crash point fires.
func (s *session) runStep(st step) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.opt.Wait)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func(crashed <-chan struct{}) {
		select {
		case <-crashed:
			cancel()
		case <-done:
		}
	}(s.crashed)
	return st.run(ctx, s)
}

func (s *session) readOutcome(o *outcome) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.opt.Wait)
	defer cancel()
	o.hist = map[string][]entry{}
	for _, v := range s.d.viewers {
		h, err := s.history(ctx, v)
		if err != nil {
			return fmt.Errorf("%s's history: %w", v, err)
		}
		o.hist[v] = h
	}
	st, err := s.status(ctx, s.d.viewers[0])
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	o.status = st
	if s.opt.CompareLog {
		who := s.d.viewers[0]
		if s.d.logAs != "" {
			who = s.d.logAs
		}
		kinds, err := s.execLog(ctx, who)
		if err != nil {
			return fmt.Errorf("log: %w", err)
		}
		o.log = kinds
	}
	return nil
}

func fired(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func lastN(xs []string, n int) []string {
	if len(xs) > n {
		return xs[len(xs)-n:]
	}
	return xs
}

// WriteFiles writes report.json and summary.md into dir (created if missing).
//
//	err := rep.WriteFiles("reports/explore")
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.md"), []byte(r.Markdown()), 0o644)
}

// Markdown is the report as a short markdown page: a table of the dialogues, then every finding.
//
//	fmt.Print(rep.Markdown())
func (r *Report) Markdown() string {
	var b strings.Builder
	b.WriteString("# Crash exploration\n\n")
	fmt.Fprintf(&b, "Started %s, took %.1f s. Crash points: every %d", r.Started.Format(time.RFC3339), float64(r.Millis)/1000, r.Every)
	if r.MaxPoints > 0 {
		fmt.Fprintf(&b, ", at most %d per dialogue", r.MaxPoints)
	}
	if r.Then > 0 {
		fmt.Fprintf(&b, "; each restarted instance crashed again right after its write %d", r.Then)
	}
	b.WriteString(".\n\n| dialogue | durable writes | points explored | reached | lost | duplicated | divergences | time |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range r.Dialogues {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %.1f s |\n", d.Name, d.Writes, len(d.Points), d.Fired, d.Lost, d.Duplicated, d.Divergences, float64(d.Millis)/1000)
	}
	if r.Findings == 0 {
		b.WriteString("\nNo findings: every acknowledged turn answered exactly once, every history equal to the uncrashed run's.\n")
		return b.String()
	}
	fmt.Fprintf(&b, "\n## %d findings\n\n", r.Findings)
	for _, d := range r.Dialogues {
		for _, f := range d.Findings {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	return b.String()
}
