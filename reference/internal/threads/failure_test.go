package threads_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// slowModel blocks on the text "slow" until its call is cancelled (scriptmodel.Model.Waited
// counts those calls); other texts are answered by rule, as fakeModel does.
func slowModel(rule func(msgs []model.Message) model.Response) *scriptmodel.Model {
	return scriptmodel.Script(func(req model.Request) scriptmodel.Reply {
		if lastUser(req.Messages) == "slow" {
			return scriptmodel.Hold()
		}
		return scriptmodel.Reply{Response: rule(req.Messages)}
	})
}

func TestAThreadRejectionFailsTheTextClosesTheSideAndTheNextSendOpensANewThread(t *testing.T) {
	ctx := context.Background()
	// The peer answers 503 twice, then rejects the first text with thread, then takes all.
	peer := &fakePeer{answer: func(n int) (int, string) {
		switch n {
		case 1, 2:
			return 503, ""
		case 3:
			return 409, "thread"
		}
		return 200, ""
	}}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	b := openBox(t, t.TempDir(), threads.Config{Roles: []threads.Role{{Name: "planner", Principals: []loomtype.Identity{{Actor: "role:planner"}}}},
		Connections: []threads.Connection{{ID: "lab", URL: srv.URL, Send: "s", Accept: "a", Owner: olga}},
		Provider:    relayModel()})
	defer b.close()
	root := threads.Root{Kind: "conversation", ID: "pc_x"}
	sent, err := b.svc.Send(ctx, "planner", root, json.RawMessage(`{"to":"lab/scout","text":"one"}`), "m_one")
	if err != nil {
		t.Fatal(err)
	}
	first := sent.(threads.Sent).AgentConversation
	// The same message id again is the same text: nothing more is queued.
	if again, _ := b.svc.Send(ctx, "planner", root, json.RawMessage(`{"to":"lab/scout","text":"one"}`), "m_one"); again != sent {
		t.Fatalf("again: %+v", again)
	}
	eventually(t, "the text to fail", func() bool {
		v, _ := b.svc.Get(ctx, loomtype.Identity{Actor: "role:planner"}, first)
		return len(v.Texts) == 1 && v.Texts[0].State == "failed"
	})
	v, _ := b.svc.Get(ctx, loomtype.Identity{Actor: "role:planner"}, first)
	if v.State != "closed" || v.Texts[0] != (threads.TextView{Dir: "out", Message: "m_one", Text: "one", State: "failed", Reason: "thread"}) {
		t.Fatalf("after the rejection: %+v", v)
	}
	got := peer.received()
	if len(got) != 3 || got[0] != got[1] || got[1] != got[2] {
		t.Fatalf("every try is the same text under one message id: %+v", got)
	}
	sent, err = b.svc.Send(ctx, "planner", root, json.RawMessage(`{"to":"lab/scout","text":"two"}`), "m_two")
	if err != nil {
		t.Fatal(err)
	}
	second := sent.(threads.Sent).AgentConversation
	eventually(t, "the second text", func() bool { return len(peer.received()) == 4 })
	if second == first || peer.received()[3].Thread == got[0].Thread {
		t.Fatalf("the next send reused the closed conversation: %s %s", first, second)
	}
	for _, bad := range []string{`{"to":"lab","text":"x"}`, `{"to":"lab/scout","text":""}`, `{"text":"x"}`} {
		if a, _ := b.svc.Send(ctx, "planner", root, json.RawMessage(bad), "m_bad"); a != (threads.SendError{Error: "bad-request"}) {
			t.Errorf("%s: %+v", bad, a)
		}
	}
	if a, _ := b.svc.Send(ctx, "planner", root, json.RawMessage(`{"to":"nowhere/scout","text":"x"}`), "m_bad"); a != (threads.SendError{Error: "connection"}) {
		t.Errorf("unknown connection: %+v", a)
	}
}

