package explore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// The principals of the canonical dialogues, by the name the dialogues use.
var principals = map[string]sutconfig.Principal{
	"alice": {Tenant: "acme", Actor: "alice"},
	"bob":   {Tenant: "acme", Actor: "bob"},
	// the service is the host identity a shared conversation runs as: it owns the execution, so
	// it alone reads the execution's log through the runtime door.
	"service": servicePrincipal,
}

var servicePrincipal = sutconfig.Principal{Tenant: "acme", Actor: "loom-service"}

func tokenOf(who string) string { return "tok-explore-" + who }

// epochKey is the model API key the instance of one epoch (0 before any restart, 1 after the
// first) reaches the model with: the world's request log then says which instance asked.
func epochKey(epoch int) string { return "explore-epoch-" + strconv.Itoa(epoch) }

// heldKey is the model API key of a request of epoch that arrived while model requests were held,
// that is before the restarted instance's history had been read (session.recorded): that history
// may already hold what the instance recorded after sending the request.
func heldKey(epoch int) string { return epochKey(epoch) + heldSuffix }

const heldSuffix = "-held"

// heldOf says whether a model API key is one heldKey made.
func heldOf(key string) bool { return epochOf(key) >= 0 && strings.HasSuffix(key, heldSuffix) }

// epochOf is the epoch of a model API key epochKey or heldKey made, or -1.
func epochOf(key string) int {
	key = strings.TrimSuffix(key, heldSuffix)
	n, err := strconv.Atoi(strings.TrimPrefix(key, "explore-epoch-"))
	if err != nil || !strings.HasPrefix(key, "explore-epoch-") {
		return -1
	}
	return n
}

// ack is a message the instance acknowledged (202).
type ack struct {
	who, messageID, text string
	door                 bool
}

// session is one run of one dialogue: the world, the instance of the current epoch, and what the
// clients know.
type session struct {
	opt      *Options
	d        *dialogue
	ctx      context.Context
	dir      string
	w        *world.World
	fr       *front
	frontURL string
	frontSrv *http.Server
	cfg      sutconfig.SUTConfig
	key      []byte

	epoch   int
	inst    harness.Instance
	srv     *http.Server
	served  chan struct{}
	base    string
	tr      *http.Transport
	hc      *http.Client
	crashed <-chan struct{} // closed when the armed crash point fires; nil when unarmed

	conv     string
	created  bool // the conversation's creation was acknowledged
	acks     []ack
	envs     map[string]json.RawMessage // door payloads, built once per run so retries resend them
	holds    map[string]*world.Hold
	modelAt  int                        // model requests the world had when the current epoch began
	recorded map[int]map[string][]entry // per epoch after a crash, per viewer: the history read while model requests were held
	events   []string                   // what the session did, for a finding's context
}

