package steps

import (
	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// toolsAndClasses declares the tools of the table with their data classes.
func (s *sharedSteps) toolsAndClasses(t *godog.Table) error {
	return s.configure(func(c *sutconfig.SUTConfig) {
		for _, row := range t.Rows[1:] {
			c.Tools.Definitions = append(c.Tools.Definitions, sutconfig.ToolDef{Name: row.Cells[0].Value,
				Description: "the " + row.Cells[0].Value + " tool", Parameters: map[string]any{"type": "object"}, Class: row.Cells[1].Value})
		}
	})
}

// sharedEditClassesVocabulary lists the steps of features/shared/edit_classes.feature.
func sharedEditClassesVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the tools and their classes are:$`, a.shared.toolsAndClasses, "declares the tools of the table with their data classes"},
	}
}
