package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
)

// thener takes each message, decides on it with DecideTaken and keeps a record of it with
// DecideThen; then it decides an answer and keeps a reply with DecideThen after it. A message
// "step" runs a step between the answer and the reply, so the reply has a row of its own.
func thener(calls *atomic.Int64) kernel.Flow {
	return func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		decide := func(then bool, id string, v any) error {
			fn := func() (any, error) { calls.Add(1); return v, nil }
			var err error
			if then {
				_, err = c.DecideThen(id, fn)
			} else {
				_, err = c.DecideValue(id, fn)
			}
			return err
		}
		for n := 1; ; n++ {
			m, err := c.Receive()
			if err != nil {
				return nil, err
			}
			var text string
			_ = json.Unmarshal(m.Payload, &text)
			if _, err := c.DecideTaken(fmt.Sprintf("o%d:verify", n), func() (any, error) { calls.Add(1); return true, nil }); err != nil {
				return nil, err
			}
			if err := decide(true, fmt.Sprintf("o%d:user", n), text); err != nil {
				return nil, err
			}
			if err := decide(false, fmt.Sprintf("o%d:answer", n), "a "+text); err != nil {
				return nil, err
			}
			if text == "step" {
				if _, err := c.Execute(fmt.Sprintf("o%d:step", n), func(context.Context) (json.RawMessage, error) { return json.RawMessage(`1`), nil }); err != nil {
					return nil, err
				}
			}
			if err := decide(true, fmt.Sprintf("o%d:reply", n), "r "+text); err != nil {
				return nil, err
			}
		}
	}
}

// TestADecisionThenSharesTheRowBeforeIt: a decision made with DecideThen is kept in the row of the
// command pending right before it (journal version 5): the message, its verdict and its record
// in one row, the answer and the reply in another; ReadLog reads each row as its last decision
// with the others before it, and a replay serves every decision without running its decider. A
// reply after a step keeps a row of its own.
func TestADecisionThenSharesTheRowBeforeIt(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"thener": thener(&calls)})
	_, err := r.k.Start(ctx, kernel.StartRequest{ID: "c1", Flow: "thener", Principal: alice})
	require.NoError(t, err)
	send(t, r.k, "c1", "m1", "one")
	waitFor(t, "the first reply", func() bool { return calls.Load() == 4 })
	send(t, r.k, "c1", "m2", "step")
	waitFor(t, "the second reply", func() bool { return calls.Load() == 8 })
	rows := func() []kernel.LogEvent {
		evs, err := r.k.ReadLog(ctx, "c1", 0, 0, 100)
		require.NoError(t, err)
		return evs
	}
	waitFor(t, "the rows committed", func() bool { return len(rows()) == 8 })
	evs := rows()
	kinds := []string{}
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
	}
	require.Equal(t, []string{"started", "consumed", "decision", "consumed", "decision", "step.started", "step.completed", "decision"}, kinds)
	require.Equal(t, "o1:user", evs[1].Decision.ID)
	require.Equal(t, []kernel.Decision{{ID: "o1:verify", Value: json.RawMessage(`true`)}}, evs[1].Before)
	require.Equal(t, "o1:reply", evs[2].Decision.ID)
	require.JSONEq(t, `"r one"`, string(evs[2].Decision.Value))
	require.Len(t, evs[2].Before, 1)
	require.Equal(t, "o1:answer", evs[2].Before[0].ID)
	require.Equal(t, "o2:answer", evs[4].Decision.ID, "a step between: the reply has a row of its own")
	require.Empty(t, evs[4].Before)
	require.Equal(t, "o2:reply", evs[7].Decision.ID)

	before := calls.Load()
	r.restart()
	send(t, r.k, "c1", "m3", "three")
	waitFor(t, "the third reply", func() bool { return calls.Load() == before+4 })
	require.Empty(t, r.divs)
}
