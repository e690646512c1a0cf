package reference_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// roleModel is the model of one box's role: in a person's conversation or a turn the peer
// started it relays (sends once, then says so); in an agent conversation it opened it reports
// the answer it was given.
type roleModel struct {
	relay func(text string) (to, out string) // where a relayed text goes and what it says
	done  string                             // the answer once the text is sent
}

func (m roleModel) Complete(_ context.Context, req model.Request, _ func(string)) (model.Response, error) {
	last, sent, opened := "", false, false
	for _, msg := range req.Messages {
		switch {
		case msg.Role == model.RoleUser:
			last = msg.Content
		case msg.Role == model.RoleTool:
			sent = true
		case msg.Role == model.RoleSystem && strings.Contains(msg.Content, "It answers for the conversation of"):
			opened = true
		}
	}
	switch {
	case opened:
		return model.Response{Content: "The lab says: " + last, FinishReason: model.FinishStop}, nil
	case !sent:
		to, out := m.relay(last)
		args, _ := json.Marshal(map[string]string{"to": to, "text": out})
		return model.Response{ToolCalls: []model.ToolCall{{ID: "send", Name: "peer.send", Arguments: string(args)}}}, nil
	}
	return model.Response{Content: m.done, FinishReason: model.FinishStop}, nil
}

// tokens authenticates a fixed set of bearer tokens.
func tokens(m map[string]loomtype.Identity) reference.Authenticator {
	return func(r *http.Request) (loomtype.Identity, error) {
		if who, ok := m[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]; ok {
			return who, nil
		}
		return loomtype.Identity{}, reference.ErrUnauthenticated
	}
}

// Two boxes, each one's connection pointing at the other's HTTP server: a person asks the planner
// of box hq, the planner asks the scout of box lab, the scout answers, and the answer comes back
// in the same agent conversation, where the planner reports it for the person.
func Example_twoBoxes() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "loom-twobox-*")
	defer os.RemoveAll(dir)
	dana := loomtype.Identity{Tenant: "acme", Actor: "dana"}
	olga := loomtype.Identity{Tenant: "acme", Actor: "olga"}

	// Each server forwards to its engine, which is opened once both addresses are known.
	var hqH, labH atomic.Value
	hqSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hqH.Load().(http.Handler).ServeHTTP(w, r) }))
	defer hqSrv.Close()
	labSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { labH.Load().(http.Handler).ServeHTTP(w, r) }))
	defer labSrv.Close()

	open := func(name string, role reference.ThreadRole, peer, url, send, accept string, m model.Provider) *reference.Engine {
		eng, err := reference.Open(ctx, reference.Options{
			DataDir:      filepath.Join(dir, name),
			Conversation: reference.ConversationConfig{Keys: [][]byte{signingKey()}},
			Deps:         reference.ConversationDeps{Provider: m},
			Gateway:      reference.GatewayConfig{Authenticate: tokens(map[string]loomtype.Identity{"dana": dana, "olga": olga})},
			Threads: &reference.ThreadsConfig{Roles: []reference.ThreadRole{role}, Members: []loomtype.Identity{olga},
				Connections: []reference.ThreadConnection{{ID: peer, URL: url, Send: send, Accept: accept, Owner: olga}}},
		})
		if err != nil {
			log.Fatal(err)
		}
		return eng
	}
	hq := open("hq", reference.ThreadRole{Name: "planner", Prompt: "You plan the work."}, "lab", labSrv.URL, "hq-to-lab", "lab-to-hq",
		roleModel{relay: func(text string) (string, string) { return "lab/scout", text }, done: "I asked the lab's scout."})
	defer hq.Close()
	lab := open("lab", reference.ThreadRole{Name: "scout"}, "hq", hqSrv.URL, "lab-to-hq", "hq-to-lab",
		roleModel{relay: func(string) (string, string) { return "hq/planner", "Van 3 is free on Friday." }, done: "Answered."})
	defer lab.Close()
	hqH.Store(hq.Handler())
	labH.Store(lab.Handler())

	// Dana asks the planner, over HTTP.
	req, _ := http.NewRequest(http.MethodPost, hqSrv.URL+"/roles/planner/conversation/messages", strings.NewReader(`{"text":"Is a van free on Friday?"}`))
	req.Header.Set("Authorization", "Bearer dana")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("dana's turn:", resp.StatusCode)

	// Dana reads the agent conversation her request opened once the answer has been taken.
	vs, err := hq.Threads().List(ctx, dana)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err != nil {
			log.Fatal(err)
		}
		if len(vs) == 1 && len(vs[0].Turns) == 1 && vs[0].Turns[0].Status == "completed" && vs[0].Texts[0].State == "sent" {
			break
		}
		if time.Now().After(deadline) {
			log.Fatal("the planner's answer was not taken within 10s")
		}
		vs, err = hq.Threads().List(ctx, dana)
	}
	mine := vs[0]
	fmt.Println("root:", mine.Root.Kind, "started by:", mine.StartedBy)
	for _, t := range mine.Texts {
		fmt.Printf("%s %s: %s\n", t.Dir, t.State, t.Text)
	}
	fmt.Println("planner:", *mine.Turns[0].Output)

	// On the lab's side it is one conversation the peer started, under the same thread id.
	theirs, err := lab.Threads().Find(ctx, olga, "hq", mine.Thread)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("lab:", theirs.Role, "with hq/"+theirs.PeerRole, "started by:", theirs.StartedBy, "root:", theirs.Root.Kind)
	// Output:
	// dana's turn: 202
	// root: conversation started by: local
	// out sent: Is a van free on Friday?
	// in received: Van 3 is free on Friday.
	// planner: The lab says: Van 3 is free on Friday.
	// lab: scout with hq/planner started by: peer root: agent
}
