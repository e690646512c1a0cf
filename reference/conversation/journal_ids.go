package conversation

import "fmt"

// The journal vocabulary of the dialogue: every flow name, decision id, step id and side-stream
// event kind this package writes. They are the on-disk shape of every conversation already
// written: a replay finds each fact by its id, so renaming one makes every older journal diverge
// (the golden journals under reference/testdata/golden fail first). Add ids; never change one.
const (
	// FlowName is the kernel flow a conversation runs as.
	FlowName = "conversation"
	// TurnFlowName is the kernel flow a shared-mode turn runs as, under its asker.
	TurnFlowName = "conversation.turn"

	// idPrefix begins every decision and step id the dialogue itself writes.
	idPrefix = "conv#"
	// verifySuffix ends the id of a message's acceptance verdict.
	verifySuffix = ":verify"

	idVerify        = idPrefix + "o%d" + verifySuffix // the acceptance verdict of message ord
	idUser          = idPrefix + "o%d:user"           // the user record of message ord
	idReply         = idPrefix + "o%d:reply"          // the reply record of message ord
	idClosed        = idPrefix + "closed"             // the close record
	idDropped       = idPrefix + "dropped:%d"         // the counter of invalid messages past the cap
	idFit           = idPrefix + "fit:%d"             // the budget verdict of message ord
	idSummarize     = idPrefix + "o%d:summarize"      // the summarizer step
	idSummarizeDone = idSummarize + ":outcome"        // the summary decision around that step
	idMember        = idPrefix + "o%d:member"         // shared: the asker is still a participant
	idVisible       = idPrefix + "o%d:visible"        // shared: the window the asker may see
	idTurnExec      = idPrefix + "o%d:turnexec"       // shared: the turn execution's id
	idTurn          = idPrefix + "o%d:turn"           // shared: the step that starts and awaits it
	loopOwner       = idPrefix + "o%d"                // the agent loop id of an owner-mode turn
	loopShared      = "turn#o%d"                      // the agent loop id of a shared-mode turn
	memoryRecall    = "#memory:recall"                // after a loop id: the memory recall step
	memoryWrite     = "#memory:write"                 // after a loop id: the memory write-back step
	// The participants stream's name and kind are in package participants.
)

func verifyID(ord int64) string        { return fmt.Sprintf(idVerify, ord) }
func userID(ord int64) string          { return fmt.Sprintf(idUser, ord) }
func replyID(ord int64) string         { return fmt.Sprintf(idReply, ord) }
func droppedID(n int64) string         { return fmt.Sprintf(idDropped, n) }
func fitID(ord int64) string           { return fmt.Sprintf(idFit, ord) }
func summarizeID(ord int64) string     { return fmt.Sprintf(idSummarize, ord) }
func summarizeDoneID(ord int64) string { return fmt.Sprintf(idSummarizeDone, ord) }
func memberID(ord int64) string        { return fmt.Sprintf(idMember, ord) }
func visibleID(ord int64) string       { return fmt.Sprintf(idVisible, ord) }
func turnExecID(ord int64) string      { return fmt.Sprintf(idTurnExec, ord) }
func turnStepID(ord int64) string      { return fmt.Sprintf(idTurn, ord) }
func ownerLoopID(ord int64) string     { return fmt.Sprintf(loopOwner, ord) }
func sharedLoopID(ord int64) string    { return fmt.Sprintf(loopShared, ord) }
