package world_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

func TestTypedToolFailureOnTheWire(t *testing.T) {
	w := start(t, world.Options{})
	u := w.URL() + "/tools/pay"
	deny := &world.ToolError{Class: world.ClassCapabilityDenied, Message: "not granted", Retryable: world.Bool(false)}
	require.NoError(t, w.Tools().Enqueue("pay",
		world.Behavior{Error: deny},
		world.Behavior{Fail: &world.Failure{Status: http.StatusForbidden, Message: "no"}, Error: world.WrapAt(deny, 2)},
		world.Behavior{Fail: &world.Failure{Status: http.StatusBadGateway, Message: "bank down"}}))

	status, body := post(t, u, map[string]int{}, "Idempotency-Key", "k1")
	assert.Equal(t, http.StatusInternalServerError, status)
	assert.JSONEq(t, `{"error":"not granted","failure":{"class":"CapabilityDeniedError","message":"not granted","retryable":false}}`, string(body))

	status, body = post(t, u, map[string]int{}, "Idempotency-Key", "k2")
	assert.Equal(t, http.StatusForbidden, status)
	assert.JSONEq(t, `{"error":"no","failure":{"class":"Error","message":"wrapper at depth 0","cause":
		{"class":"Error","message":"wrapper at depth 1","cause":
		{"class":"CapabilityDeniedError","message":"not granted","retryable":false}}}}`, string(body))

	// A plain failure is unchanged: feedback, {"error": message} only.
	status, body = post(t, u, map[string]int{}, "Idempotency-Key", "k3")
	assert.Equal(t, http.StatusBadGateway, status)
	assert.JSONEq(t, `{"error":"bank down"}`, string(body))

	for name, b := range map[string]world.Behavior{
		"no class":       {Error: &world.ToolError{Message: "x"}},
		"no cause class": {Error: &world.ToolError{Class: "A", Cause: &world.ToolError{}}},
		"2xx status":     {Fail: &world.Failure{Status: 200}, Error: deny},
		"given body":     {Fail: &world.Failure{Body: "{}"}, Error: deny},
		"too deep":       {Error: world.WrapAt(deny, world.MaxCauseDepth+1)},
	} {
		assert.ErrorIs(t, w.Tools().Enqueue("bad", b), world.ErrBadToolError, name)
		assert.ErrorIs(t, w.Tools().Define("bad", b), world.ErrBadToolError, name)
	}
	assert.NoError(t, w.Tools().Enqueue("deep", world.Behavior{Error: world.WrapAt(deny, world.MaxCauseDepth)}))
}

func TestTerminalClassification(t *testing.T) {
	for _, c := range world.TerminalClasses {
		e := &world.ToolError{Class: c}
		assert.True(t, e.Terminal(), c)
		assert.True(t, world.WrapAt(e, world.CauseDepth).Terminal(), c+" at the deepest depth followed")
		assert.False(t, world.WrapAt(e, world.CauseDepth+1).Terminal(), c+" one deeper")
	}
	cases := []struct {
		name string
		e    *world.ToolError
		want bool
	}{
		{"nil", nil, false},
		{"ordinary", &world.ToolError{Class: "TypeError"}, false},
		{"retryable true", &world.ToolError{Class: "VendorError", Retryable: world.Bool(true)}, false},
		{"retryable false", &world.ToolError{Class: "VendorError", Retryable: world.Bool(false)}, true},
		{"retryable false at 5", world.WrapAt(&world.ToolError{Class: "V", Retryable: world.Bool(false)}, 5), true},
		{"retryable false at 6", world.WrapAt(&world.ToolError{Class: "V", Retryable: world.Bool(false)}, 6), false},
		{"subclass naming only its parent", &world.ToolError{Class: "VendorStop", Extends: []string{world.ClassSafetyViolation}}, true},
		{"grandchild", &world.ToolError{Class: "B", Extends: []string{"A", world.ClassQuotaExceeded}}, true},
		{"subclass of an ordinary class", &world.ToolError{Class: "B", Extends: []string{"TypeError"}}, false},
		{"kill switch at 5", world.WrapAt(&world.ToolError{Class: world.ClassKillSwitchEngaged}, 5), true},
		{"authority at 6", world.WrapAt(&world.ToolError{Class: world.ClassCapabilityDenied}, 6), false},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, c.e.Terminal(), c.name)
	}
	assert.Equal(t, 6, world.WrapAt(&world.ToolError{Class: "A"}, 6).Depth())
	assert.Equal(t, 0, (*world.ToolError)(nil).Depth())
}

