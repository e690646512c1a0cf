package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cucumber/godog"
)

// historyHolds waits until the history holds exactly the records of the table.
func (s *historySteps) historyHolds(t *godog.Table) error { return s.matchTable(s.owner(), t) }

// seesHistory waits until the history who reads holds exactly the records of the table.
func (s *historySteps) seesHistory(who string, t *godog.Table) error { return s.matchTable(who, t) }

// remembersHistory remembers the history as who reads it.
func (s *historySteps) remembersHistory(who string) error {
	es, err := s.history(s.ctx, who, false)
	if err != nil {
		return err
	}
	s.remembered = es
	return nil
}

// historyIsRemembered expects the raw history to equal the remembered one, byte for byte.
func (s *historySteps) historyIsRemembered() error {
	return s.rememberedThen(nil)
}

// historyIsRememberedThen expects the raw history to be the remembered one followed by exactly the records of the table.
func (s *historySteps) historyIsRememberedThen(t *godog.Table) error {
	return s.rememberedThen(t)
}

// historyEndsWith waits until the last record of the history has the status.
func (s *historySteps) historyEndsWith(st string) error {
	_, err := s.waitHistory(s.owner(), fmt.Sprintf("a %q record at the end", st), func(es []entry) bool {
		return len(es) > 0 && es[len(es)-1].Status == st
	})
	return err
}

// readsPagesOf reads the whole history as who in pages of N, forward or backward.
func (s *historySteps) readsPagesOf(who, dir string, n int) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	s.pages, s.shortNotDone, s.widest = nil, false, 0
	cursor := ""
	for range maxPages {
		q := url.Values{"direction": {dir}, "limit": {strconv.Itoa(n)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r, err := s.cl.Do(s.ctx, who, http.MethodGet, "/conversations/"+url.PathEscape(c.id)+"/history?"+q.Encode(), nil, reqOpts{})
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fail(r.Op, fmt.Sprint(r.Status), "200")
		}
		var p page
		if err := r.JSON(&p); err != nil {
			return err
		}
		es, err := decodeEntries(p.Entries)
		if err != nil {
			return fail(r.Op, "entries that do not decode", "entries")
		}
		if len(es) > n {
			return fail(r.Op, fmt.Sprintf("%d entries", len(es)), fmt.Sprintf("at most %d", n))
		}
		if len(es) < n && !p.Done {
			s.shortNotDone = true
		}
		s.widest = max(s.widest, len(es))
		if len(es) > 0 {
			var ords []string
			for _, e := range es {
				ords = append(ords, strconv.FormatInt(e.Ord, 10))
			}
			s.pages = append(s.pages, strings.Join(ords, ","))
		}
		if p.Done {
			return nil
		}
		if p.NextCursor == "" {
			return fail(r.Op, "no nextCursor on a page that is not done", "a nextCursor")
		}
		cursor = p.NextCursor
	}
	return fail("paging the history", fmt.Sprintf("more than %d pages", maxPages), "an end")
}

// maxPages is the most pages a paged reading takes before it calls the paging endless: the
// histories the scenarios page hold a few records, and a turn without tool calls spends at most
// 50 log events besides its records (spec/http.md), so even a scan bound of 1 ends far sooner.
const maxPages = 2000

// pagesTogetherHold expects the records of the pages read, one page after the other, to be
// exactly the listed records (separated by commas or bars), however the pages split them.
func (s *historySteps) pagesTogetherHold(want string) error {
	w := strings.Join(strings.FieldsFunc(want, func(r rune) bool { return r == ',' || r == '|' || r == ' ' }), ",")
	var got []string
	for _, p := range s.pages {
		got = append(got, strings.Split(p, ",")...)
	}
	if strings.Join(got, ",") != w {
		return fail("the records of the pages read, in order", strings.Join(s.pages, " | "), w)
	}
	return nil
}

// noPageWider expects every page of the paged reading to have held at most n records.
func (s *historySteps) noPageWider(n int) error {
	if s.widest > n {
		return fail("paging the history", fmt.Sprintf("a page of %d records (pages %s)", s.widest, strings.Join(s.pages, " | ")), fmt.Sprintf("at most %d records a page", n))
	}
	return nil
}

