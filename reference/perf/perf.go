// Package perf measures the reference engine's performance figures as a user would meet them
// (the store's commits, turns over HTTP, opening a data directory, a restart, live deltas, memory,
// and on PostgreSQL the commits, turns, takeover and idle cost of nodes), each beside a baseline
// that does the same work without the engine (raw SQLite, a bare net/http server, a bare binary,
// a bare SSE echo) in the same process. Baseline and figure runs alternate, round after round, so
// that the noise of a busy machine hits both; each row reports the median of both over the rounds
// and the ratio of each round's pair as min / median / max. Nothing here asserts a duration: a
// goal is printed beside the figure and marked met or not, never failed.
//
// It measures the engine through its public APIs only (reference.Open and OpenNode over
// loopback HTTP, the store backends' Open), so its numbers follow whatever those packages do.
// `loomcheck bench` is the command over it.
//
//	res, err := perf.Run(ctx, perf.Config{Figures: []string{"store-append"}, Rounds: 5, Log: os.Stderr})
//	if err != nil { return err }
//	res.Markdown(os.Stdout)
package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// DefaultRounds is Config.Rounds' default.
const DefaultRounds = 5

// Config says which figures to measure and how. The zero value measures every figure but those
// on PostgreSQL, DefaultRounds times, at full size.
//
//	cfg := perf.Config{Figures: []string{"turns"}, Rounds: 3, Postgres: os.Getenv("PGHOST") != ""}
type Config struct {
	// Figures names the figures to measure (Figures() lists them); empty means all.
	Figures []string
	// Rounds is how many times each baseline and figure run alternate (default DefaultRounds).
	Rounds int
	// Quick uses small sizes (a few commits, turns and conversations per run) so that a whole
	// run takes seconds: for tests and smoke runs. Its numbers are not the figures.
	Quick bool
	// Postgres enables the figures that need a PostgreSQL server: the one the standard PG*
	// environment variables name (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE), whose role
	// may create databases. Each such figure runs on databases of its own, dropped after it.
	// Without it those figures are skipped with a note.
	Postgres bool
	// Module is the directory of the loomcheck module, which the restart figure builds
	// `loomcheck` from (default: the module of the working directory, found with `go env GOMOD`).
	Module string
	// TempDir is where data directories, databases files and binaries go (default os.TempDir()).
	TempDir string
	// Log receives one progress line per run and the engine's warnings (default: discarded).
	Log io.Writer
}

// Figure is one measured figure: a few rows of the table.
//
//	for _, f := range perf.Figures() { fmt.Printf("%s: %s\n", f.Name, f.About) }
type Figure struct {
	// Name is what Config.Figures and `loomcheck bench --figures` call it.
	Name string
	// About says what it measures, beside what.
	About string
	// Postgres: the figure needs a PostgreSQL server (Config.Postgres).
	Postgres bool

	run func(e *env) ([]Row, error)
}

