package explore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
)

func TestChoosePoints(t *testing.T) {
	require.Equal(t, []int64{}, choosePoints(0, 1, 0))
	require.Equal(t, []int64{1, 2, 3, 4, 5}, choosePoints(5, 1, 0))
	require.Equal(t, []int64{1, 3, 5}, choosePoints(5, 2, 0))
	require.Equal(t, []int64{1, 4, 6}, choosePoints(6, 3, 0), "the last write always")
	require.Equal(t, []int64{1, 6}, choosePoints(6, 1, 2))
	require.Equal(t, []int64{1, 4, 7, 10}, choosePoints(10, 1, 4))
	require.Equal(t, []int64{1, 2, 3}, choosePoints(3, 1, 10))
	require.Equal(t, []int64{1}, choosePoints(4, 1, 1))
}

// The explorer's own signer reproduces every vector of fixtures/envelopes it can express (user
// envelopes without editOf or onBehalfOf).
func TestEnvelopeVectors(t *testing.T) {
	b, err := os.ReadFile("../../fixtures/envelopes/vectors.json")
	require.NoError(t, err)
	var doc struct {
		Signing []struct {
			Name      string `json:"name"`
			Key       string `json:"keyBase64"`
			Canonical string `json:"canonical"`
			Sig       string `json:"sig"`
			Envelope  struct {
				ConversationID string          `json:"conversationId"`
				Kind           string          `json:"kind"`
				ID             string          `json:"id"`
				IAT            int64           `json:"iat"`
				Text           *string         `json:"text"`
				EditOf         json.RawMessage `json:"editOf"`
				Asker          map[string]string
			} `json:"envelope"`
		} `json:"signing"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	checked := 0
	for _, v := range doc.Signing {
		e := v.Envelope
		if e.Kind != "user" || e.EditOf != nil || e.Asker["onBehalfOf"] != "" || e.Text == nil {
			continue
		}
		env := envelope{ConversationID: e.ConversationID, ID: e.ID, IAT: e.IAT, Text: *e.Text, Tenant: e.Asker["tenant"], Actor: e.Asker["actor"]}
		require.Equal(t, v.Canonical, string(env.canonical()), v.Name)
		key, err := base64.StdEncoding.DecodeString(v.Key)
		require.NoError(t, err)
		var wire map[string]any
		require.NoError(t, json.Unmarshal(env.signed(key), &wire))
		require.Equal(t, v.Sig, wire["sig"], v.Name)
		checked++
	}
	require.GreaterOrEqual(t, checked, 2, "vectors the signer can express")
}

func rec(role, status string, turn int64, text, msgID string) entry {
	e := entry{"role": role, "status": status, "turn": float64(turn), "text": text, "time": "t", "cursor": "0.1"}
	if msgID != "" {
		e["messageId"] = msgID
	}
	return e
}

// judge itself: each kind of finding, named by dialogue, point and record.
func TestJudge(t *testing.T) {
	d := &dialogue{name: "plain", viewers: []string{"alice"}}
	hist := []entry{rec("user", "accepted", 1, "hi", "m-1"), rec("assistant", "complete", 1, "re: hi", "")}
	base := &outcome{hist: map[string][]entry{"alice": hist}, status: entry{"turns": float64(1)},
		acks: []ack{{who: "alice", messageID: "m-1", text: "hi"}}}
	same := func() *outcome {
		o := *base
		o.hist = map[string][]entry{"alice": append([]entry(nil), hist...)}
		return &o
	}
	require.Empty(t, judge(d, 3, base, same()))

	// Only times and minted ids are ignored.
	o := same()
	o.hist["alice"] = []entry{hist[0], rec("assistant", "complete", 1, "re: hi", "")}
	o.hist["alice"][1]["time"], o.hist["alice"][1]["errorId"], o.hist["alice"][1]["turnExecutionId"] = "other", "e", "x"
	require.Empty(t, judge(d, 3, base, o))
	o.hist["alice"][1]["cursor"] = "0.2"
	fs := judge(d, 3, base, o)
	require.Len(t, fs, 1)
	require.Equal(t, Finding{Dialogue: "plain", Point: 3, Kind: "history", Viewer: "alice", Record: 2,
		What: "the history differs from the uncrashed run's", Want: normalized(hist[1]), Got: normalized(o.hist["alice"][1])}, fs[0])

	// A doubled turn, an extra record past the uncrashed run's end.
	o = same()
	o.hist["alice"] = append(o.hist["alice"], rec("user", "accepted", 2, "hi", "m-1"), rec("assistant", "complete", 2, "re: hi", ""))
	fs = judge(d, 4, base, o)
	require.Equal(t, "duplicated", fs[0].Kind)
	require.Contains(t, fs[0].Got, "2 (turns 1, 2)")
	require.Contains(t, kindsOf(fs), "history")

	// A lost acknowledged turn, and an unanswered one.
	o = same()
	o.hist["alice"] = nil
	require.Equal(t, "lost", judge(d, 1, base, o)[0].Kind)
	o.hist["alice"] = hist[:1]
	fs = judge(d, 1, base, o)
	require.Equal(t, "lost", fs[0].Kind)
	require.Equal(t, "exactly one reply", fs[0].Want)

	// The model asked again, after the restart, for a turn recorded before the crash.
	o = same()
	o.recorded = map[int]map[string][]entry{1: {"alice": hist}}
	o.requests = []world.ModelRequest{{Index: 0, APIKey: epochKey(0), Messages: []world.Message{{Role: "user", Content: "hi"}}},
		{Index: 1, APIKey: epochKey(1), Messages: []world.Message{{Role: "user", Content: "hi"}}}}
	base.requests = o.requests[:1]
	fs = judge(d, 2, base, o)
	require.Len(t, fs, 1)
	require.Equal(t, "reasked", fs[0].Kind)
	require.Contains(t, fs[0].What, "model request 1")
	// Not a finding when the reply had not been recorded at the crash.
	o.recorded = map[int]map[string][]entry{1: {"alice": hist[:1]}}
	require.Empty(t, judge(d, 2, base, o))

	// A request the uncrashed run never made, and an error report after the restart.
	o = same()
	o.requests = []world.ModelRequest{{Index: 0, APIKey: epochKey(1), Messages: []world.Message{{Role: "user", Content: "other"}}}}
	o.hooks = []hookReport{{Epoch: 0, Report: world.ErrorReport{Error: "dying"}}, {Epoch: 1, Report: world.ErrorReport{Error: "divergence at command 3"}}}
	o.epochs = 2
	fs = judge(d, 2, base, o)
	require.ElementsMatch(t, []string{"request", "request", "error"}, kindsOf(fs))

	// The execution log, when compared: an event the uncrashed run did not write.
	o = same()
	base.log, o.log = []string{"0.1 started", "0.2 decided"}, []string{"0.1 started", "0.2 decided", "0.3 failed"}
	fs = judge(d, 5, base, o)
	require.Equal(t, []Finding{{Dialogue: "plain", Point: 5, Kind: "log", Record: 3,
		What: "the execution log differs from the uncrashed run's (event, by position and kind)", Want: "no event", Got: "0.3 failed"}}, fs)
	require.Contains(t, fs[0].String(), "(event 3)")
	base.log = nil

	// A tool call redone after a restart that found no turn in flight; not one redone for a turn
	// in flight.
	o = same()
	o.recorded = map[int]map[string][]entry{1: {"alice": hist}}
	o.calls = []toolCall{{Epoch: 0, Name: "lookup", Key: "k1", Status: 200}, {Epoch: 1, Name: "lookup", Key: "k1", Status: 200}}
	fs = judge(d, 6, base, o)
	require.Equal(t, []string{"reasked"}, kindsOf(fs))
	require.Contains(t, fs[0].What, "tool call 1 (lookup), after restart 1, redoes call 0")
	o.recorded = map[int]map[string][]entry{1: {"alice": hist[:1]}}
	require.Empty(t, judge(d, 6, base, o))

	// A tool call the uncrashed run never made.
	o = same()
	o.tools = []world.Invocation{{Index: 0, Name: "lookup", Args: []byte(`{"q":"x"}`), IdempotencyKey: "k"}}
	require.ElementsMatch(t, []string{"tool"}, kindsOf(judge(d, 6, base, o)))

	// A changed status.
	o = same()
	o.status = entry{"turns": float64(2)}
	require.Equal(t, []string{"status"}, kindsOf(judge(d, 2, base, o)))
}

func kindsOf(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Kind)
	}
	return out
}

// A barge-in dialogue crashed before its interrupted turn's reply was recorded: the restarted
// instance asks the model for the turn (the request waits while its history is read), a message
// already waiting interrupts the turn, and the instance records the interrupted reply itself
// before the read sees it. That request is no re-ask; the same request arriving after the read,
// or a waiting request for a turn the read shows complete, is.
func TestJudgeRequestsHeldDuringTheRead(t *testing.T) {
	d := &dialogue{name: "barge-in", viewers: []string{"alice"}}
	final := []entry{rec("user", "accepted", 1, "check the pumps", "m-1"), rec("assistant", "interrupted", 1, "", ""),
		rec("user", "accepted", 2, "actually, check the valves", "m-2"), rec("assistant", "complete", 2, "ok", "")}
	ask := func(i int, key, text string) world.ModelRequest {
		return world.ModelRequest{Index: i, APIKey: key, Messages: []world.Message{{Role: "user", Content: text}}}
	}
	base := &outcome{hist: map[string][]entry{"alice": final}, status: entry{"turns": float64(2)},
		acks:     []ack{{who: "alice", messageID: "m-1", text: "check the pumps"}, {who: "alice", messageID: "m-2", text: "actually, check the valves"}},
		requests: []world.ModelRequest{ask(0, epochKey(0), "check the pumps"), ask(1, epochKey(0), "actually, check the valves")}}
	crashed := func(key string, read []entry) *outcome {
		o := *base
		o.hist = map[string][]entry{"alice": append([]entry(nil), final...)}
		o.recorded = map[int]map[string][]entry{1: {"alice": read}}
		o.requests = []world.ModelRequest{ask(0, epochKey(0), "check the pumps"), ask(1, key, "check the pumps"),
			ask(2, heldKey(1), "actually, check the valves")}
		o.epochs = 2
		return &o
	}
	// The read after the restart shows the interrupted reply the restarted instance recorded
	// after sending its waiting request for turn 1.
	read := final[:3]
	require.Empty(t, judge(d, 4, base, crashed(heldKey(1), read)))

	// The same request, arriving after the read had shown the turn answered, is a re-ask.
	fs := judge(d, 4, base, crashed(epochKey(1), read))
	require.Equal(t, []string{"reasked"}, kindsOf(fs))
	require.Equal(t, `model request 1, after restart 1, asks for turn 1 ("check the pumps")`, fs[0].What)

	// A waiting request for a turn whose reply the read shows complete is a re-ask: a complete
	// reply needs the model's answer, and none reached the restarted instance before the read.
	done := []entry{rec("user", "accepted", 1, "check the pumps", "m-1"), rec("assistant", "complete", 1, "pumps fine", "")}
	fs = judge(d, 4, base, crashed(heldKey(1), done))
	require.Contains(t, kindsOf(fs), "reasked")
	require.Equal(t, `model request 1, after restart 1, asks for turn 1 ("check the pumps")`, fs[slices.Index(kindsOf(fs), "reasked")].What)

	// Keys: the epoch of either kind, and which one waited.
	require.Equal(t, 1, epochOf(heldKey(1)))
	require.Equal(t, 1, epochOf(epochKey(1)))
	require.True(t, heldOf(heldKey(1)))
	require.False(t, heldOf(epochKey(1)))
	require.False(t, heldOf("other-held"))
	require.Equal(t, -1, epochOf("other-held"))
}

// The front marks a model request that arrived while the gate was shut with heldKey, and one that
// arrived while it was open with epochKey.
func TestFrontMarksHeldRequests(t *testing.T) {
	w := world.New(world.Options{})
	defer w.Close()
	f := &front{w: w, crashed: map[int]<-chan struct{}{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	post := func() error {
		resp, err := http.Post(srv.URL+"/e/1"+world.PathModel, "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"check the pumps"}]}`))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("got %d", resp.StatusCode)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	f.shutModel()
	done := make(chan error, 1)
	go func() { done <- post() }()
	// The request arrives while the gate is shut; it reaches the world only once it opens.
	require.Eventually(t, func() bool { return f.waiting() == 1 }, 10*time.Second, time.Millisecond, "the request never reached the shut gate")
	require.Equal(t, 0, w.Model().Count())
	f.openModel()
	require.NoError(t, <-done)
	require.NoError(t, post())
	require.NoError(t, w.Model().WaitRequests(ctx, 2))
	reqs := w.Model().Requests()
	require.Equal(t, heldKey(1), reqs[0].APIKey)
	require.Equal(t, epochKey(1), reqs[1].APIKey)
}