func TestToolDeclarations(t *testing.T) {
	w := start(t, world.Options{})
	u := w.URL() + "/tools/"
	require.NoError(t, w.Tools().Declare(
		sutconfig.ToolDef{Name: "pay", Idempotent: world.Bool(false)},
		sutconfig.ToolDef{Name: "ask", Kind: world.KindHuman},
		sutconfig.ToolDef{Name: "look", Idempotent: world.Bool(true)}))
	assert.ErrorIs(t, w.Tools().Declare(sutconfig.ToolDef{Name: "x", Kind: "robot"}), world.ErrBadToolError)
	assert.Equal(t, []sutconfig.ToolDef{{Name: "pay", Idempotent: world.Bool(false)}, {Name: "ask", Kind: "human"},
		{Name: "look", Idempotent: world.Bool(true)}}, w.Tools().Definitions())
	require.NoError(t, w.Tools().Enqueue("pay", world.Behavior{Result: map[string]int{"n": 1}}, world.Behavior{Result: map[string]int{"n": 2}}))
	require.NoError(t, w.Tools().Enqueue("look", world.Behavior{Result: map[string]int{"n": 1}}, world.Behavior{Result: map[string]int{"n": 2}}))
	require.NoError(t, w.Tools().Enqueue("ask", world.Behavior{Result: map[string]int{"n": 1}}))

	// Not idempotent: the same key runs again, taking the next behavior.
	for _, want := range []string{`{"n":1}`, `{"n":2}`} {
		status, body := post(t, u+"pay", map[string]int{}, "Idempotency-Key", "k")
		assert.Equal(t, http.StatusOK, status)
		assert.JSONEq(t, want, string(body))
	}
	// Idempotent: the same key is answered again from the first success.
	for range 2 {
		status, body := post(t, u+"look", map[string]int{}, "Idempotency-Key", "k")
		assert.Equal(t, http.StatusOK, status)
		assert.JSONEq(t, `{"n":1}`, string(body))
	}
	// Human: recorded, answered 202, no behavior taken, every time.
	for range 2 {
		status, body := post(t, u+"ask", map[string]string{"q": "ok?"}, "Idempotency-Key", "h")
		assert.Equal(t, http.StatusAccepted, status)
		assert.JSONEq(t, `{"pending":"human"}`, string(body))
	}
	require.NoError(t, w.Tools().WaitCalls(bounded(t), 6))
	type seen struct {
		Name     string
		Attempt  int
		Replayed bool
		Human    bool
		Status   int
	}
	var got []seen
	for i := range 6 {
		inv, err := w.Tools().WaitDone(bounded(t), i)
		require.NoError(t, err)
		got = append(got, seen{inv.Name, inv.Attempt, inv.Replayed, inv.Human, inv.Status})
	}
	assert.Equal(t, []seen{
		{"pay", 1, false, false, 200}, {"pay", 2, false, false, 200},
		{"look", 1, false, false, 200}, {"look", 2, true, false, 200},
		{"ask", 1, false, true, 202}, {"ask", 2, false, true, 202},
	}, got)

	// The declaration in force when a call arrives decides: a success remembered before the tool
	// was declared not idempotent is not replayed, and one made while it was is not remembered.
	require.NoError(t, w.Tools().Enqueue("redo", world.Behavior{Result: 1}, world.Behavior{Result: 2}, world.Behavior{Result: 3}))
	type step struct {
		idempotent bool
		key        string
		status     int
		body       string
	}
	for i, st := range []step{
		{true, "r1", 200, "1"},                        // remembered
		{false, "r1", 200, "2"},                       // not replayed while not idempotent
		{true, "r1", 200, "1"},                        // replayed again once idempotent
		{false, "r2", 200, "3"},                       // a success while not idempotent ...
		{true, "r2", 404, `{"error":"unknown tool"}`}, // ... is not remembered: the queue is used up
	} {
		require.NoError(t, w.Tools().Declare(sutconfig.ToolDef{Name: "redo", Idempotent: world.Bool(st.idempotent)}))
		status, body := post(t, u+"redo", map[string]int{}, "Idempotency-Key", st.key)
		assert.Equal(t, st.status, status, i)
		assert.Equal(t, st.body, string(body), i)
	}

	w.Reset()
	assert.Empty(t, w.Tools().Definitions())
}

