package harness

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

type jsonRaw string

// MarshalJSON writes the raw JSON text as is.
func (j jsonRaw) MarshalJSON() ([]byte, error) {
	if !json.Valid([]byte(j)) {
		return nil, fmt.Errorf("not JSON: %s", string(j))
	}
	return []byte(j), nil
}

// streamOf returns who's open event stream of the current conversation, opening it if needed.
func (s *scenario) streamOf(who, name string) (*stream, error) {
	key := who + "/" + name
	s.mu.Lock()
	st := s.named[key]
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	c, err := s.conv("")
	if err != nil {
		return nil, err
	}
	st, err = s.cl.openStream(s.ctx, who, "/conversations/"+url.PathEscape(c.id)+"/events", nil)
	if err != nil {
		return nil, err
	}
	if st.status != http.StatusOK {
		return nil, fail(st.op, fmt.Sprintf("%d %s", st.status, clip(string(st.body), 200)), "200 and an event stream")
	}
	s.mu.Lock()
	s.named[key] = st
	s.mu.Unlock()
	return st, nil
}

// liveText is the text of the live events seen so far: the last partial plus the deltas after it.
func liveText(evs []sseEvent) string {
	var b strings.Builder
	for _, e := range evs {
		var d struct {
			Text string `json:"text"`
		}
		switch e.Event {
		case "partial":
			_ = json.Unmarshal([]byte(e.Data), &d)
			b.Reset()
			b.WriteString(d.Text)
		case "delta":
			_ = json.Unmarshal([]byte(e.Data), &d)
			b.WriteString(d.Text)
		case "reset":
			b.Reset()
		}
	}
	return b.String()
}
