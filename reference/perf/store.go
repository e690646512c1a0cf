package perf

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// payload is about the size of a recorded decision in a conversation log (the store benchmarks'
// payload).
var payload = []byte(`{"id":"conv#o12:reply","value":{"rec":{"ord":24,"turn":12,"role":"assistant","status":"complete","text":"re: a reply of a few dozen characters"}}}`)

// storeAppend: single-event Update commits/s of the SQLite store beside raw autocommit INSERTs
// of the same payload into a table of the same shape with the same pragmas, for synchronous FULL
// and NORMAL. Every run has two new database files in the same directory, the store's and the
// baseline's, which take turns of appendBatch commits (appendAlternating), so that a slow moment
// of the disk or of the machine falls on both alike rather than on whichever ran then. The rate
// with the goal is that of each side's middle turns (the mean of the middle half of its turns by
// time, the quarter fastest and the quarter slowest left out): on a machine shared with other
// work a turn now and then waits for the processor or the disk many times longer than the others
// (the slowest twentieth of the turns can take half the time), and where those fall decides a
// ratio of sums more than either side's work does; a median alone jumps when a slow spell covers
// about half of a run. The rate over every turn, each side's checkpoints and waits included, is a
// row of its own.
func storeAppend(e *env) ([]Row, error) {
	modes := []struct {
		name   string
		normal bool
		n      int
	}{{"FULL", false, e.size(1000, 20)}, {"NORMAL", true, e.size(5000, 20)}}
	rows := make([]Row, 2*len(modes))
	for i, m := range modes {
		turns := fmt.Sprintf("%d commits each per run; the store and the baseline take turns of %d commits, who goes first changing every turn", m.n, appendBatch)
		mode := "WAL; each commit waits for the disk (the engine's default)"
		if m.normal {
			mode = "WAL, synchronous NORMAL (storage.sync \"normal\"): commits do not wait for the disk"
		}
		rows[i] = Row{Measure: "single-event Update commits/s, synchronous " + m.name, Unit: "commits/s",
			BaselineName: "raw SQLite autocommit INSERTs", Goal: Goal{Text: ">= 0.8x", Of: "ratio", Bound: 0.8},
			Note: mode + "; " + turns + "; the rate of each side's middle half of turns by time"}
		rows[len(modes)+i] = Row{Measure: "single-event Update commits/s over every turn, synchronous " + m.name, Unit: "commits/s",
			BaselineName: "raw SQLite autocommit INSERTs", Note: "the same runs: all the commits of each side over the time all its turns took"}
	}
	for r := range e.rounds() {
		for i, m := range modes {
			raw, st, err := appendAlternating(e, fmt.Sprintf("%d-%d", r, i), m.normal, m.n)
			if err != nil {
				return nil, err
			}
			rows[i].Baseline = append(rows[i].Baseline, perSecond(appendBatch, raw.middle))
			rows[i].Measured = append(rows[i].Measured, perSecond(appendBatch, st.middle))
			all := &rows[len(modes)+i]
			all.Baseline = append(all.Baseline, perSecond(m.n, raw.all))
			all.Measured = append(all.Measured, perSecond(m.n, st.all))
			e.logf("round %d, %s: middle turns raw %.0f/s, store %.0f/s; every turn raw %.0f/s, store %.0f/s", r+1, m.name,
				perSecond(appendBatch, raw.middle), perSecond(appendBatch, st.middle), perSecond(m.n, raw.all), perSecond(m.n, st.all))
		}
	}
	return rows, nil
}

// appendBatch is how many commits the store and the baseline of store-append make in a turn.
const appendBatch = 10

// turnTimes is how long one side's turns of appendAlternating took: the mean of the middle half
// of its turns by time (middleMean), and all of them.
type turnTimes struct{ middle, all time.Duration }

