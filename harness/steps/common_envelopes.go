package steps

// capturesEnvelope reads turn N's envelope from the conversation's log as who and keeps it.
func (s *envelopesSteps) capturesEnvelope(who string, turn int64) error {
	text, err := s.userText(turn)
	if err != nil {
		return err
	}
	s.captured, err = s.captureEnvelope(who, text)
	return err
}

// putsCapturedAgain puts the captured envelope into the inbox again as who.
func (s *envelopesSteps) putsCapturedAgain(who string) error {
	if s.captured == nil {
		return harnessErr("no envelope has been captured")
	}
	return s.mustPut(who, s.captured)
}

// keyRotated rotates the signing key, keeping the old one as previous, and restarts the system.
func (s *envelopesSteps) keyRotated() error {
	return s.rotateKey(true)
}

// commonEnvelopesVocabulary lists the envelope steps that several features share: capturing an
// envelope to send it again, and rotating the signing key.
func commonEnvelopesVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) captures the envelope of turn (\d+) from the log$`, a.envelopes.capturesEnvelope, "reads turn N's envelope from the conversation's log as who and keeps it"},
		{`^(\w[\w' ]*?) puts the captured envelope into the conversation's inbox again$`, a.envelopes.putsCapturedAgain, "puts the captured envelope into the inbox again as who"},
		{`^the signing key is rotated, keeping the old one as a previous key, and the system restarted$`, a.envelopes.keyRotated, "rotates the signing key, keeping the old one as previous, and restarts the system"},
	}
}
