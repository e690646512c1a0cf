package threads_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// The tests of this file run the threads on a whole engine served over HTTP (reftest).

// askModel sends the person's text to lab/scout, blocks on "hold" until cancelled, and answers
// everything else with its last text.
func askModel() *scriptmodel.Model {
	return scriptmodel.ByText(func(last string, req model.Request) scriptmodel.Reply {
		switch {
		case strings.HasPrefix(last, "ask ") && len(scriptmodel.ToolResults(req)) == 0:
			args, _ := json.Marshal(map[string]string{"to": "lab/scout", "text": strings.TrimPrefix(last, "ask ")})
			return scriptmodel.Reply{Response: model.Response{ToolCalls: []model.ToolCall{{ID: "s", Name: "peer.send", Arguments: string(args)}}}}
		case strings.HasSuffix(last, "hold"):
			return scriptmodel.Hold()
		}
		return scriptmodel.Reply{Response: model.Response{Content: "re: " + last, FinishReason: model.FinishStop}}
	})
}

var (
	tDana = loomtype.Identity{Tenant: "acme", Actor: "dana"}
	tOlga = loomtype.Identity{Tenant: "acme", Actor: "olga"}
	tEve  = loomtype.Identity{Tenant: "acme", Actor: "eve"}
	tRole = loomtype.Identity{Tenant: "acme", Actor: "role:planner"}
)

// openThreadsEngine opens a served engine with the role planner and the connection lab to the peer
// at peerURL, its conversations completed by m.
func openThreadsEngine(t *testing.T, peerURL string, m model.Provider) *reftest.Engine {
	t.Helper()
	return reftest.Open(t, reftest.Served(), reftest.Provider(m),
		reftest.Tokens(map[string]loomtype.Identity{"dana": tDana, "olga": tOlga, "eve": tEve, "planner": tRole}),
		reftest.With(func(o *reference.Options) {
			o.Threads = &threads.Config{Roles: []threads.Role{{Name: "planner", Prompt: "You plan the work.", Principals: []loomtype.Identity{tRole}}}, Members: []loomtype.Identity{tOlga},
				Connections: []threads.Connection{{ID: "lab", URL: peerURL, Send: "to-lab", Accept: "from-lab", Owner: tOlga}},
				MaxBackoff:  50 * time.Millisecond}
		}))
}

type client struct {
	t   *testing.T
	url string
}

func (c client) do(method, path, token, body string) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