// appendAlternating makes n single-row commits on a new raw SQLite database (sqlite.Raw) and n
// single-event Updates (with the expected head, as a flow's log grows) on a new store, both
// files named after name in e's directory, in turns of appendBatch commits: the baseline first in
// one turn, the store first in the next. It returns how long each side's turns took. The middle
// turns are taken among the full turns (all of them when n < appendBatch).
func appendAlternating(e *env, name string, normal bool, n int) (raw, st turnTimes, err error) {
	r, err := sqlite.OpenRaw(e.ctx, filepath.Join(e.dir, "raw-"+name+".db"), normal)
	if err != nil {
		return raw, st, err
	}
	defer r.Close()
	s, err := sqlite.Open(e.ctx, filepath.Join(e.dir, "store-"+name+".db"), sqlite.Options{SyncNormal: normal})
	if err != nil {
		return raw, st, err
	}
	defer s.Close()
	var head int64
	sides := [2]func(k int) error{
		func(k int) error {
			for range k {
				if err := r.Insert(e.ctx, payload); err != nil {
					return err
				}
			}
			return nil
		},
		func(k int) error {
			for range k {
				if err := s.Update(e.ctx, func(tx store.Tx) error {
					h, err := tx.Append("x/append/0", 0, head, store.NewEvent{Kind: "decision", Data: payload})
					head = h
					return err
				}); err != nil {
					return err
				}
			}
			return nil
		},
	}
	var took [2][]float64 // each side's turns, in seconds
	var all [2]time.Duration
	for done, turn := 0, 0; done < n; done, turn = done+appendBatch, turn+1 {
		k := min(appendBatch, n-done)
		for j := range 2 {
			side := (turn + j) % 2 // 0, the baseline, goes first in even turns
			start := time.Now()
			if err := sides[side](k); err != nil {
				return raw, st, err
			}
			d := time.Since(start)
			all[side] += d
			if k == appendBatch || n < appendBatch {
				took[side] = append(took[side], d.Seconds())
			}
		}
	}
	mid := func(side int) time.Duration { return time.Duration(middleMean(took[side]) * float64(time.Second)) }
	return turnTimes{mid(0), all[0]}, turnTimes{mid(1), all[1]}, nil
}

// middleMean is the mean of the middle half of vs (the interquartile mean): sorted, the first
// and the last len(vs)/4 left out. vs is not changed; an empty vs gives NaN.
//
//	middleMean([]float64{9, 1, 2, 3}) // 2.5: the mean of 2 and 3
func middleMean(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	s = s[len(s)/4 : len(s)-len(s)/4]
	if len(s) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, v := range s {
		sum += v
	}
	return sum / float64(len(s))
}

// storeConcurrency: events/s of 8 and of 64 concurrent appenders, each to its own stream with
// one event per Update, over the events/s of one appender, on the SQLite store (synchronous
// FULL). Every run has a new database file and appends the same number of events in all.
func storeConcurrency(e *env) ([]Row, error) {
	total := e.size(640, 64)
	levels := []int{8, 64}
	rows := make([]Row, len(levels))
	for i, k := range levels {
		rows[i] = Row{Measure: fmt.Sprintf("events/s, %d concurrent appenders", k), Unit: "events/s", BaselineName: "1 appender"}
	}
	rows[0].Note = fmt.Sprintf("%d events in all per run, one per Update, synchronous FULL", total)
	rows[0].Goal = Goal{Text: "grows with appenders"}
	rows[1].Goal = Goal{Text: ">= 4x", Of: "ratio", Bound: 4}
	for r := range e.rounds() {
		rate := func(k int) (float64, error) {
			st, err := sqlite.Open(e.ctx, filepath.Join(e.dir, fmt.Sprintf("conc-%d-%d.db", r, k)), sqlite.Options{})
			if err != nil {
				return 0, err
			}
			defer st.Close()
			took, err := appendRun(e.ctx, st, k, total, "x/conc")
			return perSecond(total, took), err
		}
		one, err := rate(1)
		if err != nil {
			return nil, err
		}
		line := fmt.Sprintf("round %d: 1 appender %.0f/s", r+1, one)
		for i, k := range levels {
			v, err := rate(k)
			if err != nil {
				return nil, err
			}
			rows[i].Baseline = append(rows[i].Baseline, one)
			rows[i].Measured = append(rows[i].Measured, v)
			line += fmt.Sprintf(", %d appenders %.0f/s", k, v)
		}
		e.logf("%s", line)
	}
	return rows, nil
}

