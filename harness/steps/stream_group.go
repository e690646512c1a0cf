package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
)

// groupSteps judge what a session stream shows of a chat beyond its text (profile stream):
// terminal lines, tool blocks, retention, and the group-chat frames (participants, reactions,
// pins, presence, read markers).
//
// Readers are the stream area's (s.areas.stream): a group step names a reader exactly as a
// stream step does.
type groupSteps struct {
	*scenario
	// texts are the long texts the scenario scripted tools to answer with, by tool.
	texts map[string]string
}

// groupRoutes are the session routes a group step posts to.
var groupRoutes = map[string]bool{"terminal": true, "reactions": true, "pins": true, "presence": true, "read": true}

func sessionRoutePath(id, route string) string {
	return "/sessions/" + url.PathEscape(id) + "/" + route
}

// posts sends the body to a session route as who and keeps the answer.
func (s *groupSteps) posts(who, route, outside, body string) error {
	if err := s.sut(); err != nil {
		return err
	}
	if !groupRoutes[route] {
		return harnessErr("unknown session route %q", route)
	}
	if !json.Valid([]byte(body)) {
		return harnessErr("the body is not JSON: %s", body)
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	r, err := s.cl.Do(ctx, who, http.MethodPost, sessionRoutePath(c.id, route), nil, reqOpts{RawBody: []byte(body), OffSpec: outside != ""})
	if err != nil {
		return err
	}
	s.last = r
	return nil
}

// typesLong sends a terminal line of exactly n bytes.
func (s *groupSteps) typesLong(who string, n int) error {
	if n < 6 {
		return harnessErr("a long line needs at least 6 bytes")
	}
	line := "echo " + strings.Repeat("abcdefghij", n/10+1)[:n-5]
	b, err := json.Marshal(map[string]string{"line": line})
	if err != nil {
		return harnessErr("encode: %v", err)
	}
	outside := ""
	if n > 4096 {
		outside = "outside the contract"
	}
	return s.posts(who, "terminal", outside, string(b))
}

// groupJSON is b's JSON with object members sorted and no spacing; ok false when b is not JSON.
func groupJSON(b []byte) (string, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return "", false
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", false
	}
	return strings.TrimSpace(out.String()), true
}

// answersExactly expects the last answer's status and body.
func (s *groupSteps) answersExactly(status int, body string) error {
	if s.last == nil {
		return harnessErr("no answer was kept in this scenario")
	}
	want, ok := groupJSON([]byte(body))
	if !ok {
		return harnessErr("the expected body is not JSON: %s", body)
	}
	got, _ := groupJSON(s.last.Body)
	if s.last.Status != status || got != want {
		return fail(s.last.Op, fmt.Sprintf("%d %s", s.last.Status, clip(string(s.last.Body), 300)), fmt.Sprintf("%d %s", status, want))
	}
	return nil
}

// longText is a text of exactly n characters, every fifth of two bytes, so that a cut by bytes
// and one by characters differ.
func longText(n int) string {
	var b strings.Builder
	for i := range n {
		if i%5 == 4 {
			b.WriteRune('é')
		} else {
			b.WriteByte(byte('a' + i%26))
		}
	}
	return b.String()
}

// toolAnswersText scripts the tool's next answer as a JSON string of n characters.
func (s *groupSteps) toolAnswersText(name string, n int) error {
	t := longText(n)
	if err := s.declareTool(name); err != nil {
		return err
	}
	if err := s.world.Tools().Define(name, world.Behavior{Result: t}); err != nil {
		return harnessErr("script the tool: %v", err)
	}
	s.texts[name] = t
	return nil
}

// cutText is the text block's text spec/stream.md asks for: t itself when it has at most 280
// characters, else its first 280 characters and an ellipsis.
func cutText(t string) string {
	if utf8.RuneCountInString(t) <= 280 {
		return t
	}
	return string([]rune(t)[:280]) + "…"
}

// envelope is what a group step reads of a frame beyond sframe.
type envelope struct {
	Author  string `json:"author"`
	ActsFor string `json:"acts_for"`
	Expired *bool  `json:"expired"`
	Rid     string `json:"rid"`
	Ver     *int64 `json:"ver"`
}

