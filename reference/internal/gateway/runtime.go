package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

type rawStartBody struct {
	ID    string          `json:"id"`
	Flow  string          `json:"flow"`
	Input json.RawMessage `json:"input"`
}

func (g *Gateway) rawStart(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if !g.limitPost(w, r, who) {
		return
	}
	var b rawStartBody
	if !g.readBody(w, r, &b, false) {
		return
	}
	if b.ID == "" || b.Flow == "" || len(b.Input) == 0 {
		writeError(w, http.StatusBadRequest, "bad request", "id, flow and input are required")
		return
	}
	if err := g.cv.StartRaw(r.Context(), who, b.ID, b.Flow, b.Input); err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": b.ID})
}

type rawSendBody struct {
	MessageID string          `json:"messageId"`
	Payload   json.RawMessage `json:"payload"`
}

func (g *Gateway) rawSend(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	id := r.PathValue("id")
	if _, err := g.cv.AuthorizeRuntime(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return
	}
	if !g.limitPost(w, r, who) {
		return
	}
	var b rawSendBody
	if !g.readBody(w, r, &b, false) {
		return
	}
	if len(b.Payload) == 0 || b.Payload[0] != '{' { // the contract's payload is an object
		writeError(w, http.StatusBadRequest, "bad request", "payload")
		return
	}
	ok, err := g.cv.SendRaw(r.Context(), who, id, b.MessageID, b.Payload)
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"delivered": ok})
}

func (g *Gateway) rawLog(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	q := r.URL.Query()
	var after loomtype.Cursor
	id := r.PathValue("id")
	if _, err := g.cv.AuthorizeRuntime(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return
	}
	if c := q.Get("cursor"); c != "" {
		var err error
		if after, err = loomtype.ParseCursor(c); err != nil {
			g.fail(w, err)
			return
		}
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "bad request", "limit")
			return
		}
		limit = n
	}
	evs, next, done, err := g.cv.RawLog(r.Context(), who, id, after, limit)
	if err != nil {
		g.fail(w, err)
		return
	}
	if evs == nil {
		evs = []conversation.RawEvent{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs, "nextCursor": next.String(), "done": done})
}
