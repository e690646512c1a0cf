package world_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

const handScript = `{
  "model": [
    {"chunks": ["Hel", "lo"], "keepAlive": true, "multiLine": true, "usageChunk": true},
    {"match": "weather", "text": "Checking.", "toolCalls": [{"name": "lookup", "arguments": "{\"q\":\"Oslo\"}"}]},
    {"fail": {"status": 503, "message": "overloaded"}}
  ],
  "tools": {"lookup": [{"result": {"temp": 3}}, {"fail": {"status": 502, "message": "down"}}]},
  "toolDefaults": {"clock": {"result": {"now": "noon"}}},
  "identities": {"tok-alice": {"tenant": "acme", "actor": "alice"}},
  "clearance": {"alice": ["finance"]}
}`

func TestScriptSetsUpEveryParty(t *testing.T) {
	w := start(t, world.Options{})
	s, err := world.LoadScript([]byte(handScript))
	require.NoError(t, err)
	require.NoError(t, w.Apply(s))
	assert.Equal(t, 3, w.Model().Pending())

	c := client(w, true)
	resp, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("what is the weather?")}, nil)
	require.NoError(t, err)
	assert.Equal(t, model.Response{Content: "Checking.", FinishReason: "tool_calls",
		ToolCalls: []model.ToolCall{{ID: "call_1_1", Name: "lookup", Arguments: `{"q":"Oslo"}`}}}, resp)
	resp, err = c.Complete(bounded(t), model.Request{Messages: userMsgs("hi")}, nil)
	require.NoError(t, err)
	assert.Equal(t, model.Response{Content: "Hello", FinishReason: "stop"}, resp)
	_, err = c.Complete(bounded(t), model.Request{Messages: userMsgs("hi")}, nil)
	var pe *model.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 503, pe.Status)
	assert.JSONEq(t, `{"error":{"message":"overloaded","type":"server_error"}}`, pe.Body)

	status, body := post(t, w.URL()+"/tools/lookup", map[string]string{"q": "Oslo"}, "Idempotency-Key", "k1")
	assert.Equal(t, 200, status)
	assert.JSONEq(t, `{"temp":3}`, string(body))
	status, body = post(t, w.URL()+"/tools/lookup", map[string]string{"q": "Oslo"}, "Idempotency-Key", "k2")
	assert.Equal(t, 502, status)
	assert.JSONEq(t, `{"error":"down"}`, string(body))
	status, body = post(t, w.URL()+"/tools/clock", map[string]string{}, "Idempotency-Key", "k3")
	assert.Equal(t, 200, status)
	assert.JSONEq(t, `{"now":"noon"}`, string(body))

	assert.Equal(t, map[string]sutconfig.Principal{"tok-alice": {Tenant: "acme", Actor: "alice"}}, w.Identity().Principals())
	status, body = post(t, w.URL()+"/clearance", map[string]any{"viewer": map[string]string{"actor": "alice"}, "classes": []string{"finance"}})
	assert.Equal(t, 200, status)
	assert.JSONEq(t, `{"cleared":true}`, string(body))
}

func TestBadScriptsAreRefused(t *testing.T) {
	for name, doc := range map[string]string{
		"not JSON":           `{"model": [`,
		"unknown member":     `{"modle": []}`,
		"unknown in reply":   `{"model": [{"txt": "x"}]}`,
		"trailing data":      `{} {}`,
		"call without name":  `{"model": [{"toolCalls": [{"arguments": "{}"}]}]}`,
		"arguments not JSON": `{"model": [{"toolCalls": [{"name": "f", "arguments": "{"}]}]}`,
	} {
		_, err := world.LoadScript([]byte(doc))
		assert.ErrorIs(t, err, world.ErrBadScript, name)
	}
	w := start(t, world.Options{MaxScript: 1})
	err := w.Apply(world.Script{Model: []world.ScriptReply{{Text: "a"}, {Text: "b"}}})
	assert.ErrorIs(t, err, world.ErrBadScript)
	assert.ErrorIs(t, err, world.ErrScriptFull)
}

func TestControlAPI(t *testing.T) {
	w := world.New(world.Options{})
	mux := http.NewServeMux()
	mux.Handle(world.PathControl, world.ControlHandler(w))
	mux.Handle("/", w.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer w.Close()

	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, path)
		var v json.RawMessage
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
		return string(v)
	}
	assert.Equal(t, `[]`, get("/control/model/requests"))

	resp, err := http.Post(srv.URL+"/control/script", "application/json", strings.NewReader(`{"model": [{"text": "from the script", "plain": true}]}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, err = http.Post(srv.URL+"/control/script", "application/json", strings.NewReader(`{"model": {}}`))
	require.NoError(t, err)
	var e struct{ Error string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.True(t, strings.HasPrefix(e.Error, "bad script"), e.Error)

	c := model.NewClient(model.ClientOptions{BaseURL: srv.URL + "/v1", Stream: true})
	out, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("hi")}, nil)
	require.NoError(t, err)
	assert.Equal(t, model.Response{Content: "from the script", FinishReason: "stop"}, out)

	var reqs []struct {
		Index    int
		Stream   bool
		Messages []world.Message
		Finished bool
	}
	require.NoError(t, json.Unmarshal([]byte(get("/control/model/requests")), &reqs))
	require.Len(t, reqs, 1)
	assert.True(t, reqs[0].Stream)
	assert.True(t, reqs[0].Finished)
	assert.Equal(t, []world.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "hi"}}, reqs[0].Messages)

	// A body without Content-Type reaches the world as a refusal, listed by the control API.
	resp, err = http.Post(srv.URL+"/v1/chat/completions", "", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	var rej []world.Rejection
	require.NoError(t, json.Unmarshal([]byte(get("/control/rejections")), &rej))
	require.Len(t, rej, 1)
	assert.Equal(t, http.StatusUnsupportedMediaType, rej[0].Status)

	resp, err = http.Post(srv.URL+"/control/reset", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, `[]`, get("/control/model/requests"))
	assert.Equal(t, `[]`, get("/control/rejections"))

	resp, err = http.Get(srv.URL + "/control/nothing")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}