// groupCells is one delivered frame's cells by column.
func groupCells(f sframe) map[string]string {
	var e envelope
	_ = json.Unmarshal(f.Raw, &e)
	m := map[string]string{"cur": strconv.FormatInt(f.Cur, 10), "type": f.Kind(), "author": e.Author,
		"acts_for": e.ActsFor, "message": f.Message, "rid": e.Rid}
	if e.Ver != nil {
		m["ver"] = strconv.FormatInt(*e.Ver, 10)
	}
	if f.Span > 0 {
		m["span"] = strconv.Itoa(f.Span)
	}
	if d, ok := groupJSON(f.Data); ok {
		m["data"] = d
	} else {
		m["data"] = string(f.Data)
	}
	if e.Expired != nil {
		m["expired"] = strconv.FormatBool(*e.Expired)
	}
	return m
}

// gotWithData expects the delivered frames, with their envelopes and data, to be exactly the table.
func (s *groupSteps) gotWithData(who, transport string, t *godog.Table) error {
	f, err := s.areas.stream.reader(who, transport)
	if err != nil {
		return err
	}
	table := frameTable{
		columns: []string{"cur", "span", "type", "author", "acts_for", "message", "data", "expired", "rid", "ver"},
		cell: func(col, v string) (string, error) {
			v, err := s.personNames(v)
			if err != nil || col != "data" || v == "" {
				return v, err
			}
			// A table cell's \n is a newline; in the JSON it stands for one.
			cv, ok := groupJSON([]byte(strings.ReplaceAll(v, "\n", `\n`)))
			if !ok {
				return "", harnessErr("the data cell is not JSON: %s", v)
			}
			return cv, nil
		},
	}
	if _, err := table.header(t); err != nil {
		return err
	}
	fw, err := s.framesFor(f, t, "frames delivered", delivered)
	if err != nil {
		return err
	}
	rows := make([]map[string]string, len(fw.delivered))
	for i, d := range fw.delivered {
		rows[i] = groupCells(d)
	}
	if err := table.judge(who+"'s "+transport+" reader delivered", t, rows); err != nil {
		return err
	}
	return fw.sutErr
}

// blockOf waits for the tool-finished frame of call and returns its block's canonical JSON.
func (s *groupSteps) blockOf(who, transport, call string) (string, string, error) {
	f, err := s.areas.stream.reader(who, transport)
	if err != nil {
		return "", "", err
	}
	op := who + "'s " + transport + " reader, the tool-finished frame of " + call
	type finished struct {
		Call  string          `json:"call"`
		Block json.RawMessage `json:"block"`
	}
	find := func(fw followed) *finished {
		for _, d := range fw.delivered {
			var x finished
			if d.Kind() == "tool-finished" && json.Unmarshal(d.Data, &x) == nil && x.Call == call {
				return &x
			}
		}
		return nil
	}
	ctx, cancel := s.wait()
	defer cancel()
	fw, err := f.waitFor(ctx, "a tool-finished frame of call "+call, func(fw followed) bool { return find(fw) != nil })
	if err != nil {
		return "", op, err
	}
	x := find(fw)
	b, ok := groupJSON(x.Block)
	if !ok {
		return "", op, fail(op, "no block: "+clip(string(x.Block), 300), "a block object")
	}
	return b, op, nil
}

// gotBlock expects the call's block to be exactly the doc string's JSON.
func (s *groupSteps) gotBlock(who, transport, call string, doc *godog.DocString) error {
	if doc == nil {
		return harnessErr("the step needs the block as a doc string")
	}
	want, ok := groupJSON([]byte(doc.Content))
	if !ok {
		return harnessErr("the expected block is not JSON: %s", doc.Content)
	}
	got, op, err := s.blockOf(who, transport, call)
	if err != nil {
		return err
	}
	if got != want {
		return fail(op, got, want)
	}
	return nil
}

// gotCutBlock expects the call's block to be the tool's scripted text, cut as spec/stream.md says.
func (s *groupSteps) gotCutBlock(who, transport, call, tool string) error {
	t, ok := s.texts[tool]
	if !ok {
		return harnessErr("the tool %q was not scripted with a text", tool)
	}
	wb, err := json.Marshal(map[string]string{"kind": "text", "text": cutText(t)})
	if err != nil {
		return harnessErr("encode: %v", err)
	}
	want, _ := groupJSON(wb)
	got, op, err := s.blockOf(who, transport, call)
	if err != nil {
		return err
	}
	if got != want {
		return fail(op, got, want)
	}
	return nil
}

