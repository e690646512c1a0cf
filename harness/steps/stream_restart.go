package steps

import "github.com/loomcheck/loomcheck/harness/world"

// summarizerWaits scripts the summarizer's next answer to wait (until the world closes, or the
// call goes away); a call after it gets the next scripted answer, or the default one.
func (s *budgetSteps) summarizerWaits() error {
	return s.enqueue(1, world.Summary{Hold: s.world.NewHold()})
}

// streamRestartVocabulary lists the steps of features/stream/restart.feature.
func streamRestartVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the summarizer holds its next answer$`, a.budget.summarizerWaits, "scripts the summarizer's next answer to wait and never come (a later call gets the next answer)"},
	}
}