// readsWithLimit reads the history with the limit as who; the page is kept.
func (s *historySteps) readsWithLimit(who string, n int) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	_, _, _, err = s.readPage(who, c.id, "?limit="+strconv.Itoa(n), n < 1 || n > 500)
	return err
}

// readsWithNoLimit reads the history with no limit as who; the page is kept.
func (s *historySteps) readsWithNoLimit(who string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	_, _, _, err = s.readPage(who, c.id, "", false)
	return err
}

// answerIsPageOf expects the kept page to hold the records N to N and to be done or not.
func (s *historySteps) answerIsPageOf(from, to int, done string) error {
	var want []string
	for i := from; i <= to; i++ {
		want = append(want, strconv.Itoa(i))
	}
	w := strings.Join(want, ",")
	if s.last == nil || s.last.Status != http.StatusOK || ords(s.lastPage) != w || s.lastPageDone != (done == "done") {
		return fail(opOf(s.last), fmt.Sprintf("%d, records [%s], done %v", statusOf(s.last), ords(s.lastPage), s.lastPageDone),
			fmt.Sprintf("200, records %d to %d, %s", from, to, done))
	}
	return nil
}

// historyHasRecords expects the history to hold exactly N records.
func (s *historySteps) historyHasRecords(n int) error {
	es, err := s.waitHistory(s.owner(), fmt.Sprintf("%d records", n), func(es []entry) bool { return len(es) >= n })
	if err != nil {
		return err
	}
	if len(es) != n {
		return fail("the history", fmt.Sprintf("%d records", len(es)), fmt.Sprintf("%d", n))
	}
	return nil
}

// recordRejected expects record N of the history to be rejected with the reason.
func (s *historySteps) recordRejected(ord int64, reason string) error {
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
}

// readsFromCursor reads the history from the cursor as who; the page is kept.
func (s *historySteps) readsFromCursor(who, cursor string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	_, _, _, err = s.readPage(who, c.id, "?cursor="+url.QueryEscape(cursor), true)
	return err
}

// readsDirectionFromCursor reads the history forward or backward from the cursor as who.
func (s *historySteps) readsDirectionFromCursor(who, dir, cursor string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	_, _, _, err = s.readPage(who, c.id, "?direction="+dir+"&cursor="+url.QueryEscape(cursor), false)
	return err
}

// answerIsEmptyDonePage expects the kept page to be done with no records.
func (s *historySteps) answerIsEmptyDonePage() error {
	if s.last == nil || s.last.Status != http.StatusOK || len(s.lastPage) != 0 || !s.lastPageDone {
		return fail(opOf(s.last), fmt.Sprintf("%d, records [%s], done %v", statusOf(s.last), ords(s.lastPage), s.lastPageDone), "200, no records, done")
	}
	return nil
}

// answerIsPageHolding expects the kept page to hold exactly the listed records.
func (s *historySteps) answerIsPageHolding(want string) error {
	if s.last == nil || s.last.Status != http.StatusOK || ords(s.lastPage) != strings.ReplaceAll(want, " ", "") {
		return fail(opOf(s.last), fmt.Sprintf("%d, records [%s]", statusOf(s.last), ords(s.lastPage)), "200, records ["+want+"]")
	}
	return nil
}

// somePageShort expects some page of the paged reading to have been short but not done.
func (s *historySteps) somePageShort() error {
	if !s.shortNotDone {
		return fail("paging the history", "every page full or done", "a page with fewer records than the limit that is not done (the scan bound at work)")
	}
	return nil
}

// takesLastCursor keeps the cursor of the last record of the named conversation.
func (s *historySteps) takesLastCursor(who, name string) error {
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
}

// readsNamedFromCursor reads the named conversation forward from the kept cursor as who.
func (s *historySteps) readsNamedFromCursor(who, name string) error {
	c, err := s.conv(name)
	if err != nil {
		return err
	}
	_, _, _, err = s.readPage(who, c.id, "?cursor="+url.QueryEscape(s.saved["cursor"]), false)
	return err
}

