package kernel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
)

// TestInboxAt: a flow reads the messages at inbox positions it names, runs of them and single
// ones, in the order named, each as it was received; a position the inbox does not hold (past its
// end, or below 1) is damage (ErrUnreadable), whatever else the read names.
func TestInboxAt(t *testing.T) {
	type read struct {
		msgs []kernel.Message
		errs []error
	}
	got := make(chan read, 1)
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		for range 4 {
			if _, err := c.Receive(); err != nil {
				return nil, err
			}
		}
		msgs, err := c.InboxAt([]int64{2, 3, 4, 1, 3})
		var errs []error
		for _, bad := range [][]int64{{5}, {3, 4, 5}, {0}, {-1, 2}} {
			_, e := c.InboxAt(bad)
			errs = append(errs, e)
		}
		if err != nil {
			errs = append(errs, err)
		}
		got <- read{msgs, errs}
		return json.RawMessage(`null`), nil
	}
	r := newRig(t, map[string]kernel.Flow{"reader": flow})
	ctx := context.Background()
	_, err := r.k.Start(ctx, kernel.StartRequest{ID: "c1", Flow: "reader", Principal: alice})
	require.NoError(t, err)
	for _, m := range []string{"m1", "m2", "m3", "m4"} {
		require.True(t, send(t, r.k, "c1", m, "text of "+m))
	}
	rd := <-got
	require.Len(t, rd.errs, 4, "the good read did not fail")
	for i, e := range rd.errs {
		assert.ErrorIs(t, e, kernel.ErrUnreadable, i)
	}
	require.Len(t, rd.msgs, 5)
	for i, seq := range []int64{2, 3, 4, 1, 3} {
		m := rd.msgs[i]
		id := "m" + string(rune('0'+seq))
		assert.Equal(t, seq, m.Seq, i)
		assert.Equal(t, id, m.MessageID, i)
		assert.Equal(t, alice, m.Sender, i)
		assert.Equal(t, kernel.SenderKey(alice, id), m.Key, i)
		assert.JSONEq(t, `"text of `+id+`"`, string(m.Payload), i)
		assert.Positive(t, m.Time, i)
	}
}
