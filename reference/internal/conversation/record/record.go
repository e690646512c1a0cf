package record

import (
	"time"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Stored is a transcript record as the journal stores it: the "rec" of a record decision's
// value. It is kept apart from loomtype.Entry, the wire form history and the event stream
// answer, so that either can change without the other: a record becomes an entry only when it
// is read back (Entry), and an entry is recorded only through Of. Its fields and their
// JSON names are the on-disk shape of every journal already written; add fields, never rename.
type Stored struct {
	// Cursor is always empty in the journal (a record's place is its event's). Journals of
	// version 1 wrote it ("cursor":""); since version 2 it is left out.
	Cursor          string                `json:"cursor,omitempty"`
	Ord             int64                 `json:"ord"`
	Turn            int64                 `json:"turn"`
	Role            loomtype.Role         `json:"role"`
	Status          loomtype.RecordStatus `json:"status"`
	Text            *string               `json:"text,omitempty"`
	Reason          loomtype.Reason       `json:"reason,omitempty"`
	ErrorID         string                `json:"errorId,omitempty"`
	MessageID       string                `json:"messageId,omitempty"`
	EditOf          int64                 `json:"editOf,omitempty"`
	EditOfTurn      int64                 `json:"editOfTurn,omitempty"`
	Asker           *loomtype.Identity    `json:"asker,omitempty"`
	Time            time.Time             `json:"time"`
	Classes         []string              `json:"classes,omitempty"`
	TurnExecutionID string                `json:"turnExecutionId,omitempty"`
	// In (version 4) names the inbox entry that holds the record's text, message id, asker and
	// edited record, which the record then leaves out (inboxref.go).
	In *InboxRef `json:"in,omitempty"`
}

// Of is the stored form of an entry about to be recorded (its cursor is not stored).
func Of(e loomtype.Entry) Stored {
	return Stored{Ord: e.Ord, Turn: e.Turn, Role: e.Role, Status: e.Status, Text: e.Text, Reason: e.Reason,
		ErrorID: e.ErrorID, MessageID: e.MessageID, EditOf: e.EditOf, EditOfTurn: e.EditOfTurn, Asker: e.Asker,
		Time: e.Time, Classes: e.Classes, TurnExecutionID: e.TurnExecutionID}
}

// Entry is the wire form of a stored record; its Cursor is for the reader to set.
func (r Stored) Entry() loomtype.Entry {
	return loomtype.Entry{Ord: r.Ord, Turn: r.Turn, Role: r.Role, Status: r.Status, Text: r.Text,
		Reason: r.Reason, ErrorID: r.ErrorID, MessageID: r.MessageID, EditOf: r.EditOf, EditOfTurn: r.EditOfTurn,
		Asker: r.Asker, Time: r.Time, Classes: r.Classes, TurnExecutionID: r.TurnExecutionID}
}