func TestToolCallsRecordThePrincipal(t *testing.T) {
	w := start(t, world.Options{})
	require.NoError(t, w.Tools().Define("t", world.Behavior{}))
	u := w.URL() + "/tools/t"
	p := sutconfig.Principal{Tenant: "acme corp", Actor: "zoë", OnBehalfOf: "bob/1"}
	h := world.PrincipalHeaders(p)
	assert.Equal(t, "zo%C3%AB", h.Get(world.HeaderActor))
	assert.Equal(t, "acme%20corp", h.Get(world.HeaderTenant))

	status, _ := post(t, u, map[string]int{}, "Idempotency-Key", "1", world.HeaderTenant, h.Get(world.HeaderTenant),
		world.HeaderActor, h.Get(world.HeaderActor), world.HeaderOnBehalfOf, h.Get(world.HeaderOnBehalfOf))
	assert.Equal(t, http.StatusOK, status)
	status, _ = post(t, u, map[string]int{}, "Idempotency-Key", "2", world.HeaderActor, "alice")
	assert.Equal(t, http.StatusOK, status)
	status, _ = post(t, u, map[string]int{}, "Idempotency-Key", "3")
	assert.Equal(t, http.StatusOK, status)
	status, _ = post(t, u, map[string]int{}, "Idempotency-Key", "4", world.HeaderActor, "%zz")
	assert.Equal(t, http.StatusBadRequest, status)

	calls := w.Tools().Calls()
	require.Len(t, calls, 3)
	assert.Equal(t, p, calls[0].Principal)
	assert.True(t, calls[0].PrincipalSent)
	assert.Equal(t, sutconfig.Principal{Actor: "alice"}, calls[1].Principal)
	assert.True(t, calls[1].PrincipalSent)
	assert.Equal(t, sutconfig.Principal{}, calls[2].Principal)
	assert.False(t, calls[2].PrincipalSent)
	require.Len(t, w.Rejections(), 1)
	assert.Equal(t, http.StatusBadRequest, w.Rejections()[0].Status)
}

func TestFill(t *testing.T) {
	assert.Equal(t, "ab01234567890", world.FillText("ab", 13))
	assert.Equal(t, "héllo", world.FillText("héllo", 3))
	assert.Equal(t, 7, utf8.RuneCountInString(world.FillText("é", 7)))
	for _, in := range []string{"", "{}", `{"q":"x"}`, ` { "q" : 1 } `} {
		out, err := world.FillArguments(in, 100)
		require.NoError(t, err, in)
		assert.Equal(t, 100, len(out), in)
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &v), in)
		assert.Contains(t, v, "fill")
	}
	_, err := world.FillArguments(`[1]`, 100)
	assert.Error(t, err)
	_, err = world.FillArguments(`{"fill":1}`, 100)
	assert.Error(t, err)
	_, err = world.FillArguments(`{"q":"a long value"}`, 10)
	assert.Error(t, err)
}

func TestModelAnswersOverACap(t *testing.T) {
	const n = 256*1024 + 1
	w := start(t, world.Options{})
	s, err := world.LoadScript([]byte(`{"model": [
		{"text": "big: ", "fill": 262145},
		{"text": "big: ", "fill": 262145, "plain": true},
		{"toolCalls": [{"name": "store", "arguments": "{\"k\":1}", "fill": 262145}, {"name": "store", "arguments": "{}"}]}
	]}`))
	require.NoError(t, err)
	require.NoError(t, w.Apply(s))
	want := world.FillText("big: ", n)
	require.Equal(t, n, len(want))
	for _, stream := range []bool{true, false} {
		resp, err := client(w, stream).Complete(bounded(t), model.Request{Messages: userMsgs("hi")}, nil)
		require.NoError(t, err)
		assert.Equal(t, model.Response{Content: want, FinishReason: "stop"}, resp)
	}
	resp, err := client(w, true).Complete(bounded(t), model.Request{Messages: userMsgs("hi")}, nil)
	require.NoError(t, err)
	args, err := world.FillArguments(`{"k":1}`, n)
	require.NoError(t, err)
	assert.Equal(t, model.Response{FinishReason: "tool_calls", ToolCalls: []model.ToolCall{
		{ID: "call_3_1", Name: "store", Arguments: args}, {ID: "call_3_2", Name: "store", Arguments: "{}"}}}, resp)

	_, err = world.LoadScript([]byte(`{"model": [{"toolCalls": [{"name": "s", "arguments": "[1]", "fill": 100}]}]}`))
	assert.ErrorIs(t, err, world.ErrBadScript)
	_, err = world.LoadScript([]byte(`{"model": [{"fill": -1}]}`))
	assert.ErrorIs(t, err, world.ErrBadScript)
}

