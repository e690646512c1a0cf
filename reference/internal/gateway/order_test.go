package gateway_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestUserRecordPrecedesItsLiveText: on an open stream, a turn's user record (committed before
// the model is asked) is delivered before the first live delta of that turn's reply, turn after
// turn. The stream's two sources (the log's wake-up and the hub) are both ready at once when the
// handler is busy, so without an order between them the delta comes first about half the time.
func TestUserRecordPrecedesItsLiveText(t *testing.T) {
	be := openBenchEngine(t, instant())
	const turns = 60
	for turn := int64(1); turn <= turns; turn++ {
		be.sendTurn(fmt.Sprintf("question %d", turn))
		sawUser := false
		for done := false; !done; {
			ev := be.next()
			switch ev.name {
			case "delta":
				var d struct {
					Turn int64 `json:"turn"`
				}
				if err := json.Unmarshal(ev.data, &d); err != nil {
					t.Fatalf("bad delta data: %v", err)
				}
				if d.Turn == turn && !sawUser {
					t.Fatalf("turn %d: a live delta arrived before the turn's user record", turn)
				}
			case "message":
				var e loomtype.Entry
				if err := json.Unmarshal(ev.data, &e); err != nil {
					t.Fatalf("bad message data: %v", err)
				}
				if e.Turn == turn && e.Role == loomtype.RoleUser {
					sawUser = true
				}
				done = e.Turn == turn && e.Role == loomtype.RoleAssistant
			}
		}
		if !sawUser {
			t.Fatalf("turn %d: the reply came without the user record", turn)
		}
	}
}
