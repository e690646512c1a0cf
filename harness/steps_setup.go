package harness

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/spec"
)

func (s *scenario) registerSetup(sc *godog.ScenarioContext) {
	sc.Step(`^barge-in is (on|off)$`, func(v string) error {
		on := v == "on"
		return s.configure(func(c *spec.SUTConfig) { c.Conversation.BargeIn = &on })
	})
	sc.Step(`^the conversation rotates every (\d+) turns?$`, func(n int) error {
		return s.configure(func(c *spec.SUTConfig) { c.Conversation.RotateEveryTurns = n })
	})
	sc.Step(`^the system takes caller-chosen conversation ids$`, func() error {
		if !s.run.extensions["chosen-id"] {
			return &HarnessError{Err: fmt.Errorf("%w: the system does not claim the chosen-id extension (discovery)", ErrNotApplicable)}
		}
		return nil
	})
	sc.Step(`^the setting "([^"]+)" is (.+)$`, s.setSetting)
	sc.Step(`^the settings are:$`, func(t *godog.Table) error {
		for _, row := range t.Rows {
			if len(row.Cells) != 2 {
				return harnessErr("a settings table has two columns: path and JSON value")
			}
			if row.Cells[0].Value == "setting" {
				continue
			}
			if err := s.setSetting(row.Cells[0].Value, row.Cells[1].Value); err != nil {
				return err
			}
		}
		return nil
	})
	sc.Step(`^the tools are:$`, func(t *godog.Table) error {
		return s.configure(func(c *spec.SUTConfig) {
			for _, row := range t.Rows[1:] {
				def := spec.ToolDef{Name: row.Cells[0].Value, Description: "test tool " + row.Cells[0].Value,
					Parameters: map[string]any{"type": "object"}}
				if len(row.Cells) > 1 {
					def.Class = row.Cells[1].Value
				}
				c.Tools.Definitions = append(c.Tools.Definitions, def)
			}
		})
	})
}

// setSetting sets one field of the configuration document by its JSON path ("conversation.maxScan")
// to a JSON value.
func (s *scenario) setSetting(path, value string) error {
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		v = strings.Trim(value, `"`)
	}
	return s.configureErr(func(c *spec.SUTConfig) error {
		b, _ := json.Marshal(c)
		var doc map[string]any
		_ = json.Unmarshal(b, &doc)
		parts := strings.Split(path, ".")
		m := doc
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = v
		b, _ = json.Marshal(doc)
		var out spec.SUTConfig
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out); err != nil {
			return harnessErr("setting %s = %s does not fit the configuration document: %v", path, value, err)
		}
		*c = out
		return nil
	})
}

func (s *scenario) configureErr(f func(*spec.SUTConfig) error) error {
	var err error
	if cerr := s.configure(func(c *spec.SUTConfig) { err = f(c) }); cerr != nil {
		return cerr
	}
	return err
}

func atoi(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, harnessErr("%q is not a number", s)
	}
	return n, nil
}
