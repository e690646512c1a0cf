package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// taker takes each message and decides, with DecideTaken, on what it took; a message "two"
// makes a second decision of it too, which keeps a row of its own.
func taker(calls *atomic.Int64) kernel.Flow {
	return func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		for n := 1; ; n++ {
			m, err := c.Receive()
			if err != nil {
				return nil, err
			}
			var text string
			_ = json.Unmarshal(m.Payload, &text)
			if _, err := c.DecideTaken(fmt.Sprintf("o%d:verdict", n), func() (any, error) {
				calls.Add(1)
				return map[string]string{"took": text}, nil
			}); err != nil {
				return nil, err
			}
			if text == "two" {
				if _, err := c.DecideTaken(fmt.Sprintf("o%d:again", n), func() (any, error) {
					calls.Add(1)
					return "again", nil
				}); err != nil {
					return nil, err
				}
			}
		}
	}
}

// TestADecisionOnTheMessageTakenSharesItsRow: a decision made with DecideTaken right after
// Receive is kept in the consumed event's row (journal version 4): one row per message, read
// back as a decision at that place (ReadLog), shown with the message it took (LogPage), and
// served by a replay without running the decider again; a second decision keeps its own row.
func TestADecisionOnTheMessageTakenSharesItsRow(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"taker": taker(&calls)})
	_, err := r.k.Start(ctx, kernel.StartRequest{ID: "c1", Flow: "taker", Principal: alice})
	require.NoError(t, err)
	send(t, r.k, "c1", "m1", "one")
	send(t, r.k, "c1", "m2", "two")
	want := []string{
		"started",
		`consumed o1:verdict = {"took":"one"} "one"`,
		`consumed o2:verdict = {"took":"two"} "two"`,
		`decision o2:again = "again"`,
	}
	waitFor(t, "three decisions", func() bool { return len(r.transcript("c1", 0)) == len(want) })
	require.Equal(t, want, r.transcript("c1", 0))
	require.EqualValues(t, 3, calls.Load())

	evs, err := r.k.ReadLog(ctx, "c1", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 4)
	require.Equal(t, "consumed", evs[1].Kind)
	require.NotNil(t, evs[1].Decision, "the row reads as the decision it holds")
	require.Equal(t, "o1:verdict", evs[1].Decision.ID)
	require.JSONEq(t, `{"took":"one"}`, string(evs[1].Decision.Value))

	page, _, _, err := r.k.LogPage(ctx, "c1", loomtype.Cursor{}, 10)
	require.NoError(t, err)
	var shown map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(page[1].Data, &shown))
	require.JSONEq(t, `"one"`, string(shown["payload"]), "the message taken")
	require.JSONEq(t, `"o1:verdict"`, string(shown["id"]), "and the decision")
	require.JSONEq(t, `{"took":"one"}`, string(shown["value"]))

	r.restart()
	send(t, r.k, "c1", "m3", "three")
	waitFor(t, "the third verdict", func() bool { return len(r.transcript("c1", 0)) == len(want)+1 })
	require.Equal(t, append(want, `consumed o3:verdict = {"took":"three"} "three"`), r.transcript("c1", 0))
	require.EqualValues(t, 4, calls.Load(), "the replay served the recorded decisions")
	require.Empty(t, r.divs)
}
