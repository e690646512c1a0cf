package reference_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// turnRec is one turn the test sends, and what it knows about it.
type turnRec struct {
	text, messageID string
	// acked: a 202 answer reached the test. lostAck: the test had one but acts as a client
	// that lost it, so the retry, made some iterations later, must find the turn delivered.
	acked, lostAck bool
	retryAt        int
}

// torture is the state of one TestCrashTorture run.
type torture struct {
	t *testing.T
	// conv is the conversation's id, the one the start answered for the chosen id.
	conv    string
	rng     *rand.Rand
	w       *world.World
	cfgPath string
	logs    *logBuffer
	tr      *http.Transport
	hc      *http.Client
	child   *childProc
	turns   []*turnRec
	holds   []*world.Hold
	kills   map[string]int
	retries int // turns posted again after a restart
	dupes   int // of those, turns the engine already had
	killed  []window
	reposts int // acknowledged turns posted again on purpose
	asked   []askedBefore
}

// askedBefore says that no model request from index from on may ask for a turn in answered:
// those turns had their reply recorded before a kill, and a recovery must not ask again.
type askedBefore struct {
	from     int
	answered map[string]bool
}

// window is when one kill happened: from the signal to the exit the test saw.
type window struct{ from, to time.Time }

func TestCrashTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash torture test starts and kills many processes")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(crashSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "%s must be an unsigned integer", crashSeedEnv)
		seed = v
	}
	iterations := 25
	if s := os.Getenv(crashIterationsEnv); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, "%s must be an integer", crashIterationsEnv)
		iterations = v
	}
	t.Logf("seed %d (rerun the same kill schedule with %s=%d)", seed, crashSeedEnv, seed)

	w := world.New(world.Options{})
	_, err := w.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	require.NoError(t, w.Identity().Add(crashToken, sutconfig.Principal{Tenant: "acme", Actor: "alice"}))

	dir := t.TempDir()
	cfg := w.Config(sutconfig.SUTConfig{
		Listen:  "127.0.0.1:0", // a fresh port each start: a restart never waits for the old socket
		DataDir: filepath.Join(dir, "data"),
		Signing: sutconfig.SigningConfig{Key: base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))},
	})
	cfg.Gateway.PostsPerMinute = 1 << 20
	// No agent memory: a recall puts earlier turns at the head of each prompt, and the test
	// relates each reply to its turn through the prompt the model sees.
	cfg.Memory = sutconfig.EndpointConfig{}
	// Rotate often, so that generations change under the crashes too.
	cfg.Conversation.RotateEveryTurns = 4
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	cfgPath := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(cfgPath, b, 0o600))

	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	x := &torture{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), w: w, cfgPath: cfgPath,
		logs: &logBuffer{}, tr: tr, hc: &http.Client{Timeout: 15 * time.Second, Transport: tr}, kills: map[string]int{}}
	t.Cleanup(func() {
		x.stopChild()
		x.releaseHolds()
		tr.CloseIdleConnections()
		if t.Failed() {
			t.Logf("child logs:\n%s", tail(x.logs.String(), 64<<10))
		}
	})

	x.startChild()
	code, body := x.do("POST", "/conversations", `{"id":"`+crashChosenID+`"}`)
	require.Equal(t, http.StatusCreated, code, body)
	var started struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &started))
	x.conv = started.ID

	for it := range iterations {
		x.iteration(it)
		if t.Failed() {
			return
		}
	}
	x.retry(iterations, true)
	x.check()
	t.Logf("%d turns over %d iterations; kill points: %v; %d turns posted again after a restart, %d of them already delivered; %d reposts; %d model requests",
		len(x.turns), iterations, x.kills, x.retries, x.dupes, x.reposts, x.w.Model().Count())
}