func newSession(ctx context.Context, opt *Options, d *dialogue) (*session, error) {
	dir, err := os.MkdirTemp(opt.Dir, "explore-*")
	if err != nil {
		return nil, fmt.Errorf("%w: scratch directory: %v", harness.ErrHarness, err)
	}
	s := &session{opt: opt, d: d, ctx: ctx, dir: dir, envs: map[string]json.RawMessage{}, holds: map[string]*world.Hold{},
		recorded: map[int]map[string][]entry{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w: listen: %v", harness.ErrHarness, err)
	}
	s.frontURL = "http://" + ln.Addr().String()
	s.w = world.New(world.Options{URL: s.frontURL})
	s.fr = &front{w: s.w, crashed: map[int]<-chan struct{}{}}
	s.frontSrv = &http.Server{Handler: s.fr, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.frontSrv.Serve(ln) }()
	for who, p := range principals {
		if err := s.w.Identity().Add(tokenOf(who), p); err != nil {
			s.close()
			return nil, fmt.Errorf("%w: register %s: %v", harness.ErrHarness, who, err)
		}
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	s.key = raw
	svc := servicePrincipal
	s.cfg = sutconfig.SUTConfig{
		Listen:  "127.0.0.1:0",
		DataDir: filepath.Join(dir, "data"),
		Signing: sutconfig.SigningConfig{Key: base64.StdEncoding.EncodeToString(raw)},
		Shared:  sutconfig.SharedConfig{ServicePrincipal: &svc},
		Gateway: sutconfig.GatewayConfig{PollMs: 200, PostsPerMinute: 1_000_000},
		// The exploration crashes the process, never the power: a commit that waits for the disk
		// survives nothing more here, and only slows every crash point down.
		Storage: sutconfig.StorageConfig{Sync: "normal"},
	}
	if d.configure != nil {
		d.configure(&s.cfg)
	}
	s.tr = &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 10 * time.Second}
	s.hc = &http.Client{Transport: s.tr}
	return s, nil
}

// configFor is the configuration of an epoch: every world endpoint behind the front, under the
// epoch's prefix.
func (s *session) configFor(epoch int) sutconfig.SUTConfig {
	c := s.cfg
	u := s.frontURL + "/e/" + strconv.Itoa(epoch)
	c.Model.BaseURL = u + "/v1"
	c.Tools.BaseURL = u + "/tools"
	c.Summarizer.URL = u + world.PathSummarize
	c.Identity.URL = u + world.PathIdentity
	c.Clearance.URL = u + world.PathClearance
	c.ErrorHook.URL = u + world.PathErrorHook
	c.Memory.URL = ""
	if s.d.noSummarizer {
		c.Summarizer.URL = ""
	}
	return c
}

// open opens the instance of the current epoch and serves it on a loopback listener.
func (s *session) open() error {
	inst, err := s.opt.Factory(s.ctx, s.configFor(s.epoch))
	if err != nil {
		return fmt.Errorf("open the instance (epoch %d): %w", s.epoch, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		inst.Close()
		return fmt.Errorf("%w: listen: %v", harness.ErrHarness, err)
	}
	s.inst = inst
	s.base = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: inst.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.served = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln)
	}(s.srv, s.served)
	s.modelAt = s.w.Model().Count()
	return nil
}

// writeCrasher is the instance's crash hook, or a harness error naming what is missing.
func (s *session) writeCrasher() (harness.WriteCrasher, error) {
	wc, ok := s.inst.(harness.WriteCrasher)
	if !ok {
		return nil, fmt.Errorf("%w: the instance (%T) does not implement harness.WriteCrasher", harness.ErrHarness, s.inst)
	}
	return wc, nil
}

// arm arms the current instance's crash hook at its n-th write from now.
func (s *session) arm(wc harness.WriteCrasher, n int64) {
	s.crashed = wc.CrashAfterWrite(n)
	s.fr.mu.Lock()
	s.fr.crashed[s.epoch] = s.crashed
	s.fr.mu.Unlock()
}

// abandon crashes the current instance as the in-process driver does: Crash, then the listener
// goes; no Close.
func (s *session) abandon() {
	if s.inst == nil {
		return
	}
	s.inst.Crash()
	_ = s.srv.Close()
	<-s.served
	s.tr.CloseIdleConnections()
	s.inst = nil
	s.crashed = nil
}

// restart abandons the crashed instance and opens the next epoch on the same data directory. Model
// requests wait until the restarted instance's history has been read (s.recorded[epoch]): it holds
// what was recorded before the crash, and what the instance recorded since without a model answer.
// The restarted instance runs while the history is read: it may ask the model for a turn in flight
// (the request waits) and then record that turn's reply itself, interrupted by a barge-in or
// failed, before the read sees it. The requests that waited carry heldKey, so the judgement can
// tell them apart (see judge). With Options.Then, the first restarted
// instance is armed to crash again right after its Then-th write; a crash during the read
// restarts again.
func (s *session) restart() error {
	for {
		s.abandon()
		s.epoch++
		s.note("crash; restart as epoch %d", s.epoch)
		err := s.reopen()
		if err == nil || !fired(s.crashed) {
			return err
		}
	}
}

func (s *session) reopen() error {
	s.fr.shutModel()
	defer s.fr.openModel()
	if err := s.open(); err != nil {
		return err
	}
	if s.epoch == 1 && s.opt.Then > 0 {
		wc, err := s.writeCrasher()
		if err != nil {
			return err
		}
		s.arm(wc, s.opt.Then)
	}
	rec := map[string][]entry{}
	s.recorded[s.epoch] = rec
	if !s.created {
		return nil
	}
	for _, v := range s.d.viewers {
		h, err := s.history(s.ctx, v)
		if err != nil {
			return fmt.Errorf("read %s's history right after the restart: %w", v, err)
		}
		rec[v] = h
	}
	return nil
}

