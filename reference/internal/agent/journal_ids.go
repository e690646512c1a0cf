package agent

import "fmt"

// The journal vocabulary of the agent loop: the decision and step ids one loop writes, each
// under the loop's id (Config.LoopID). They are the on-disk shape of every turn already written:
// a replay finds each fact by its id, so renaming one makes every older journal diverge (the
// golden journals under reference/testdata/golden fail first). Add ids; never change one.
const (
	idAbortTurn = "%s#abort:turn:%d"    // the barge-in checkpoint before model call i
	idResponse  = "%s#turn:%d:response" // the model's answer to call i
	idToolStep  = "%s#turn:%d:tool:%d"  // the step of tool call j of model call i
	idAbortAll  = "%s#abort:tools:%d"   // the checkpoint before parallel tool calls
	idAbortTool = "%s#abort:tool:%d:%d" // the checkpoint before sequential tool call j
	maxIterName = "max-iterations"      // the call name an out-of-iterations errorId derives from
)

func abortTurnID(loop string, i int) string    { return fmt.Sprintf(idAbortTurn, loop, i) }
func responseID(loop string, i int) string     { return fmt.Sprintf(idResponse, loop, i) }
func toolStepID(loop string, i, j int) string  { return fmt.Sprintf(idToolStep, loop, i, j) }
func abortToolsID(loop string, i int) string   { return fmt.Sprintf(idAbortAll, loop, i) }
func abortToolID(loop string, i, j int) string { return fmt.Sprintf(idAbortTool, loop, i, j) }