// iteration sends 1-3 new turns, kills the child at a point chosen by the seed, restarts it and
// sends again every turn that was not acknowledged.
func (x *torture) iteration(it int) {
	t := x.t
	n := 1 + x.rng.IntN(3)
	batch := make([]*turnRec, n)
	for i := range batch {
		k := len(x.turns) + i + 1
		batch[i] = &turnRec{text: fmt.Sprintf("message t%03d %s", k, words[x.rng.IntN(len(words))]), messageID: fmt.Sprintf("m-%03d", k)}
	}
	x.turns = append(x.turns, batch...)

	// The replies recorded so far are durable: no later engine may ask the model for them.
	entries, _ := x.history(500)
	answered := map[string]bool{}
	users := map[int64]string{}
	for _, e := range entries {
		if e.Role == loomtype.RoleUser && e.Text != nil {
			users[e.Turn] = *e.Text
		}
	}
	for _, e := range entries {
		if e.Role == loomtype.RoleAssistant {
			answered[users[e.Turn]] = true
		}
	}

	// Now and then a client posts an acknowledged turn again, maybe from an older generation:
	// it is acknowledged and not delivered.
	if x.rng.IntN(3) == 0 {
		var acked []*turnRec
		for _, tu := range x.turns {
			if tu.acked {
				acked = append(acked, tu)
			}
		}
		if len(acked) > 0 {
			tu := acked[x.rng.IntN(len(acked))]
			x.reposts++
			ok, delivered := x.postTurn(x.child.base, tu)
			require.True(t, ok, "the repost of %s was not acknowledged", tu.messageID)
			require.False(t, delivered, "the repost of %s was delivered again", tu.messageID)
		}
	}

	modes := []string{"at-once", "after-acks", "lost-ack", "model-request", "model-answered", "mid-stream", "jitter", "no-kill"}
	mode := modes[x.rng.IntN(len(modes))]
	heldTurn := -1
	if mode == "mid-stream" {
		heldTurn = x.rng.IntN(n)
	}
	// Some other replies stream slowly too: they stop at a hold that is released as soon as
	// they reach it.
	var held *world.Hold
	var pauses []*world.Hold
	for i, tu := range batch {
		if i != heldTurn && x.rng.IntN(3) != 0 {
			continue
		}
		h := x.w.NewHold()
		x.holds = append(x.holds, h)
		if i == heldTurn {
			held = h
		} else {
			pauses = append(pauses, h)
		}
		first, rest, _ := strings.Cut(tu.text, " ")
		require.NoError(t, x.w.Model().EnqueueFor(tu.text, world.Reply{Chunks: []string{"re: ", first}, Hold: h, After: []string{" ", rest}}))
	}
	for _, h := range pauses {
		go func() {
			if h.WaitReached(context.Background()) == nil {
				h.Release()
			}
		}()
	}
	k := 1 + x.rng.IntN(n)
	jitter := time.Duration(x.rng.IntN(25)) * time.Millisecond
	x.logs.mark("iteration %d: turns %s..%s, kill %s (k=%d jitter=%s)", it, batch[0].messageID, batch[n-1].messageID, mode, k, jitter)

	base := x.w.Model().Count()
	sent := make(chan struct{})
	target := x.child.base
	go func() {
		defer close(sent)
		x.send(target, batch)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	switch mode {
	case "at-once":
		// Kill while the posts are on their way: some land, some do not, some land unanswered.
	case "after-acks":
		<-sent
	case "lost-ack":
		<-sent
		if tu := batch[x.rng.IntN(n)]; tu.acked {
			tu.acked, tu.lostAck, tu.retryAt = false, true, it+1+x.rng.IntN(4)
		}
	case "model-request":
		require.NoError(t, x.w.Model().WaitRequests(ctx, base+k), "the model never got request %d of this iteration", k)
	case "model-answered":
		_, err := x.w.Model().WaitDone(ctx, base+k-1)
		require.NoError(t, err, "model request %d of this iteration never ended", k)
	case "mid-stream":
		require.NoError(t, held.WaitReached(ctx), "the held reply was never reached")
	case "jitter":
		// Not a synchronisation: a kill at an arbitrary instant is the point of this mode.
		timer := time.NewTimer(jitter)
		<-timer.C
	case "no-kill":
		<-sent
		x.waitAnswered(ctx)
		x.kills[mode]++
		return
	}
	x.kill()
	x.kills[mode]++
	x.asked = append(x.asked, askedBefore{from: x.w.Model().Count(), answered: answered})
	<-sent
	x.releaseHolds()
	x.startChild()
	// Sometimes the child dies again while it recovers.
	if x.rng.IntN(6) == 0 {
		x.kills["during-recovery"]++
		x.kill()
		x.startChild()
	}
	x.retry(it, false)
}

var words = []string{"alpha", "bravo charlie", "delta echo foxtrot", "golf", "hotel india", "juliet kilo lima mike"}

// send posts turns in order and stops at the first one that is not acknowledged: the child
// is gone, and the rest will be sent after the restart.
func (x *torture) send(base string, batch []*turnRec) {
	for _, tu := range batch {
		if !x.post(base, tu) {
			return
		}
	}
}

// post sends one turn and reports whether it was acknowledged. A transport error means the
// child died; any complete answer other than 202 is a failure of the engine.
func (x *torture) post(base string, tu *turnRec) bool {
	ok, _ := x.postTurn(base, tu)
	return ok
}

func (x *torture) postTurn(base string, tu *turnRec) (acked, delivered bool) {
	body, _ := json.Marshal(map[string]string{"text": tu.text, "messageId": tu.messageID})
	req, _ := http.NewRequest("POST", base+"/conversations/"+x.conv+"/turns", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+crashToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := x.hc.Do(req)
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, false
	}
	if resp.StatusCode != http.StatusAccepted {
		x.t.Errorf("POST turn %s: %d %s", tu.messageID, resp.StatusCode, b)
		return false, false
	}
	var res struct {
		MessageID string `json:"messageId"`
		Delivered bool   `json:"delivered"`
	}
	if err := json.Unmarshal(b, &res); err != nil || res.MessageID != tu.messageID {
		x.t.Errorf("POST turn %s: answer %s", tu.messageID, b)
		return false, false
	}
	tu.acked = true
	return true, res.Delivered
}

// retry sends again, with the same messageId, every turn not yet acknowledged, in order
// (a turn whose acknowledgement was lost waits for its iteration unless final). The child is
// alive, so each must be acknowledged now.
func (x *torture) retry(it int, final bool) {
	for _, tu := range x.turns {
		if tu.acked || (tu.lostAck && tu.retryAt > it && !final) {
			continue
		}
		x.retries++
		acked, delivered := x.postTurn(x.child.base, tu)
		if !acked {
			x.t.Errorf("turn %s was not acknowledged by a live engine", tu.messageID)
			return
		}
		if !delivered {
			x.dupes++
		}
		if tu.lostAck && delivered {
			x.t.Errorf("turn %s was acknowledged before the crash, yet its retry was delivered again", tu.messageID)
		}
	}
}

func (x *torture) releaseHolds() {
	for _, h := range x.holds {
		h.Release()
	}
}

func (x *torture) do(method, path, body string) (int, string) {
	x.t.Helper()
	req, err := http.NewRequest(method, x.base()+path, strings.NewReader(body))
	require.NoError(x.t, err)
	req.Header.Set("Authorization", "Bearer "+crashToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := x.hc.Do(req)
	require.NoError(x.t, err, "%s %s", method, path)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(x.t, err)
	return resp.StatusCode, string(b)
}

// history reads the whole transcript in pages of limit entries and returns the entries and the
// raw pages.
func (x *torture) history(limit int) ([]loomtype.Entry, []byte) {
	t := x.t
	t.Helper()
	var all []loomtype.Entry
	var raw bytes.Buffer
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10000, "history paging does not end")
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		code, body := x.do("GET", "/conversations/"+x.conv+"/history?"+q.Encode(), "")
		require.Equal(t, http.StatusOK, code, body)
		raw.WriteString(body)
		raw.WriteByte('\n')
		var page loomtype.Page
		require.NoError(t, json.Unmarshal([]byte(body), &page), body)
		all = append(all, page.Entries...)
		if page.Done {
			return all, raw.Bytes()
		}
		require.False(t, page.NextCursor == cursor && len(page.Entries) == 0, "history paging is stuck at %q", cursor)
		cursor = page.NextCursor
	}
}

