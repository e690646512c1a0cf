package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

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
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/conversations/"+url.PathEscape(c.id)+"/turns",
		map[string]any{"text": unescape(text), "editOf": v}, reqOpts{OffSpec: true})
	s.last = r
	return err
}

// lastUserMessageQuotesTurn expects the last user message of request N to quote N characters of turn N and say the text.
func (s *modelSteps) lastUserMessageQuotesTurn(i, n int, t int64, says string) error {
	quote, err := s.expandMessage(fmt.Sprintf("{turn %d}", t))
	if err != nil {
		return err
	}
	if r := []rune(quote); len(r) > n {
		quote = string(r[:n])
	}
	want := editPrompt(quote, unescape(says))
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	last := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			last = m.Content
		}
	}
	if last != want {
		detail := firstDifference(last, want)
		if got, ok := quotedLength(last); ok {
			if n := lengthNote("quoted", got, utf8.RuneCountInString(quote)); n != "" {
				detail = n + "; " + detail
			}
		}
		return &Failure{Op: fmt.Sprintf("the last user message of request %d to the model", i), Got: fmt.Sprintf("%q", clip(last, 700)),
			Want: fmt.Sprintf("%q (spec/prompt.md: the quote is at most 500 characters)", clip(want, 700)), Detail: detail}
	}
	return nil
}

// editPrompt is the user message spec/prompt.md section 1 says the model is sent for an edit: one
// data line quoting the quote (already cut to its first 500 code points) as a JSON string that
// escapes only what JSON requires and U+2028, U+2029, then the text.
func editPrompt(quote, text string) string {
	var q strings.Builder
	enc := json.NewEncoder(&q)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(quote)
	return "[This message edits the user's earlier message " + strings.TrimSuffix(q.String(), "\n") + ".]\n" + text
}

// conversationEditsVocabulary lists the steps of features/conversation/edits.feature.
func conversationEditsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the last user message of request (\d+) to the model quotes (\d+) characters of turn (\d+) and says "((?:[^"\\]|\\.)*)"$`, a.model.lastUserMessageQuotesTurn, "expects the last user message of request N to quote N characters of turn N and say the text"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" as an edit of record (\d+)$`, a.edits.sendsEditOfRecord, "sends the text as who as an edit of record N of the history"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" with editOf (.+)$`, a.edits.sendsWithEditOf, "sends the text as who with the given raw editOf value"},
	}
}
