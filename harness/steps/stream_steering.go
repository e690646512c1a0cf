package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
)

// steerSteps send messages into a running session (steering), take them back, stop turns and
// relay private messages, and judge the frames, the answers and the model's requests they make
// (profile stream; spec/http.md "Steering", "Stopping", "Private messages", "Group chats").
type steerSteps struct{ *scenario }

// post sends one request of the steering routes as who to the current session and keeps the answer.
func (s *steerSteps) post(who, suffix string, body any, o reqOpts) error {
	if err := s.sut(); err != nil {
		return err
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/sessions/"+url.PathEscape(c.id)+suffix, body, o)
	if err != nil {
		return err
	}
	s.last = r
	return nil
}

// steers posts a steering message under a message id, with its mentions.
func (s *steerSteps) steers(who, text, id, mentions string) error {
	body := map[string]any{"text": unescape(text), "messageId": id}
	if mentions != "" {
		body["mentions"] = quoted(mentions)
	}
	return s.post(who, "/messages", body, reqOpts{})
}

// steersBody posts a body as it is (one outside the contract on purpose, when it is).
func (s *steerSteps) steersBody(who, raw string) error {
	if !json.Valid([]byte(raw)) {
		return harnessErr("the body %s is not JSON", raw)
	}
	return s.post(who, "/messages", nil, reqOpts{RawBody: []byte(raw), OffSpec: true})
}

// edits asks to edit message id to text (retry: re-ask it as it was) as who, under key.
func (s *steerSteps) edits(who, verb, id, text, key string) error {
	o := reqOpts{Headers: map[string]string{"Idempotency-Key": key}}
	if verb == "retries" {
		return s.post(who, "/messages/"+url.PathEscape(id)+"/retry", nil, o)
	}
	return s.post(who, "/messages/"+url.PathEscape(id)+"/edit", map[string]any{"text": text}, o)
}

// takesBack asks to take back a message.
func (s *steerSteps) takesBack(who, id string) error {
	return s.post(who, "/messages/"+url.PathEscape(id)+"/cancel", nil, reqOpts{})
}

// takeBackRefusedAsMissing expects who's take-back of id to answer exactly as a take-back of a
// message id nothing ever sent.
func (s *steerSteps) takeBackRefusedAsMissing(who, id string) error {
	if err := s.takesBack(who, "never-sent-"+s.run.ID); err != nil {
		return err
	}
	missing := s.last
	if err := s.takesBack(who, id); err != nil {
		return err
	}
	got := s.last
	if missing.Status != http.StatusNotFound {
		return fail(missing.Op, fmt.Sprintf("%d %s", missing.Status, clip(string(missing.Body), 200)), "404 for a message never sent")
	}
	if got.Status != missing.Status || !bytes.Equal(got.Body, missing.Body) {
		return fail(got.Op, fmt.Sprintf("%d %s", got.Status, clip(string(got.Body), 200)),
			fmt.Sprintf("exactly a never-sent message's answer: %d %s", missing.Status, clip(string(missing.Body), 200)))
	}
	return nil
}

// stopsTurn asks to stop the running turn.
func (s *steerSteps) stopsTurn(who string) error {
	return s.post(who, "/stop", nil, reqOpts{})
}

// answers expects the last answer to be exactly the status and body.
func (s *steerSteps) answers(status int, body string) error {
	if s.last == nil {
		return harnessErr("no request was answered in this scenario")
	}
	var want any
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		return harnessErr("the expected body %s is not JSON: %v", body, err)
	}
	var got any
	gerr := json.Unmarshal(s.last.Body, &got)
	if s.last.Status != status || gerr != nil || !reflect.DeepEqual(got, want) {
		return fail(s.last.Op, fmt.Sprintf("%d %s", s.last.Status, clip(string(s.last.Body), 300)), fmt.Sprintf("exactly %d %s", status, canonical(want)))
	}
	return nil
}

