package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"testing"

	gherkin "github.com/cucumber/gherkin/go/v42"
	messages "github.com/cucumber/messages/go/v34"

	"github.com/loomcheck/loomcheck/features"
	"github.com/loomcheck/loomcheck/schemas"
)

// featurePickles reads every scenario of the *.feature files of fsys as godog runs it (an
// outline once per example row, the background's steps first), each step with its table.
func featurePickles(t *testing.T, fsys fs.FS) [][]pickledStep {
	t.Helper()
	names, err := features.Files(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]pickledStep
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		ids := (&messages.Incrementing{}).NewId
		doc, err := gherkin.ParseGherkinDocument(bytes.NewReader(b), ids)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lines := stepLines(doc)
		for _, p := range gherkin.Pickles(*doc, name, ids) {
			var steps []pickledStep
			for _, st := range p.Steps {
				ps := pickledStep{where: name, text: st.Text}
				if len(st.AstNodeIds) > 0 {
					ps.where = fmt.Sprintf("%s:%d", name, lines[st.AstNodeIds[0]])
				}
				if st.Argument != nil && st.Argument.DataTable != nil {
					for _, row := range st.Argument.DataTable.Rows {
						var cells []string
						for _, c := range row.Cells {
							cells = append(cells, c.Value)
						}
						ps.table = append(ps.table, cells)
					}
				}
				steps = append(steps, ps)
			}
			out = append(out, steps)
		}
	}
	return out
}

// withoutDefault is the configuration schema with the default of the setting at path removed.
func withoutDefault(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := schemas.Raw("sut-config")
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		t.Fatal(err)
	}
	node := root
	for _, seg := range strings.Split(path, ".") {
		if items, ok := node["items"].(map[string]any); ok && node["properties"] == nil {
			node = items
		}
		node = node["properties"].(map[string]any)[seg].(map[string]any)
	}
	if _, ok := node["default"]; !ok {
		t.Fatalf("the schema writes no default for %s to remove", path)
	}
	delete(node, "default")
	b, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFeaturesRelyOnlyOnWrittenDefaults: no scenario's expected values follow from a setting it
// leaves unset unless the configuration schema writes that setting's default.
func TestFeaturesRelyOnlyOnWrittenDefaults(t *testing.T) {
	raw, err := schemas.Raw("sut-config")
	if err != nil {
		t.Fatal(err)
	}
	scens := featurePickles(t, features.FS)
	if len(scens) < 500 {
		t.Fatalf("read %d scenarios from features/; the parser found too few", len(scens))
	}
	for _, p := range defaultProblems(raw, scens) {
		t.Error(p)
	}
}

// TestDefaultProblemsFindsAMissingDefault: with a default removed from the schema, the check
// names the scenarios that relied on it, and only those that left the setting unset.
func TestDefaultProblemsFindsAMissingDefault(t *testing.T) {
	schema := withoutDefault(t, "conversation.maxScan")
	scens := [][]pickledStep{
		{{where: "a.feature:3", text: "alice has started a conversation"}, {where: "a.feature:4", text: "alice reads the history with no limit"}},
		{{where: "b.feature:3", text: `the setting "conversation.maxScan" is 5`}, {where: "b.feature:4", text: "alice reads the history with no limit"}},
		{{where: "c.feature:3", table: [][]string{{"setting", "value"}, {"conversation.maxScan", "5"}}, text: "the settings are:"}, {where: "c.feature:5", text: "alice reads the history forward 2 at a time"}},
		{{where: "d.feature:3", text: "alice reads the history forward 2 at a time"}, {where: "d.feature:4", text: `the setting "conversation.maxScan" is 5`}},
	}
	got := defaultProblems(schema, scens)
	want := []string{
		`a.feature:4: "alice reads the history with no limit" depends on conversation.maxScan, which the scenario does not set and schemas/sut-config.schema.json gives no default`,
		`d.feature:3: "alice reads the history forward 2 at a time" depends on conversation.maxScan, which the scenario does not set and schemas/sut-config.schema.json gives no default`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// On the features themselves: the scenarios that count on the default maxInvalidRecords are
	// found once the schema no longer writes it.
	got = defaultProblems(withoutDefault(t, "conversation.maxInvalidRecords"), featurePickles(t, features.FS))
	if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), "transcript.feature") {
		t.Errorf("with maxInvalidRecords' default removed the check found %d problems, none in transcript.feature:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, p := range got {
		if !strings.Contains(p, "conversation.maxInvalidRecords") {
			t.Errorf("a problem that is not about the removed default: %s", p)
		}
	}
}

// TestSettingRelianceNamesTheVocabulary: every step the reliance table names is a step of the
// vocabulary, and every setting it names has a default the schema writes.
func TestSettingRelianceNamesTheVocabulary(t *testing.T) {
	known := map[string]bool{}
	for _, st := range Vocabulary() {
		known[st.Pattern] = true
	}
	for p, paths := range settingReliance {
		if !known[p] {
			t.Errorf("settingReliance names %s, which no step registers", p)
		}
		for _, path := range paths {
			if _, ok := SettingDefault(path); !ok {
				t.Errorf("step %s depends on %s, which has no default in the schema", p, path)
			}
		}
	}
}

// noDefault lists the settings of the configuration schema that have no default, each with why.
var noDefault = map[string]string{
	"conversation.budget.contextWindow":    "required whenever budget is given",
	"conversation.budget.maxSummaryTokens": "its default is a quarter of contextWindow, written in its description",
}

// TestEveryLimitWritesItsDefault: every integer or boolean setting of the configuration schema
// writes its default beside it, except those noDefault explains.
func TestEveryLimitWritesItsDefault(t *testing.T) {
	raw, err := schemas.Raw("sut-config")
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		t.Fatal(err)
	}
	var missing []string
	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		if items, ok := node["items"].(map[string]any); ok {
			walk(path, items)
		}
		props, _ := node["properties"].(map[string]any)
		for name, v := range props {
			p := strings.TrimPrefix(path+"."+name, ".")
			child, _ := v.(map[string]any)
			walk(p, child)
			ref, _ := child["$ref"].(string)
			typ, _ := child["type"].(string)
			if ref != "#/$defs/count" && typ != "integer" && typ != "boolean" {
				continue
			}
			if _, ok := child["default"]; !ok && noDefault[p] == "" {
				missing = append(missing, p)
			}
		}
	}
	walk("", root)
	sort.Strings(missing)
	for _, p := range missing {
		t.Errorf("%s has no default written beside it", p)
	}
}
