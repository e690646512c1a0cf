package threads_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

func msgs(pairs ...string) []model.Message {
	var out []model.Message
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, model.Message{Role: pairs[i], Content: pairs[i+1]})
	}
	return out
}

func TestAgentRequestIsExactlyAsTheContractLists(t *testing.T) {
	done := "I asked the lab."
	got := threads.AgentRequest(threads.AgentTurn{Prompt: "You plan the work.", Role: "planner", ID: "ac_1", Connection: "lab",
		PeerRole: "scout", Root: "task tk_1: Move the lab",
		Earlier: []threads.Earlier{{Texts: []string{"one", "two"}, Output: &done}, {Texts: []string{"three"}}},
		Stopped: true, Failed: []threads.Failure{{Message: "m_9", Reason: "thread"}}, Texts: []string{"four", "five"}})
	want := msgs(
		"system", "You plan the work.",
		"system", "You are planner, in agent conversation ac_1 with lab/scout. It answers for task tk_1: Move the lab.",
		"user", "one", "user", "two", "assistant", "I asked the lab.",
		"user", "three",
		"system", "A person stopped your last turn.",
		"system", "Your text m_9 failed: thread.",
		"user", "four", "user", "five")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("request:\n got %#v\nwant %#v", got, want)
	}
	got = threads.AgentRequest(threads.AgentTurn{Role: "scout", ID: "ac_2", Connection: "hq", PeerRole: "planner", Root: "itself", Texts: []string{"hi"}})
	want = msgs("system", "You are scout, in agent conversation ac_2 with hq/planner. It answers for itself.", "user", "hi")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("request without a prompt:\n got %#v\nwant %#v", got, want)
	}
}

func TestPersonAndTaskRequests(t *testing.T) {
	a := "Booked."
	got := threads.PersonRequest("P", []threads.Exchange{{Text: "book a van", Output: &a}, {Text: "cancel it"}}, "again")
	want := msgs("system", "P", "user", "book a van", "assistant", "Booked.", "user", "cancel it", "user", "again")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("person request:\n got %#v\nwant %#v", got, want)
	}
	got = threads.TaskRequest("", "tk_1", "Move", "go")
	want = msgs("system", "You work on task tk_1: Move.", "user", "go")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("task request:\n got %#v\nwant %#v", got, want)
	}
}

func TestParseTextNamesTheFirstBadMemberInOrder(t *testing.T) {
	good := `{"v":1,"thread":"t_0123456789abcdef","message":"m1","from":"scout","to":"planner","text":"hi"}`
	if tx, rej := threads.ParseText([]byte(good)); rej != nil || tx != (threads.Text{V: 1, Thread: "t_0123456789abcdef", Message: "m1", From: "scout", To: "planner", Text: "hi"}) {
		t.Fatalf("good text: %+v %v", tx, rej)
	}
	cases := map[string]string{
		`[]`:                                    "body",
		`{"thread":1}`:                          "v",
		`{"v":2,"thread":"short"}`:              "v",
		`{"v":1,"thread":"short","message":""}`: "thread",
		`{"v":1,"thread":"t_0123456789abcdef","message":"has space"}`:                                                                                "message",
		`{"v":1,"thread":"t_0123456789abcdef","message":"m1","from":"Scout"}`:                                                                        "from",
		`{"v":1,"thread":"t_0123456789abcdef","message":"m1","from":"scout","to":5}`:                                                                 "to",
		`{"v":1,"thread":"t_0123456789abcdef","message":"m1","from":"scout","to":"planner","text":""}`:                                               "text",
		`{"v":1,"thread":"t_0123456789abcdef","message":"m1","from":"scout","to":"planner","text":"` + strings.Repeat("x", threads.MaxText+1) + `"}`: "text",
	}
	for body, member := range cases {
		_, rej := threads.ParseText([]byte(body))
		if rej == nil || *rej != (threads.Rejection{Status: 400, Reason: "bad-request", Detail: member}) {
			t.Errorf("%.60s: got %+v, want bad-request %s", body, rej, member)
		}
	}
}

