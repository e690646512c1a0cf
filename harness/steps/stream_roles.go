package steps

// withheldText is the text of the block that replaces, for the turn's asker, a tool result holding
// what the asker may not read (spec/http.md, Steering).
const withheldText = "withheld: the asker may not read this result"

// gotWithheld expects the call's block to be the text block that says the result was withheld
// from its asker.
func (s *groupSteps) gotWithheld(who, transport, call string) error {
	want, ok := groupJSON([]byte(`{"kind": "text", "text": "` + withheldText + `"}`))
	if !ok {
		return harnessErr("the withheld block is not JSON")
	}
	got, op, err := s.blockOf(who, transport, call)
	if err != nil {
		return err
	}
	if got != want {
		return fail(op, got, want)
	}
	return nil
}

// streamRolesVocabulary lists the steps of features/stream/roles.feature.
func streamRolesVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^` + readerPat + ` got for call "([^"]*)" the block withheld from its asker$`, a.group.gotWithheld, "waits for the tool-finished frame of the call and expects its block to be the text block saying the result was withheld from its asker"},
	}
}
