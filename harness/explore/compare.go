package explore

import (
	"encoding/json"
	"fmt"
	"strings"
)

// minted are the fields a run mints afresh: they are the only ones the comparison ignores.
var minted = []string{"time", "errorId", "turnExecutionId"}

func normalized(e entry) string {
	c := make(map[string]any, len(e))
	for k, v := range e {
		c[k] = v
	}
	for _, k := range minted {
		delete(c, k)
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// judge compares a crashed run o (crash after write point) with the uncrashed run base.
func judge(d *dialogue, point int64, base, o *outcome) []Finding {
	if o.stuck != nil {
		out := []Finding{*o.stuck}
		if o.hist != nil {
			out = append(out, exactlyOnce(d, point, o)...)
		}
		return out
	}
	out := exactlyOnce(d, point, o)
	add := func(f Finding) {
		f.Dialogue, f.Point = d.name, point
		out = append(out, f)
	}
	owner := d.viewers[0]
	compareHistories(d, base, o, add)
	compareLogs(base, o, add)
	reaskedModel(o, owner, add)
	compareRequests(base, o, add)
	compareCalls(base, o, add)
	redoneCalls(o, owner, add)
	restartErrors(base, o, add)
	return out
}

// compareHistories adds a finding for each record of a viewer's history that differs from the
// uncrashed run's (the first five per viewer), for a different number of records, and for a
// different status of the conversation.
func compareHistories(d *dialogue, base, o *outcome, add func(Finding)) {
	owner := d.viewers[0]
	// The whole history of every viewer, record by record.
	for _, v := range d.viewers {
		want, got := base.hist[v], o.hist[v]
		shown := 0
		for i := 0; i < max(len(want), len(got)) && shown < 5; i++ {
			var w, g string
			if i < len(want) {
				w = normalized(want[i])
			} else {
				w = "no record"
			}
			if i < len(got) {
				g = normalized(got[i])
			} else {
				g = "no record"
			}
			if w != g {
				shown++
				add(Finding{Kind: "history", Viewer: v, Record: i + 1, What: "the history differs from the uncrashed run's", Want: w, Got: g})
			}
		}
		if len(want) != len(got) {
			add(Finding{Kind: "history", Viewer: v, What: "the number of records", Want: fmt.Sprint(len(want)), Got: fmt.Sprint(len(got))})
		}
	}
	if w, g := normalized(base.status), normalized(o.status); w != g {
		add(Finding{Kind: "status", Viewer: owner, What: "the conversation's status", Want: w, Got: g})
	}
}

// compareLogs adds a finding for each event of the execution log that differs from the
// uncrashed run's (the first three).
func compareLogs(base, o *outcome, add func(Finding)) {
	// The raw execution log (Options.CompareLog), event by event.
	shownLog := 0
	for i := 0; i < max(len(base.log), len(o.log)) && shownLog < 3; i++ {
		w, g := "no event", "no event"
		if i < len(base.log) {
			w = base.log[i]
		}
		if i < len(o.log) {
			g = o.log[i]
		}
		if w != g {
			shownLog++
			add(Finding{Kind: "log", Record: i + 1, What: "the execution log differs from the uncrashed run's (event, by position and kind)", Want: w, Got: g})
		}
	}
}

// reaskedModel adds a finding for each model request, after a restart, for a turn whose reply
// was already recorded when that instance started.
func reaskedModel(o *outcome, owner string, add func(Finding)) {
	// No model call, after a restart, for a turn whose reply was already recorded when that
	// instance started. What the history read after the restart shows was recorded before the
	// crash, or since by the restarted instance without a model answer (model requests wait until
	// the read is done). A request that arrived after the read asked for a turn the read had
	// already seen answered. A request that arrived while requests waited may have been sent
	// before the instance recorded the turn's reply itself, interrupted or failed, which needs no
	// answer: it is a re-ask only when that reply is complete, since a complete reply needs the
	// model's answer, and none reached the instance before the read.
	for _, r := range o.requests {
		e := epochOf(r.APIKey)
		rec := o.recorded[e][owner]
		if e < 1 || rec == nil {
			continue
		}
		last := lastUser(r.Messages)
		for text, a := range answeredIn(rec) {
			if !strings.Contains(last, text) || (heldOf(r.APIKey) && a.status != "complete") {
				continue
			}
			add(Finding{Kind: "reasked", What: fmt.Sprintf("model request %d, after restart %d, asks for turn %d (%q)", r.Index, e, a.turn, clip(text, 40)),
				Want: "no model call: its reply was recorded before the crash", Got: "the model was asked again"})
		}
	}
}

// compareRequests adds a finding for each model request one run made and the other did not.
func compareRequests(base, o *outcome, add func(Finding)) {
	// Every model request is one the uncrashed run made, and every one it made was made.
	baseReqs, gotReqs := requestSet(base), requestSet(o)
	for k, idx := range gotReqs {
		if _, ok := baseReqs[k]; !ok {
			add(Finding{Kind: "request", What: fmt.Sprintf("model request %d was never made by the uncrashed run", idx),
				Want: "one of the uncrashed run's requests", Got: clip(k, 600)})
		}
	}
	for k, idx := range baseReqs {
		if _, ok := gotReqs[k]; !ok {
			add(Finding{Kind: "request", What: fmt.Sprintf("the uncrashed run's model request %d was never made", idx),
				Want: clip(k, 600), Got: "no such request"})
		}
	}
}

// compareCalls adds a finding for each tool call one run made and the other did not.
func compareCalls(base, o *outcome, add func(Finding)) {
	// Every tool call (tool, arguments, idempotency key) is one the uncrashed run made, and every
	// one it made was made: a call redone after a crash carries the key of the first.
	baseCalls, gotCalls := callSet(base), callSet(o)
	for k, idx := range gotCalls {
		if _, ok := baseCalls[k]; !ok {
			add(Finding{Kind: "tool", What: fmt.Sprintf("tool call %d was never made by the uncrashed run", idx),
				Want: "one of the uncrashed run's tool calls", Got: clip(k, 400)})
		}
	}
	for k, idx := range baseCalls {
		if _, ok := gotCalls[k]; !ok {
			add(Finding{Kind: "tool", What: fmt.Sprintf("the uncrashed run's tool call %d was never made", idx),
				Want: clip(k, 400), Got: "no such call"})
		}
	}
}

// redoneCalls adds a finding for each tool call redone after a restart that found no turn in
// flight.
func redoneCalls(o *outcome, owner string, add func(Finding)) {
	// No tool call redone after a restart that found no turn in flight: every result it could
	// need was recorded already.
	for i, c := range o.calls {
		rec := o.recorded[c.Epoch][owner]
		if c.Epoch < 1 || rec == nil || inFlight(rec) {
			continue
		}
		for j, prev := range o.calls[:i] {
			if prev.Epoch < c.Epoch && prev.Name == c.Name && prev.Key == c.Key && prev.Status/100 == 2 {
				add(Finding{Kind: "reasked", What: fmt.Sprintf("tool call %d (%s), after restart %d, redoes call %d although no turn was in flight", i, c.Name, c.Epoch, j),
					Want: "no tool call: its result was recorded before the crash", Got: "the tool was called again"})
				break
			}
		}
	}
}

// restartErrors adds a finding for each error the last instance reported that the uncrashed run
// did not.
func restartErrors(base, o *outcome, add func(Finding)) {
	// The last instance, the one that did not crash, reports nothing the uncrashed run did not.
	baseErrs := map[string]int{}
	for _, h := range base.hooks {
		baseErrs[h.Report.Error]++
	}
	for _, h := range o.hooks {
		if h.Epoch == 0 || h.Epoch != o.epochs-1 {
			continue // an instance that crashed: what it said while dying is not judged
		}
		if baseErrs[h.Report.Error] > 0 {
			baseErrs[h.Report.Error]--
			continue
		}
		add(Finding{Kind: "error", What: fmt.Sprintf("the restarted instance reported an error (turn %d)", h.Report.Turn),
			Want: "no error the uncrashed run did not report", Got: clip(h.Report.Error, 300)})
	}
}

// answered is a turn with a reply: its number and its reply's status.
type answered struct {
	turn   int64
	status string
}

// answeredIn maps the text of every accepted user record of h whose turn has a reply to its turn
// and the reply's status.
func answeredIn(h []entry) map[string]answered {
	replied := map[int64]string{}
	for _, e := range h {
		if e.str("role") == "assistant" && finalStatus(e.str("status")) {
			replied[e.num("turn")] = e.str("status")
		}
	}
	out := map[string]answered{}
	for _, e := range h {
		if st, ok := replied[e.num("turn")]; ok && e.str("role") == "user" && e.str("status") == "accepted" && e.str("text") != "" {
			out[e.str("text")] = answered{turn: e.num("turn"), status: st}
		}
	}
	return out
}

// isRecordOf says whether user record e is the message a: by its messageId when the record shows
// one (the field is optional), else by its text and asker (the dialogues' texts are unique).
func isRecordOf(e entry, a ack) bool {
	if id := e.str("messageId"); id != "" {
		return id == a.messageID
	}
	if e.str("text") != a.text {
		return false
	}
	if asker, ok := e["asker"].(map[string]any); ok {
		return asker["actor"] == principals[a.who].Actor && asker["tenant"] == principals[a.who].Tenant
	}
	return true
}

// exactlyOnce checks that every message o's clients had acknowledged is in the history once, as an
// accepted record, and that its turn has exactly one reply.
func exactlyOnce(d *dialogue, point int64, o *outcome) []Finding {
	var out []Finding
	add := func(f Finding) {
		f.Dialogue, f.Point = d.name, point
		out = append(out, f)
	}
	owner := d.viewers[0]
	seen := map[string]bool{}
	for _, a := range o.acks {
		if seen[a.who+"\x00"+a.messageID] || (a.door && a.text == "") {
			continue
		}
		seen[a.who+"\x00"+a.messageID] = true
		var recs []entry
		for _, e := range o.hist[owner] {
			if e.str("role") == "user" && e.str("status") == "accepted" && isRecordOf(e, a) {
				recs = append(recs, e)
			}
		}
		switch {
		case len(recs) == 0:
			add(Finding{Kind: "lost", Viewer: owner, What: fmt.Sprintf("acknowledged message %s of %s (%q)", a.messageID, a.who, clip(a.text, 40)),
				Want: "one accepted record", Got: "none"})
			continue
		case len(recs) > 1:
			add(Finding{Kind: "duplicated", Viewer: owner, What: fmt.Sprintf("acknowledged message %s of %s", a.messageID, a.who),
				Want: "one accepted record", Got: fmt.Sprintf("%d (turns %s)", len(recs), turnsOf(recs))})
		}
		turn := recs[0].num("turn")
		replies := 0
		for _, e := range o.hist[owner] {
			if e.str("role") == "assistant" && e.num("turn") == turn {
				replies++
			}
		}
		if replies != 1 {
			kind := "duplicated"
			if replies == 0 {
				kind = "lost"
			}
			add(Finding{Kind: kind, Viewer: owner, What: fmt.Sprintf("the reply to turn %d (message %s)", turn, a.messageID),
				Want: "exactly one reply", Got: fmt.Sprintf("%d", replies)})
		}
	}

	return out
}

func turnsOf(es []entry) string {
	var parts []string
	for _, e := range es {
		parts = append(parts, fmt.Sprint(e.num("turn")))
	}
	return strings.Join(parts, ", ")
}

// requestSet is every distinct model request of a run (messages and tools), with the index of its
// first arrival.
func requestSet(o *outcome) map[string]int {
	out := map[string]int{}
	for _, r := range o.requests {
		b, _ := json.Marshal(struct {
			M any `json:"messages"`
			T any `json:"tools"`
		}{r.Messages, r.Tools})
		if _, ok := out[string(b)]; !ok {
			out[string(b)] = r.Index
		}
	}
	return out
}

// callSet is every distinct tool call of a run, with the index of its first arrival.
func callSet(o *outcome) map[string]int {
	out := map[string]int{}
	for _, c := range o.tools {
		k := c.Name + " " + string(c.Args) + " key " + c.IdempotencyKey
		if _, ok := out[k]; !ok {
			out[k] = c.Index
		}
	}
	return out
}

// inFlight says whether a history has an accepted turn without a reply.
func inFlight(h []entry) bool {
	replied := map[int64]bool{}
	for _, e := range h {
		if e.str("role") == "assistant" && finalStatus(e.str("status")) {
			replied[e.num("turn")] = true
		}
	}
	for _, e := range h {
		if e.str("role") == "user" && e.str("status") == "accepted" && !replied[e.num("turn")] {
			return true
		}
	}
	return false
}
