package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/loomcheck/loomcheck/schemas"
)

// A scenario's expected values must follow from spec/ alone. When they follow from a setting the
// scenario leaves unset, they follow from that setting's default, which must then be written
// beside the setting in schemas/sut-config.schema.json: otherwise an implementer would have to
// guess it. settingReliance names, for each step whose outcome depends on a setting's value, the
// settings it depends on; defaultProblems reads the features with it.

// settingReliance maps a step pattern of the vocabulary to the settings (JSON paths of the
// configuration document) whose value its outcome depends on.
var settingReliance = map[string][]string{
	`^(\w[\w' ]*?) sends (\d+) (blank|oversized) messages?$`:                                                                        {"conversation.maxTurnChars"},
	`^the whole history is: (.+)$`:                                                                                                  {"conversation.maxInvalidRecords"},
	`^(\w[\w' ]*?) reads the history (forward|backward) (\d+) at a time$`:                                                           {"conversation.maxScan"},
	`^(\w[\w' ]*?) reads the history with no limit$`:                                                                                {"conversation.maxScan"},
	`^(\w[\w' ]*?) reads the history with limit (-?\d+)$`:                                                                           {"conversation.maxScan"},
	`^the status of (\w[\w' ]*?)'s conversation is (open|closed) at turn (\d+), generation (\d+), owned by (\w[\w' ]*?)$`:           {"conversation.rotateEveryTurns"},
	`^the window of request (\d+) to the model holds turns (.+)$`:                                                                   {"conversation.maxWindowTurns"},
	`^request (\d+) to the model holds the messages:$`:                                                                              {"conversation.maxWindowTurns"},
	`^request (\d+) to the model holds exactly (?:turns (.+) as sent and answered|no earlier turn), then "((?:[^"\\]|\\.)*)"$`:      {"conversation.maxWindowTurns", "conversation.maxCarryBytes"},
	`^(someone without credentials|\w[\w' ]*?) sends the headers of a turn and half its body, then stalls$`:                         {"gateway.requestTimeoutMs"},
	`^a client sends part of a request's headers and stalls$`:                                                                       {"gateway.headersTimeoutMs", "gateway.requestTimeoutMs"},
	`^a client holds (\d+) more connections?, each answered$`:                                                                       {"gateway.maxConnections"},
	`^(\w[\w' ]*?) puts an envelope saying "([^"]*)" into the inbox and waits until its issue time is older than maxEnvelopeAgeMs$`: {"conversation.maxEnvelopeAgeMs"},
	`^(\d+) re-authorization periods pass$`:                                                                                         {"gateway.reauthMs"},
	`^(\w[\w' ]*?)'s stream ends with a "reconnect" event saying "([\w-]+)", no sooner than its lifetime$`:                          {"gateway.streamLifetimeMs"},
}

// settingSetters are the steps that set a setting: the first group of the pattern names it, or
// the step sets the fixed settings listed; the settings table sets those of its first column.
var settingSetters = []struct {
	re    *regexp.Regexp
	fixed []string
}{
	{re: regexp.MustCompile(`^the setting "([^"]+)" is (.+)$`)},
	{re: regexp.MustCompile(`^the system is killed and restarted with the setting "([^"]+)" at (.+)$`)},
	{re: regexp.MustCompile(`^barge-in is (?:on|off)$`), fixed: []string{"conversation.bargeIn"}},
	{re: regexp.MustCompile(`^the conversation rotates every \d+ turns?$`), fixed: []string{"conversation.rotateEveryTurns"}},
	{re: regexp.MustCompile(`^the settings are:$`)},
}

// SettingDefault returns the default schemas/sut-config.schema.json writes beside the setting
// at path ("conversation.maxScan"), and whether it writes one.
func SettingDefault(path string) (any, bool) {
	raw, err := schemas.Raw("sut-config")
	if err != nil {
		return nil, false
	}
	return settingDefaultIn(raw, path)
}

// settingDefaultIn is SettingDefault for the configuration schema given as JSON: the "default"
// member of the property the path names (through objects' properties and arrays' items).
func settingDefaultIn(schema []byte, path string) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var node map[string]any
	if dec.Decode(&node) != nil {
		return nil, false
	}
	for _, seg := range strings.Split(path, ".") {
		if items, ok := node["items"].(map[string]any); ok && node["properties"] == nil {
			node = items
		}
		props, _ := node["properties"].(map[string]any)
		next, ok := props[seg].(map[string]any)
		if !ok {
			return nil, false
		}
		node = next
	}
	d, ok := node["default"]
	return d, ok
}

// settingDefaultInt is the integer default the schema writes for path; a setting the kit reads
// a default of must have one, so its absence is the kit's own error.
func settingDefaultInt(path string) (int64, error) {
	d, ok := SettingDefault(path)
	n, isNum := d.(json.Number)
	if !ok || !isNum {
		return 0, harnessErr("schemas/sut-config.schema.json writes no integer default for %s", path)
	}
	v, err := n.Int64()
	if err != nil {
		return 0, harnessErr("the default of %s in schemas/sut-config.schema.json is %s, not an integer", path, n)
	}
	return v, nil
}

// pickledStep is one step of a scenario as it runs: its place, its text, its data table.
type pickledStep struct {
	where string
	text  string
	table [][]string
}

// defaultProblems is every step of scens whose outcome depends on a setting the scenario does
// not set and whose default the configuration schema does not write, one line each.
func defaultProblems(schema []byte, scens [][]pickledStep) []string {
	reliance := map[*regexp.Regexp][]string{}
	for p, paths := range settingReliance {
		reliance[regexp.MustCompile(p)] = paths
	}
	var problems []string
	for _, steps := range scens {
		set := map[string]bool{}
		for _, st := range steps {
			for _, p := range settingsSetBy(st) {
				set[p] = true
			}
			for re, paths := range reliance {
				if !re.MatchString(st.text) {
					continue
				}
				for _, p := range paths {
					if _, ok := settingDefaultIn(schema, p); !ok && !set[p] {
						problems = append(problems, fmt.Sprintf("%s: %q depends on %s, which the scenario does not set and schemas/sut-config.schema.json gives no default", st.where, st.text, p))
					}
				}
			}
		}
	}
	return problems
}

// settingsSetBy is the settings a step sets.
func settingsSetBy(st pickledStep) []string {
	for _, s := range settingSetters {
		m := s.re.FindStringSubmatch(st.text)
		switch {
		case m == nil:
			continue
		case s.fixed != nil:
			return s.fixed
		case len(m) > 1:
			return []string{m[1]}
		}
		var out []string
		for _, row := range st.table {
			if len(row) > 0 && row[0] != "setting" {
				out = append(out, row[0])
			}
		}
		return out
	}
	return nil
}