func TestThreadsOverHTTP(t *testing.T) {
	peer := &fakePeer{}
	psrv := httptest.NewServer(peer)
	defer psrv.Close()
	eng := openThreadsEngine(t, psrv.URL, askModel())
	c := client{t, eng.URL}

	st, v := c.do("POST", "/roles/planner/conversation", "dana", "")
	if st != 200 || v["role"] != "planner" || v["id"] == "" {
		t.Fatalf("open: %d %v", st, v)
	}
	pc := v["id"]
	if st, _ := c.do("POST", "/roles/planner/conversation", "planner", ""); st != 404 {
		t.Fatalf("a role token opens a conversation: %d", st)
	}
	if st, _ := c.do("POST", "/roles/nobody/conversation", "dana", ""); st != 404 {
		t.Fatalf("an unknown role: %d", st)
	}
	st, v = c.do("POST", "/roles/planner/conversation/messages", "dana", `{"text":"ask is a van free?"}`)
	if st != 202 || v["conversation"] != pc || v["turn"] != 1.0 {
		t.Fatalf("message: %d %v", st, v)
	}
	if st, v := c.do("POST", "/roles/planner/send", "planner", `{"to":"lab/scout","text":"x"}`); st != 409 || v["reason"] != "no-topic" {
		t.Fatalf("the role's own door: %d %v", st, v)
	}
	eventually(t, "the text at the peer", func() bool { return len(peer.received()) == 1 })
	out := peer.received()[0]

	// The peer's answers: a wrong token, a bad member, then the answer.
	text := func(mid, body string) string {
		b, _ := json.Marshal(threads.Text{V: 1, Thread: out.Thread, Message: mid, From: "scout", To: "planner", Text: body})
		return string(b)
	}
	if st, v := c.do("POST", "/peer/v1/texts", "dana", text("p1", "van 3")); st != 401 || !reflect.DeepEqual(v, map[string]any{"reason": "connection"}) {
		t.Fatalf("an identity's token at the peer door: %d %v", st, v)
	}
	if st, v := c.do("POST", "/peer/v1/texts", "from-lab", `{"v":1,"thread":"x"}`); st != 400 || !reflect.DeepEqual(v, map[string]any{"reason": "bad-request", "detail": "thread"}) {
		t.Fatalf("a bad thread: %d %v", st, v)
	}
	st, v = c.do("POST", "/peer/v1/texts", "from-lab", text("p1", "van 3 is free"))
	if want := map[string]any{"ack": true, "thread": out.Thread, "message": "p1"}; st != 200 || !reflect.DeepEqual(v, want) {
		t.Fatalf("ack: %d %v", st, v)
	}
	q := "/agent-conversations?connection=lab&thread=" + out.Thread
	eventually(t, "the answer's turn", func() bool {
		_, v = c.do("GET", q, "dana", "")
		turns, _ := v["turns"].([]any)
		return len(turns) == 1 && turns[0].(map[string]any)["status"] == "completed"
	})
	turn := v["turns"].([]any)[0].(map[string]any)
	if want := map[string]any{"turn": 1.0, "status": "completed", "texts": []any{"p1"}, "output": "re: van 3 is free"}; !reflect.DeepEqual(turn, want) {
		t.Fatalf("turn: %v", turn)
	}
	id := v["id"].(string)
	for _, who := range []string{"eve", "olga", ""} {
		if st, _ := c.do("GET", "/agent-conversations/"+id, who, ""); st == 200 {
			t.Fatalf("%q reads dana's agent conversation", who)
		}
	}
	if st, _ := c.do("GET", "/agent-conversations/"+id, "planner", ""); st != 200 {
		t.Fatalf("the role reads its own: %d", st)
	}
	if st, v := c.do("POST", "/agent-conversations/"+id+"/stop", "dana", ""); st != 202 || v["stopped"] != false {
		t.Fatalf("stop with no turn: %d %v", st, v)
	}

	// The connection: only its owner.
	if st, _ := c.do("GET", "/connections/lab", "dana", ""); st != 404 {
		t.Fatalf("dana reads the connection: %d", st)
	}
	if st, v := c.do("POST", "/connections/lab/pause", "olga", ""); st != 200 || !reflect.DeepEqual(v, map[string]any{"id": "lab", "state": "paused"}) {
		t.Fatalf("pause: %d %v", st, v)
	}
	if st, v := c.do("POST", "/peer/v1/texts", "from-lab", text("p2", "more")); st != 409 || v["reason"] != "paused" {
		t.Fatalf("text while paused: %d %v", st, v)
	}
	if st, v := c.do("POST", "/connections/lab/revoke", "olga", ""); st != 200 || v["state"] != "revoked" {
		t.Fatalf("revoke: %d %v", st, v)
	}
	if st, v := c.do("POST", "/connections/lab/unpause", "olga", ""); st != 409 || v["reason"] != "revoked" {
		t.Fatalf("unpause after revoke: %d %v", st, v)
	}

	// Tasks: members read, others get the uniform 404.
	st, v = c.do("POST", "/tasks", "dana", `{"title":"Move the lab","members":[{"tenant":"acme","actor":"olga"}]}`)
	if st != 201 || v["title"] != "Move the lab" || v["state"] != "open" {
		t.Fatalf("task: %d %v", st, v)
	}
	task := v["id"].(string)
	if st, _ := c.do("GET", "/tasks/"+task, "eve", ""); st != 404 {
		t.Fatalf("eve reads the task: %d", st)
	}
	if st, _ := c.do("POST", "/tasks/"+task+"/runs", "eve", `{"nonsense":1}`); st != 404 {
		t.Fatalf("a stranger's bad body: %d (the 404 comes first)", st)
	}
	if st, v := c.do("POST", "/tasks/"+task+"/runs", "olga", `{"role":"planner"}`); st != 400 || v["detail"] != "prompt" {
		t.Fatalf("a member's run without a prompt: %d %v", st, v)
	}
	st, v = c.do("POST", "/tasks/"+task+"/runs", "olga", `{"role":"planner","prompt":"list the boxes"}`)
	if st != 202 {
		t.Fatalf("run: %d %v", st, v)
	}
	run := v["run"].(string)
	eventually(t, "the task run", func() bool {
		_, v = c.do("GET", "/threads/runs/"+run, "olga", "")
		return v["status"] == "completed"
	})
	if v["output"] != "re: list the boxes" || v["task"] != task {
		t.Fatalf("run: %v", v)
	}
	if st, _ := c.do("GET", "/threads/runs/"+run, "eve", ""); st != 404 {
		t.Fatalf("eve reads the run: %d", st)
	}
	// The role's own door in a running run of it: the connection is revoked by now.
	_, v = c.do("POST", "/tasks/"+task+"/runs", "olga", `{"role":"planner","prompt":"wait hold"}`)
	held := v["run"].(string)
	if st, v := c.do("POST", "/roles/planner/send", "planner", `{"to":"lab/scout","text":"x","run":"`+held+`"}`); st != 409 || !reflect.DeepEqual(v, map[string]any{"reason": "connection"}) {
		t.Fatalf("the role's door on a revoked connection: %d %v", st, v)
	}
	if st, v := c.do("POST", "/roles/planner/send", "planner", `{"to":"lab/scout","text":"x","run":"tr_none"}`); st != 409 || v["reason"] != "no-topic" {
		t.Fatalf("the role's door with a run that is none: %d %v", st, v)
	}
	if st, _ := c.do("POST", "/roles/planner/send", "dana", `{"to":"lab/scout","text":"x","run":"`+held+`"}`); st != 404 {
		t.Fatalf("a person at the role's door: %d", st)
	}
	if st, _ := c.do("DELETE", "/tasks/"+task, "olga", ""); st != 403 {
		t.Fatalf("a member who is not the owner deletes: %d", st)
	}
	if st, _ := c.do("DELETE", "/tasks/"+task, "dana", ""); st != 204 {
		t.Fatalf("delete: %d", st)
	}
	if st, _ := c.do("GET", "/tasks/"+task, "dana", ""); st != 404 {
		t.Fatalf("a deleted task: %d", st)
	}
	if st, _ := c.do("DELETE", "/roles/planner/conversation", "dana", ""); st != 204 {
		t.Fatalf("delete the conversation: %d", st)
	}
	if st, _ := c.do("GET", "/roles/planner/conversation", "dana", ""); st != 404 {
		t.Fatalf("a deleted conversation: %d", st)
	}
}