// pgStore: the same harness on a PostgreSQL database beside the SQLite store: single-event
// commits/s of one appender, and events/s of 8 concurrent appenders; and the 8 appenders'
// events/s over the one appender's on PostgreSQL, how well the store commits writers together.
func pgStore(e *env) ([]Row, error) {
	n := e.size(500, 20)
	db, err := e.database()
	if err != nil {
		return nil, err
	}
	pg, err := postgres.Open(e.ctx, db.url, postgres.Options{})
	if err != nil {
		return nil, err
	}
	defer pg.Close()
	lite, err := sqlite.Open(e.ctx, filepath.Join(e.dir, "lite.db"), sqlite.Options{})
	if err != nil {
		return nil, err
	}
	defer lite.Close()
	act, err := postgres.DatabaseActivity(e.ctx, "", db.name)
	if err != nil {
		return nil, err
	}
	note := fmt.Sprintf("the server runs with fsync=%s, synchronous_commit=%s; SQLite with synchronous FULL", act.Fsync, act.SynchronousCommit)
	rows := []Row{
		{Measure: "single-event commits/s, PostgreSQL", Unit: "commits/s", BaselineName: "SQLite store", Note: note},
		{Measure: "events/s, 8 concurrent appenders, PostgreSQL", Unit: "events/s", BaselineName: "SQLite store"},
		{Measure: "events/s, 8 concurrent appenders over 1, PostgreSQL", Unit: "events/s", BaselineName: "1 appender, PostgreSQL",
			Goal: Goal{Text: ">= 4x", Of: "ratio", Bound: 4}, Note: "each appender to its own stream, one event per Update"},
	}
	for r := range e.rounds() {
		for i, k := range []int{1, 8} {
			prefix := fmt.Sprintf("x/pg-%d-%d", r, k)
			lt, err := appendRun(e.ctx, lite, k, n, prefix)
			if err != nil {
				return nil, err
			}
			pt, err := appendRun(e.ctx, pg, k, n, prefix)
			if err != nil {
				return nil, err
			}
			rows[i].Baseline = append(rows[i].Baseline, perSecond(n, lt))
			rows[i].Measured = append(rows[i].Measured, perSecond(n, pt))
			e.logf("round %d, %d appender(s): SQLite %.0f/s, PostgreSQL %.0f/s", r+1, k, perSecond(n, lt), perSecond(n, pt))
		}
		rows[2].Baseline = append(rows[2].Baseline, rows[0].Measured[len(rows[0].Measured)-1])
		rows[2].Measured = append(rows[2].Measured, rows[1].Measured[len(rows[1].Measured)-1])
	}
	return rows, nil
}

// appendRun appends total events to st from k concurrent appenders, appender i to the stream
// prefix/i, one event per Update with the expected head (as a flow's log grows), and returns how
// long they took from the first Update to the last commit.
func appendRun(ctx context.Context, st store.Store, k, total int, prefix string) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, k)
	start := time.Now()
	for i := range k {
		stream := fmt.Sprintf("%s/%d", prefix, i)
		wg.Go(func() {
			var head int64
			for next.Add(1) <= int64(total) {
				if err := st.Update(ctx, func(tx store.Tx) error {
					h, err := tx.Append(stream, 0, head, store.NewEvent{Kind: "decision", Data: payload})
					head = h
					return err
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return took, nil
}

// database is a new PostgreSQL database of the figure's, dropped when it ends.
type database struct{ name, url string }

// database creates a new, empty database on the server of the PG* variables; it is dropped
// when the figure ends (e.drop).
func (e *env) database() (database, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("loombench_%d_%s", os.Getpid(), hex.EncodeToString(rnd[:]))
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	url, err := postgres.CreateDatabase(ctx, "", name)
	if err != nil {
		return database{}, err
	}
	e.cleanups = append(e.cleanups, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), time.Minute)
		defer cancel()
		if err := postgres.DropDatabase(ctx, "", name); err != nil {
			e.logf("%v", err)
		}
	})
	return database{name, url}, nil
}
