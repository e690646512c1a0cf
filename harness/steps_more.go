package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
)

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func describeMessages(msgs []world.Message) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, m.Role+": "+clip(m.Content, 80))
	}
	return strings.Join(parts, " | ")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s *scenario) readPage(who, convID, query string, offSpec bool) (*response, []entry, page, error) {
	r, err := s.cl.do(s.ctx, who, http.MethodGet, "/conversations/"+url.PathEscape(convID)+"/history"+query, nil, reqOpts{offSpec: offSpec})
	s.last = r
	if err != nil {
		return r, nil, page{}, err
	}
	var p page
	if r.status != http.StatusOK {
		return r, nil, p, nil
	}
	if err := r.json(&p); err != nil {
		return r, nil, p, err
	}
	es, err := decodeEntries(p.Entries)
	if err != nil {
		return r, nil, p, fail(r.op, "entries that do not decode", "entries per spec")
	}
	s.lastPage = es
	s.lastPageDone = p.Done
	return r, es, p, nil
}

func ords(es []entry) string {
	var parts []string
	for _, e := range es {
		parts = append(parts, strconv.FormatInt(e.Ord, 10))
	}
	return strings.Join(parts, ",")
}

func (s *scenario) registerMore(sc *godog.ScenarioContext) {
	sc.Step(`^the model waits before answering$`, func() error {
		h := s.world.NewHold()
		s.holds = append(s.holds, h)
		return s.enqueue(world.Reply{Hold: h})
	})
	sc.Step(`^the model replies "((?:[^"\\]|\\.)*)" after a release$`, func(text string) error {
		h := s.world.NewHold()
		s.holds = append(s.holds, h)
		return s.enqueue(world.Reply{Hold: h, After: []string{unescape(text)}})
	})
	sc.Step(`^the system refuses to start$`, func() error {
		err := s.sut()
		if err == nil {
			return fail("starting the system", "it started and answers", "a refusal to start with this configuration")
		}
		if !errors.Is(err, ErrHarness) {
			return err
		}
		// When the scenario declared a tool that needs approval, a control: the same
		// configuration, the same tools, none of them needing approval, must start, so the
		// refusal is about the approval and not about anything else in it.
		ctl := s.cfg
		ctl.Tools.Definitions = nil
		approval := false
		for _, d := range s.cfg.Tools.Definitions {
			approval = approval || d.NeedsApproval
			d.NeedsApproval = false
			ctl.Tools.Definitions = append(ctl.Tools.Definitions, d)
		}
		if !approval {
			return nil
		}
		dir := s.dir + "/control"
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return harnessErr("control directory: %v", err)
		}
		ctl.DataDir = dir + "/data"
		d := s.run.kind.newDriver()
		if p, ok := d.(*process); ok {
			p.dir = dir
		}
		if err := d.Start(s.ctx, ctl); err != nil {
			return fail("starting the same configuration with no tool needing approval", err.Error()+logsOf(d),
				"a system that starts: the refusal must be about the approval alone")
		}
		_ = d.Stop()
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) puts (\{.*\}) into the conversation's inbox$`, func(who, payload string) error {
		c, err := s.conv("")
		if err != nil {
			return err
		}
		body := map[string]any{"messageId": s.nextMessageID(), "payload": jsonRaw(payload)}
		r, err := s.cl.do(s.ctx, who, http.MethodPost, "/runtime/executions/"+url.PathEscape(c.id)+"/messages", body, reqOpts{})
		s.last = r
		if err != nil {
			return err
		}
		if r.status == http.StatusNotFound && !s.run.door {
			return &HarnessError{Err: fmt.Errorf("%w: the system has no runtime door", ErrNotApplicable)}
		}
		if r.status != http.StatusAccepted {
			return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "202")
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) has had (\d+) turns of (\d+) characters answered$`, func(who string, n, size int) error {
		for range n {
			s.turns++
			head := fmt.Sprintf("turn %d: ", s.turns)
			text := head + strings.Repeat("x", max(0, size-len(head)))
			s.longTexts = append(s.longTexts, text)
			if err := s.mustSend(who, text, s.nextMessageID(), nil); err != nil {
				return err
			}
			t, err := s.waitAnswered(who, text)
			if err != nil {
				return err
			}
			s.turnText[t] = text
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) has had (\d+) turns answered with replies of (\d+) characters$`, func(who string, n, size int) error {
		for range n {
			s.turns++
			text := fmt.Sprintf("question %d", s.turns)
			if err := s.world.Model().EnqueueFor(text, world.Reply{Text: noiseText(s.turns, size)}); err != nil {
				return harnessErr("script the model: %v", err)
			}
			if err := s.mustSend(who, text, s.nextMessageID(), nil); err != nil {
				return err
			}
			t, err := s.waitAnswered(who, text)
			if err != nil {
				return err
			}
			s.turnNo = t
			s.turnText[t] = text
		}
		return nil
	})
	sc.Step(`^request (\d+) to the model carries only a newest run of the earlier turns, not all of them$`, func(i int) error {
		req, err := s.modelRequest(i)
		if err != nil {
			return err
		}
		var users []string
		for _, m := range req.Messages {
			if m.Role == "user" {
				users = append(users, m.Content)
			}
		}
		if len(users) > 0 {
			users = users[:len(users)-1] // the prompt itself
		}
		all := s.longTexts
		op := fmt.Sprintf("request %d to the model", i)
		if len(users) >= len(all) {
			return fail(op, fmt.Sprintf("all %d earlier turns", len(users)), "fewer: the carry is over its byte bound")
		}
		want := all[len(all)-len(users):]
		for j := range users {
			if users[j] != want[j] {
				return fail(op, fmt.Sprintf("earlier turn %d of the request is %q", j+1, clip(users[j], 20)),
					fmt.Sprintf("the newest %d turns, oldest dropped first", len(users)))
			}
		}
		return nil
	})
	sc.Step(`^the user record of turn (\d+) holds (\d+) characters$`, func(n int64, size int) error {
		es, err := s.history(s.ctx, s.owner(), false)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Role == "user" && e.Turn == n && e.Status == "accepted" {
				if got := len([]rune(e.text())); got != size {
					return fail(fmt.Sprintf("the user record of turn %d", n), fmt.Sprintf("%d characters", got), fmt.Sprintf("%d, exactly as sent", size))
				}
				return nil
			}
		}
		return fail("the history", describeEntries(es), fmt.Sprintf("an accepted user record of turn %d", n))
	})
	sc.Step(`^(\w[\w' ]*?) reads the history with limit (-?\d+)$`, func(who string, n int) error {
		c, err := s.conv("")
		if err != nil {
			return err
		}
		_, _, _, err = s.readPage(who, c.id, "?limit="+strconv.Itoa(n), n < 1 || n > 500)
		return err
	})
	sc.Step(`^(\w[\w' ]*?) reads the history with no limit$`, func(who string) error {
		c, err := s.conv("")
		if err != nil {
			return err
		}
		_, _, _, err = s.readPage(who, c.id, "", false)
		return err
	})
	sc.Step(`^the answer is a page of the records (\d+) to (\d+), (done|not done)$`, func(from, to int, done string) error {
		var want []string
		for i := from; i <= to; i++ {
			want = append(want, strconv.Itoa(i))
		}
		w := strings.Join(want, ",")
		if s.last == nil || s.last.status != http.StatusOK || ords(s.lastPage) != w || s.lastPageDone != (done == "done") {
			return fail(opOf(s.last), fmt.Sprintf("%d, records [%s], done %v", statusOf(s.last), ords(s.lastPage), s.lastPageDone),
				fmt.Sprintf("200, records %d to %d, %s", from, to, done))
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?)'s memory held exactly, when the turn "((?:[^"\\]|\\.)*)" recalled it:$`, func(who, text string, t *godog.Table) error {
		return s.memoryHeldAtRecall(who, unescape(text), t)
	})
	sc.Step(`^(\w[\w' ]*?) sends (\d+) empty messages$`, func(who string, n int) error {
		for range n {
			if err := s.mustSend(who, "", s.nextMessageID(), nil); err != nil {
				return err
			}
		}
		return nil
	})
	sc.Step(`^the history has (\d+) records$`, func(n int) error {
		es, err := s.waitHistory(s.owner(), fmt.Sprintf("%d records", n), func(es []entry) bool { return len(es) >= n })
		if err != nil {
			return err
		}
		if len(es) != n {
			return fail("the history", fmt.Sprintf("%d records", len(es)), fmt.Sprintf("%d", n))
		}
		return nil
	})
	sc.Step(`^record (\d+) is rejected with reason "([^"]*)"$`, func(ord int64, reason string) error {
		es, err := s.waitHistory(s.owner(), fmt.Sprintf("record %d", ord), func(es []entry) bool { return int64(len(es)) >= ord })
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Ord == ord {
				if e.Status != "rejected" || e.Reason != reason || e.Turn != 0 || e.Text != nil {
					return fail(fmt.Sprintf("record %d", ord), e.String(), fmt.Sprintf("rejected, turn 0, reason %q, no text", reason))
				}
				return nil
			}
		}
		return fail("the history", describeEntries(es), fmt.Sprintf("a record with ord %d", ord))
	})
	sc.Step(`^the last user message of request (\d+) to the model quotes "((?:[^"\\]|\\.)*)" and says "((?:[^"\\]|\\.)*)"$`, func(i int, quote, says string) error {
		req, err := s.modelRequest(i)
		if err != nil {
			return err
		}
		last := ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		q := `"` + unescape(quote) + `"`
		if !strings.Contains(last, q) || !strings.HasSuffix(last, unescape(says)) || strings.Index(last, q) > strings.LastIndex(last, unescape(says)) {
			return fail(fmt.Sprintf("the last user message of request %d to the model", i), fmt.Sprintf("%q", last),
				fmt.Sprintf("the earlier words %s quoted as data, then %q", q, says))
		}
		return nil
	})
	sc.Step(`^the last user message of request (\d+) to the model quotes (\d+) characters of turn (\d+) and says "((?:[^"\\]|\\.)*)"$`, func(i, n int, t int64, says string) error {
		quote, err := s.expandMessage(fmt.Sprintf("{turn %d}", t))
		if err != nil {
			return err
		}
		if r := []rune(quote); len(r) > n {
			quote = string(r[:n])
		}
		var q strings.Builder
		enc := json.NewEncoder(&q)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(quote)
		want := "[This message edits the user's earlier message " + strings.TrimSuffix(q.String(), "\n") + ".]\n" + unescape(says)
		req, err := s.modelRequest(i)
		if err != nil {
			return err
		}
		last := ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		if last != want {
			return fail(fmt.Sprintf("the last user message of request %d to the model", i), fmt.Sprintf("%q", clip(last, 700)),
				fmt.Sprintf("%q (spec/prompt.md: the quote is at most 500 characters)", clip(want, 700)))
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) reads the history from cursor "([^"]*)"$`, func(who, cursor string) error {
		c, err := s.conv("")
		if err != nil {
			return err
		}
		_, _, _, err = s.readPage(who, c.id, "?cursor="+url.QueryEscape(cursor), true)
		return err
	})
	sc.Step(`^(\w[\w' ]*?) reads the history (forward|backward) from cursor "([^"]*)"$`, func(who, dir, cursor string) error {
		c, err := s.conv("")
		if err != nil {
			return err
		}
		_, _, _, err = s.readPage(who, c.id, "?direction="+dir+"&cursor="+url.QueryEscape(cursor), false)
		return err
	})
	sc.Step(`^the answer is a done page with no records$`, func() error {
		if s.last == nil || s.last.status != http.StatusOK || len(s.lastPage) != 0 || !s.lastPageDone {
			return fail(opOf(s.last), fmt.Sprintf("%d, records [%s], done %v", statusOf(s.last), ords(s.lastPage), s.lastPageDone), "200, no records, done")
		}
		return nil
	})
	sc.Step(`^the answer is a page holding the records (.+)$`, func(want string) error {
		if s.last == nil || s.last.status != http.StatusOK || ords(s.lastPage) != strings.ReplaceAll(want, " ", "") {
			return fail(opOf(s.last), fmt.Sprintf("%d, records [%s]", statusOf(s.last), ords(s.lastPage)), "200, records ["+want+"]")
		}
		return nil
	})
	sc.Step(`^some page was short but not done$`, func() error {
		if !s.shortNotDone {
			return fail("paging the history", "every page full or done", "a page with fewer records than the limit that is not done (the scan bound at work)")
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) has started a conversation "([^"]*)"$`, func(who, name string) error {
		if err := s.mustStart(who, "", nil); err != nil {
			return err
		}
		s.current.name = name
		s.convs[name] = s.current
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) takes the last cursor of conversation "([^"]*)"$`, func(who, name string) error {
		c, err := s.conv(name)
		if err != nil {
			return err
		}
		keep := s.current
		s.current = c
		es, err := s.history(s.ctx, who, false)
		s.current = keep
		if err != nil {
			return err
		}
		if len(es) == 0 {
			return harnessErr("conversation %s has no records to take a cursor from", name)
		}
		s.saved["cursor"] = es[len(es)-1].Cursor
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) reads conversation "([^"]*)" forward from that cursor$`, func(who, name string) error {
		c, err := s.conv(name)
		if err != nil {
			return err
		}
		_, _, _, err = s.readPage(who, c.id, "?cursor="+url.QueryEscape(s.saved["cursor"]), false)
		return err
	})
	sc.Step(`^every record read belongs to conversation "([^"]*)"$`, func(name string) error {
		c, err := s.conv(name)
		if err != nil {
			return err
		}
		keep := s.current
		s.current = c
		own, err := s.history(s.ctx, c.owner, false)
		s.current = keep
		if err != nil {
			return err
		}
		mine := map[string]bool{}
		for _, e := range own {
			mine[string(compact(e.raw))] = true
		}
		if s.last == nil || s.last.status != http.StatusOK {
			return fail(opOf(s.last), fmt.Sprint(statusOf(s.last)), "200")
		}
		if len(s.lastPage) == 0 {
			return fail(opOf(s.last), "no records", "the records of "+name+" past that position")
		}
		for _, e := range s.lastPage {
			if !mine[string(compact(e.raw))] {
				return fail(opOf(s.last), "a record that is not one of "+name+"'s: "+e.String(), "only records of "+name)
			}
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?)'s stream shows "((?:[^"\\]|\\.)*)"$`, func(who, text string) error {
		st, err := s.streamOf(who, "")
		if err != nil {
			return err
		}
		ctx, cancel := s.wait()
		defer cancel()
		want := unescape(text)
		_, err = st.waitFor(ctx, fmt.Sprintf("live text %q (delta or partial events)", want), func(evs []sseEvent, _ bool) bool {
			return strings.Contains(liveText(evs), want)
		})
		return err
	})
}

