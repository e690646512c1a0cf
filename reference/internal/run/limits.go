package run

import (
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// ReasonResponseTooLarge is the reason of a run whose model answered with tool calls over the
// cap on a recorded response (agent.ResponseTooLargeError): nothing of that answer was recorded
// or run.
//
//	if v.Reason == run.ReasonResponseTooLarge { /* the model's tool calls were over the cap */ }
const ReasonResponseTooLarge loomtype.Reason = "response-too-large"

// ReasonTurnTimeout is the reason of a run whose model call ran out of its turnTimeoutMs.
//
//	opt := run.Options{Prompt: "check pump 3", TurnTimeoutMs: 30000} // else v.Reason == run.ReasonTurnTimeout
const ReasonTurnTimeout loomtype.Reason = "turn-timeout"

// MaxTimeoutMs bounds turnTimeoutMs and toolTimeoutMs (one day).
const MaxTimeoutMs = 24 * 60 * 60 * 1000

// reasonOf is the reason a failed run carries for res.
func reasonOf(res agent.Result) loomtype.Reason {
	switch {
	case res.TooLarge:
		return ReasonResponseTooLarge
	case res.TimedOut:
		return ReasonTurnTimeout
	}
	return res.Reason
}

// checkTimeouts refuses a timeout that is negative or over MaxTimeoutMs, by its name.
func checkTimeouts(opt Options) error {
	if opt.TurnTimeoutMs < 0 || opt.TurnTimeoutMs > MaxTimeoutMs {
		return loomtype.BadRequest("turnTimeoutMs", "")
	}
	if opt.ToolTimeoutMs < 0 || opt.ToolTimeoutMs > MaxTimeoutMs {
		return loomtype.BadRequest("toolTimeoutMs", "")
	}
	return nil
}

// timeouts are the loop's bounds of a model call and of a tool call.
func timeouts(opt Options) (turn, tool time.Duration) {
	return time.Duration(opt.TurnTimeoutMs) * time.Millisecond, time.Duration(opt.ToolTimeoutMs) * time.Millisecond
}