// everyRecordBelongs expects every record read to belong to the named conversation.
func (s *historySteps) everyRecordBelongs(name string) error {
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
	if s.last == nil || s.last.Status != http.StatusOK {
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
}

// field renders one column of an entry as a table cell.
func field(e entry, col string) string {
	switch col {
	case "ord":
		return strconv.FormatInt(e.Ord, 10)
	case "turn":
		return strconv.FormatInt(e.Turn, 10)
	case "role":
		return e.Role
	case "status":
		return e.Status
	case "text":
		if e.Text == nil {
			return "-"
		}
		return *e.Text
	case "reason":
		return e.Reason
	case "messageId":
		return e.MessageID
	case "editOf":
		if e.EditOf == 0 {
			return ""
		}
		return strconv.FormatInt(e.EditOf, 10)
	case "editOfTurn":
		if e.EditOfTurn == 0 {
			return ""
		}
		return strconv.FormatInt(e.EditOfTurn, 10)
	case "classes":
		return strings.Join(e.Classes, " ")
	case "asker":
		var a struct {
			Actor string `json:"actor"`
		}
		_ = json.Unmarshal(e.Asker, &a)
		return a.Actor
	}
	return "?" + col
}

// tableRows turns a table into column names and expected rows.
func tableRows(t *godog.Table) ([]string, [][]string) {
	var cols []string
	for _, c := range t.Rows[0].Cells {
		cols = append(cols, c.Value)
	}
	var rows [][]string
	for _, r := range t.Rows[1:] {
		var row []string
		for _, c := range r.Cells {
			row = append(row, unescape(c.Value))
		}
		rows = append(rows, row)
	}
	return cols, rows
}

func render(cols []string, rows [][]string) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString("\n  | " + strings.Join(r, " | ") + " |")
	}
	if len(rows) == 0 {
		b.WriteString("\n  (no records)")
	}
	return b.String()
}

func (s *scenario) matchTable(who string, t *godog.Table) error {
	cols, want := tableRows(t)
	es, err := s.waitHistory(who, fmt.Sprintf("at least %d records", len(want)), func(es []entry) bool { return len(es) >= len(want) })
	if err != nil {
		return err
	}
	var got [][]string
	for _, e := range es {
		var row []string
		for _, c := range cols {
			row = append(row, field(e, c))
		}
		got = append(got, row)
	}
	if g, w := render(cols, got), render(cols, want); g != w {
		return &Failure{Op: "the history of " + s.current.id + " as " + who + " (" + strings.Join(cols, " | ") + ")",
			Got: g, Want: w, Detail: firstDifference(g, w)}
	}
	return nil
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}

// rememberedThen checks the whole history: exactly the remembered records, byte for byte, then
// exactly the records of t (nil: none), and nothing else. It waits until the history holds at least
// that many records and then reads it again, so records appended twice by a replay are seen.
func (s *historySteps) rememberedThen(t *godog.Table) error {
	var cols []string
	var want [][]string
	if t != nil {
		cols, want = tableRows(t)
	}
	n := len(s.remembered) + len(want)
	if _, err := s.waitHistory(s.owner(), fmt.Sprintf("the %d remembered records and %d more", len(s.remembered), len(want)),
		func(es []entry) bool { return len(es) >= n }); err != nil {
		return err
	}
	es, err := s.history(s.ctx, s.owner(), false)
	if err != nil {
		return err
	}
	if len(es) != n {
		return fail("the history after the restart", describeEntries(es),
			fmt.Sprintf("exactly %d records: the %d remembered ones and %d more", n, len(s.remembered), len(want)))
	}
	for i, old := range s.remembered {
		a, b := compact(old.raw), compact(es[i].raw)
		if !bytes.Equal(a, b) {
			return fail(fmt.Sprintf("record %d after the restart", i+1), string(b), string(a))
		}
	}
	var got [][]string
	for _, e := range es[len(s.remembered):] {
		var row []string
		for _, c := range cols {
			row = append(row, field(e, c))
		}
		got = append(got, row)
	}
	if render(cols, got) != render(cols, want) {
		return fail("the records after the remembered ones ("+strings.Join(cols, " | ")+")", render(cols, got), render(cols, want))
	}
	return nil
}

