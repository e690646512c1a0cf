package harness

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/cucumber/godog"
)

// defaultMaxTurnChars is spec/config.go's default for conversation.maxTurnChars.
const defaultMaxTurnChars = 32000

var (
	historyRejected = regexp.MustCompile(`^(\d+) rejected "(\w[\w-]*)"$`)
	historyTurn     = regexp.MustCompile(`^turn (\d+) "((?:[^"\\]|\\.)*)" answered$`)
)

// expectedHistory expands a history written as items joined by ", then ": `<n> rejected
// "<reason>"` (n rejected user records of turn 0 with that reason and no text) and `turn <n>
// "<text>" answered` (the accepted user record of turn n with that text, then the model's
// complete reply "re: <text>"). It renders one line per record, ords counted from 1.
func expectedHistory(spec string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(spec, ", then ") {
		if m := historyRejected.FindStringSubmatch(item); m != nil {
			n, _ := strconv.Atoi(m[1])
			for range n {
				out = append(out, historyLine(int64(len(out)+1), 0, "user", "rejected", m[2], nil))
			}
			continue
		}
		if m := historyTurn.FindStringSubmatch(item); m != nil {
			turn, _ := strconv.ParseInt(m[1], 10, 64)
			text, reply := unescape(m[2]), "re: "+unescape(m[2])
			out = append(out, historyLine(int64(len(out)+1), turn, "user", "accepted", "", &text))
			out = append(out, historyLine(int64(len(out)+1), turn, "assistant", "complete", "", &reply))
			continue
		}
		return nil, harnessErr("cannot read the history item %q", item)
	}
	return out, nil
}

func historyLine(ord, turn int64, role, status, reason string, text *string) string {
	t := "-"
	if text != nil {
		t = strconv.Quote(*text)
	}
	return fmt.Sprintf("%d | %d | %s | %s | %s | %s", ord, turn, role, status, reason, t)
}

func (s *scenario) maxTurnChars() int {
	if n := s.cfg.Conversation.MaxTurnChars; n > 0 {
		return n
	}
	return defaultMaxTurnChars
}

func (s *scenario) registerRejections(sc *godog.ScenarioContext) {
	sc.Step(`^(\w[\w' ]*?) sends (\d+) (blank|oversized) messages?$`, func(who string, n int, kind string) error {
		blanks := []string{" ", "\t", "\n \r\n", "   ", "\u00a0", "\u3000 "}
		for i := range n {
			text := blanks[i%len(blanks)]
			if kind == "oversized" {
				text = strings.Repeat("x", s.maxTurnChars()+1+i%3)
			}
			if err := s.mustSend(who, text, "", nil); err != nil {
				return err
			}
		}
		return nil
	})
	sc.Step(`^the whole history is: (.+)$`, func(spec string) error {
		want, err := expectedHistory(spec)
		if err != nil {
			return err
		}
		es, err := s.waitHistory(s.owner(), fmt.Sprintf("%d records", len(want)), func(es []entry) bool { return len(es) >= len(want) })
		if err != nil {
			return err
		}
		var got []string
		for _, e := range es {
			got = append(got, historyLine(e.Ord, e.Turn, e.Role, e.Status, e.Reason, e.Text))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			return fail("the history of "+s.current.id+" (ord | turn | role | status | reason | text)", clip(strings.Join(got, "\n"), 3000), clip(strings.Join(want, "\n"), 3000))
		}
		return nil
	})
	sc.Step(`^the status of (\w[\w' ]*?)'s conversation is (open|closed) at turn (\d+), generation (\d+), owned by (\w[\w' ]*?)$`, func(who, state string, turns, gen int64, owner string) error {
		c, err := s.conv("")
		if err != nil {
			return err
		}
		r, err := s.cl.do(s.ctx, who, http.MethodGet, "/conversations/"+url.PathEscape(c.id), nil, reqOpts{})
		if err != nil {
			return err
		}
		if r.status != http.StatusOK {
			return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "200 and the status")
		}
		// Every member the contract documents, compared as one object.
		var got map[string]json.RawMessage
		if err := r.json(&got); err != nil {
			return err
		}
		documented := map[string]json.RawMessage{}
		for _, k := range []string{"id", "mode", "state", "turns", "generation", "owner"} {
			if v, ok := got[k]; ok {
				documented[k] = v
			}
		}
		gb, _ := json.Marshal(documented)
		var g any
		_ = json.Unmarshal(gb, &g)
		gb, _ = json.Marshal(g) // canonical: keys sorted, no spacing
		wb, _ := json.Marshal(map[string]any{"id": c.id, "mode": "owner", "state": state, "turns": turns, "generation": gen, "owner": identityJSON(owner)})
		var w any
		_ = json.Unmarshal(wb, &w)
		wb, _ = json.Marshal(w)
		if string(gb) != string(wb) {
			return fail(r.op, string(gb), string(wb))
		}
		return nil
	})
}