// Figures lists every figure, in the table's order.
//
//	for _, f := range perf.Figures() { fmt.Println(f.Name, f.About) }
func Figures() []Figure {
	return []Figure{
		{Name: "store-append", About: "single-event Update commits/s of the SQLite store beside raw autocommit INSERTs with the same pragmas, synchronous FULL and NORMAL", run: storeAppend},
		{Name: "store-concurrency", About: "events/s of 8 and 64 concurrent appenders (a stream each, one event per Update) over one appender", run: storeConcurrency},
		{Name: "turns", About: "engine turns/s with the built-in model over loopback HTTP at 1, 8 and 32 conversations beside a bare net/http server doing the same round trip, and the per-turn overhead", run: turns},
		{Name: "turns-durable", About: "the median turn at one conversation beside a bare server that makes the 3 durable commits a turn requires (raw SQLite INSERTs, synchronous FULL and NORMAL), and the engine's own overhead beyond them", run: durableTurns},
		{Name: "turn-bytes", About: "the bytes of the rows one turn stores beside what the turn means, and the bytes it writes to storage beside a bare server making the 3 durable commits of a turn", run: turnBytes},
		{Name: "open-1000", About: "Open to the first answered turn on a data directory holding 1000 open conversations beside an empty one", run: open1000},
		{Name: "open-10000", About: "ready, and the first answered turn, on a data directory holding 10 000 open conversations beside one holding 1, in-process (also with the store checked whole at Open) and as a `loom` process after a SIGKILL", run: open10000},
		{Name: "restart", About: "exec to ready of a `loomcheck serve` process, and of `loom` when the module has cmd/loom, beside a bare Go HTTP binary", run: restart},
		{Name: "delta-sse", About: "model delta to SSE client latency p50 and p99 through the engine beside a bare SSE echo", run: deltaSSE},
		{Name: "stream-emit", About: "session frame append to WebSocket client p50 and p99, idle and beside a job syncing the disk, beside a bare WebSocket server sending the same bytes", run: streamEmit},
		{Name: "fanout", About: "a session frame to each of 100 viewers of a shared conversation over WebSocket, p50 and p99, and the CPU time per frame per viewer, beside a bare broadcaster writing the same bytes to as many connections", run: fanout},
		{Name: "stream-resume", About: "kill of an in-process engine to the first frame a resuming WebSocket client receives, beside a bare WebSocket server killed and started again; and of a loom process, beside the in-process engine", run: streamResume},
		{Name: "memory", About: "heap and goroutines per open SSE stream (beside a bare SSE server) and per open conversation at rest", run: memory},
		{Name: "pg-store", About: "single-event commits/s and 8 appenders' events/s of the PostgreSQL store beside the SQLite store", Postgres: true, run: pgStore},
		{Name: "pg-turns", About: "engine turns/s on PostgreSQL beside SQLite at 1 and 8 conversations", Postgres: true, run: pgTurns},
		{Name: "pg-turn-cost", About: "what one answered turn costs the database at one conversation: transactions beside the three commits the rules require, rows written and write-ahead log bytes", Postgres: true, run: pgTurnCost},
		{Name: "pg-takeover", About: "kill of the holder node to the first answer of the follower, lease 1 s and 2 s", Postgres: true, run: pgTakeover},
		{Name: "nodes-scale", About: "turns/s at 32 conversations with 1, 2 and 3 `loom` node processes on one database at P = 12, each held to a CPU budget, beside one node; each node's share of the turns and CPU per turn; the share of requests forwarded, sent to the owner and to the nodes in turn", Postgres: true, run: nodesScale},
		{Name: "pg-partition-takeover", About: "two `loom` node processes at P = 12, one SIGKILLed under retrying clients: kill to the survivor's first answer for each partition the dead node held (p50, max) beside the lease; the survivor's own partitions' worst answer time meanwhile beside before; turns lost and duplicated", Postgres: true, run: pgPartitionTakeover},
		{Name: "pg-node", About: "what a node costs at rest: heap and goroutines (beside an engine on SQLite), database connections and transactions/s while idle", Postgres: true, run: pgNode},
	}
}

// Row is one line of the table: a measured value per round beside its baseline's value in the
// same round. Measured[i] and Baseline[i] were measured one right after the other.
//
//	for _, row := range res.Rows { fmt.Println(row.Measure, perf.Median(row.Measured), row.Ratio().Median) }
type Row struct {
	// Figure is the name of the figure the row belongs to.
	Figure string `json:"figure"`
	// Measure says what the row measures ("commits/s, synchronous FULL").
	Measure string `json:"measure"`
	// Unit is the unit of Measured and Baseline ("commits/s", "ms", "bytes").
	Unit string `json:"unit"`
	// Measured holds the engine's value in each round.
	Measured []float64 `json:"measured"`
	// BaselineName says what the baseline is ("raw SQLite INSERTs"); empty when the row has none.
	BaselineName string `json:"baselineName,omitempty"`
	// Baseline holds the baseline's value in each round, in Unit; empty when the row has none.
	Baseline []float64 `json:"baseline,omitempty"`
	// Goal is what the figure should reach.
	Goal Goal `json:"goal,omitzero"`
	// Note says what a reader should know to read the row.
	Note string `json:"note,omitempty"`
}

// Goal is a figure's target: a text, and optionally a bound on the median of the ratio or of
// the measured value, which the table marks met or not (it never fails a run).
//
//	perf.Goal{Text: ">= 0.8x", Of: "ratio", Bound: 0.8}
//	perf.Goal{Text: "<= 200 ms", Of: "measured", AtMost: true, Bound: 200}
type Goal struct {
	// Text is the goal as written in the table (">= 0.8x").
	Text string `json:"text"`
	// Of is "ratio" or "measured": what Bound bounds; empty when the goal is not checked.
	Of string `json:"of,omitempty"`
	// AtMost: the median must be <= Bound; otherwise >= Bound.
	AtMost bool    `json:"atMost,omitempty"`
	Bound  float64 `json:"bound,omitempty"`
}

// Met reports whether r's median meets its goal; ok is false when the goal is not checked or
// the row has no such median.
//
//	met, ok := row.Met()
func (r Row) Met() (met, ok bool) {
	var v float64
	switch r.Goal.Of {
	case "ratio":
		if len(r.Baseline) == 0 {
			return false, false
		}
		v = r.Ratio().Median
	case "measured":
		v = Median(r.Measured)
	default:
		return false, false
	}
	if math.IsNaN(v) {
		return false, false
	}
	if r.Goal.AtMost {
		return v <= r.Goal.Bound, true
	}
	return v >= r.Goal.Bound, true
}

// Ratio is the spread over the rounds of measured / baseline (NaNs when the row has no
// baseline).
//
//	fmt.Printf("%.2fx", row.Ratio().Median)
func (r Row) Ratio() Summary { return Summarize(Ratios(r.Measured, r.Baseline)) }

