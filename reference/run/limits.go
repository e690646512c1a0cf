package run

import (
	"github.com/loomcheck/loomcheck/reference/agent"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// ReasonResponseTooLarge is the reason of a run whose model answered with tool calls over the
// cap on a recorded response (agent.ResponseTooLargeError): nothing of that answer was recorded
// or run.
const ReasonResponseTooLarge loomtype.Reason = "response-too-large"

// reasonOf is the reason a failed run carries for res.
func reasonOf(res agent.Result) loomtype.Reason {
	if res.TooLarge {
		return ReasonResponseTooLarge
	}
	return res.Reason
}
