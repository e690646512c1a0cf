// Package record is the conversation's journaled vocabulary, shared by the client, the dialogue
// flow and the turn execution: the stored record and how a log event is read back as one, the
// start input, the wire form of an envelope, the decision and step ids, and the configuration
// every layer reads. Nothing here runs a flow.
package record

import "fmt"

// The journal vocabulary of the dialogue: every flow name, decision id, step id and side-stream
// event kind the conversation writes. They are the on-disk shape of every conversation already
// written: a replay finds each fact by its id, so renaming one makes every older journal diverge
// (the golden journals under reference/testdata/golden fail first). Add ids; never change one.
const (
	// FlowName is the kernel flow a conversation runs as.
	FlowName = "conversation"
	// TurnFlowName is the kernel flow a shared-mode turn runs as, under its asker.
	TurnFlowName = "conversation.turn"

	// IDPrefix begins every decision and step id the dialogue itself writes.
	IDPrefix = "conv#"
	// VerifySuffix ends the id of a message's acceptance verdict.
	VerifySuffix = ":verify"

	idVerify        = IDPrefix + "o%d" + VerifySuffix // the acceptance verdict of message ord
	idUser          = IDPrefix + "o%d:user"           // the user record of message ord
	idReply         = IDPrefix + "o%d:reply"          // the reply record of message ord
	IDClosed        = IDPrefix + "closed"             // the close record
	idDropped       = IDPrefix + "dropped:%d"         // the counter of invalid messages past the cap
	idFit           = IDPrefix + "fit:%d"             // the budget verdict of message ord
	idSummarize     = IDPrefix + "o%d:summarize"      // the summarizer step
	idSummarizeDone = idSummarize + ":outcome"        // the summary decision around that step
	idMember        = IDPrefix + "o%d:member"         // shared: the asker is still a participant
	idVisible       = IDPrefix + "o%d:visible"        // shared: the window the asker may see
	idTurnExec      = IDPrefix + "o%d:turnexec"       // shared: the turn execution's id
	idTurn          = IDPrefix + "o%d:turn"           // shared: the step that starts and awaits it
	loopOwner       = IDPrefix + "o%d"                // the agent loop id of an owner-mode turn
	loopShared      = "turn#o%d"                      // the agent loop id of a shared-mode turn
	MemoryRecall    = "#memory:recall"                // after a loop id: the memory recall step
	MemoryWrite     = "#memory:write"                 // after a loop id: the memory write-back step
	// The participants stream's name and kind are in package participants.
)

// The ids of one message's facts, by its ordinal (or, for DroppedID, the invalid count).

func VerifyID(ord int64) string        { return fmt.Sprintf(idVerify, ord) }
func UserID(ord int64) string          { return fmt.Sprintf(idUser, ord) }
func ReplyID(ord int64) string         { return fmt.Sprintf(idReply, ord) }
func DroppedID(n int64) string         { return fmt.Sprintf(idDropped, n) }
func FitID(ord int64) string           { return fmt.Sprintf(idFit, ord) }
func SummarizeID(ord int64) string     { return fmt.Sprintf(idSummarize, ord) }
func SummarizeDoneID(ord int64) string { return fmt.Sprintf(idSummarizeDone, ord) }
func MemberID(ord int64) string        { return fmt.Sprintf(idMember, ord) }
func VisibleID(ord int64) string       { return fmt.Sprintf(idVisible, ord) }
func TurnExecID(ord int64) string      { return fmt.Sprintf(idTurnExec, ord) }
func TurnStepID(ord int64) string      { return fmt.Sprintf(idTurn, ord) }
func OwnerLoopID(ord int64) string     { return fmt.Sprintf(loopOwner, ord) }
func SharedLoopID(ord int64) string    { return fmt.Sprintf(loopShared, ord) }
