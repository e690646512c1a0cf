package harness

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
	if render(cols, got) != render(cols, want) {
		return fail("the history of "+s.current.id+" as "+who+" ("+strings.Join(cols, " | ")+")", render(cols, got), render(cols, want))
	}
	return nil
}

func (s *scenario) registerHistory(sc *godog.ScenarioContext) {
	sc.Step(`^the history holds:$`, func(t *godog.Table) error { return s.matchTable(s.owner(), t) })
	sc.Step(`^(\w[\w' ]*?) sees the history:$`, func(who string, t *godog.Table) error { return s.matchTable(who, t) })
	sc.Step(`^(\w[\w' ]*?) remembers the history$`, func(who string) error {
		es, err := s.history(s.ctx, who, false)
		if err != nil {
			return err
		}
		s.remembered = es
		return nil
	})
	sc.Step(`^the history is the remembered one, byte for byte$`, func() error {
		return s.rememberedThen(nil)
	})
	sc.Step(`^the history is the remembered one, byte for byte, followed by:$`, func(t *godog.Table) error {
		return s.rememberedThen(t)
	})
	sc.Step(`^the history ends with a "(\w+)" record$`, func(st string) error {
		_, err := s.waitHistory(s.owner(), fmt.Sprintf("a %q record at the end", st), func(es []entry) bool {
			return len(es) > 0 && es[len(es)-1].Status == st
		})
		return err
	})
	sc.Step(`^(\w[\w' ]*?) reads the history (forward|backward) (\d+) at a time$`, func(who, dir string, n int) error {
		c, err := s.conv("")
		if err != nil {
			return err
		}
		s.pages = nil
		cursor := ""
		for range 200 {
			q := url.Values{"direction": {dir}, "limit": {strconv.Itoa(n)}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			r, err := s.cl.do(s.ctx, who, http.MethodGet, "/conversations/"+url.PathEscape(c.id)+"/history?"+q.Encode(), nil, reqOpts{})
			if err != nil {
				return err
			}
			if r.status != http.StatusOK {
				return fail(r.op, fmt.Sprint(r.status), "200")
			}
			var p page
			if err := r.json(&p); err != nil {
				return err
			}
			es, err := decodeEntries(p.Entries)
			if err != nil {
				return fail(r.op, "entries that do not decode", "entries")
			}
			if len(es) > n {
				return fail(r.op, fmt.Sprintf("%d entries", len(es)), fmt.Sprintf("at most %d", n))
			}
			if len(es) < n && !p.Done {
				s.shortNotDone = true
			}
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
				return fail(r.op, "no nextCursor on a page that is not done", "a nextCursor")
			}
			cursor = p.NextCursor
		}
		return fail("paging the history", "more than 200 pages", "an end")
	})
	sc.Step(`^the pages hold the records (.+)$`, func(want string) error {
		w := strings.Join(strings.Fields(want), "")
		got := strings.Join(s.pages, "|")
		if got != w {
			return fail("the pages read", got, w)
		}
		return nil
	})
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
func (s *scenario) rememberedThen(t *godog.Table) error {
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
