package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/reference/model"
)

// scripted is a provider that streams a delta each time it is told to: each delta is "t=<stamp>;",
// the stamp taken just before it is handed to the engine; told to stop, it returns the text so
// far as its answer.
type scripted struct {
	started chan struct{} // receives when a completion begins
	next    chan bool     // true: hand one delta over; false: answer
}

func newScripted() *scripted { return &scripted{started: make(chan struct{}), next: make(chan bool)} }

func (p *scripted) Complete(ctx context.Context, _ model.Request, onDelta func(string)) (model.Response, error) {
	select {
	case p.started <- struct{}{}:
	case <-ctx.Done():
		return model.Response{}, ctx.Err()
	}
	var text strings.Builder
	for {
		select {
		case <-ctx.Done():
			return model.Response{Content: text.String()}, ctx.Err()
		case more := <-p.next:
			if !more {
				return model.Response{Content: text.String(), FinishReason: model.FinishStop}, nil
			}
			piece := stampText(stamp())
			text.WriteString(piece)
			if onDelta != nil {
				onDelta(piece)
			}
		}
	}
}

// tell hands the provider its next step: a delta (true) or the answer (false).
func (p *scripted) tell(more bool) error {
	select {
	case p.next <- more:
		return nil
	case <-time.After(stallGuard):
		return fmt.Errorf("the model was not waiting for its next delta within %v", stallGuard)
	}
}

func stampText(d time.Duration) string { return "t=" + strconv.FormatInt(int64(d), 10) + ";" }

// stamps parses the stamps of a delta's text.
func stamps(text string) ([]time.Duration, error) {
	var out []time.Duration
	for rest := text; rest != ""; {
		piece, after, ok := strings.Cut(rest, ";")
		if !ok {
			return nil, fmt.Errorf("truncated stamp %q", rest)
		}
		rest = after
		v, err := strconv.ParseInt(strings.TrimPrefix(piece, "t="), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad stamp %q", piece)
		}
		out = append(out, time.Duration(v))
	}
	return out, nil
}

// deltaPace is how often the delta figure's model hands a delta over: a fast model's pace, a
// token a millisecond.
const deltaPace = time.Millisecond

// deltaSSE: the time from a model delta (the provider hands it to the engine) to an SSE client
// reading it off a loopback connection, p50 and p99, beside a bare SSE server writing each delta
// it is handed at once. The model hands a delta over every deltaPace whether or not the client
// has read the previous one, as a model streams; a delta the engine had not sent when the reply
// was committed reaches the client in the reply, and counts at the reply's arrival.
func deltaSSE(e *env) ([]Row, error) {
	n := e.size(1000, 20)
	p := newScripted()
	eng, _, err := e.openEngine(filepath.Join(e.dir, "data"), "", p)
	if err != nil {
		return nil, err
	}
	defer eng.close()
	bareT, bareS, err := openBare()
	if err != nil {
		return nil, err
	}
	defer bareT.close()
	ec, err := eng.newConv(e.ctx, 0)
	if err != nil {
		return nil, err
	}
	if err := ec.listen(e.ctx); err != nil {
		return nil, err
	}
	defer ec.stop()
	bc, err := bareT.newConv(e.ctx, 0)
	if err != nil {
		return nil, err
	}
	if err := bc.listen(e.ctx); err != nil {
		return nil, err
	}
	defer bc.stop()
	note := fmt.Sprintf("%d deltas per run, one every %v; the stamp is taken as the provider hands the delta over, the receipt as the client reads its data line", n, deltaPace)
	p50 := Row{Measure: "model delta to SSE client, p50", Unit: "ms", BaselineName: "bare SSE echo", Note: note}
	p99 := Row{Measure: "model delta to SSE client, p99", Unit: "ms", BaselineName: "bare SSE echo",
		Goal: Goal{Text: "<= 1.2x", Of: "ratio", AtMost: true, Bound: 1.2}}
	for r := range e.rounds() {
		b, err := bareDeltas(bareS, bc, n)
		if err != nil {
			return nil, fmt.Errorf("bare: %w", err)
		}
		m, err := engineDeltas(e.ctx, p, ec, n)
		if err != nil {
			return nil, err
		}
		p50.Baseline = append(p50.Baseline, ms(Percentile(b, 0.5)))
		p50.Measured = append(p50.Measured, ms(Percentile(m, 0.5)))
		p99.Baseline = append(p99.Baseline, ms(Percentile(b, 0.99)))
		p99.Measured = append(p99.Measured, ms(Percentile(m, 0.99)))
		e.logf("round %d: bare p50 %v p99 %v, engine p50 %v p99 %v", r+1, Percentile(b, 0.5), Percentile(b, 0.99),
			Percentile(m, 0.5), Percentile(m, 0.99))
	}
	return []Row{p50, p99}, nil
}

