package reference_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Embed the engine in a program: open it on a data directory, start a conversation, send a turn
// and follow the conversation until the reply is recorded. With no model provider configured the
// engine answers with its built-in deterministic model. The README shows this same code.
func Example_embed() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, _ := os.MkdirTemp("", "loom-embed-*")
	defer os.RemoveAll(dir)

	key := make([]byte, 32) // signs every message; a real host keeps it across restarts
	rand.Read(key)
	eng, err := reference.Open(ctx, reference.Options{
		DataDir:      filepath.Join(dir, "data"), // created on the first start
		Conversation: reference.ConversationConfig{Keys: [][]byte{key}},
		Gateway:      reference.GatewayConfig{Insecure: true}, // no HTTP is served here
	})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	cv := eng.Conversations()
	st, _, err := cv.Start(ctx, alice, reference.StartOptions{})
	if err != nil {
		log.Fatal(err)
	}
	follow := cv.Follow(st.ID) // reads the log as it grows; alice started it, so she may read it
	defer follow.Close()
	if _, err := cv.SendTurn(ctx, alice, st.ID, "is pump 7 running?", reference.SendOptions{MessageID: "m1"}); err != nil {
		log.Fatal(err)
	}
	for at := (loomtype.Cursor{}); ; {
		entries, next, _, err := follow.Read(ctx, at, 100)
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range entries {
			fmt.Println(e.Turn, e.Role, e.Status, *e.Text)
			if e.Role == loomtype.RoleAssistant {
				return
			}
		}
		at = next
		select {
		case <-follow.Wake(): // a commit: read again
		case <-ctx.Done():
			log.Fatal("no reply within 30s: ", ctx.Err())
		}
	}
	// Output:
	// 1 user accepted is pump 7 running?
	// 1 assistant complete You said: "is pump 7 running?"
}
