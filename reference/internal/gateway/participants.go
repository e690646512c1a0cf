package gateway

import (
	"net/http"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

func (g *Gateway) participants(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	ps, err := g.cv.Participants(r.Context(), who, r.PathValue("id"))
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ps)
}

type participantsBody struct {
	Op       string            `json:"op"`
	Identity loomtype.Identity `json:"identity"`
}

func (g *Gateway) changeParticipants(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	var b participantsBody
	id, ok := g.admitPost(w, r, who, &b, false)
	if !ok {
		return
	}
	ps, err := g.cv.ChangeParticipants(r.Context(), who, id, b.Op, b.Identity)
	if err != nil {
		g.fail(w, err)
		return
	}
	if g.cfg.Sessions != nil && (b.Op == "add" || b.Op == "remove") {
		// The session stream says so too (a failure here leaves the change made: the
		// participant list is the record, the frame is its view).
		if err := g.cfg.Sessions.Participant(r.Context(), who, id, b.Identity, b.Op == "add"); err != nil {
			g.log.Warn("gateway: participant frame not logged", "conversation", id, "err", err)
		}
	}
	writeJSON(w, http.StatusOK, ps)
}