func (s *session) close() {
	if s.inst != nil {
		_ = s.srv.Close()
		<-s.served
		_ = s.inst.Close()
		s.inst = nil
	}
	if s.tr != nil {
		s.tr.CloseIdleConnections()
	}
	s.w.Close()
	_ = s.frontSrv.Close()
	os.RemoveAll(s.dir)
}

func (s *session) note(format string, args ...any) {
	s.events = append(s.events, fmt.Sprintf(format, args...))
}

// request sends one request as who and decodes a JSON answer into out (when non-nil).
func (s *session) request(ctx context.Context, who, method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tokenOf(who))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: the answer is not JSON: %v", method, path, err)
		}
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: got %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return resp.StatusCode, nil
}

// entry is one history record as the instance shows it, kept whole.
type entry map[string]any

func (e entry) str(k string) string { v, _ := e[k].(string); return v }
func (e entry) num(k string) int64  { v, _ := e[k].(float64); return int64(v) }

// history reads the whole history as viewer, oldest first, page by page.
func (s *session) history(ctx context.Context, viewer string) ([]entry, error) {
	var out []entry
	cursor := ""
	for range 10000 {
		q := url.Values{"limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Entries    []entry `json:"entries"`
			NextCursor string  `json:"nextCursor"`
			Done       bool    `json:"done"`
		}
		if _, err := s.request(ctx, viewer, http.MethodGet, "/conversations/"+url.PathEscape(s.conv)+"/history?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Entries...)
		if page.Done {
			return out, nil
		}
		if page.NextCursor == cursor && len(page.Entries) == 0 {
			return nil, fmt.Errorf("history: the read makes no progress at cursor %q", cursor)
		}
		cursor = page.NextCursor
	}
	return nil, errors.New("history: more than 10000 pages")
}

// status reads the conversation's status as viewer.
func (s *session) status(ctx context.Context, viewer string) (entry, error) {
	var st entry
	_, err := s.request(ctx, viewer, http.MethodGet, "/conversations/"+url.PathEscape(s.conv), nil, &st)
	return st, err
}

// start creates the conversation under a caller-chosen id, so a retry is idempotent. The
// conversation's id is the one the answer names (a chosen id is the owner's own, and a system
// may derive the conversation's id from it).
func (s *session) start(ctx context.Context, owner string, body map[string]any) error {
	body["id"] = "explore-" + s.d.name
	var out struct {
		ID string `json:"id"`
	}
	if _, err := s.request(ctx, owner, http.MethodPost, "/conversations", body, &out); err != nil {
		return err
	}
	if out.ID == "" || (s.conv != "" && out.ID != s.conv) {
		return fmt.Errorf("start: the conversation's id is %q, want a stable, non-empty one (first %q)", out.ID, s.conv)
	}
	s.conv = out.ID
	s.created = true
	return nil
}

// send posts a turn with a fixed message id; a 202 makes it acknowledged.
func (s *session) send(ctx context.Context, who, messageID, text string) error {
	var out struct {
		Delivered bool `json:"delivered"`
	}
	_, err := s.request(ctx, who, http.MethodPost, "/conversations/"+url.PathEscape(s.conv)+"/turns",
		map[string]any{"text": text, "messageId": messageID}, &out)
	if err != nil {
		return err
	}
	s.acks = append(s.acks, ack{who: who, messageID: messageID, text: text})
	s.note("%s's %s acknowledged (delivered %v)", who, messageID, out.Delivered)
	return nil
}

// steer sends who's message to the conversation's session (POST /sessions/{id}/messages): it is
// queued while a turn runs and sent at the next safe point, under its own message id.
func (s *session) steer(ctx context.Context, who, messageID, text string) error {
	var out struct {
		State string `json:"state"`
	}
	_, err := s.request(ctx, who, http.MethodPost, "/sessions/"+url.PathEscape(s.conv)+"/messages",
		map[string]any{"text": text, "messageId": messageID}, &out)
	if err != nil {
		return err
	}
	s.acks = append(s.acks, ack{who: who, messageID: messageID, text: text})
	s.note("%s's %s steered (%s)", who, messageID, out.State)
	return nil
}

// put puts a signed envelope into the conversation's inbox through the runtime door. The payload
// of a message id is built once, so a retry sends the same bytes.
func (s *session) put(ctx context.Context, who, messageID, text string) error {
	payload, ok := s.envs[messageID]
	if !ok {
		p := principals[who]
		payload = envelope{ConversationID: s.conv, ID: messageID, IAT: time.Now().UnixMilli(), Text: text,
			Tenant: p.Tenant, Actor: p.Actor}.signed(s.key)
		s.envs[messageID] = payload
	}
	_, err := s.request(ctx, who, http.MethodPost, "/runtime/executions/"+url.PathEscape(s.conv)+"/messages",
		map[string]any{"messageId": messageID, "payload": payload}, nil)
	if err != nil {
		return err
	}
	s.acks = append(s.acks, ack{who: who, messageID: messageID, text: text, door: true})
	return nil
}

// finalStatus is whether a reply status ends a turn.
func finalStatus(st string) bool { return st == "complete" || st == "interrupted" || st == "failed" }

// waitReply follows the event stream as viewer until the reply of turn has been recorded.
func (s *session) waitReply(ctx context.Context, viewer string, turn int64) error {
	for {
		found, err := s.streamUntil(ctx, viewer, func(e entry) bool {
			return e.str("role") == "assistant" && e.num("turn") == turn && finalStatus(e.str("status"))
		})
		if found {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for the reply to turn %d: %w", turn, ctx.Err())
		}
		if err != nil {
			return fmt.Errorf("waiting for the reply to turn %d: %w", turn, err)
		}
		// The stream ended (a reconnect hint): follow it again from the start.
	}
}

// streamUntil reads one event stream until a message entry satisfies cond (true), or it ends.
func (s *session) streamUntil(ctx context.Context, viewer string, cond func(entry) bool) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/conversations/"+url.PathEscape(s.conv)+"/events", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+tokenOf(viewer))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return false, fmt.Errorf("GET events: got %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var event string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event == "message" {
				var e entry
				if json.Unmarshal([]byte(data.String()), &e) == nil && cond(e) {
					return true, nil
				}
			}
			if event == "closed" {
				return false, errors.New("the conversation closed")
			}
			event = ""
			data.Reset()
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return false, sc.Err()
}