func TestStopEndsTheTurnAndTheNextTurnIsToldOfItAndOfFailures(t *testing.T) {
	ctx := context.Background()
	peer := &fakePeer{answer: func(int) (int, string) { return 404, "role" }}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	fm := slowModel(func(m []model.Message) model.Response {
		if lastUser(m) == "ask" && !hasTool(m) {
			return model.Response{ToolCalls: []model.ToolCall{{ID: "c1", Name: "peer.send", Arguments: `{"to":"hq/nobody","text":"anyone?"}`}}}
		}
		return model.Response{Content: "done", FinishReason: model.FinishStop}
	})
	b := openBox(t, t.TempDir(), threads.Config{Roles: []threads.Role{{Name: "scout"}}, Members: []loomtype.Identity{dana},
		Connections: []threads.Connection{{ID: "hq", URL: srv.URL, Send: "s", Accept: "a", Owner: olga}}, Provider: fm})
	defer b.close()
	th := "t_bbbbbbbbbbbbbbbbbbbb"
	send := func(mid, text string) {
		t.Helper()
		body, _ := json.Marshal(threads.Text{V: 1, Thread: th, Message: mid, From: "planner", To: "scout", Text: text})
		if _, err := b.svc.Receive(ctx, "a", body); err != nil {
			t.Fatal(err)
		}
	}
	send("p1", "slow")
	eventually(t, "the slow turn", func() bool { return fm.Waited() == 1 })
	v, err := b.svc.Find(ctx, dana, "hq", th)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.svc.Stop(ctx, eve, v.ID); err == nil || ok {
		t.Fatalf("eve stops it: %v %v", ok, err)
	}
	if ok, err := b.svc.Stop(ctx, dana, v.ID); err != nil || !ok {
		t.Fatalf("stop: %v %v", ok, err)
	}
	if ok, err := b.svc.Stop(ctx, dana, v.ID); err != nil || ok {
		t.Fatalf("stop with no turn: %v %v", ok, err)
	}
	v, _ = b.svc.Get(ctx, dana, v.ID)
	if v.State != "open" || len(v.Turns) != 1 || v.Turns[0].Status != "stopped" {
		t.Fatalf("after stop: %+v", v)
	}
	// The next text: its turn sends to a role the peer does not have (the text fails).
	send("p2", "ask")
	eventually(t, "the text to fail", func() bool {
		v, _ = b.svc.Get(ctx, dana, v.ID)
		return len(v.Turns) == 2 && v.Turns[1].Status == "completed"
	})
	eventually(t, "the relayed text", func() bool { return len(peer.received()) == 1 })
	// The failed text lives in the agent conversation to hq/nobody, rooted in this one.
	eventually(t, "the failure recorded", func() bool {
		f, err := b.svc.Find(ctx, dana, "hq", peer.received()[0].Thread)
		return err == nil && len(f.Texts) == 1 && f.Texts[0].State == "failed" && f.Texts[0].Reason == "role"
	})
	f, _ := b.svc.Find(ctx, dana, "hq", peer.received()[0].Thread)
	if f.Root != (threads.Root{Kind: "agent", ID: v.ID}) || f.StartedBy != "local" || f.PeerRole != "nobody" {
		t.Fatalf("relayed conversation: %+v", f)
	}
	want := msgs("system", "You are scout, in agent conversation "+v.ID+" with hq/planner. It answers for itself.",
		"user", "slow",
		"system", "A person stopped your last turn.",
		"user", "ask")
	var got []model.Message
	for _, r := range fm.Messages() {
		if lastUser(r) == "ask" && !hasTool(r) {
			got = r
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("request after the stop:\n got %#v\nwant %#v", got, want)
	}
	// A reply in this conversation (its key is its own root) fails; the next turn is told.
	sent, err := b.svc.Send(ctx, "scout", threads.Root{Kind: "agent", ID: v.ID}, json.RawMessage(`{"to":"hq/planner","text":"bye"}`), "m_reply")
	if err != nil || sent != (threads.Sent{Sent: true, AgentConversation: v.ID}) {
		t.Fatalf("reply: %+v %v", sent, err)
	}
	eventually(t, "the reply to fail", func() bool {
		v, _ = b.svc.Get(ctx, dana, v.ID)
		return len(v.Texts) == 3 && v.Texts[2].State == "failed"
	})
	send("p3", "last")
	eventually(t, "the third turn", func() bool {
		v, _ = b.svc.Get(ctx, dana, v.ID)
		return len(v.Turns) == 3 && v.Turns[2].Status == "completed"
	})
	got = fm.Messages()[len(fm.Messages())-1]
	done := "done"
	want = msgs("system", "You are scout, in agent conversation "+v.ID+" with hq/planner. It answers for itself.",
		"user", "slow", "user", "ask", "assistant", done,
		"system", "Your text m_reply failed: role.",
		"user", "last")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("request after the failure:\n got %#v\nwant %#v", got, want)
	}
}

