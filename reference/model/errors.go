package model

import (
	"fmt"
	"strconv"
)

// MaxErrorBody is how much of a failed answer's body a ProviderError keeps.
const MaxErrorBody = 4 << 10

// ProviderError is a model server's refusal: an answer with a non-2xx status, or an error object
// sent inside an otherwise successful stream (then Status is the stream's own status, normally
// 200). Body holds at most MaxErrorBody bytes of what the server sent. Callers use errors.As; the
// body is for diagnostics and must not be shown to end users verbatim.
//
//	var pe *model.ProviderError
//	if errors.As(err, &pe) && pe.Status == http.StatusTooManyRequests { retryLater() }
type ProviderError struct {
	Status int
	Body   string
}

func (e *ProviderError) Error() string {
	return "model: provider answered " + strconv.Itoa(e.Status)
}

// ProtocolError is an answer that does not follow the Chat Completions protocol: a body that is
// not the expected JSON, a malformed or truncated event stream, or an answer over the size limits.
// Reason says what was wrong in a few words; Err, when set, is the underlying decoding error.
//
//	var pe *model.ProtocolError
//	if errors.As(err, &pe) { log.Printf("bad model answer: %s", pe.Reason) }
type ProtocolError struct {
	Reason string
	Err    error
}

func (e *ProtocolError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("model: malformed answer: %s: %v", e.Reason, e.Err)
	}
	return "model: malformed answer: " + e.Reason
}

// Unwrap returns the underlying decoding error, if any.
func (e *ProtocolError) Unwrap() error { return e.Err }

// TransportError is a failure to reach the model server or to read its answer (connection refused,
// reset, TLS failure, ...). It wraps the error of the HTTP client. A cancelled or expired context
// is never reported as a TransportError but as the context's own error (see Provider).
//
//	var te *model.TransportError
//	if errors.As(err, &te) { markUnavailable() }
type TransportError struct {
	Err error
}

func (e *TransportError) Error() string { return "model: transport: " + e.Err.Error() }

// Unwrap returns the HTTP client's error.
func (e *TransportError) Unwrap() error { return e.Err }
