package kernel

import (
	"encoding/json"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// The kernel's journal: the names of what it keeps in the store and the kinds and payloads of the
// events it writes. They are the on-disk shape of every execution already written (the golden
// journals under reference/testdata/golden replay them): add kinds and fields; never rename one.

// Stream names and keys in the store.
func logStream(id string) string   { return "x/" + id }
func inboxStream(id string) string { return "in/" + id }
func metaKey(id string) string     { return "exec/" + id }
func dedupeScope(id string) string { return "dd/" + id }

// metaPrefix begins every execution record's key.
const metaPrefix = "exec/"

// Event kinds of an execution's log.
const (
	kindStarted   = "started"
	kindConsumed  = "consumed"
	kindDecision  = "decision"
	kindStepStart = "step.started"
	kindStepDone  = "step.completed"
	kindStepFail  = "step.failed"
	kindContinued = "continued"
	kindCompleted = "completed"
	kindFailed    = "failed"
	kindMessage   = "message" // inbox
)

// Event payloads.
type evStarted struct {
	Flow        string            `json:"flow"`
	Principal   loomtype.Identity `json:"principal"`
	Input       json.RawMessage   `json:"input"`
	InboxCursor int64             `json:"inboxCursor,omitempty"`
}

type evDecision struct {
	ID    string          `json:"id"`
	Value json.RawMessage `json:"value"`
	Inner []string        `json:"inner,omitempty"`
}

type evStep struct {
	ID     string          `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

type evEnd struct {
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}
