package world

import "fmt"

// earlierResets is how many resets back the model remembers the tool calls it answered with. A
// system that serves scenario after scenario asks about a call of a scenario that has just ended
// (the request after the call's result, arriving after the reset), not about one of a scenario
// long gone.
const earlierResets = 64

// callIDs are the ids of the tool calls the model answered with, since the last reset and before
// it. They tell a request of an earlier scenario from one of the scenario that runs now: a
// request that carries a call answered before the last reset, and not since, continues an
// exchange of an earlier scenario. The scenarios of a shared target give their calls ids of their
// own, so such a request is always recognised there; elsewhere an id two scenarios share is
// taken for the current one's, as if the world did not remember it.
type callIDs struct {
	// resets counts the resets; served are the ids answered since the last one, earlier the
	// ids answered before it, each with the reset count when it was last answered.
	resets  int
	served  map[string]bool
	earlier map[string]int
}

// serve fills in the id of every call of calls that has none ("call_<request number>_<call
// number>", request index+1), remembers the ids (up to limit since the last reset) and returns
// the calls, leaving calls itself unchanged.
func (c *callIDs) serve(calls []ToolCall, index, limit int) []ToolCall {
	if len(calls) == 0 {
		return calls
	}
	out := make([]ToolCall, len(calls))
	for k, tc := range calls {
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_%d_%d", index+1, k+1)
		}
		if c.served == nil {
			c.served = map[string]bool{}
		}
		if len(c.served) < limit {
			c.served[tc.ID] = true
		}
		out[k] = tc
	}
	return out
}

// reset moves the ids answered since the last reset to the earlier ones and forgets those last
// answered more than earlierResets resets ago.
func (c *callIDs) reset() {
	if c.earlier == nil {
		c.earlier = map[string]int{}
	}
	for id := range c.served {
		c.earlier[id] = c.resets
	}
	c.served = nil
	c.resets++
	for id, at := range c.earlier {
		if at < c.resets-earlierResets {
			delete(c.earlier, id)
		}
	}
}

// fromEarlier reports whether msgs carry a tool call (an assistant's call or a tool result) the
// model answered with before the last reset and not since.
func (c *callIDs) fromEarlier(msgs []Message) bool {
	isEarlier := func(id string) bool {
		_, before := c.earlier[id]
		return id != "" && before && !c.served[id]
	}
	for _, m := range msgs {
		if isEarlier(m.ToolCallID) {
			return true
		}
		for _, tc := range m.ToolCalls {
			if isEarlier(tc.ID) {
				return true
			}
		}
	}
	return false
}