// fakeModel answers each request by rule, saying nothing, and keeps every request
// (scriptmodel.Model.Messages).
func fakeModel(rule func(msgs []model.Message) model.Response) *scriptmodel.Model {
	return scriptmodel.Script(func(req model.Request) scriptmodel.Reply { return scriptmodel.Reply{Response: rule(req.Messages)} })
}

// fakePeer is the peer box's door: it keeps every text and answers with answer.
type fakePeer struct {
	mu     sync.Mutex
	texts  []threads.Text
	tokens []string
	answer func(n int) (int, string)
}

func (p *fakePeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var tx threads.Text
	_ = json.Unmarshal(b, &tx)
	p.mu.Lock()
	p.texts = append(p.texts, tx)
	p.tokens = append(p.tokens, r.Header.Get("Authorization"))
	n := len(p.texts)
	p.mu.Unlock()
	status, reason := 200, ""
	if p.answer != nil {
		status, reason = p.answer(n)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status == 200 {
		_ = json.NewEncoder(w).Encode(threads.Ack{Ack: true, Thread: tx.Thread, Message: tx.Message})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"reason": reason})
}

func (p *fakePeer) received() []threads.Text {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]threads.Text(nil), p.texts...)
}

var (
	dana = loomtype.Identity{Tenant: "acme", Actor: "dana"}
	olga = loomtype.Identity{Tenant: "acme", Actor: "olga"}
	eve  = loomtype.Identity{Tenant: "acme", Actor: "eve"}
)

type box struct {
	st  *sqlite.SQLite
	k   *kernel.Kernel
	svc *threads.Service
}

func openBox(t *testing.T, dir string, cfg threads.Config) *box {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "loom.db"), sqlite.Options{AllowEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := threads.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: svc.Flows(), Prepare: svc.Prepare})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	return &box{st: st, k: k, svc: svc}
}