func TestModelCountsRequestsByShape(t *testing.T) {
	w := start(t, world.Options{})
	c := client(w, false)
	for _, q := range []string{"same", "same", "other"} {
		_, err := c.Complete(bounded(t), model.Request{Messages: userMsgs(q)}, nil)
		require.NoError(t, err)
	}
	reqs := w.Model().Requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, reqs[0].Shape, reqs[1].Shape)
	assert.NotEqual(t, reqs[0].Shape, reqs[2].Shape)
	assert.Equal(t, 2, w.Model().CountShape(reqs[0].Shape))
	assert.Equal(t, 1, w.Model().CountShape(reqs[2].Shape))
	assert.Equal(t, reqs[0].Shape, world.ShapeOf("m", []world.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "same"}}, nil))
	// Streaming is not part of the shape; the tools offered are.
	_, err := client(w, true).Complete(bounded(t), model.Request{Messages: userMsgs("same")}, nil)
	require.NoError(t, err)
	assert.Equal(t, 3, w.Model().CountShape(reqs[0].Shape))
	_, err = c.Complete(bounded(t), model.Request{Messages: userMsgs("same"), Tools: []model.Tool{{Name: "t"}}}, nil)
	require.NoError(t, err)
	assert.Equal(t, 3, w.Model().CountShape(reqs[0].Shape))
	w.Reset()
	assert.Zero(t, w.Model().CountShape(reqs[0].Shape))
}

func TestMemoryLogsEveryOperationInOrder(t *testing.T) {
	w := start(t, world.Options{})
	u := w.URL()
	a := world.MemoryEntry{ID: "a", Role: "user", Text: "q"}
	b := world.MemoryEntry{ID: "b", Role: "assistant", Text: "ans", Tainted: true}
	steps := []struct {
		path string
		body any
	}{
		{world.PathMemoryRecall, map[string]string{"scope": "s", "query": "q1"}},
		{world.PathMemoryWrite, map[string]any{"scope": "s", "entries": []world.MemoryEntry{a, b}}},
		{world.PathMemoryWrite, map[string]any{"scope": "s", "entries": []world.MemoryEntry{a, b}}},
		{world.PathMemoryRecall, map[string]string{"scope": "s", "query": "q2"}},
	}
	var last []byte
	for _, s := range steps {
		status, body := post(t, u+s.path, s.body)
		require.Less(t, status, 300)
		last = body
	}
	assert.JSONEq(t, `{"entries":[{"id":"a","role":"user","text":"q"},{"id":"b","role":"assistant","text":"ans","tainted":true}]}`, string(last))
	require.NoError(t, w.Memory().WaitOps(bounded(t), 4))
	ops := w.Memory().Log()
	for i := range ops {
		assert.False(t, ops[i].Arrived.IsZero())
		ops[i].Arrived = ops[0].Arrived
	}
	at := ops[0].Arrived
	assert.Equal(t, []world.MemoryOp{
		{Index: 0, Op: world.OpRecall, Scope: "s", Query: "q1", Entries: []world.MemoryEntry{}, Held: []world.MemoryEntry{}, Arrived: at},
		{Index: 1, Op: world.OpWrite, Scope: "s", Entries: []world.MemoryEntry{a, b}, Stored: []string{"a", "b"}, Held: []world.MemoryEntry{}, Arrived: at},
		{Index: 2, Op: world.OpWrite, Scope: "s", Entries: []world.MemoryEntry{a, b}, Held: []world.MemoryEntry{a, b}, Arrived: at},
		{Index: 3, Op: world.OpRecall, Scope: "s", Query: "q2", Entries: []world.MemoryEntry{a, b}, Held: []world.MemoryEntry{a, b}, Arrived: at},
	}, ops)
}

