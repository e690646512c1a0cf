package gateway

import (
	"net/http"
	"strconv"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

func (g *Gateway) history(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	id := r.PathValue("id")
	if err := g.cv.Authorize(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return
	}
	q := r.URL.Query()
	opt := conversation.HistoryOptions{Cursor: q.Get("cursor"), Direction: q.Get("direction")}
	if opt.Direction != "" && opt.Direction != conversation.Forward && opt.Direction != conversation.Backward {
		writeError(w, http.StatusBadRequest, "bad request", "direction")
		return
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			writeError(w, http.StatusBadRequest, "bad request", "limit")
			return
		}
		opt.Limit = n
	}
	page, err := g.cv.History(r.Context(), who, id, opt)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away
		}
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}