// canonical is v as JSON with its object members sorted and nothing escaped for HTML.
func canonical(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// steerCells is one delivered frame's cells by column name.
func steerCells(f sframe) map[string]string {
	m := map[string]string{"cur": strconv.FormatInt(f.Cur, 10), "type": f.Kind(), "message": f.Message, "author": "", "turn": "", "data": "", "state": "", "text": ""}
	d := f.Payload()
	switch {
	case d.State != "":
		m["state"] = d.State
	case d.Status != "":
		m["state"] = d.Status
	}
	if d.Text != nil {
		m["text"] = strconv.Quote(*d.Text)
	}
	if f.Turn > 0 {
		m["turn"] = strconv.FormatInt(f.Turn, 10)
	}
	var env struct {
		Author string `json:"author"`
	}
	_ = json.Unmarshal(f.Raw, &env)
	m["author"] = env.Author
	if len(f.Data) > 0 {
		var d any
		if json.Unmarshal(f.Data, &d) == nil {
			m["data"] = canonical(d)
		} else {
			m["data"] = string(f.Data)
		}
	}
	return m
}

// steerFrames is the frame table of the steering steps: the frame's place and type, its message,
// author and turn, the data's state, the data's text and the data itself.
var steerFrames = frameTable{
	columns: []string{"cur", "type", "message", "author", "turn", "state", "text", "data"},
	cell: func(col, v string) (string, error) {
		if col != "data" || v == "" {
			return v, nil
		}
		var d any
		if err := json.Unmarshal([]byte(v), &d); err != nil {
			return "", harnessErr("the data cell %s is not JSON: %v", v, err)
		}
		return canonical(d), nil
	},
}

// framesExactly expects the frames the reader delivered to be exactly the table.
func (s *steerSteps) framesExactly(who, transport string, t *godog.Table) error {
	f, err := s.areas.stream.reader(who, transport)
	if err != nil {
		return err
	}
	if _, err := steerFrames.header(t); err != nil {
		return err
	}
	fw, err := s.framesFor(f, t, "frames delivered", delivered)
	if err != nil {
		return err
	}
	rows := make([]map[string]string, len(fw.delivered))
	for i, d := range fw.delivered {
		rows[i] = steerCells(d)
	}
	if err := steerFrames.judge(who+"'s "+transport+" reader delivered", t, rows); err != nil {
		return err
	}
	return fw.sutErr
}

// lastUserMessage is the content of a request's last user message ("" when it has none).
func lastUserMessage(r world.ModelRequest) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// modelSettle is how long a step that counts the model's requests waits for one too many.
const modelSettle = 300 * time.Millisecond

// modelAskedFor expects the last user message of every request to the model to be exactly the
// table's, in order.
func (s *steerSteps) modelAskedFor(t *godog.Table) error {
	if t == nil || len(t.Rows) == 0 {
		return harnessErr("the step needs a table with a header row")
	}
	var want []string
	for _, r := range t.Rows[1:] {
		want = append(want, strconv.Quote(unescape(r.Cells[0].Value)))
	}
	m := s.world.Model()
	ctx, cancel := s.wait()
	defer cancel()
	if len(want) > 0 {
		if err := m.WaitRequests(ctx, len(want)); err != nil {
			var got []string
			for _, r := range m.Requests() {
				got = append(got, strconv.Quote(lastUserMessage(r)))
			}
			return fail("the requests to the model", "\n"+strings.Join(got, "\n"), "exactly\n"+strings.Join(want, "\n"))
		}
	}
	time.Sleep(modelSettle)
	reqs := m.Requests()
	var got []string
	for _, r := range reqs {
		got = append(got, strconv.Quote(lastUserMessage(r)))
	}
	if n := m.Count(); n != len(reqs) {
		return harnessErr("the model's journal kept %d of its %d requests", len(reqs), n)
	}
	if !slicesEqual(want, got) {
		return fail("the requests to the model (the last user message of each, in order)", "\n"+strings.Join(got, "\n"), "exactly\n"+strings.Join(want, "\n"))
	}
	return nil
}

// streamSteeringVocabulary lists the steps of features/stream/steering.feature.
func streamSteeringVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) steers ` + quotedPat + ` as "([^"]*)"(?: mentioning ((?:"[^"]*"[ ,]*)+))?$`, a.steer.steers, "posts the text to the current session's messages as who under the message id (with the mentions, when named); the answer is kept"},
		{`^(\w[\w' ]*?) steers with the body (\{.*\})$`, a.steer.steersBody, "posts the JSON body as it is to the current session's messages as who; the answer is kept"},
		{`^(\w[\w' ]*?) (edits|retries) "([^"]*)"(?: to ` + quotedPat + `)? with the key "([^"]*)"$`, a.steer.edits, "asks to edit the message to the text (or to retry it) as who in the current session, under the Idempotency-Key; the answer is kept"},
		{`^(\w[\w' ]*?) takes back "([^"]*)"$`, a.steer.takesBack, "asks to take back the message as who; the answer is kept"},
		{`^(\w[\w' ]*?) taking back "([^"]*)" gets the same 404 as for a message never sent$`, a.steer.takeBackRefusedAsMissing, "takes back the message as who and expects 404, byte for byte the answer a message id never sent gets"},
		{`^(\w[\w' ]*?) stops the running turn$`, a.steer.stopsTurn, "asks to stop the current session's running turn as who; the answer is kept"},
		{`^the session answers (\d{3}) (\{.*\})$`, a.steer.answers, "expects the last answer to be exactly the status and the JSON body, member for member"},
		{`^` + readerPat + `'s frames are exactly:$`, a.steer.framesExactly, "waits for as many frames as the table has rows (and a moment for one too many) and expects the frames the reader delivered to be exactly the table; columns among cur, type, message, author, turn, state (the data's state, else its status), text (the data's text, quoted) and data (the frame's data as JSON)"},
		{`^the model was asked for exactly, in order:$`, a.steer.modelAskedFor, "waits for as many requests to the model as the table has rows (and a moment for one too many) and expects the last user message of every request of the scenario to be exactly the table's, in order"},
	}
}
