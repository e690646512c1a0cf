package harness

import (
	"encoding/json"
	"net/http"
	"net/url"
)

// steps is the edits vocabulary: each pattern, the method that runs it, what it means.
func (s *editsSteps) steps() []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" as an edit of record (\d+)$`, s.sendsEditOfRecord, "sends the text as who as an edit of record N of the history"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" with editOf (.+)$`, s.sendsWithEditOf, "sends the text as who with the given raw editOf value"},
	}
}

// sendsEditOfRecord sends the text as who as an edit of record N of the history.
func (s *editsSteps) sendsEditOfRecord(who, text string, ord int) error {
	return s.mustSend(who, unescape(text), s.nextMessageID(), map[string]any{"editOf": ord})
}

// sendsWithEditOf sends the text as who with the given raw editOf value.
func (s *editsSteps) sendsWithEditOf(who, text, raw string) error {
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return harnessErr("editOf %s is not JSON", raw)
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	r, err := s.cl.do(s.ctx, who, http.MethodPost, "/conversations/"+url.PathEscape(c.id)+"/turns",
		map[string]any{"text": unescape(text), "editOf": v}, reqOpts{offSpec: true})
	s.last = r
	return err
}