// A crash (the engine killed, nothing shut down) loses no text that was acknowledged or queued,
// and sends none twice: texts the peer had acknowledged are each taken by one turn after the
// restart; a text a person's turn queued while the peer was down goes out after it under its
// one message id, although that turn was cut off after its send and ran again.
func TestThreadsSurviveACrash(t *testing.T) {
	ctx := context.Background()
	var status atomic.Int64
	status.Store(503)
	peer := &fakePeer{answer: func(int) (int, string) { return int(status.Load()), "busy" }}
	psrv := httptest.NewServer(peer)
	defer psrv.Close()
	eng := openThreadsEngine(t, psrv.URL, askModel())
	c := client{t, eng.URL}

	// A peer-started conversation whose turn hangs, and a second text that waits for it.
	th := "t_cccccccccccccccccccc"
	for _, mid := range []string{"p1", "p2"} {
		b, _ := json.Marshal(threads.Text{V: 1, Thread: th, Message: mid, From: "scout", To: "planner", Text: "text " + mid + " hold"})
		if st, v := c.do("POST", "/peer/v1/texts", "from-lab", string(b)); st != 200 {
			t.Fatalf("%s: %d %v", mid, st, v)
		}
	}
	// A reply queued in it while the peer is down (the peer answers 503).
	v, err := eng.Threads().Find(ctx, tOlga, "lab", th)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := eng.Threads().Send(ctx, "planner", threads.Root{Kind: "agent", ID: v.ID}, json.RawMessage(`{"to":"lab/scout","text":"on it"}`), "m_crash"); err != nil || a != (threads.Sent{Sent: true, AgentConversation: v.ID}) {
		t.Fatalf("send: %+v %v", a, err)
	}
	// Dana's turn sends, then hangs in its next model call.
	if st, v := c.do("POST", "/roles/planner/conversation/messages", "dana", `{"text":"ask a van hold"}`); st != 202 {
		t.Fatalf("dana: %d %v", st, v)
	}
	tried := func(text string) bool {
		for _, x := range peer.received() {
			if x.Text == text {
				return true
			}
		}
		return false
	}
	eventually(t, "both texts tried at the peer", func() bool { return tried("on it") && tried("a van hold") })
	eng.Kill()

	status.Store(200)
	eng.Restart(reftest.Provider(scriptmodel.Echo("re: ")))
	eventually(t, "both texts handled", func() bool {
		v, _ = eng.Threads().Get(ctx, tOlga, v.ID)
		return len(v.Turns) == 2 && v.Turns[1].Status == "completed" && v.Texts[2].State == "sent"
	})
	// Turn 1 ran again after the crash (it had not ended) and completed with p1; p2 waited for
	// turn 2. Each text was taken once.
	want := [][]string{{"p1"}, {"p2"}}
	for i, tr := range v.Turns {
		if tr.Status != "completed" || !reflect.DeepEqual(tr.Texts, want[i]) {
			t.Fatalf("turn %d: %+v", i+1, tr)
		}
	}
	var mine []threads.View
	eventually(t, "dana's text delivered", func() bool {
		mine, _ = eng.Threads().List(ctx, tDana)
		return len(mine) == 1 && len(mine[0].Texts) == 1 && mine[0].Texts[0].State == "sent"
	})
	eventually(t, "dana's turn", func() bool {
		return lastTurnStatus(eng.Engine, tDana) == "completed"
	})
	ids := map[string]map[string]bool{}
	for _, x := range peer.received() {
		if ids[x.Text] == nil {
			ids[x.Text] = map[string]bool{}
		}
		ids[x.Text][x.Message] = true
	}
	if len(ids) != 2 || len(ids["on it"]) != 1 || !ids["on it"]["m_crash"] || len(ids["a van hold"]) != 1 || !ids["a van hold"][mine[0].Texts[0].Message] {
		t.Fatalf("texts at the peer by message id: %v", ids)
	}
}

// lastTurnStatus is the status of who's last turn with the planner ("" for none).
func lastTurnStatus(eng *reference.Engine, who loomtype.Identity) string {
	cv, err := eng.Threads().Conversation(context.Background(), who, "planner")
	if err != nil || len(cv.Turns) == 0 {
		return ""
	}
	return cv.Turns[len(cv.Turns)-1].Status
}