func TestScriptFormsOfTheAgentWorld(t *testing.T) {
	w := start(t, world.Options{})
	s, err := world.LoadScript([]byte(`{
	  "tools": {"pay": [
	    {"failure": {"class": "VendorStop", "extends": ["SafetyViolationError"]}},
	    {"fail": {"status": 429, "message": "slow down"}, "failure": {"class": "RateLimitExceededError", "retryable": true}, "wrapDepth": 6}
	  ]},
	  "declare": [{"name": "pay", "idempotent": false}, {"name": "ask", "kind": "human"}],
	  "memory": {"acme/alice": [{"id": "m1", "role": "assistant", "text": "earlier", "tainted": true}, {"id": "m1", "text": "again"}]}
	}`))
	require.NoError(t, err)
	require.NoError(t, w.Apply(s))
	assert.Equal(t, []sutconfig.ToolDef{{Name: "pay", Idempotent: world.Bool(false)}, {Name: "ask", Kind: "human"}}, w.Tools().Definitions())
	status, body := post(t, w.URL()+"/tools/pay", map[string]int{}, "Idempotency-Key", "k")
	assert.Equal(t, http.StatusInternalServerError, status)
	assert.JSONEq(t, `{"error":"VendorStop","failure":{"class":"VendorStop","extends":["SafetyViolationError"]}}`, string(body))
	status, body = post(t, w.URL()+"/tools/pay", map[string]int{}, "Idempotency-Key", "k")
	assert.Equal(t, http.StatusTooManyRequests, status)
	var got struct {
		Error   string
		Failure *world.ToolError
	}
	require.NoError(t, json.Unmarshal(body, &got))
	assert.Equal(t, "slow down", got.Error)
	assert.Equal(t, 6, got.Failure.Depth())
	assert.False(t, got.Failure.Terminal())
	status, _ = post(t, w.URL()+"/tools/ask", map[string]int{}, "Idempotency-Key", "h")
	assert.Equal(t, http.StatusAccepted, status)
	assert.Equal(t, []world.MemoryEntry{{ID: "m1", Role: "assistant", Text: "earlier", Tainted: true}}, w.Memory().Scope("acme/alice"))
	assert.Empty(t, w.Memory().Log(), "seeding is not an operation")

	for name, doc := range map[string]string{
		"failure without class":  `{"tools": {"t": [{"failure": {"message": "x"}}]}}`,
		"wrapDepth alone":        `{"tools": {"t": [{"wrapDepth": 2}]}}`,
		"failure with 2xx":       `{"tools": {"t": [{"fail": {"status": 201}, "failure": {"class": "A"}}]}}`,
		"default too deep":       `{"toolDefaults": {"t": {"failure": {"class": "A"}, "wrapDepth": 33}}}`,
		"unknown kind":           `{"declare": [{"name": "t", "kind": "robot"}]}`,
		"unknown failure member": `{"tools": {"t": [{"failure": {"class": "A", "retriable": false}}]}}`,
		"unknown entry member":   `{"memory": {"s": [{"text": "x", "taint": true}]}}`,
	} {
		_, err := world.LoadScript([]byte(doc))
		assert.ErrorIs(t, err, world.ErrBadScript, name)
	}
}

func TestControlAPIListsMemoryAndDeclarations(t *testing.T) {
	w := world.New(world.Options{})
	defer w.Close()
	h := world.ControlHandler(w)
	require.NoError(t, w.Tools().Declare(sutconfig.ToolDef{Name: "ask", Kind: world.KindHuman}))
	require.NoError(t, w.Memory().Seed("s", "x"))
	get := func(path string) string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(t, http.StatusOK, rec.Code, path)
		return rec.Body.String()
	}
	assert.JSONEq(t, `[{"name":"ask","kind":"human"}]`, get("/control/tools/definitions"))
	assert.JSONEq(t, `[]`, get("/control/memory/log"))
	assert.True(t, strings.HasPrefix(get("/control/tools/calls"), "["))
}
