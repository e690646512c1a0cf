package kernel

import (
	"encoding/json"
	"time"
)

type evTimer struct {
	ID  string `json:"id"`
	Due int64  `json:"due,omitempty"` // Unix milliseconds
}

// Sleep waits for d on a durable timer named id: SleepUntil with the clock's now plus d, the due
// time recorded when the timer is first set.
//
//	if err := c.Sleep("backoff#3", 30*time.Second); err != nil { return nil, err }
func (c *Context) Sleep(id string, d time.Duration) error {
	return c.sleep(id, func() time.Time { return c.k.clock().Now().Add(d) })
}

// SleepUntil waits on a durable timer named id until t. Setting the timer journals its due time
// and its firing journals that it fired: a replay of a timer that fired returns at once, a timer
// a crash interrupted waits only for what is left of it, and one whose due time has passed fires
// at once. Time is the kernel's Clock (Options.Clock). A cancel wakes the wait.
//
// Errors: a *CanceledError, a *loomtype.DivergenceError, ErrStopped or a store error.
//
// Concurrency: the flow's goroutine only.
//
//	err := c.SleepUntil("reminder", time.UnixMilli(due))
func (c *Context) SleepUntil(id string, t time.Time) error {
	return c.sleep(id, func() time.Time { return t })
}

func (c *Context) sleep(id string, due func() time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, ok, err := c.replayCommand(kindTimerSet, id)
	if err != nil {
		return err
	}
	var at time.Time
	if ok {
		var ev evTimer
		_ = json.Unmarshal(data, &ev)
		at = time.UnixMilli(ev.Due)
		if _, fired, err := c.replayCommand(kindTimerFired, id); err != nil || fired {
			return err
		}
	} else {
		at = due()
		if err := c.record(kindTimerSet, evTimer{ID: id, Due: at.UnixMilli()}, nil); err != nil {
			return err
		}
		// A cancel requested meanwhile stops the wait before it starts.
		if err := c.frame(); err != nil {
			return err
		}
	}
	ch, release := c.k.clock().At(at)
	defer release()
	select {
	case <-ch: // due already: it fires at once
	default:
		c.mu.Unlock()
		err = c.wait("timer "+id, ch)
		c.mu.Lock()
	}
	if err != nil {
		return err
	}
	return c.record(kindTimerFired, evTimer{ID: id}, nil)
}
