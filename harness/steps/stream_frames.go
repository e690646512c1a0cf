package steps

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/harness/world"
)

// modelStreamsThenFails scripts the model's next answer to stream the deltas, then fail with the status.
func (s *modelSteps) modelStreamsThenFails(parts string, status int) error {
	return s.enqueue(world.Reply{Chunks: quoted(parts), Fail: &world.Failure{Status: status, Message: "cut off"}})
}

// heartbeats waits for the heartbeats of heartbeatIntervals(interval) intervals after the last
// logged frame and judges them with judgeHeartbeats.
func (s *streamSteps) heartbeats(who, transport string, ms int) error {
	f, err := s.reader(who, transport)
	if err != nil {
		return err
	}
	op := who + "'s " + transport + " reader, idle"
	period := time.Duration(ms) * time.Millisecond
	if period <= 0 {
		return fmt.Errorf("a heartbeat interval of %d ms", ms)
	}
	need := heartbeatIntervals(period) + 1
	// idleSince is when the reader received the last frame that is not a heartbeat (zero when
	// it received none), and beats the heartbeats it received after that.
	idleSince := func(fw followed) (time.Time, []sframe) {
		var lastAt time.Time
		for _, r := range fw.raw {
			if r.Kind() != "heartbeat" {
				lastAt = r.At
			}
		}
		var out []sframe
		for _, r := range fw.raw {
			if r.Kind() == "heartbeat" && r.At.After(lastAt) {
				out = append(out, r)
			}
		}
		return lastAt, out
	}
	before := f.snapshot()
	ctx, cancel := s.wait()
	defer cancel()
	// silent is how long the reader has gone without a heartbeat since the stream went idle or
	// the last heartbeat; the wait ends early once that is already too long.
	silent := func(idle time.Time, beats []sframe) (time.Duration, string) {
		if len(beats) > 0 {
			return time.Since(beats[len(beats)-1].At), "the last heartbeat"
		}
		if idle.IsZero() {
			return 0, ""
		}
		return time.Since(idle), "the last logged frame"
	}
	fw, err := f.waitFor(ctx, fmt.Sprintf("%d heartbeats after the last logged frame", need), func(fw followed) bool {
		idle, beats := idleSince(fw)
		d, _ := silent(idle, beats)
		return len(beats) >= need || d > period+heartbeatSlack
	})
	if err != nil {
		return err
	}
	if fw.last != before.last {
		return fail(op, fmt.Sprintf("the reader's cursor moved from %d to %d while idle", before.last, fw.last), "the cursor unmoved by heartbeats")
	}
	idle, beats := idleSince(fw)
	if len(beats) < need {
		d, since := silent(idle, beats)
		return fail(op, fmt.Sprintf("no heartbeat for %s after %s (%d of the %d awaited)", d.Round(time.Millisecond), since, len(beats), need),
			fmt.Sprintf("one every %s (at most %s apart, with %s of slack for a loaded machine)", period, period+heartbeatSlack, heartbeatSlack))
	}
	beats = beats[:need]
	at := make([]time.Time, len(beats))
	for i, b := range beats {
		if b.Cur != 0 {
			return fail(op, fmt.Sprintf("a heartbeat with cursor %d", b.Cur), "cursor 0")
		}
		at[i] = b.At
	}
	if got, want := judgeHeartbeats(idle, at, period); got != "" {
		return fail(op, got, want)
	}
	return nil
}

// fillLog records n terminal lines as who, each a frame of the session's log: a quick way to
// take the log past its default bound. The lines go fillWorkers at a time, each worker sending
// one after the other. Each answer must be 202 {logged: true, cur}; a worker's cursors must rise
// (a line answered before the next is sent comes before it in the log), and the n cursors
// together must be n different ones with no gap between them, as they are when every answer is
// one past the one before. Which line has which cursor is not judged: the rules the filled log
// serves are about its head and its floor.
func (s *streamSteps) fillLog(who string, n int) error {
	if err := s.sut(); err != nil {
		return err
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	path := "/sessions/" + url.PathEscape(c.id) + "/terminal"
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	curs := make([]int64, n)
	lines := make(chan int)
	errs := make(chan error, fillWorkers)
	var wg sync.WaitGroup
	for range fillWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev int64
			for i := range lines {
				r, err := s.cl.Do(ctx, who, http.MethodPost, path, map[string]any{"line": "line " + strconv.Itoa(i)}, reqOpts{Quiet: true})
				if err != nil {
					errs <- err
					cancel()
					return
				}
				var a struct {
					Logged bool  `json:"logged"`
					Cur    int64 `json:"cur"`
				}
				if r.Status != http.StatusAccepted || r.JSON(&a) != nil || !a.Logged || a.Cur <= prev {
					errs <- fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)),
						fmt.Sprintf("202 {logged: true, cur} with cur past %d, the cursor of this sender's line before (line %d)", prev, i))
					cancel()
					return
				}
				prev, curs[i-1] = a.Cur, a.Cur
			}
		}()
	}
feed:
	for i := 1; i <= n; i++ {
		select {
		case lines <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(lines)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	if err := s.ctx.Err(); err != nil {
		return harnessErr("the run was stopped: %v", err)
	}
	sorted := slices.Sorted(slices.Values(curs))
	for k := 1; k < n; k++ {
		if sorted[k] != sorted[k-1]+1 {
			return fail("the cursors of the "+strconv.Itoa(n)+" lines", fmt.Sprintf("%d then %d", sorted[k-1], sorted[k]),
				"n different cursors with no gap between them")
		}
	}
	return nil
}

// streamFramesVocabulary lists the steps of features/stream/frames.feature.
func streamFramesVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) then fails with status (\d+)$`, a.model.modelStreamsThenFails, "scripts the model's next answer to stream the deltas, then fail with the status"},
		{`^(\w[\w' ]*?) fills the session's log with (\d+) terminal lines$`, a.stream.fillLog, "records N terminal lines \"line 1\" .. \"line N\" as who in the current conversation's session, a few requests at a time, each expected 202 {logged: true, cur}; the N cursors must have no gap, and rise for each sender"},
		{`^` + readerPat + ` gets heartbeats every (\d+) ms while idle, each with cursor 0$`, a.stream.heartbeats, "waits for the heartbeats of at least 3 intervals (more for a short interval) after the last logged frame and expects each with cursor 0, the first at most the interval plus 400 ms after that frame, all of them on a schedule of one per interval with each arriving up to 400 ms late, the reader's cursor unmoved"},
	}
}
