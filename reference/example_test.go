package reference_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// echoModel is a model provider written in Go: anything implementing model.Provider plugs in.
type echoModel struct{}

func (echoModel) Complete(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	last := req.Messages[len(req.Messages)-1].Content
	answer := "You asked: " + last
	if onDelta != nil {
		onDelta(answer)
	}
	return model.Response{Content: answer, FinishReason: model.FinishStop}, nil
}

func signingKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// waitForReply polls the transcript until turn 1 has a reply (for the example's brevity; a real
// client follows the event stream instead).
func waitForReply(ctx context.Context, cv *reference.Conversations, who loomtype.Identity, id string) loomtype.Entry {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		page, err := cv.History(ctx, who, id, reference.HistoryOptions{})
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range page.Entries {
			if e.Role == loomtype.RoleAssistant {
				return e
			}
		}
	}
	return loomtype.Entry{}
}

// Open an engine on a data directory, plug in a model provider, start a conversation, send a
// turn and read the history back.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "loom-example-*")
	defer os.RemoveAll(dir)

	eng, err := reference.Open(ctx, reference.Options{
		DataDir:      filepath.Join(dir, "data"),
		Conversation: reference.ConversationConfig{Keys: [][]byte{signingKey()}},
		Deps:         reference.ConversationDeps{Provider: echoModel{}},
		Gateway:      reference.GatewayConfig{Insecure: true}, // this example does not serve HTTP
	})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	cv := eng.Conversations()
	st, _, err := cv.Start(ctx, alice, reference.StartOptions{ID: "pumps"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := cv.SendTurn(ctx, alice, st.ID, "is pump 7 running?", reference.SendOptions{MessageID: "m1"}); err != nil {
		log.Fatal(err)
	}
	reply := waitForReply(ctx, cv, alice, st.ID)
	fmt.Println(reply.Status, *reply.Text)
	// Output: complete You asked: is pump 7 running?
}

// Serve the HTTP surface (spec/http.md) with bearer tokens checked by the embedding program.
func ExampleEngine_Handler() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "loom-example-*")
	defer os.RemoveAll(dir)

	auth := func(r *http.Request) (loomtype.Identity, error) {
		if r.Header.Get("Authorization") == "Bearer secret-alice" {
			return loomtype.Identity{Tenant: "acme", Actor: "alice"}, nil
		}
		return loomtype.Identity{}, reference.ErrUnauthenticated
	}
	eng, err := reference.Open(ctx, reference.Options{
		DataDir:      filepath.Join(dir, "data"),
		Conversation: reference.ConversationConfig{Keys: [][]byte{signingKey()}},
		Deps:         reference.ConversationDeps{Provider: echoModel{}},
		Gateway:      reference.GatewayConfig{Authenticate: auth},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	srv := httptest.NewServer(eng.Handler()) // in production: http.ListenAndServe("127.0.0.1:8080", eng.Handler())
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/conversations", strings.NewReader(`{"id":"pumps"}`))
	req.Header.Set("Authorization", "Bearer secret-alice")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)

	stranger, _ := http.NewRequest(http.MethodGet, srv.URL+"/conversations/pumps", nil)
	resp, err = http.DefaultClient.Do(stranger)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// 201
	// 401
}

// Open an engine from the kit's configuration document, as `loomcheck serve` does.
func ExampleOpenConfig() {
	fmt.Println(reference.SpecVersion)
	// Output: 0.1.0
}