// countAnswered reports how many accepted user records and assistant records there are.
func countAnswered(entries []loomtype.Entry) (users, replies int) {
	for _, e := range entries {
		switch {
		case e.Role == loomtype.RoleUser && e.Status == loomtype.StatusAccepted:
			users++
		case e.Role == loomtype.RoleAssistant:
			replies++
		}
	}
	return users, replies
}

// waitAnswered waits until every acknowledged turn has a reply. Nothing announces that to a
// client that holds no stream open, so it polls the history with a short ticker.
func (x *torture) waitAnswered(ctx context.Context) {
	t := x.t
	t.Helper()
	want := 0
	for _, tu := range x.turns {
		if tu.acked {
			want++
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		entries, _ := x.history(500)
		users, replies := countAnswered(entries)
		if users >= want && replies >= want {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("only %d of %d turns recorded, %d answered", users, want, replies)
		}
	}
}

// check waits for every turn to be answered, then checks the transcript.
func (x *torture) check() {
	t := x.t
	for _, tu := range x.turns {
		require.True(t, tu.acked, "turn %s was never acknowledged", tu.messageID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	x.waitAnswered(ctx)

	// Small pages, so that paging across generations is exercised.
	entries, raw := x.history(7)
	var transcript []string
	for _, e := range entries {
		text := "-"
		if e.Text != nil {
			text = *e.Text
		}
		transcript = append(transcript, fmt.Sprintf("ord %d turn %d %s %s %q %s", e.Ord, e.Turn, e.Role, e.Status, text, e.MessageID))
	}
	if t.Failed() {
		return
	}
	defer func() {
		if t.Failed() {
			t.Logf("transcript:\n%s", strings.Join(transcript, "\n"))
		}
	}()

	// Ords are exactly 1..N, in order; no record (cursor) appears twice.
	cursors := map[string]bool{}
	for i, e := range entries {
		require.EqualValues(t, i+1, e.Ord, "ords run 1..N with no gap or repeat")
		require.False(t, cursors[e.Cursor], "record at cursor %s appears twice", e.Cursor)
		cursors[e.Cursor] = true
	}

	// Every turn sent is recorded once, accepted, in the order sent, with its messageId; turn
	// numbers are 1..T.
	var users []loomtype.Entry
	replies := map[int64][]loomtype.Entry{}
	for _, e := range entries {
		switch e.Role {
		case loomtype.RoleUser:
			require.Equal(t, loomtype.StatusAccepted, e.Status, "user record %d", e.Ord)
			users = append(users, e)
		case loomtype.RoleAssistant:
			replies[e.Turn] = append(replies[e.Turn], e)
		default:
			t.Fatalf("unexpected record %d: %s %s", e.Ord, e.Role, e.Status)
		}
	}
	require.Len(t, users, len(x.turns), "one user record per turn sent")
	for i, u := range users {
		tu := x.turns[i]
		require.NotNil(t, u.Text)
		require.Equal(t, tu.text, *u.Text, "user record %d", u.Ord)
		require.Equal(t, tu.messageID, u.MessageID, "user record %d", u.Ord)
		require.EqualValues(t, i+1, u.Turn, "user record %d", u.Ord)
	}

	// Every accepted turn has exactly one reply, complete, after its user record, answering it.
	require.Len(t, replies, len(users), "replies belong to accepted turns only")
	for _, u := range users {
		rs := replies[u.Turn]
		require.Len(t, rs, 1, "turn %d has exactly one assistant record", u.Turn)
		r := rs[0]
		require.Equal(t, loomtype.StatusComplete, r.Status, "turn %d", u.Turn)
		require.NotNil(t, r.Text, "turn %d", u.Turn)
		require.Equal(t, "re: "+*u.Text, *r.Text, "turn %d", u.Turn)
		require.Greater(t, r.Ord, u.Ord, "turn %d is answered after it was asked", u.Turn)
	}

	// The transcript is stable: a second read is byte for byte the same.
	_, again := x.history(7)
	require.Equal(t, string(raw), string(again), "history read twice differs")

	code, body := x.do("GET", "/conversations/"+x.conv, "")
	require.Equal(t, http.StatusOK, code, body)
	var st loomtype.Status
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.EqualValues(t, len(x.turns), st.Turns, "status counts every turn")
	require.Equal(t, loomtype.StateOpen, st.State)

	// A recovery never asks the model again for a reply that was recorded.
	reqs := x.w.Model().Requests()
	for _, a := range x.asked {
		for _, r := range reqs {
			if r.Index < a.from {
				continue
			}
			text := lastUserText(r.Messages)
			require.False(t, a.answered[text], "model request %d asked again for %q, answered before a kill", r.Index, text)
		}
	}

	// A request cut short by a kill is refused by the world as unreadable; anything else it
	// refused, the engine sent malformed while it was alive.
	for _, r := range x.w.Rejections() {
		explained := false
		for _, k := range x.killed {
			if !r.Arrived.Before(k.from) && r.Arrived.Before(k.to.Add(5*time.Second)) {
				explained = true
			}
		}
		require.True(t, explained, "the world refused %s %s (%d %s) away from any kill", r.Method, r.Path, r.Status, r.Reason)
	}
	logs := x.logs.String()
	require.False(t, strings.Contains(logs, "WARNING: DATA RACE"), "a child reported a data race")
	require.False(t, strings.Contains(logs, "panic:"), "a child panicked")
}

func lastUserText(msgs []world.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}
