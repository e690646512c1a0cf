package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

type startBody struct {
	ID           *string             `json:"id,omitempty"`
	Mode         *string             `json:"mode,omitempty"`
	Participants []loomtype.Identity `json:"participants,omitempty"`
}

func (g *Gateway) start(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if !g.limitPost(w, r, who) {
		return
	}
	var b startBody
	if !g.readBody(w, r, &b, true) {
		return
	}
	// An empty id or mode is not an absent one: the contract gives both a non-empty form.
	if b.ID != nil && *b.ID == "" {
		writeError(w, http.StatusBadRequest, "invalid id", "")
		return
	}
	if b.Mode != nil && *b.Mode == "" {
		writeError(w, http.StatusBadRequest, "bad request", "mode")
		return
	}
	st, created, err := g.cv.Start(r.Context(), who, conversation.StartOptions{ID: deref(b.ID), Mode: loomtype.Mode(deref(b.Mode)), Participants: b.Participants})
	if err != nil {
		g.fail(w, err)
		return
	}
	writeStarted(w, created, "/conversations/"+st.ID, st)
}

// writeStarted answers a start by a chosen id: 201 with the new resource, or 200 with the one
// that already existed under that id, and its location either way.
func writeStarted(w http.ResponseWriter, created bool, location string, v any) {
	code := http.StatusCreated
	if !created {
		code = http.StatusOK
	}
	w.Header().Set("Location", location)
	writeJSON(w, code, v)
}

func (g *Gateway) status(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	st, err := g.cv.Status(r.Context(), who, r.PathValue("id"))
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// admitPost runs the checks of a POST on a conversation in their fixed order: authorization (the
// one 404), then the rate limit, then the body. It answers the request itself when one fails.
func (g *Gateway) admitPost(w http.ResponseWriter, r *http.Request, who loomtype.Identity, body any, allowEmpty bool) (string, bool) {
	id := r.PathValue("id")
	if err := g.cv.Authorize(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return "", false
	}
	if !g.limitPost(w, r, who) {
		return "", false
	}
	if !g.readBody(w, r, body, allowEmpty) {
		return "", false
	}
	return id, true
}

type turnBody struct {
	Text      *string         `json:"text"`
	MessageID *string         `json:"messageId,omitempty"`
	EditOf    json.RawMessage `json:"editOf,omitempty"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// emptyMessageID answers 400 for a messageId that is present but empty (absent, the server
// makes one; empty, it is outside the contract's 1 to 128 characters).
func emptyMessageID(w http.ResponseWriter, id *string) bool {
	if id != nil && *id == "" {
		writeError(w, http.StatusBadRequest, "bad request", "messageId")
		return true
	}
	return false
}

func (g *Gateway) turns(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	var b turnBody
	id, ok := g.admitPost(w, r, who, &b, false)
	if !ok {
		return
	}
	if b.Text == nil {
		writeError(w, http.StatusBadRequest, "bad request", "text")
		return
	}
	if emptyMessageID(w, b.MessageID) {
		return
	}
	var editOf int64
	if len(b.EditOf) > 0 {
		n, err := strconv.ParseInt(string(b.EditOf), 10, 64)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "bad request", "editOf")
			return
		}
		editOf = n
	}
	res, err := g.cv.SendTurn(r.Context(), who, id, *b.Text, conversation.SendOptions{MessageID: deref(b.MessageID), EditOf: editOf})
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

// closeBody is the contract's close body: an empty object (the server makes the messageId).
type closeBody struct{}

func (g *Gateway) close(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	var b closeBody
	id, ok := g.admitPost(w, r, who, &b, true)
	if !ok {
		return
	}
	res, err := g.cv.Close(r.Context(), who, id, "")
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}