// msPass waits n milliseconds (or until the run is stopped).
func (s *groupSteps) msPass(n int) error {
	select {
	case <-s.ctx.Done():
		return harnessErr("the run was stopped: %v", s.ctx.Err())
	case <-time.After(time.Duration(n) * time.Millisecond):
		return nil
	}
}

// personRef is a table's "name(<principal>)": the name the session stream shows that principal
// under, which the kit computes itself (personName).
var personRef = regexp.MustCompile(`name\(([^()]+)\)`)

// personNames writes each name(<principal>) of cell as the principal's name in the current
// conversation's stream.
func (s *groupSteps) personNames(cell string) (string, error) {
	if !strings.Contains(cell, "name(") {
		return cell, nil
	}
	c, err := s.conv("")
	if err != nil {
		return "", err
	}
	owner, ok := principals[c.owner]
	if !ok {
		return "", harnessErr("the conversation's owner %q is no known principal", c.owner)
	}
	var bad string
	out := personRef.ReplaceAllStringFunc(cell, func(m string) string {
		name := personRef.FindStringSubmatch(m)[1]
		p, ok := principals[name]
		if !ok {
			bad = name
			return m
		}
		return personName(owner.Tenant, p.Tenant, p.Actor, p.OnBehalfOf)
	})
	if bad != "" {
		return "", harnessErr("unknown principal %q in name(...)", bad)
	}
	return out, nil
}

// personName is the name a person is shown under in the session stream of a conversation whose
// owner belongs to ownerTenant (spec/stream.md, Group chats): person:<actor> for one of the
// owner's tenant who acts for no one and whose actor holds none of '%', '/' and '~', else
// person:<identity key>.
func personName(ownerTenant, tenant, actor, onBehalfOf string) string {
	if tenant == ownerTenant && onBehalfOf == "" && !strings.ContainsAny(actor, "%/~") {
		return "person:" + actor
	}
	return "person:" + identityKey(tenant, actor, onBehalfOf)
}

// streamGroupVocabulary lists the steps of features/stream/group.feature.
func streamGroupVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) posts to the session's (terminal|reactions|pins|presence|read)( outside the contract)? (\{.*\})$`, a.group.posts, "sends the JSON body as who to POST /sessions/{id}/<route> of the current conversation (one the contract refuses, when said so); the answer is kept"},
		{`^(\w[\w' ]*?) types a line of (\d+) bytes in the session's terminal$`, a.group.typesLong, "sends as who a terminal line of exactly N bytes (\"echo \" then letters); the answer is kept"},
		{`^the session answers exactly (\d+) (\{.*\})$`, a.group.answersExactly, "expects the last answer's status to be N and its body to be exactly the JSON (member for member)"},
		{`^the tool "([\w-]+)" gives a text of (\d+) characters as its answer$`, a.group.toolAnswersText, "scripts the tool's next answer as one JSON string of exactly N characters, some of them of more than one byte"},
		{`^` + readerPat + ` got exactly these frames with their data:$`, a.group.gotWithData, "waits for as many frames as the table has rows and expects the frames the reader delivered and the control and ephemeral frames but heartbeats to be exactly the table (cur, span, type, author, acts_for, message, data as canonical JSON, expired, rid and ver of the reply handle)"},
		{`^` + readerPat + ` got for call "([^"]*)" exactly the block:$`, a.group.gotBlock, "waits for the tool-finished frame of the call and expects its block to be exactly the JSON of the doc string"},
		{`^` + readerPat + ` got for call "([^"]*)" the text of "([\w-]+)" as a text block cut at 280 characters$`, a.group.gotCutBlock, "waits for the tool-finished frame of the call and expects its block to be {kind: text, text} with the tool's text as the kit cuts it: its first 280 characters and an ellipsis when it is longer"},
		{`^(\d+) ms pass$`, a.group.msPass, "waits the given milliseconds"},
	}
}
