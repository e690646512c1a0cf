package steps

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/loomcheck/loomcheck/harness/sutclient"
)

// The kit's client of the session stream (spec/stream.md, spec/http.md "The session stream"):
// an open (POST .../stream/open) that returns a ticket, a connection that serves frames
// (sutclient.Client.DialSession, WebSocket or SSE), and a follower that reads them through
// resume.Reader across reconnects (sessionfollower.go).

// The session stream's pieces, by the names the steps use.
type (
	sframe     = sutclient.Frame
	conn       = sutclient.Conn
	dialOpts   = sutclient.DialOpts
	refusedErr = sutclient.RefusedError
)

// The transports a session stream is served on.
const (
	overWebSocket = sutclient.OverWebSocket
	overSSE       = sutclient.OverSSE
)

// openAnswer is the answer to POST /sessions/{id}/stream/open.
type openAnswer struct {
	Ticket    string `json:"ticket"`
	ExpiresIn int64  `json:"expiresIn"`
	Session   string `json:"session"`
	From      int64  `json:"from"`
	Head      int64  `json:"head"`
	Floor     int64  `json:"floor"`
}

func streamOpenPath(id string) string { return "/sessions/" + url.PathEscape(id) + "/stream/open" }
func streamPath(id string) string     { return sutclient.SessionStreamPath(id) }

// openSession asks for a ticket for who to read session id after from, on device (none when
// empty). It returns the answer as it came (any status) and, for a 200, the decoded answer.
func (s *scenario) openSession(ctx context.Context, who, id string, from int64, device string) (*response, *openAnswer, error) {
	body := map[string]any{"from": from}
	if device != "" {
		body["device"] = device
	}
	r, err := s.cl.Do(ctx, who, http.MethodPost, streamOpenPath(id), body, reqOpts{})
	if err != nil || r.Status != http.StatusOK {
		return r, nil, err
	}
	var a openAnswer
	if err := r.JSON(&a); err != nil {
		return r, nil, err
	}
	if a.Ticket == "" || a.Session != id || a.From != from || a.ExpiresIn <= 0 || a.ExpiresIn > 15 || a.Floor < 1 || a.Head < a.Floor-1 {
		return r, nil, fail(r.Op, clip(string(r.Body), 300), "200 {ticket, expiresIn (at most 15), session, from, head, floor} with floor >= 1 and head >= floor-1")
	}
	return r, &a, nil
}

// dialSession connects who to session id's stream (sutclient.Client.DialSession).
func (s *scenario) dialSession(ctx context.Context, who, id string, o dialOpts) (conn, error) {
	return s.cl.DialSession(ctx, who, id, o)
}

// frameRow is one frame as a feature's table shows it.
func frameRow(f sframe) []string {
	d := f.Payload()
	span := ""
	if f.Span > 0 {
		span = strconv.Itoa(f.Span)
	}
	text := ""
	switch f.Kind() {
	case "text-delta", "user-message", "text-done":
		if d.Parts != nil {
			q := make([]string, len(d.Parts))
			for i, p := range d.Parts {
				q[i] = strconv.Quote(p)
			}
			text = strings.Join(q, " + ")
		} else if d.Text != nil {
			text = strconv.Quote(*d.Text)
		}
		if f.Kind() == "user-message" && d.State != "" && d.State != "sent" {
			text = strings.TrimSpace(d.State + " " + text)
		}
	case "status":
		text = d.State
	case "reset":
		if d.Floor != nil && d.Head != nil {
			text = fmt.Sprintf("floor %d, head %d", *d.Floor, *d.Head)
		}
	case "hidden":
		if d.Parts != nil {
			text = fmt.Sprintf("%d empty parts", len(d.Parts))
		} else if !bytes.Equal(bytes.TrimSpace(f.Data), []byte("{}")) && len(f.Data) > 0 {
			text = "data " + string(f.Data)
		}
	}
	cur := strconv.FormatInt(f.Cur, 10)
	return []string{cur, span, f.Kind(), f.Message, text}
}

func describeFrames(fs []sframe) string {
	if len(fs) == 0 {
		return "no frame"
	}
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.Join(frameRow(f), " "))
	}
	return clip(b.String(), 1500)
}
