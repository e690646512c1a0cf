package perf

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"time"
)

// footprint is the process's heap and goroutines, after two collections.
type footprint struct {
	heap       int64 // HeapInuse: the spans in use, live objects and the room between them
	live       int64 // HeapAlloc: the live objects alone
	goroutines int
}

// measureFootprint lets what just ended wind down (goroutines back to at most settleTo, for up
// to two seconds, when settleTo >= 0), collects garbage and reads the heap in use.
func measureFootprint(settleTo int) footprint {
	deadline := time.Now().Add(2 * time.Second)
	for settleTo >= 0 && runtime.NumGoroutine() > settleTo && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return footprint{heap: int64(m.HeapInuse), live: int64(m.HeapAlloc), goroutines: runtime.NumGoroutine()}
}

// per is the difference between two footprints over n.
func per(before, after footprint, n int) (heap, goroutines float64) {
	return float64(after.heap-before.heap) / float64(n), float64(after.goroutines-before.goroutines) / float64(n)
}

// memory: the heap in use (runtime.MemStats.HeapInuse) and the goroutines per open SSE stream,
// beside a bare SSE server's streams opened by the same client, and per open conversation at
// rest (started, one turn answered, no stream), in this process: client and server both, so
// that the streams' client side, the same for both, cancels out of the difference.
func memory(e *env) ([]Row, error) {
	n := e.size(200, 8)
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
	note := fmt.Sprintf("HeapInuse after GC over %d, client side included", n)
	streamHeap := Row{Measure: "heap per open SSE stream", Unit: "bytes", BaselineName: "bare SSE server", Note: note,
		Goal: Goal{Text: "reported, bounded"}}
	streamOwn := Row{Measure: "heap per open SSE stream, engine minus bare", Unit: "bytes",
		Note: "what the engine's stream adds to a bare server's, the client side cancelled out"}
	streamG := Row{Measure: "goroutines per open SSE stream", Unit: "", BaselineName: "bare SSE server", Note: "client side included (2 per connection)"}
	convHeap := Row{Measure: "heap per open conversation at rest", Unit: "bytes",
		Note: fmt.Sprintf("%d conversations started, one turn answered each, no stream open", n), Goal: Goal{Text: "reported, bounded"}}
	convG := Row{Measure: "goroutines per open conversation at rest", Unit: ""}
	rest := measureFootprint(-1).goroutines
	for r := range e.rounds() {
		// Conversations at rest.
		eng.tr.CloseIdleConnections()
		before := measureFootprint(rest)
		owners, err := makeConversations(e.ctx, eng, n, 8)
		if err != nil {
			return nil, err
		}
		eng.tr.CloseIdleConnections()
		after := measureFootprint(before.goroutines)
		h, g := per(before, after, n)
		convHeap.Measured = append(convHeap.Measured, h)
		convG.Measured = append(convG.Measured, g)
		rest = after.goroutines
		// Streams: the bare server's, then the engine's, on as many conversations.
		bareConvs := make([]*conv, n)
		for i := range bareConvs {
			if bareConvs[i], err = bareT.newConv(e.ctx, i); err != nil {
				return nil, err
			}
		}
		bh, bg, err := openStreams(e.ctx, bareT, bareConvs, rest)
		if err != nil {
			return nil, fmt.Errorf("bare: %w", err)
		}
		engConvs := make([]*conv, n)
		for i, o := range owners {
			engConvs[i] = &conv{t: eng, user: o.user, id: o.id}
		}
		mh, mg, err := openStreams(e.ctx, eng, engConvs, rest)
		if err != nil {
			return nil, err
		}
		streamHeap.Baseline = append(streamHeap.Baseline, bh)
		streamHeap.Measured = append(streamHeap.Measured, mh)
		streamOwn.Measured = append(streamOwn.Measured, mh-bh)
		streamG.Baseline = append(streamG.Baseline, bg)
		streamG.Measured = append(streamG.Measured, mg)
		e.logf("round %d: per conversation %.0f B, %.2f goroutines; per stream bare %.0f B, %.2f goroutines, engine %.0f B, %.2f goroutines",
			r+1, h, g, bh, bg, mh, mg)
	}
	return []Row{streamHeap, streamOwn, streamG, convHeap, convG}, nil
}

// openStreams opens the event streams of convs, measures the heap and goroutines they add per
// stream, and closes them.
func openStreams(ctx context.Context, t *target, convs []*conv, rest int) (heap, goroutines float64, err error) {
	t.tr.CloseIdleConnections()
	before := measureFootprint(rest)
	defer func() {
		for _, c := range convs {
			c.stop()
		}
		t.tr.CloseIdleConnections()
	}()
	for _, c := range convs {
		if err := c.listen(ctx); err != nil {
			return 0, 0, err
		}
	}
	after := measureFootprint(-1)
	heap, goroutines = per(before, after, len(convs))
	return heap, goroutines, nil
}
