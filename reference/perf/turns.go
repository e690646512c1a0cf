package perf

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// turnLoad is what one run of concurrent conversations did.
type turnLoad struct {
	rate   float64         // turns answered per second
	median time.Duration   // the median time from a POST to its reply's arrival
	lat    []time.Duration // every turn's time
	// garbage is what the whole process allocated per turn while the turns were counted (client
	// side included), and collections the garbage collections it ran per 1 000 turns.
	garbage, collections float64
	// written is the bytes the process wrote to storage per turn while the turns were counted
	// (see storageWritten); writtenOK is false where that cannot be read.
	written   float64
	writtenOK bool
}

// runTurns starts k conversations on t, each with its event stream open and one turn answered
// (not counted), then has each send a turn, wait for its reply and send the next, until window
// has passed; it returns the turns answered per second, their times, and the process's garbage
// per turn over that window.
func runTurns(ctx context.Context, t *target, k int, window time.Duration) (turnLoad, error) {
	convs := make([]*conv, k)
	defer func() {
		for _, c := range convs {
			if c != nil {
				c.stop()
			}
		}
	}()
	for i := range convs {
		c, err := t.newConv(ctx, i)
		if err != nil {
			return turnLoad{}, err
		}
		convs[i] = c
		if err := c.listen(ctx); err != nil {
			return turnLoad{}, err
		}
	}
	if err := each(convs, func(c *conv) error { _, err := c.turn(ctx, "warm up"); return err }); err != nil {
		return turnLoad{}, err
	}
	lats := make([][]time.Duration, k)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	wrote0, ok0 := storageWritten()
	start := time.Now()
	err := each(convs, func(c *conv) error {
		i := c.user
		for time.Since(start) < window {
			d, err := c.turn(ctx, "hello")
			if err != nil {
				return err
			}
			lats[i] = append(lats[i], d)
		}
		return nil
	})
	took := time.Since(start)
	wrote1, ok1 := storageWritten()
	runtime.ReadMemStats(&after)
	if err != nil {
		return turnLoad{}, err
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	load := turnLoad{rate: perSecond(len(all), took), median: Percentile(all, 0.5), lat: all}
	load.garbage, load.collections = garbagePerTurn(&before, &after, len(all))
	load.written, load.writtenOK = writtenPerTurn(wrote0, ok0, wrote1, ok1, len(all))
	return load, nil
}

// each runs fn for every conversation at once and returns the first error.
func each(convs []*conv, fn func(*conv) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(convs))
	for _, c := range convs {
		wg.Go(func() {
			if err := fn(c); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// turns: engine turns/s with the built-in model, driven over loopback HTTP by k conversations
// at once (each posts a turn and waits for its reply on the conversation's event stream), beside
// a bare net/http server doing the same round trip; and the median time per turn at one
// conversation, engine minus bare.
func turns(e *env) ([]Row, error) {
	levels := []int{1, 8, 32}
	window := e.span(2*time.Second, 150*time.Millisecond)
	eng, _, err := e.openEngine(filepath.Join(e.dir, "data"), "", nil)
	if err != nil {
		return nil, err
	}
	defer eng.close()
	bareT, _, err := openBare()
	if err != nil {
		return nil, err
	}
	defer bareT.close()
	var rows []Row
	for _, k := range levels {
		rows = append(rows, Row{Measure: fmt.Sprintf("turns/s, %s", conversations(k)), Unit: "turns/s",
			BaselineName: "bare net/http"})
		if k > 1 {
			rows[len(rows)-1].Goal = Goal{Text: "more than at 1 conversation"}
		}
	}
	rows[0].Note = fmt.Sprintf("the built-in model; each conversation posts a turn and waits for its reply on its SSE stream, for %v per run", window)
	lat := Row{Measure: "median time per turn, 1 conversation", Unit: "ms", BaselineName: "bare net/http"}
	over := Row{Measure: "overhead per turn (median, engine minus bare), 1 conversation", Unit: "ms",
		Goal: Goal{Text: "<= 0.5 ms", Of: "measured", AtMost: true, Bound: 0.5}}
	garbage, collections := garbageRows("1 conversation", "bare net/http")
	for r := range e.rounds() {
		line := fmt.Sprintf("round %d:", r+1)
		for i, k := range levels {
			b, err := runTurns(e.ctx, bareT, k, window)
			if err != nil {
				return nil, fmt.Errorf("bare: %w", err)
			}
			m, err := runTurns(e.ctx, eng, k, window)
			if err != nil {
				return nil, err
			}
			rows[i].Baseline = append(rows[i].Baseline, b.rate)
			rows[i].Measured = append(rows[i].Measured, m.rate)
			if k == 1 {
				lat.Baseline = append(lat.Baseline, ms(b.median))
				lat.Measured = append(lat.Measured, ms(m.median))
				over.Measured = append(over.Measured, ms(m.median-b.median))
				addGarbage(&garbage, &collections, b, m)
			}
			line += fmt.Sprintf(" %d conv: bare %.0f/s, engine %.0f/s;", k, b.rate, m.rate)
		}
		e.logf("%s", line)
	}
	return append(rows, lat, over, garbage, collections), nil
}

// garbagePerTurn is the bytes allocated per turn between two readings of the runtime's
// statistics, and the collections per 1 000 turns; both 0 for no turns.
func garbagePerTurn(before, after *runtime.MemStats, turns int) (garbage, collections float64) {
	if turns <= 0 {
		return 0, 0
	}
	n := float64(turns)
	return float64(after.TotalAlloc-before.TotalAlloc) / n, float64(after.NumGC-before.NumGC) / n * 1000
}

// writtenPerTurn is the bytes written to storage per turn between two readings of
// storageWritten, each with its ok; it is not known (false) when either was not read, without
// turns, or when the count went backwards.
func writtenPerTurn(before int64, beforeOK bool, after int64, afterOK bool, turns int) (float64, bool) {
	if !beforeOK || !afterOK || turns <= 0 || after < before {
		return 0, false
	}
	return float64(after-before) / float64(turns), true
}

// garbageRows are the rows of the garbage per turn and the collections per 1 000 turns, of the
// runs named by what, beside the baseline named base.
func garbageRows(what, base string) (garbage, collections Row) {
	garbage = Row{Measure: "garbage per turn, " + what, Unit: "bytes", BaselineName: base,
		Note: "bytes the whole process allocated (runtime.MemStats.TotalAlloc) over the run's turns, the same client's included", Goal: Goal{Text: "reported"}}
	collections = Row{Measure: "garbage collections per 1000 turns, " + what, Unit: "", BaselineName: base}
	return garbage, collections
}

// addGarbage adds one round's baseline b and engine m to the garbage rows.
func addGarbage(garbage, collections *Row, b, m turnLoad) {
	garbage.Baseline = append(garbage.Baseline, b.garbage)
	garbage.Measured = append(garbage.Measured, m.garbage)
	collections.Baseline = append(collections.Baseline, b.collections)
	collections.Measured = append(collections.Measured, m.collections)
}

// writtenRow is the row of the bytes written to storage per turn, of the runs named by what,
// beside the baseline named base.
func writtenRow(what, base string) Row {
	return Row{Measure: "bytes written to storage per turn, " + what, Unit: "bytes", BaselineName: base,
		Note: "what the whole process wrote to files over the run's turns, the log's and the database's when the log is copied back: write_bytes of /proc/self/io, which counts a page each time a clean page is dirtied, so that a commit that waits for the disk makes the next write to its last page count again", Goal: Goal{Text: "reported"}}
}

// addWritten adds one round's baseline b and engine m to the row of bytes written, when both
// were counted.
func addWritten(row *Row, b, m turnLoad) {
	if !b.writtenOK || !m.writtenOK {
		return
	}
	row.Baseline = append(row.Baseline, b.written)
	row.Measured = append(row.Measured, m.written)
}

// writesPerTurn is the number of durable writes the engine makes for one turn: the store's count
// over calibrationTurns turns of a conversation of its own, after one turn that is not counted.
func writesPerTurn(ctx context.Context, t *target, eng *reference.Engine) (int, error) {
	const calibrationTurns = 20
	c, err := t.newConv(ctx, 1000)
	if err != nil {
		return 0, err
	}
	defer c.stop()
	if err := c.listen(ctx); err != nil {
		return 0, err
	}
	if _, err := c.turn(ctx, "warm up"); err != nil {
		return 0, err
	}
	before := eng.DurableWrites()
	for range calibrationTurns {
		if _, err := c.turn(ctx, "hello"); err != nil {
			return 0, err
		}
	}
	n := int(math.Round(float64(eng.DurableWrites()-before) / calibrationTurns))
	if n < 1 {
		return 0, fmt.Errorf("the engine made %d durable writes in %d turns", eng.DurableWrites()-before, calibrationTurns)
	}
	return n, nil
}

// durableTurns: the median time of a turn at one conversation beside a bare server that makes the
// durable commits the rules require of a turn (durableCommits, a constant: the first before the
// acknowledgement, the rest before the reply), as raw SQLite INSERTs with the same synchronous
// setting; once with commits that wait for the disk (the default) and once with synchronous
// NORMAL. What is left is the engine's own work per turn, a commit more than the rules require
// included. The engine's own count of durable writes per turn is reported beside it.
func durableTurns(e *env) ([]Row, error) {
	window := e.span(2*time.Second, 150*time.Millisecond)
	const k = 1 // conversations at once
	one := conversations(k)
	_, counted := storageWritten() // the bytes written are reported where they are counted
	type setting struct {
		name   string
		normal bool
		eng    *target
		bare   *target
		writes int
	}
	settings := []*setting{{name: "synchronous FULL"}, {name: "synchronous NORMAL", normal: true}}
	for i, s := range settings {
		engT, eng, err := e.openEngine(filepath.Join(e.dir, fmt.Sprintf("durable-%d", i)), "", nil,
			func(o *reference.Options) { o.SyncNormal = s.normal })
		if err != nil {
			return nil, err
		}
		defer engT.close()
		s.eng = engT
		if s.writes, err = writesPerTurn(e.ctx, engT, eng); err != nil {
			return nil, err
		}
		raw, err := sqlite.OpenRaw(e.ctx, filepath.Join(e.dir, fmt.Sprintf("durable-raw-%d.db", i)), s.normal)
		if err != nil {
			return nil, err
		}
		defer raw.Close()
		bareT, _, err := openDurableBare(raw, 1, durableCommits-1)
		if err != nil {
			return nil, err
		}
		defer bareT.close()
		s.bare = bareT
	}
	var rows []Row
	for _, s := range settings {
		base := fmt.Sprintf("bare net/http + %d raw SQLite INSERT commits per turn, %s", durableCommits, s.name)
		rows = append(rows,
			Row{Measure: "median time per turn, " + one + ", " + s.name, Unit: "ms", BaselineName: base},
			Row{Measure: fmt.Sprintf("overhead per turn beyond its %d durable commits (median, engine minus bare with %d commits), ", durableCommits, durableCommits) + s.name,
				Unit: "ms", Goal: Goal{Text: "<= 0.5 ms", Of: "measured", AtMost: true, Bound: 0.5}})
	}
	rows[0].Note = fmt.Sprintf("the bare server makes the %d durable commits a turn requires, one before its 202 and the rest before the reply; the engine's store counts %d durable writes per turn (%s) and %d (%s); %v per run",
		durableCommits, settings[0].writes, settings[0].name, settings[1].writes, settings[1].name, window)
	gc, written := durableCostRows(one, settings[0].name, settings[1].name)
	for r := range e.rounds() {
		line := fmt.Sprintf("round %d:", r+1)
		for i, s := range settings {
			b, err := runTurns(e.ctx, s.bare, k, window)
			if err != nil {
				return nil, fmt.Errorf("durable bare: %w", err)
			}
			m, err := runTurns(e.ctx, s.eng, k, window)
			if err != nil {
				return nil, err
			}
			rows[2*i].Baseline = append(rows[2*i].Baseline, ms(b.median))
			rows[2*i].Measured = append(rows[2*i].Measured, ms(m.median))
			rows[2*i+1].Measured = append(rows[2*i+1].Measured, ms(m.median-b.median))
			addGarbage(&gc[2*i], &gc[2*i+1], b, m)
			addWritten(&written[i], b, m)
			line += fmt.Sprintf(" %s: bare %.3f ms, engine %.3f ms;", s.name, ms(b.median), ms(m.median))
		}
		e.logf("%s", line)
	}
	rows = append(rows, gc...)
	if counted {
		rows = append(rows, written...)
	}
	return rows, nil
}

// durableCostRows are the turns-durable figure's garbage rows (two per setting) and bytes-written
// rows (one per setting), for the settings named, the note on the first of each only.
func durableCostRows(one string, settings ...string) (gc, written []Row) {
	for _, name := range settings {
		g, c := garbageRows(one+", "+name, fmt.Sprintf("bare server with %d commits", durableCommits))
		w := writtenRow(one+", "+name, fmt.Sprintf("bare server with %d commits", durableCommits))
		if len(gc) > 0 {
			g.Note, w.Note = "", ""
		}
		gc = append(gc, g, c)
		written = append(written, w)
	}
	return gc, written
}

// pgTurns: engine turns/s on PostgreSQL beside the same engine on SQLite, at 1 and 8
// conversations, the two engines open side by side and run in turn; and turns/s at 8
// conversations over turns/s at 1 on PostgreSQL, how well the store commits writers together.
func pgTurns(e *env) ([]Row, error) {
	levels := []int{1, 8}
	window := e.span(2*time.Second, 150*time.Millisecond)
	db, err := e.database()
	if err != nil {
		return nil, err
	}
	lite, _, err := e.openEngine(filepath.Join(e.dir, "lite"), "", nil)
	if err != nil {
		return nil, err
	}
	defer lite.close()
	pg, _, err := e.openEngine(filepath.Join(e.dir, "pg"), db.url, nil)
	if err != nil {
		return nil, err
	}
	defer pg.close()
	var rows []Row
	for _, k := range levels {
		rows = append(rows, Row{Measure: fmt.Sprintf("turns/s, %s, PostgreSQL", conversations(k)), Unit: "turns/s",
			BaselineName: "SQLite"})
	}
	rows = append(rows, Row{Measure: "turns/s, 8 conversations over 1, PostgreSQL", Unit: "turns/s",
		BaselineName: "1 conversation, PostgreSQL", Goal: Goal{Text: ">= 3x", Of: "ratio", Bound: 3}})
	for r := range e.rounds() {
		line := fmt.Sprintf("round %d:", r+1)
		for i, k := range levels {
			b, err := runTurns(e.ctx, lite, k, window)
			if err != nil {
				return nil, fmt.Errorf("sqlite: %w", err)
			}
			m, err := runTurns(e.ctx, pg, k, window)
			if err != nil {
				return nil, err
			}
			rows[i].Baseline = append(rows[i].Baseline, b.rate)
			rows[i].Measured = append(rows[i].Measured, m.rate)
			line += fmt.Sprintf(" %d conv: SQLite %.0f/s, PostgreSQL %.0f/s;", k, b.rate, m.rate)
		}
		rows[2].Baseline = append(rows[2].Baseline, rows[0].Measured[len(rows[0].Measured)-1])
		rows[2].Measured = append(rows[2].Measured, rows[1].Measured[len(rows[1].Measured)-1])
		e.logf("%s", line)
	}
	return rows, nil
}

// conversations is "1 conversation", "8 conversations".
func conversations(k int) string {
	if k == 1 {
		return "1 conversation"
	}
	return fmt.Sprintf("%d conversations", k)
}