// Skip is a figure that was not measured, and why.
//
//	for _, s := range res.Skipped { fmt.Println(s.Figure, s.Reason) }
type Skip struct {
	Figure string `json:"figure"`
	Reason string `json:"reason"`
}

// Result is what a run measured.
//
//	res, _ := perf.Run(ctx, cfg)
//	_ = res.Markdown(os.Stdout)
type Result struct {
	// Rounds and Quick are the run's settings.
	Rounds int  `json:"rounds"`
	Quick  bool `json:"quick"`
	// Machine names the machine: the Go version, the operating system, the architecture and
	// the number of CPUs.
	Machine string `json:"machine"`
	// Started is when the run began; Took how long it took.
	Started time.Time     `json:"started"`
	Took    time.Duration `json:"tookNs"`
	Rows    []Row         `json:"rows"`
	Skipped []Skip        `json:"skipped,omitempty"`
}

// Run measures the figures cfg names, one after the other, and returns their rows. A figure
// that needs PostgreSQL is skipped with a note when cfg.Postgres is false; one that cannot run
// here (no Go toolchain for the restart figure) is skipped with the reason. ctx ending stops the
// run.
//
// Errors: a name that is no figure (before anything is measured); the first figure that failed
// (the engine refused a request, a turn failed, a server did not start), with the rows measured
// before it in the Result.
//
//	res, err := perf.Run(ctx, perf.Config{Quick: true, Rounds: 2})
func Run(ctx context.Context, cfg Config) (*Result, error) {
	all := Figures()
	chosen := all
	if len(cfg.Figures) > 0 {
		chosen = nil
		for _, name := range cfg.Figures {
			i := slices.IndexFunc(all, func(f Figure) bool { return f.Name == name })
			if i < 0 {
				return nil, fmt.Errorf("perf: no figure %q (figures: %s)", name, strings.Join(Names(), ", "))
			}
			if !slices.ContainsFunc(chosen, func(f Figure) bool { return f.Name == name }) {
				chosen = append(chosen, all[i])
			}
		}
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = DefaultRounds
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	res := &Result{Rounds: cfg.Rounds, Quick: cfg.Quick, Started: time.Now(),
		Machine: fmt.Sprintf("%s %s/%s, %d CPUs", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())}
	defer func() { res.Took = time.Since(res.Started) }()
	for _, f := range chosen {
		if f.Postgres && !cfg.Postgres {
			res.Skipped = append(res.Skipped, Skip{f.Name, "needs PostgreSQL: PGHOST is unset"})
			continue
		}
		dir, err := os.MkdirTemp(cfg.TempDir, "loombench-"+f.Name+"-")
		if err != nil {
			return res, fmt.Errorf("perf: %w", err)
		}
		e := &env{ctx: ctx, cfg: cfg, dir: dir, fig: f.Name}
		fmt.Fprintf(cfg.Log, "%s: %s\n", f.Name, f.About)
		rows, err := f.run(e)
		e.cleanup()
		removeAll(dir, cfg.Log)
		var sk *skipError
		switch {
		case errors.As(err, &sk):
			res.Skipped = append(res.Skipped, Skip{f.Name, sk.reason})
			continue
		case err != nil:
			return res, fmt.Errorf("perf: %s: %w", f.Name, err)
		}
		for i := range rows {
			rows[i].Figure = f.Name
		}
		res.Rows = append(res.Rows, rows...)
	}
	return res, nil
}

// Names lists the figures' names.
//
//	strings.Join(perf.Names(), ",")
func Names() []string {
	var out []string
	for _, f := range Figures() {
		out = append(out, f.Name)
	}
	return out
}

// env is what a figure runs with.
type env struct {
	ctx context.Context
	cfg Config
	dir string // the figure's own temporary directory, removed after it
	fig string
	// cleanups run after the figure, newest first (databases to drop).
	cleanups []func()
}

// cleanup runs the cleanups, newest first.
func (e *env) cleanup() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
}

// rounds is the number of alternations.
func (e *env) rounds() int { return e.cfg.Rounds }

// size is full, or quick under Config.Quick.
func (e *env) size(full, quick int) int {
	if e.cfg.Quick {
		return quick
	}
	return full
}

// span is full, or quick under Config.Quick.
func (e *env) span(full, quick time.Duration) time.Duration {
	if e.cfg.Quick {
		return quick
	}
	return full
}

// logf writes one progress line.
func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.cfg.Log, "  %s: %s\n", e.fig, fmt.Sprintf(format, args...))
}

// skipError: the figure cannot run here.
type skipError struct{ reason string }

func (s *skipError) Error() string { return "skipped: " + s.reason }

// removeAll removes a figure's directory, trying again for a moment while files still appear in
// it (a store that is letting go of its files), and says so when it cannot.
func removeAll(dir string, log io.Writer) {
	var err error
	for range 20 {
		if err = os.RemoveAll(dir); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(log, "perf: could not remove %s: %v\n", dir, err)
}