// waitAsked waits until the instance of the current epoch has asked the model for a turn whose
// last user message holds text.
func (s *session) waitAsked(ctx context.Context, text string) error {
	for {
		reqs := s.w.Model().Requests()
		for _, r := range reqs[min(s.modelAt, len(reqs)):] {
			if epochOf(r.APIKey) == s.epoch && strings.Contains(lastUser(r.Messages), text) {
				return nil
			}
		}
		if err := s.w.Model().WaitRequests(ctx, len(reqs)+1); err != nil {
			return fmt.Errorf("waiting for the model to be asked about %q: %w", text, err)
		}
	}
}

func lastUser(msgs []world.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// execLog reads the conversation's raw execution log through the runtime door, as who: the kind
// of every event, oldest first.
func (s *session) execLog(ctx context.Context, who string) ([]string, error) {
	var kinds []string
	cursor := ""
	for range 10000 {
		q := url.Values{"limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Events []struct {
				Cursor string `json:"cursor"`
				Kind   string `json:"kind"`
			} `json:"events"`
			NextCursor string `json:"nextCursor"`
			Done       bool   `json:"done"`
		}
		if _, err := s.request(ctx, who, http.MethodGet, "/runtime/executions/"+url.PathEscape(s.conv)+"/log?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		for _, e := range page.Events {
			kinds = append(kinds, e.Cursor+" "+e.Kind)
		}
		if page.Done || (page.NextCursor == cursor && len(page.Events) == 0) {
			return kinds, nil
		}
		cursor = page.NextCursor
	}
	return nil, errors.New("log: more than 10000 pages")
}