func TestDeletingATaskEndsItsTurnsAndClosesItsAgentConversations(t *testing.T) {
	ctx := context.Background()
	peer := &fakePeer{}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	fm := slowModel(func(m []model.Message) model.Response {
		if lastUser(m) == "find a van" && !hasTool(m) {
			return model.Response{ToolCalls: []model.ToolCall{{ID: "c1", Name: "peer.send", Arguments: `{"to":"lab/scout","text":"a van?"}`}}}
		}
		return model.Response{Content: "asked", FinishReason: model.FinishStop}
	})
	b := openBox(t, t.TempDir(), threads.Config{Roles: []threads.Role{{Name: "planner"}},
		Connections: []threads.Connection{{ID: "lab", URL: srv.URL, Send: "s", Accept: "a", Owner: olga}}, Provider: fm})
	defer b.close()
	tk, err := b.svc.CreateTask(ctx, dana, "Move the lab", []loomtype.Identity{eve}, "")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.svc.CreateTask(ctx, eve, "Pack", nil, tk.ID)
	if err != nil || sub.Parent != tk.ID {
		t.Fatalf("subtask: %+v %v", sub, err)
	}
	run, err := b.svc.StartRun(ctx, eve, sub.ID, "planner", "find a van")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the text at the peer", func() bool { return len(peer.received()) == 1 })
	out := peer.received()[0]
	body, _ := json.Marshal(threads.Text{V: 1, Thread: out.Thread, Message: "p1", From: "scout", To: "planner", Text: "slow"})
	if _, err := b.svc.Receive(ctx, "a", body); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the answer's turn to run", func() bool { return fm.Waited() == 1 })
	v, err := b.svc.Find(ctx, eve, "lab", out.Thread)
	if err != nil || v.Root != (threads.Root{Kind: "task", ID: sub.ID}) {
		t.Fatalf("rooted in the subtask: %+v %v", v, err)
	}
	if want := "You are planner, in agent conversation " + v.ID + " with lab/scout. It answers for task " + sub.ID + ": Pack."; fm.Messages()[len(fm.Messages())-1][0].Content != want {
		t.Fatalf("root message: %q", fm.Messages()[len(fm.Messages())-1][0].Content)
	}
	if err := b.svc.DeleteTask(ctx, eve, tk.ID); !errors.Is(err, threads.ErrNotOwner) {
		t.Fatalf("a member deletes: %v", err)
	}
	if err := b.svc.DeleteTask(ctx, dana, tk.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Task(ctx, eve, sub.ID); !errors.Is(err, threads.ErrNotFound) {
		t.Fatalf("the subtask is still there: %v", err)
	}
	if _, err := b.svc.Run(ctx, eve, run); !errors.Is(err, threads.ErrNotFound) {
		t.Fatalf("the run of a gone task reads: %v", err)
	}
	if _, err := b.svc.Get(ctx, eve, v.ID); !errors.Is(err, threads.ErrNotFound) {
		t.Fatalf("a member reads it once the root is gone: %v", err)
	}
	v, err = b.svc.Get(ctx, olga, v.ID)
	if err != nil || v.State != "closed" || v.Root.Kind != "gone" || len(v.Turns) != 1 || v.Turns[0].Status != "ended" {
		t.Fatalf("after the delete: %+v %v", v, err)
	}
	body, _ = json.Marshal(threads.Text{V: 1, Thread: out.Thread, Message: "p2", From: "scout", To: "planner", Text: "late"})
	var rej *threads.Rejection
	if _, err := b.svc.Receive(ctx, "a", body); !errors.As(err, &rej) || rej.Reason != "thread" {
		t.Fatalf("late text: %v", err)
	}
}

// unreachableBox opens a box with role scout and connection hq (bound queue), whose peer answers
// every text 503, so what is sent stays waiting; its model answers "x" (and blocks on "slow").
func unreachableBox(t *testing.T, queue int) (*box, *scriptmodel.Model) {
	t.Helper()
	peer := &fakePeer{answer: func(int) (int, string) { return 503, "" }}
	srv := httptest.NewServer(peer)
	t.Cleanup(srv.Close)
	fm := slowModel(func(m []model.Message) model.Response {
		return model.Response{Content: "x", FinishReason: model.FinishStop}
	})
	return openBox(t, t.TempDir(), threads.Config{Roles: []threads.Role{{Name: "scout"}},
		Connections: []threads.Connection{{ID: "hq", URL: srv.URL, Send: "s", Accept: "a", Owner: olga, Queue: queue}}, Provider: fm}), fm
}

func TestTheQueuesAreBounded(t *testing.T) {
	ctx := context.Background()
	b, fm := unreachableBox(t, 1)
	defer b.close()
	root := threads.Root{Kind: "task", ID: "tk_x"}
	if a, _ := b.svc.Send(ctx, "scout", root, json.RawMessage(`{"to":"hq/planner","text":"one"}`), "m1"); a == (threads.SendError{Error: "queue-full"}) {
		t.Fatalf("the first text: %+v", a)
	}
	if a, _ := b.svc.Send(ctx, "scout", threads.Root{Kind: "task", ID: "tk_y"}, json.RawMessage(`{"to":"hq/planner","text":"two"}`), "m2"); a != (threads.SendError{Error: "queue-full"}) {
		t.Fatalf("the second text, in another agent conversation: %+v", a)
	}
	text := func(mid, body string) []byte {
		b, _ := json.Marshal(threads.Text{V: 1, Thread: "t_dddddddddddddddddddd", Message: mid, From: "planner", To: "scout", Text: body})
		return b
	}
	if _, err := b.svc.Receive(ctx, "a", text("p1", "slow")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first turn", func() bool { return fm.Waited() == 1 })
	if _, err := b.svc.Receive(ctx, "a", text("p2", "waits")); err != nil {
		t.Fatal(err)
	}
	var rej *threads.Rejection
	if _, err := b.svc.Receive(ctx, "a", text("p3", "too many")); !errors.As(err, &rej) || *rej != (threads.Rejection{Status: 429, Reason: "busy"}) {
		t.Fatalf("the third text: %v", err)
	}
}

func TestARolesOwnDoorSendsOnlyInARunningRunOfTheRole(t *testing.T) {
	ctx := context.Background()
	peer := &fakePeer{}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	fm := slowModel(func([]model.Message) model.Response {
		return model.Response{Content: "x", FinishReason: model.FinishStop}
	})
	b := openBox(t, t.TempDir(), threads.Config{Roles: []threads.Role{{Name: "planner", Principals: []loomtype.Identity{{Tenant: "acme", Actor: "role:planner"}}}, {Name: "clerk", Principals: []loomtype.Identity{{Actor: "role:clerk"}}}},
		Connections: []threads.Connection{{ID: "lab", URL: srv.URL, Send: "s", Accept: "a", Owner: olga}}, Provider: fm})
	defer b.close()
	tk, err := b.svc.CreateTask(ctx, dana, "Move", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.svc.StartRun(ctx, dana, tk.ID, "planner", "slow")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run", func() bool { return fm.Waited() == 1 })
	planner := loomtype.Identity{Tenant: "acme", Actor: "role:planner"}
	for _, c := range []struct {
		who  loomtype.Identity
		role string
		run  string
		want error
	}{
		{dana, "planner", run, threads.ErrNotFound},
		{loomtype.Identity{Actor: "role:clerk"}, "planner", run, threads.ErrNotFound},
		{planner, "planner", "", threads.ErrNoTopic},
		{planner, "planner", "tr_nothing", threads.ErrNoTopic},
		{loomtype.Identity{Actor: "role:clerk"}, "clerk", run, threads.ErrNoTopic},
	} {
		if _, err := b.svc.RoleSend(ctx, c.who, c.role, "lab/scout", "news?", c.run); !errors.Is(err, c.want) {
			t.Errorf("%v as %s in %q: %v, want %v", c.who, c.role, c.run, err, c.want)
		}
	}
	v, err := b.svc.RoleSend(ctx, planner, "planner", "lab/scout", "news?", run)
	if err != nil {
		t.Fatal(err)
	}
	sent, ok := v.(threads.Sent)
	if !ok || !sent.Sent {
		t.Fatalf("role send: %+v", v)
	}
	eventually(t, "the text at the peer", func() bool { return len(peer.received()) == 1 })
	ac, err := b.svc.Get(ctx, dana, sent.AgentConversation)
	if err != nil || ac.Root != (threads.Root{Kind: "task", ID: tk.ID}) || ac.Texts[0].Text != "news?" || peer.received()[0].Text != "news?" {
		t.Fatalf("sent in the run's root: %+v %v", ac, err)
	}
}

// TestDeletingARootFreesThePlacesOfItsWaitingTexts: the texts a deleted root's agent
// conversations still waited to send fail, and no longer count against the connection's bound,
// which stays what it was.
func TestDeletingARootFreesThePlacesOfItsWaitingTexts(t *testing.T) {
	ctx := context.Background()
	b, _ := unreachableBox(t, 2)
	defer b.close()
	tk, err := b.svc.CreateTask(ctx, olga, "Move the lab", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	full := threads.SendError{Error: "queue-full"}
	send := func(root threads.Root, mid string) any {
		t.Helper()
		a, err := b.svc.Send(ctx, "scout", root, json.RawMessage(`{"to":"hq/planner","text":"x"}`), mid)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	doomed, other := threads.Root{Kind: "task", ID: tk.ID}, threads.Root{Kind: "task", ID: "tk_other"}
	for _, mid := range []string{"m1", "m2"} {
		if a := send(doomed, mid); a == full {
			t.Fatalf("%s: %+v", mid, a)
		}
	}
	if a := send(other, "m3"); a != full {
		t.Fatalf("m3, past the bound: %+v", a)
	}
	if err := b.svc.DeleteTask(ctx, olga, tk.ID); err != nil {
		t.Fatal(err)
	}
	for _, mid := range []string{"m4", "m5"} {
		if a := send(other, mid); a == full {
			t.Fatalf("%s, after the root's texts failed: %+v", mid, a)
		}
	}
	if a := send(other, "m6"); a != full {
		t.Fatalf("m6, past the bound again: %+v", a)
	}
}

// TestFindingAThreadNobodyHoldsIsNotFound: a thread the connection never carried is ErrNotFound
// for everyone, its owner included.
func TestFindingAThreadNobodyHoldsIsNotFound(t *testing.T) {
	b := openBox(t, t.TempDir(), threads.Config{Roles: []threads.Role{{Name: "scout", Principals: []loomtype.Identity{{Actor: "role:scout"}}}},
		Connections: []threads.Connection{{ID: "hq", URL: "http://127.0.0.1:1", Send: "s", Accept: "a", Owner: olga}}, Provider: fakeModel(nil)})
	defer b.close()
	for _, who := range []loomtype.Identity{olga, {Actor: "role:scout"}, {Actor: "mallory"}} {
		if _, err := b.svc.Find(context.Background(), who, "hq", "t_nobodyholdsthisthread"); !errors.Is(err, threads.ErrNotFound) {
			t.Fatalf("%v: %v", who, err)
		}
	}
}

// TestATextDeliveredWhileAPauseFailedItCountsAsSentAndIsNotToldAsFailed: a pause fails the text
// on its way; when the peer then acknowledges it, it is recorded sent and the next turn is not
// told that it failed.
func TestATextDeliveredWhileAPauseFailedItCountsAsSentAndIsNotToldAsFailed(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	peer := &fakePeer{answer: func(int) (int, string) {
		arrived <- struct{}{}
		<-release
		return 200, ""
	}}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	fm := fakeModel(func(m []model.Message) model.Response {
		return model.Response{Content: "ok", FinishReason: model.FinishStop}
	})
	b := openBox(t, t.TempDir(), threads.Config{Roles: []threads.Role{{Name: "scout", Principals: []loomtype.Identity{{Actor: "role:scout"}}}},
		Connections: []threads.Connection{{ID: "hq", URL: srv.URL, Send: "s", Accept: "a", Owner: olga}}, Provider: fm})
	defer b.close()
	a, err := b.svc.Send(ctx, "scout", threads.Root{Kind: "task", ID: "tk_x"}, json.RawMessage(`{"to":"hq/planner","text":"on its way"}`), "m_way")
	if err != nil {
		t.Fatal(err)
	}
	sent, ok := a.(threads.Sent)
	if !ok {
		t.Fatalf("send: %+v", a)
	}
	<-arrived
	if _, err := b.svc.Pause(ctx, olga, "hq"); err != nil {
		t.Fatal(err)
	}
	close(release)
	role := loomtype.Identity{Actor: "role:scout"}
	var v threads.View
	eventually(t, "the text recorded sent", func() bool {
		v, err = b.svc.Get(ctx, role, sent.AgentConversation)
		return err == nil && len(v.Texts) == 1 && v.Texts[0].State == "sent"
	})
	if _, err := b.svc.Unpause(ctx, olga, "hq"); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(threads.Text{V: 1, Thread: v.Thread, Message: "p1", From: "planner", To: "scout", Text: "got it"})
	if _, err := b.svc.Receive(ctx, "a", body); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the turn's model call", func() bool { return len(fm.Messages()) == 1 })
	want := msgs("system", "You are scout, in agent conversation "+sent.AgentConversation+" with hq/planner. It answers for a task that is gone.", "user", "got it")
	if got := fm.Messages()[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("the turn was sent\n%+v\nwant\n%+v", got, want)
	}
}
