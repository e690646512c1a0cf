package gateway

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestTheConversationStreamReadsItsLogOnItsOwn: a conversation's event stream reads its log every
// Config.Poll whether or not the store told it of a commit, so a notification it missed costs the
// poll interval and never an event (spec/nodes.md, Wake-ups; the follow loop's polling is proved
// in reference/internal/stream). A session stream is fed by its session, not by the log, and does
// not poll. No client can make a notification go missing, so the scenarios cannot judge this.
func TestTheConversationStreamReadsItsLogOnItsOwn(t *testing.T) {
	for _, poll := range []time.Duration{DefaultPoll, 250 * time.Millisecond} {
		g := &Gateway{cfg: Config{Poll: poll}}
		r := httptest.NewRequest("GET", "/conversations/c1/events", nil)
		who := loomtype.Identity{Tenant: "acme", Actor: "alice"}
		if got := g.followConfig(r, who, "c1", false).Poll; got != poll {
			t.Errorf("the conversation's stream reads its log every %v, want every %v (Config.Poll)", got, poll)
		}
		if got := g.followConfig(r, who, "c1", true).Poll; got != 0 {
			t.Errorf("a session stream polls every %v, want never", got)
		}
	}
}