func (s *historySteps) readPage(who, convID, query string, offSpec bool) (*response, []entry, page, error) {
	r, err := s.cl.Do(s.ctx, who, http.MethodGet, "/conversations/"+url.PathEscape(convID)+"/history"+query, nil, reqOpts{OffSpec: offSpec})
	s.last = r
	if err != nil {
		return r, nil, page{}, err
	}
	var p page
	if r.Status != http.StatusOK {
		return r, nil, p, nil
	}
	if err := r.JSON(&p); err != nil {
		return r, nil, p, err
	}
	es, err := decodeEntries(p.Entries)
	if err != nil {
		return r, nil, p, fail(r.Op, "entries that do not decode", "entries per spec")
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

// conversationHistoryVocabulary lists the steps of features/conversation/history.feature.
func conversationHistoryVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the history holds:$`, a.history.historyHolds, "waits until the history holds exactly the records of the table"},
		{`^(\w[\w' ]*?) sees the history:$`, a.history.seesHistory, "waits until the history who reads holds exactly the records of the table"},
		{`^(\w[\w' ]*?) remembers the history$`, a.history.remembersHistory, "remembers the history as who reads it"},
		{`^the history is the remembered one, byte for byte$`, a.history.historyIsRemembered, "expects the raw history to equal the remembered one, byte for byte"},
		{`^the history is the remembered one, byte for byte, followed by:$`, a.history.historyIsRememberedThen, "expects the raw history to be the remembered one followed by exactly the records of the table"},
		{`^the history ends with a "(\w+)" record$`, a.history.historyEndsWith, "waits until the last record of the history has the status"},
		{`^(\w[\w' ]*?) reads the history (forward|backward) (\d+) at a time$`, a.history.readsPagesOf, "reads the whole history as who in pages of N, forward or backward"},
		{`^the pages together hold the records (.+)$`, a.history.pagesTogetherHold, "expects the records of the pages read, one page after the other, to be exactly the listed records, however the pages split them"},
		{`^no page held more than (\d+) records?$`, a.history.noPageWider, "expects every page of the paged reading to have held at most N records"},
		{`^(\w[\w' ]*?) reads the history with limit (-?\d+)$`, a.history.readsWithLimit, "reads the history with the limit as who; the page is kept"},
		{`^(\w[\w' ]*?) reads the history with no limit$`, a.history.readsWithNoLimit, "reads the history with no limit as who; the page is kept"},
		{`^the answer is a page of the records (\d+) to (\d+), (done|not done)$`, a.history.answerIsPageOf, "expects the kept page to hold the records N to N and to be done or not"},
		{`^the history has (\d+) records$`, a.history.historyHasRecords, "expects the history to hold exactly N records"},
		{`^record (\d+) is rejected with reason "([^"]*)"$`, a.history.recordRejected, "expects record N of the history to be rejected with the reason"},
		{`^(\w[\w' ]*?) reads the history from cursor "([^"]*)"$`, a.history.readsFromCursor, "reads the history from the cursor as who; the page is kept"},
		{`^(\w[\w' ]*?) reads the history (forward|backward) from cursor "([^"]*)"$`, a.history.readsDirectionFromCursor, "reads the history forward or backward from the cursor as who"},
		{`^the answer is a done page with no records$`, a.history.answerIsEmptyDonePage, "expects the kept page to be done with no records"},
		{`^the answer is a page holding the records (.+)$`, a.history.answerIsPageHolding, "expects the kept page to hold exactly the listed records"},
		{`^some page was short but not done$`, a.history.somePageShort, "expects some page of the paged reading to have been short but not done"},
		{`^(\w[\w' ]*?) takes the last cursor of conversation "([^"]*)"$`, a.history.takesLastCursor, "keeps the cursor of the last record of the named conversation"},
		{`^(\w[\w' ]*?) reads conversation "([^"]*)" forward from that cursor$`, a.history.readsNamedFromCursor, "reads the named conversation forward from the kept cursor as who"},
		{`^every record read belongs to conversation "([^"]*)"$`, a.history.everyRecordBelongs, "expects every record read to belong to the named conversation"},
	}
}