// paced calls fn n times, one every deltaPace, and sends its first error (or nil) to errc.
func paced(n int, fn func() error, errc chan<- error) {
	tick := time.NewTicker(deltaPace)
	defer tick.Stop()
	for range n {
		<-tick.C
		if err := fn(); err != nil {
			errc <- err
			return
		}
	}
	errc <- nil
}

// engineDeltas runs one turn of n paced deltas through the engine and returns each delta's
// latency.
func engineDeltas(ctx context.Context, p *scripted, c *conv, n int) ([]time.Duration, error) {
	if err := c.send(ctx, "stream"); err != nil {
		return nil, err
	}
	select {
	case <-p.started:
	case <-time.After(stallGuard):
		return nil, fmt.Errorf("the engine did not call the model within %v", stallGuard)
	}
	errc, done := make(chan error, 1), make(chan error, 1)
	go func() {
		paced(n, func() error { return p.tell(true) }, done)
		err := <-done
		if err == nil {
			err = p.tell(false)
		}
		errc <- err
	}()
	lat := make([]time.Duration, 0, n)
	var streamed strings.Builder
	ev, err := c.reply(func(ev sseEvent) error {
		text, err := addDelta(ev, &lat)
		streamed.WriteString(text)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := <-errc; err != nil {
		return nil, err
	}
	if len(lat) < n {
		// The reply was committed before the last deltas were sent: its text carries them.
		var e entry
		if err := json.Unmarshal(ev.data, &e); err != nil {
			return nil, err
		}
		rest, ok := strings.CutPrefix(e.Text, streamed.String())
		if !ok {
			return nil, fmt.Errorf("conversation %s: the deltas received are not the start of the reply", c.id)
		}
		ss, err := stamps(rest)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			lat = append(lat, ev.at-s)
		}
	}
	if len(lat) != n {
		return nil, fmt.Errorf("conversation %s: %d deltas reached the client, the model sent %d", c.id, len(lat), n)
	}
	return lat, nil
}

// bareDeltas hands n paced deltas to the bare server and returns each one's latency.
func bareDeltas(b *bare, c *conv, n int) ([]time.Duration, error) {
	c.turns++
	errc := make(chan error, 1)
	go paced(n, func() error { b.delta(c.id, c.turns, stampText(stamp())); return nil }, errc)
	lat := make([]time.Duration, 0, n)
	for len(lat) < n {
		ev, err := c.ev.next()
		if err != nil {
			return nil, fmt.Errorf("events of %s: %w", c.id, err)
		}
		if ev.name != "delta" {
			return nil, fmt.Errorf("events of %s: unexpected %s event: %s", c.id, ev.name, ev.data)
		}
		if _, err := addDelta(ev, &lat); err != nil {
			return nil, err
		}
	}
	return lat, <-errc
}

// addDelta appends the latency of each stamp in the delta event ev and returns its text.
func addDelta(ev sseEvent, lat *[]time.Duration) (string, error) {
	var d struct {
		Turn int64  `json:"turn"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(ev.data, &d); err != nil {
		return "", fmt.Errorf("delta %s: %w", ev.data, err)
	}
	ss, err := stamps(d.Text)
	if err != nil {
		return "", err
	}
	for _, s := range ss {
		*lat = append(*lat, ev.at-s)
	}
	return d.Text, nil
}