func (b *box) close() {
	b.svc.Close()
	b.k.Close()
	b.st.Close()
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func lastUser(m []model.Message) string {
	for i := len(m) - 1; i >= 0; i-- {
		if m[i].Role == model.RoleUser {
			return m[i].Content
		}
	}
	return ""
}

func hasTool(m []model.Message) bool {
	for _, x := range m {
		if x.Role == model.RoleTool {
			return true
		}
	}
	return false
}

// relayModel sends the person's request to the lab's scout, and answers everything else.
func relayModel() *scriptmodel.Model {
	return fakeModel(func(m []model.Message) model.Response {
		if lastUser(m) == "find a van" && !hasTool(m) {
			return model.Response{ToolCalls: []model.ToolCall{{ID: "c1", Name: "peer.send", Arguments: `{"to":"lab/scout","text":"is a van free?"}`}}}
		}
		return model.Response{Content: "noted: " + lastUser(m), FinishReason: model.FinishStop}
	})
}

func TestAPersonsRequestGoesOutAndTheAnswerComesBackInTheSameAgentConversation(t *testing.T) {
	ctx := context.Background()
	peer := &fakePeer{}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	fm := relayModel()
	b := openBox(t, t.TempDir(), threads.Config{Roles: []threads.Role{{Name: "planner", Prompt: "You plan the work.", Principals: []loomtype.Identity{{Actor: "role:planner"}}}},
		Members:     []loomtype.Identity{olga},
		Connections: []threads.Connection{{ID: "lab", URL: srv.URL, Send: "to-lab", Accept: "from-lab", Owner: olga}},
		Provider:    fm})
	defer b.close()

	if _, _, err := b.svc.Converse(ctx, dana, "planner", "find a van"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the text to reach the peer", func() bool { return len(peer.received()) == 1 })
	out := peer.received()[0]
	if out.V != 1 || out.From != "planner" || out.To != "scout" || out.Text != "is a van free?" || !strings.HasPrefix(out.Message, "m_") || len(out.Thread) < 16 {
		t.Fatalf("text on the wire: %+v", out)
	}
	if peer.tokens[0] != "Bearer to-lab" {
		t.Fatalf("token %q", peer.tokens[0])
	}
	body, _ := json.Marshal(threads.Text{V: 1, Thread: out.Thread, Message: "p1", From: "scout", To: "planner", Text: "van 3 is free"})
	ack, err := b.svc.Receive(ctx, "from-lab", body)
	if err != nil || ack != (threads.Ack{Ack: true, Thread: out.Thread, Message: "p1"}) {
		t.Fatalf("ack %+v, %v", ack, err)
	}
	// The same message again adds nothing and gets the same answer.
	if again, err := b.svc.Receive(ctx, "from-lab", body); err != nil || again != ack {
		t.Fatalf("again: %+v, %v", again, err)
	}
	var v threads.View
	eventually(t, "the answer's turn", func() bool {
		v, err = b.svc.Find(ctx, dana, "lab", out.Thread)
		return err == nil && len(v.Turns) == 1 && v.Turns[0].Status == "completed"
	})
	answer := "noted: van 3 is free"
	want := threads.View{ID: v.ID, Connection: "lab", Thread: out.Thread, Role: "planner", PeerRole: "scout", StartedBy: "local",
		Root: v.Root, State: "open",
		Texts: []threads.TextView{{Dir: "out", Message: out.Message, Text: "is a van free?", State: "sent"}, {Dir: "in", Message: "p1", Text: "van 3 is free", State: "received"}},
		Turns: []threads.TurnView{{Turn: 1, Status: "completed", Texts: []string{"p1"}, Output: &answer}}}
	if v.Root.Kind != "conversation" || !reflect.DeepEqual(v, want) {
		t.Fatalf("agent conversation:\n got %+v\nwant %+v", v, want)
	}
	var acReq []model.Message
	for _, r := range fm.Messages() {
		if lastUser(r) == "van 3 is free" {
			acReq = r
		}
	}
	wantReq := msgs("system", "You plan the work.",
		"system", "You are planner, in agent conversation "+v.ID+" with lab/scout. It answers for the conversation of dana.",
		"user", "van 3 is free")
	if !reflect.DeepEqual(acReq, wantReq) {
		t.Fatalf("model request of the agent turn:\n got %#v\nwant %#v", acReq, wantReq)
	}
	// Who reads it: dana (the root's person) and the role; not olga, not eve.
	if _, err := b.svc.Get(ctx, eve, v.ID); !errors.Is(err, threads.ErrNotFound) {
		t.Fatalf("eve reads it: %v", err)
	}
	if _, err := b.svc.Get(ctx, olga, v.ID); !errors.Is(err, threads.ErrNotFound) {
		t.Fatalf("the owner reads a conversation-rooted one: %v", err)
	}
	if _, err := b.svc.Get(ctx, loomtype.Identity{Actor: "role:planner"}, v.ID); err != nil {
		t.Fatalf("the role: %v", err)
	}
	// Deleting the root closes it: gone, readable by the owner, later text rejected thread.
	if err := b.svc.DeleteConversation(ctx, dana, "planner"); err != nil {
		t.Fatal(err)
	}
	g, err := b.svc.Get(ctx, olga, v.ID)
	if err != nil || g.Root.Kind != "gone" || g.State != "closed" {
		t.Fatalf("after delete: %+v %v", g, err)
	}
	body, _ = json.Marshal(threads.Text{V: 1, Thread: out.Thread, Message: "p2", From: "scout", To: "planner", Text: "late"})
	var rej *threads.Rejection
	if _, err := b.svc.Receive(ctx, "from-lab", body); !errors.As(err, &rej) || *rej != (threads.Rejection{Status: 409, Reason: "thread"}) {
		t.Fatalf("late text: %v", err)
	}
}

func TestThePeerStartsAConversationAndTheChecksComeInTheTablesOrder(t *testing.T) {
	ctx := context.Background()
	peer := &fakePeer{}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	fm := fakeModel(func(m []model.Message) model.Response {
		return model.Response{Content: "ok " + lastUser(m), FinishReason: model.FinishStop}
	})
	b := openBox(t, t.TempDir(), threads.Config{Roles: []threads.Role{{Name: "scout"}}, Members: []loomtype.Identity{dana},
		Connections: []threads.Connection{{ID: "hq", URL: srv.URL, Send: "to-hq", Accept: "from-hq", Owner: olga}}, Provider: fm})
	defer b.close()
	text := func(thread, mid, from, to string) []byte {
		b, _ := json.Marshal(threads.Text{V: 1, Thread: thread, Message: mid, From: from, To: to, Text: "hello " + mid})
		return b
	}
	th := "t_aaaaaaaaaaaaaaaaaaaa"
	rejects := func(token string, body []byte, want threads.Rejection) {
		t.Helper()
		var rej *threads.Rejection
		if _, err := b.svc.Receive(ctx, token, body); !errors.As(err, &rej) || *rej != want {
			t.Fatalf("got %v, want %+v", err, want)
		}
	}
	rejects("nope", text(th, "m1", "planner", "scout"), threads.Rejection{Status: 401, Reason: "connection"})
	rejects("from-hq", text(th, "m1", "planner", "nobody"), threads.Rejection{Status: 404, Reason: "role"})
	if _, err := b.svc.Receive(ctx, "from-hq", text(th, "m1", "planner", "scout")); err != nil {
		t.Fatal(err)
	}
	rejects("from-hq", text(th, "m2", "boss", "scout"), threads.Rejection{Status: 409, Reason: "roles"})
	var v threads.View
	eventually(t, "the peer's turn", func() bool {
		var err error
		v, err = b.svc.Find(ctx, dana, "hq", th)
		return err == nil && len(v.Turns) == 1 && v.Turns[0].Status == "completed"
	})
	if v.StartedBy != "peer" || v.Root != (threads.Root{Kind: "agent", ID: v.ID}) {
		t.Fatalf("peer-started: %+v", v)
	}
	if _, err := b.svc.Get(ctx, olga, v.ID); err != nil {
		t.Fatalf("the owner reads a peer-started one: %v", err)
	}
	want := msgs("system", "You are scout, in agent conversation "+v.ID+" with hq/planner. It answers for itself.", "user", "hello m1")
	if got := fm.Messages()[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("request:\n got %#v\nwant %#v", got, want)
	}
	// Paused: paused whatever the thread; a second turn after unpause is told nothing.
	if _, err := b.svc.Pause(ctx, dana, "hq"); !errors.Is(err, threads.ErrNotFound) {
		t.Fatalf("a member pauses: %v", err)
	}
	if cv, err := b.svc.Pause(ctx, olga, "hq"); err != nil || cv != (threads.ConnectionView{ID: "hq", State: "paused"}) {
		t.Fatalf("pause: %+v %v", cv, err)
	}
	rejects("from-hq", text(th, "m3", "boss", "scout"), threads.Rejection{Status: 409, Reason: "paused"})
	if _, err := b.svc.Unpause(ctx, olga, "hq"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Receive(ctx, "from-hq", text(th, "m3", "planner", "scout")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second turn", func() bool {
		v, _ = b.svc.Find(ctx, dana, "hq", th)
		return len(v.Turns) == 2 && v.Turns[1].Status == "completed"
	})
	first := "ok hello m1"
	want = msgs("system", "You are scout, in agent conversation "+v.ID+" with hq/planner. It answers for itself.",
		"user", "hello m1", "assistant", first, "user", "hello m3")
	if got := fm.Messages()[1]; !reflect.DeepEqual(got, want) {
		t.Fatalf("second request:\n got %#v\nwant %#v", got, want)
	}
	if cv, err := b.svc.Revoke(ctx, olga, "hq"); err != nil || cv.State != "revoked" {
		t.Fatalf("revoke: %+v %v", cv, err)
	}
	if _, err := b.svc.Pause(ctx, olga, "hq"); !errors.Is(err, threads.ErrRevoked) {
		t.Fatalf("pause after revoke: %v", err)
	}
	rejects("from-hq", text(th, "m4", "planner", "scout"), threads.Rejection{Status: 401, Reason: "connection"})
}
