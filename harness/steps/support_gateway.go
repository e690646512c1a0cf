package steps

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// bodyBytes turns a body written in a feature into the bytes sent: the text as it stands, except
// that \xHH is the byte HH (so a feature can write bytes that are not UTF-8). A JSON escape such
// as \ud800 is left as it is, for the system to read.
func bodyBytes(s string) ([]byte, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			b, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				return nil, harnessErr("bad \\x escape in body %q", s)
			}
			out = append(out, byte(b))
			i += 3
			continue
		}
		out = append(out, s[i])
	}
	return out, nil
}

// hold reads what the current conversation holds as who.
func (s *scenario) hold(who string) (holding, error) {
	c, err := s.conv("")
	if err != nil {
		return holding{}, err
	}
	p := "/conversations/" + url.PathEscape(c.id)
	var h holding
	var pages bytes.Buffer
	cursor := ""
	for range 1000 {
		q := "?limit=500"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r, err := s.cl.Do(s.ctx, who, http.MethodGet, p+"/history"+q, nil, reqOpts{})
		if err != nil {
			return holding{}, err
		}
		if r.Status != http.StatusOK {
			return holding{}, fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200 and a page")
		}
		var pg page
		if err := r.JSON(&pg); err != nil {
			return holding{}, err
		}
		for _, e := range pg.Entries {
			pages.Write(e)
			pages.WriteByte('\n')
		}
		if pg.Done || (pg.NextCursor == cursor && len(pg.Entries) == 0) {
			break
		}
		cursor = pg.NextCursor
	}
	h.history = pages.String()
	for _, read := range []struct {
		path string
		into *string
	}{{p, &h.status}, {p + "/participants", &h.participants}} {
		r, err := s.cl.Do(s.ctx, who, http.MethodGet, read.path, nil, reqOpts{})
		if err != nil {
			return holding{}, err
		}
		if r.Status != http.StatusOK {
			return holding{}, fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200")
		}
		*read.into = string(r.Body)
	}
	return h, nil
}
