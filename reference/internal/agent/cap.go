package agent

import (
	"errors"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// ResponseTooLargeError is a model response whose tool calls are over the cap on what is
// recorded: their arguments together exceed MaxResponseChars characters. Tool calls are never
// cut (a cut call would run with arguments the model did not write), so the response is not
// recorded at all and the run fails; a resume asks the model again.
//
//	if errors.Is(err, agent.ErrResponseTooLarge) { /* nothing was recorded */ }
type ResponseTooLargeError struct {
	// Chars is how many characters the response's tool-call arguments hold.
	Chars int
}

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("agent: the model's tool calls hold %d characters, over the cap of %d", e.Chars, MaxResponseChars)
}

// ErrResponseTooLarge matches every *ResponseTooLargeError with errors.Is.
var ErrResponseTooLarge = errors.New("agent: response too large")

// Is makes errors.Is(err, ErrResponseTooLarge) true.
func (e *ResponseTooLargeError) Is(target error) bool { return target == ErrResponseTooLarge }

// checkToolCalls returns a *ResponseTooLargeError when calls' arguments together are longer than
// MaxResponseChars characters.
func checkToolCalls(calls []model.ToolCall) error {
	n := 0
	for _, c := range calls {
		for range c.Arguments {
			n++
		}
	}
	if n > MaxResponseChars {
		return &ResponseTooLargeError{Chars: n}
	}
	return nil
}

// tooLarge turns a response over the cap into the run's failure: status Failed, reason
// ReasonModelError, TooLarge set, and an errorId whose report names the cause. It reports
// whether err was one.
func tooLarge(cfg Config, err error, res *Result) bool {
	var tl *ResponseTooLargeError
	if !errors.As(err, &tl) {
		return false
	}
	id := NewErrorID()
	if cfg.OnError != nil {
		cfg.OnError(id, tl)
	}
	res.Status, res.Reason, res.ErrorID, res.TooLarge = Failed, loomtype.ReasonModelError, id, true
	return true
}
