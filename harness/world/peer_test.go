package world_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

const goodText = `{"v":1,"thread":"t_0123456789abcdef","message":"m1","from":"planner","to":"analyst","text":"hi"}`

func TestPeerAcknowledgesAndRecordsWholeRequests(t *testing.T) {
	w := start(t, world.Options{})
	url := w.URL() + world.PathPeerBase + world.PathPeerTexts
	status, body := post(t, url, goodText, "Authorization", "Bearer "+world.PeerSendToken)
	assert.Equal(t, 200, status)
	assert.JSONEq(t, `{"ack":true,"thread":"t_0123456789abcdef","message":"m1"}`, string(body))
	ds := w.Peer().Deliveries()
	require.Len(t, ds, 1)
	assert.Equal(t, "Bearer "+world.PeerSendToken, ds[0].Authorization)
	assert.Equal(t, goodText, string(ds[0].Body))
	assert.Equal(t, world.PeerText{V: 1, Thread: "t_0123456789abcdef", Message: "m1", From: "planner", To: "analyst", Text: "hi"}, ds[0].Text)
	assert.Empty(t, ds[0].Problem)
}

func TestPeerRejectsWhatBreaksTheWire(t *testing.T) {
	w := start(t, world.Options{})
	url := w.URL() + world.PathPeerBase + world.PathPeerTexts
	auth := []string{"Authorization", "Bearer " + world.PeerSendToken}
	cases := []struct {
		body, auth string
		status     int
		answer     string
	}{
		{goodText, "", 401, `{"reason":"connection"}`},
		{goodText, "Bearer " + world.PeerAcceptToken, 401, `{"reason":"connection"}`},
		{`{"v":1,"thread":"short","message":"m1","from":"planner","to":"analyst","text":"hi"}`, auth[1], 400, `{"reason":"bad-request","detail":"thread"}`},
		{`{"v":1,"thread":"t_0123456789abcdef","message":"m 1","from":"planner","to":"analyst","text":"hi"}`, auth[1], 400, `{"reason":"bad-request","detail":"message"}`},
		{`{"v":1,"thread":"t_0123456789abcdef","message":"m1","from":"planner","to":"analyst","text":""}`, auth[1], 400, `{"reason":"bad-request","detail":"text"}`},
		{`{"v":1,"thread":"t_0123456789abcdef","message":"m1","from":"planner","to":"cook","text":"hi"}`, auth[1], 404, `{"reason":"role"}`},
	}
	for _, c := range cases {
		status, body := post(t, url, c.body, "Authorization", c.auth)
		assert.Equal(t, c.status, status, c.body)
		assert.JSONEq(t, c.answer, string(body), c.body)
	}
	ds := w.Peer().Deliveries()
	require.Len(t, ds, len(cases))
	assert.NotEmpty(t, ds[0].Problem)
	assert.NotEmpty(t, ds[2].Problem)
	assert.Empty(t, ds[5].Problem, "an unknown role is an answer, not a malformed text")
}

func TestPeerAnswersAsScriptedThenAcknowledges(t *testing.T) {
	w := start(t, world.Options{})
	url := w.URL() + world.PathPeerBase + world.PathPeerTexts
	require.NoError(t, w.Peer().Script(world.PeerAnswer{Status: 503, Reason: "unavailable", Times: 2}, world.PeerAnswer{Status: 409, Reason: "thread"}))
	var got []string
	for range 4 {
		status, body := post(t, url, goodText, "Authorization", "Bearer "+world.PeerSendToken)
		got = append(got, string(rune('0'+status/100))+" "+string(body))
	}
	assert.Equal(t, []string{
		`5 {"reason":"unavailable"}`, `5 {"reason":"unavailable"}`, `4 {"reason":"thread"}`,
		`2 {"ack":true,"message":"m1","thread":"t_0123456789abcdef"}`,
	}, got)
}

func TestPeerHoldsUntilReleased(t *testing.T) {
	w := start(t, world.Options{})
	url := w.URL() + world.PathPeerBase + world.PathPeerTexts
	h := w.NewHold()
	require.NoError(t, w.Peer().Script(world.PeerAnswer{Hold: h}))
	done := make(chan int, 1)
	go func() {
		status, _, _ := send(url, goodText, "Authorization", "Bearer "+world.PeerSendToken)
		done <- status
	}()
	require.NoError(t, h.WaitReached(bounded(t)))
	require.NoError(t, w.Peer().WaitDeliveries(bounded(t), 1))
	select {
	case <-done:
		t.Fatal("answered before the release")
	default:
	}
	h.Release()
	assert.Equal(t, 200, <-done)
}

func TestConfigFillsThreadsOnlyWhenEmpty(t *testing.T) {
	w := start(t, world.Options{})
	cfg := w.Config(sutconfig.SUTConfig{})
	require.Len(t, cfg.Threads.Connections, 1)
	c := cfg.Threads.Connections[0]
	assert.Equal(t, sutconfig.ConnectionConfig{ID: "lab", URL: w.URL() + "/lab", Send: world.PeerSendToken, Accept: world.PeerAcceptToken,
		Owner: sutconfig.Principal{Tenant: "acme", Actor: "olga"}}, c)
	assert.Equal(t, []sutconfig.RoleConfig{
		{Name: "planner", Prompt: "You plan the work.", Principals: []sutconfig.Principal{{Tenant: "acme", Actor: "role:planner"}}},
		{Name: "scout", Prompt: "You scout ahead.", Principals: []sutconfig.Principal{{Tenant: "acme", Actor: "role:scout"}}},
	}, cfg.Threads.Roles, "each role is issued its principal")
	assert.Equal(t, []sutconfig.Principal{{Tenant: "acme", Actor: "dana"}}, cfg.Threads.Members)
	own := sutconfig.ThreadsConfig{Roles: []sutconfig.RoleConfig{{Name: "x"}}}
	assert.Equal(t, own, w.Config(sutconfig.SUTConfig{Threads: own}).Threads)
}