func opOf(r *response) string {
	if r == nil {
		return "the last request"
	}
	return r.op
}

func statusOf(r *response) int {
	if r == nil {
		return 0
	}
	return r.status
}

// noiseText is n letters that no encoding can shrink much (a fixed pseudo-random sequence seeded
// by seed), so a bound in bytes means the same for every system.
func noiseText(seed, n int) string {
	x := uint32(seed)*2654435761 + 1
	b := make([]byte, n)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = "abcdefghijklmnopqrstuvwxyz"[x%26]
	}
	return string(b)
}

// memoryScope is the memory scope of a principal (spec/world.md): "<tenant>/<actor>", then
// "~<onBehalfOf>" for a delegate.
func memoryScope(who string) string {
	p := principals[who]
	scope := p.Tenant + "/" + p.Actor
	if p.OnBehalfOf != "" {
		scope += "~" + p.OnBehalfOf
	}
	return scope
}

// memoryHeldAtRecall waits for the recall of who's scope that the turn whose prompt is text makes
// (the sentinel: a system makes a turn's write-back before the conversation's next turn recalls,
// spec/world.md), then compares what the scope held when that recall arrived with the table, entry
// for entry. A write-back made twice, or one that should not have been made, cannot come too late
// to be seen, as long as it belongs to a turn before that one. Each entry must carry an id, and no
// write-back may have gone to another scope.
func (s *scenario) memoryHeldAtRecall(who, text string, t *godog.Table) error {
	if _, ok := principals[who]; !ok {
		return harnessErr("unknown principal %q", who)
	}
	if t == nil || len(t.Rows) < 2 {
		return harnessErr("the table needs a header and at least one entry")
	}
	scope := memoryScope(who)
	var want []string
	for _, row := range t.Rows[1:] {
		want = append(want, row.Cells[0].Value+": "+unescape(row.Cells[1].Value))
	}
	find := func() (world.MemoryRecall, bool) {
		for _, r := range s.world.Memory().Recalls() {
			if r.Scope == scope && strings.Contains(r.Query, text) {
				return r, true
			}
		}
		return world.MemoryRecall{}, false
	}
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	rec, ok := find()
	for !ok {
		select {
		case <-ctx.Done():
			return fail("the memory of "+scope, fmt.Sprintf("%d recalls, none for the turn %q", len(s.world.Memory().Recalls()), text),
				fmt.Sprintf("a recall of the scope by the turn %q", text))
		case <-tick.C:
		}
		rec, ok = find()
	}
	var got []string
	for _, e := range rec.Held {
		if e.ID == "" {
			return fail("the memory of "+scope, fmt.Sprintf("an entry without an id (%s: %q)", e.Role, clip(e.Text, 40)), "deterministic entry ids, so a replayed write-back is skipped")
		}
		got = append(got, e.Role+": "+e.Text)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		return fail("the memory of "+scope+fmt.Sprintf(" when the turn %q recalled it", text), "\n"+strings.Join(got, "\n"), "\n"+strings.Join(want, "\n"))
	}
	for _, w := range s.world.Memory().Writes() {
		if w.Scope != scope {
			return fail("a memory write-back", "one to the scope "+w.Scope, "write-backs only to the asker's scope "+scope)
		}
	}
	return nil
}
