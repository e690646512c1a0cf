package record

import (
	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// StartInput is generation 0's input: the owner stamp, written at the one moment only the
// starter can write it.
type StartInput struct {
	V     int               `json:"v"`
	Owner loomtype.Identity `json:"owner"`
	Mode  loomtype.Mode     `json:"mode"`
	// CountEmpty: empty and oversized messages count against MaxInvalidRecords. Every
	// conversation Start makes says so; one whose log predates it replays as it was written.
	CountEmpty bool `json:"countEmpty,omitempty"`
	// InvalidPerAsker: in shared mode each asker has a MaxInvalidRecords of their own. Every
	// shared conversation Start makes says so; one whose log predates it replays as written.
	InvalidPerAsker bool `json:"invalidPerAsker,omitempty"`
	// Seed are exchanges the conversation starts with (a branch's copy of another
	// conversation's), recorded before its first message, oldest first, as if they had been
	// asked and answered here.
	Seed []SeedTurn `json:"seed,omitempty"`
}

// SeedTurn is one exchange a conversation starts with: a person's accepted message and the
// reply it had (its status, and its text unless the reply failed).
type SeedTurn struct {
	Asker     loomtype.Identity     `json:"asker"`
	MessageID string                `json:"messageId,omitempty"`
	User      string                `json:"user"`
	Reply     string                `json:"reply,omitempty"`
	Status    loomtype.RecordStatus `json:"status"`
}

// EnvelopeJSON is the wire form of an envelope (schemas/envelope.schema.json).
type EnvelopeJSON struct {
	ConversationID string            `json:"conversationId"`
	Kind           string            `json:"kind"`
	ID             string            `json:"id"`
	IAT            int64             `json:"iat"`
	Text           string            `json:"text"`
	Asker          envelope.Identity `json:"asker"`
	EditOf         *int64            `json:"editOf,omitempty"`
	Sig            string            `json:"sig"`
}

// WireEnvelope is the wire form of e.
func WireEnvelope(e envelope.Envelope) EnvelopeJSON {
	return EnvelopeJSON{ConversationID: e.ConversationID, Kind: e.Kind, ID: e.ID, IAT: e.IAT, Text: e.Text,
		Asker: e.Asker, EditOf: e.EditOf, Sig: e.Sig}
}
