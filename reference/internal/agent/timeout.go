package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/loomcheck/loomcheck/reference/kernel"
)

// Journal ids of the deadlines, written only when a timeout is configured: the due time of model
// call i, and of tool call j of model call i (Unix milliseconds).
const (
	idTurnDeadline = "%s#turn:%d:deadline"
	idToolDeadline = "%s#turn:%d:tool:%d:deadline"
)

// TimeoutText is the error a tool call that ran out of Config.ToolTimeout feeds back to the model.
const TimeoutText = "timed out"

// now is the run's clock.
func (cfg Config) now() time.Time {
	if cfg.Now != nil {
		return cfg.Now()
	}
	return time.Now()
}

// deadline records, the first time it is asked, when the countdown of d that starts now ends,
// and returns that recorded time ever after: a call a crash cut off resumes its countdown
// instead of starting it again. d <= 0 records nothing and returns the zero time.
func deadline(c *kernel.Context, cfg Config, id string, d time.Duration) (time.Time, error) {
	if d <= 0 {
		return time.Time{}, nil
	}
	raw, err := c.Decide(id, func() (json.RawMessage, error) { return json.Marshal(cfg.now().Add(d).UnixMilli()) })
	if err != nil {
		return time.Time{}, err
	}
	var ms int64
	if err := json.Unmarshal(raw, &ms); err != nil {
		return time.Time{}, fmt.Errorf("agent: recorded deadline %s: %w", id, err)
	}
	return time.UnixMilli(ms), nil
}

// timedTool bounds fn, the step of tool call j of model call turn, by Config.ToolTimeout from the
// call's first logged start: a call past its deadline is the error result TimeoutText.
func timedTool(c *kernel.Context, cfg Config, turn, j int, fn kernel.StepFunc) (kernel.StepFunc, error) {
	due, err := deadline(c, cfg, fmt.Sprintf(idToolDeadline, cfg.LoopID, turn, j), cfg.ToolTimeout)
	if err != nil || due.IsZero() {
		return fn, err
	}
	return func(ctx context.Context) (json.RawMessage, error) {
		tctx, cancel := context.WithDeadline(ctx, due)
		defer cancel()
		v, err := fn(tctx)
		if ctx.Err() == nil && tctx.Err() != nil {
			return json.Marshal(toolOutcome{Error: TimeoutText})
		}
		return v, err
	}, nil
}

// withTurnDeadline bounds ctx by the deadline of the model call, if it has one.
func withTurnDeadline(ctx context.Context, due time.Time) (context.Context, context.CancelFunc) {
	if due.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, due)
}
