package steps

import (
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// refusesToStart expects the system to refuse to start with its configuration.
func (s *setupSteps) refusesToStart() error {
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
	if err := s.ownDatabase(&ctl); err != nil {
		return err
	}
	d := s.newDriver(dir)
	if err := d.Start(s.ctx, ctl); err != nil {
		return fail("starting the same configuration with no tool needing approval", err.Error()+logsOf(d),
			"a system that starts: the refusal must be about the approval alone")
	}
	_ = d.Stop()
	return nil
}

// bargeIn turns barge-in on or off in the configuration.
func (s *setupSteps) bargeIn(v string) error {
	on := v == "on"
	return s.configure(func(c *sutconfig.SUTConfig) { c.Conversation.BargeIn = &on })
}

// rotatesEvery configures the conversation to rotate its generation every N turns.
func (s *setupSteps) rotatesEvery(n int) error {
	return s.configure(func(c *sutconfig.SUTConfig) { c.Conversation.RotateEveryTurns = n })
}

// settingsAre sets every configuration setting of the table.
func (s *setupSteps) settingsAre(t *godog.Table) error {
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
}

// setSetting sets one field of the configuration document by its JSON path ("conversation.maxScan")
// to a JSON value.
func (s *scenario) setSetting(path, value string) error {
	// Decided before the system starts: a setting the driver cannot honour makes the scenario
	// not applicable, whatever it goes on to check.
	if l, ok := s.drv.(settingLimits); ok {
		if err := l.unhonoured(path); err != nil {
			return err
		}
	}
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		v = strings.Trim(value, `"`)
	}
	return s.configureErr(func(c *sutconfig.SUTConfig) error {
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
		var out sutconfig.SUTConfig
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out); err != nil {
			return harnessErr("setting %s = %s does not fit the configuration document: %v", path, value, err)
		}
		*c = out
		return nil
	})
}

func (s *scenario) configureErr(f func(*sutconfig.SUTConfig) error) error {
	var err error
	if cerr := s.configure(func(c *sutconfig.SUTConfig) { err = f(c) }); cerr != nil {
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

// commonSetupVocabulary lists the steps that several features share (setup).
func commonSetupVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the system refuses to start$`, a.setup.refusesToStart, "expects the system to refuse to start with its configuration"},
		{`^barge-in is (on|off)$`, a.setup.bargeIn, "turns barge-in on or off in the configuration"},
		{`^the conversation rotates every (\d+) turns?$`, a.setup.rotatesEvery, "configures the conversation to rotate its generation every N turns"},
		{`^the setting "([^"]+)" is (.+)$`, a.setup.setSetting, "sets one configuration setting, named by its JSON path (spec/sutconfig/sutconfig.go), to a JSON value"},
		{`^the settings are:$`, a.setup.settingsAre, "sets every configuration setting of the table"},
	}
}
