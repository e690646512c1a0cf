package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// maxPeerBody bounds a peer text's body: 16384 bytes of text, escaped, and the other members.
const maxPeerBody = 256 << 10

// threadRoutes registers the routes of spec/peer.md (profile threads).
func (g *Gateway) threadRoutes() {
	g.mux.HandleFunc("POST /peer/v1/texts", g.peerText)
	g.mux.HandleFunc("POST /roles/{role}/conversation", g.authed(g.openRoleConversation))
	g.mux.HandleFunc("GET /roles/{role}/conversation", g.authed(g.readRoleConversation))
	g.mux.HandleFunc("DELETE /roles/{role}/conversation", g.authed(g.deleteRoleConversation))
	g.mux.HandleFunc("POST /roles/{role}/conversation/messages", g.authed(g.converse))
	g.mux.HandleFunc("POST /roles/{role}/send", g.authed(g.roleSend))
	g.mux.HandleFunc("GET /roles/{role}/agent-history", g.authed(g.agentHistory))
	g.mux.HandleFunc("POST /tasks", g.authed(g.createTask))
	g.mux.HandleFunc("GET /tasks/{id}", g.authed(g.readTask))
	g.mux.HandleFunc("POST /tasks/{id}/members", g.authed(g.taskMembers))
	g.mux.HandleFunc("POST /tasks/{id}/finish", g.authed(g.finishTask))
	g.mux.HandleFunc("DELETE /tasks/{id}", g.authed(g.deleteTask))
	g.mux.HandleFunc("POST /tasks/{id}/runs", g.authed(g.startTaskRun))
	g.mux.HandleFunc("GET /threads/runs/{id}", g.authed(g.readTaskRun))
	g.mux.HandleFunc("GET /agent-conversations", g.authed(g.findAgentConversation))
	g.mux.HandleFunc("GET /agent-conversations/{id}", g.authed(g.readAgentConversation))
	g.mux.HandleFunc("POST /agent-conversations/{id}/stop", g.authed(g.stopAgentConversation))
	g.mux.HandleFunc("GET /connections/{id}", g.authed(g.readConnection))
	g.mux.HandleFunc("POST /connections/{id}/pause", g.authed(g.connectionOp((*threads.Service).Pause)))
	g.mux.HandleFunc("POST /connections/{id}/unpause", g.authed(g.connectionOp((*threads.Service).Unpause)))
	g.mux.HandleFunc("POST /connections/{id}/revoke", g.authed(g.connectionOp((*threads.Service).Revoke)))
}

// writeReason answers a refusal of spec/peer.md: {"reason"} and, for a bad request, its member.
func writeReason(w http.ResponseWriter, status int, reason, detail string) {
	body := map[string]string{"reason": reason}
	if detail != "" {
		body["detail"] = detail
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, body)
}

// threadsFail maps an error of the threads service to its answer.
func (g *Gateway) threadsFail(w http.ResponseWriter, err error) {
	var rej *threads.Rejection
	switch {
	case errors.As(err, &rej):
		writeReason(w, rej.Status, rej.Reason, rej.Detail)
	case errors.Is(err, threads.ErrNoTopic):
		writeReason(w, http.StatusConflict, "no-topic", "")
	case errors.Is(err, threads.ErrRevoked):
		writeReason(w, http.StatusConflict, "revoked", "")
	case errors.Is(err, threads.ErrBusy):
		writeReason(w, http.StatusTooManyRequests, "busy", "")
	case errors.Is(err, threads.ErrNotOwner):
		writeError(w, http.StatusForbidden, "forbidden", "")
	default:
		g.fail(w, err)
	}
}

// peerText is the peer's door: it authenticates by the connection's accept token, not by the
// identity principals.
func (g *Gateway) peerText(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPeerBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeReason(w, http.StatusBadRequest, threads.ReasonBadRequest, "body")
			return
		}
		g.internal(w, err)
		return
	}
	token, _ := cutBearer(r.Header.Get("Authorization"))
	ack, err := g.cfg.Threads.Receive(r.Context(), token, body)
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ack)
}

// clientKey reads the Idempotency-Key header of a creating route (spec/peer.md, Roots): "" when
// there is none; false, with 400 naming it answered, when it is not one value of 1 to 128
// printable ASCII characters.
func clientKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	vs, present := r.Header["Idempotency-Key"]
	if !present {
		return "", true
	}
	if len(vs) != 1 || !threads.ValidKey(vs[0]) {
		writeError(w, http.StatusBadRequest, "bad request", "Idempotency-Key")
		return "", false
	}
	return vs[0], true
}

// cutBearer returns the token of a "Bearer" Authorization value (the scheme in any case).
func cutBearer(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	return strings.TrimSpace(h[len(scheme):]), true
}

func (g *Gateway) openRoleConversation(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if !g.cfg.Threads.UsesRole(who, r.PathValue("role")) {
		writeNotFound(w)
		return
	}
	if !g.limitPost(w, r, who) || !g.readBody(w, r, &struct{}{}, true) {
		return
	}
	v, err := g.cfg.Threads.OpenConversation(r.Context(), who, r.PathValue("role"))
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (g *Gateway) readRoleConversation(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	v, err := g.cfg.Threads.Conversation(r.Context(), who, r.PathValue("role"))
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (g *Gateway) deleteRoleConversation(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if err := g.cfg.Threads.DeleteConversation(r.Context(), who, r.PathValue("role")); err != nil {
		g.threadsFail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type converseBody struct {
	Text string `json:"text"`
}

func (g *Gateway) converse(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	role := r.PathValue("role")
	if !g.cfg.Threads.UsesRole(who, role) {
		writeNotFound(w)
		return
	}
	var b converseBody
	if !g.limitPost(w, r, who) || !g.readBody(w, r, &b, false) {
		return
	}
	key, ok := clientKey(w, r)
	if !ok {
		return
	}
	id, turn, err := g.cfg.Threads.ConverseOnce(r.Context(), who, role, b.Text, key)
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"conversation": id, "turn": turn})
}

type roleSendBody struct {
	To   string  `json:"to"`
	Text string  `json:"text"`
	Run  *string `json:"run,omitempty"`
}

// roleSend is a role's own door: with its role token and a running run of the role it sends as
// peer.send would (202); without one it is refused (409 no-topic). A send refused for what it
// names answers {"reason"} with the answer peer.send would give: 400 bad-request, 409
// connection or paused, 429 queue-full.
func (g *Gateway) roleSend(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if _, err := g.cfg.Threads.RoleSend(r.Context(), who, r.PathValue("role"), "", "", ""); errors.Is(err, threads.ErrNotFound) {
		writeNotFound(w)
		return
	}
	var b roleSendBody
	if !g.limitPost(w, r, who) || !g.readBody(w, r, &b, false) {
		return
	}
	run := ""
	if b.Run != nil {
		run = *b.Run
	}
	v, err := g.cfg.Threads.RoleSend(r.Context(), who, r.PathValue("role"), b.To, b.Text, run)
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	if e, ok := v.(threads.SendError); ok {
		status := http.StatusConflict
		switch e.Error {
		case threads.SendBadRequest:
			status = http.StatusBadRequest
		case threads.SendQueueFull:
			status = http.StatusTooManyRequests
		}
		writeReason(w, status, e.Error, "")
		return
	}
	writeJSON(w, http.StatusAccepted, v)
}

type taskBody struct {
	Title   string              `json:"title"`
	Members []loomtype.Identity `json:"members,omitempty"`
	Parent  *string             `json:"parent,omitempty"`
}

func (g *Gateway) createTask(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if !g.cfg.Threads.Person(who) {
		writeNotFound(w)
		return
	}
	var b taskBody
	if !g.limitPost(w, r, who) || !g.readBody(w, r, &b, false) {
		return
	}
	key, ok := clientKey(w, r)
	if !ok {
		return
	}
	parent := ""
	if b.Parent != nil {
		parent = *b.Parent
	}
	v, err := g.cfg.Threads.CreateTaskOnce(r.Context(), who, b.Title, b.Members, parent, key)
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	w.Header().Set("Location", "/tasks/"+v.ID)
	writeJSON(w, http.StatusCreated, v)
}

func (g *Gateway) readTask(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	v, err := g.cfg.Threads.Task(r.Context(), who, r.PathValue("id"))
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

type membersBody struct {
	Add    []loomtype.Identity `json:"add,omitempty"`
	Remove []loomtype.Identity `json:"remove,omitempty"`
}

func (g *Gateway) taskMembers(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if _, err := g.cfg.Threads.Task(r.Context(), who, r.PathValue("id")); err != nil {
		g.threadsFail(w, err)
		return
	}
	var b membersBody
	if !g.limitPost(w, r, who) || !g.readBody(w, r, &b, false) {
		return
	}
	v, err := g.cfg.Threads.ChangeMembers(r.Context(), who, r.PathValue("id"), b.Add, b.Remove)
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (g *Gateway) finishTask(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if _, err := g.cfg.Threads.Task(r.Context(), who, r.PathValue("id")); err != nil {
		g.threadsFail(w, err)
		return
	}
	if !g.limitPost(w, r, who) || !g.readBody(w, r, &struct{}{}, true) {
		return
	}
	v, err := g.cfg.Threads.FinishTask(r.Context(), who, r.PathValue("id"))
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (g *Gateway) deleteTask(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if err := g.cfg.Threads.DeleteTask(r.Context(), who, r.PathValue("id")); err != nil {
		g.threadsFail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type taskRunBody struct {
	Role   string `json:"role"`
	Prompt string `json:"prompt"`
}

func (g *Gateway) startTaskRun(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if _, err := g.cfg.Threads.Task(r.Context(), who, r.PathValue("id")); err != nil {
		g.threadsFail(w, err)
		return
	}
	var b taskRunBody
	if !g.limitPost(w, r, who) || !g.readBody(w, r, &b, false) {
		return
	}
	key, ok := clientKey(w, r)
	if !ok {
		return
	}
	id, err := g.cfg.Threads.StartRunOnce(r.Context(), who, r.PathValue("id"), b.Role, b.Prompt, key)
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run": id})
}

func (g *Gateway) readTaskRun(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	v, err := g.cfg.Threads.Run(r.Context(), who, r.PathValue("id"))
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (g *Gateway) findAgentConversation(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	q := r.URL.Query()
	v, err := g.cfg.Threads.Find(r.Context(), who, q.Get("connection"), q.Get("thread"))
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// agentHistory answers a role's agent history with the peer role its query names
// (spec/peer.md, Reading): every agent conversation between them, by thread id.
func (g *Gateway) agentHistory(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	vs, err := g.cfg.Threads.History(r.Context(), who, r.PathValue("role"), r.URL.Query().Get("peer"))
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"role": r.PathValue("role"), "peer": r.URL.Query().Get("peer"), "conversations": vs})
}

func (g *Gateway) readAgentConversation(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	v, err := g.cfg.Threads.Get(r.Context(), who, r.PathValue("id"))
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (g *Gateway) stopAgentConversation(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if _, err := g.cfg.Threads.Get(r.Context(), who, r.PathValue("id")); err != nil {
		g.threadsFail(w, err)
		return
	}
	if !g.limitPost(w, r, who) || !g.readBody(w, r, &struct{}{}, true) {
		return
	}
	stopped, err := g.cfg.Threads.Stop(r.Context(), who, r.PathValue("id"))
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"stopped": stopped})
}

func (g *Gateway) readConnection(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	v, err := g.cfg.Threads.Connection(r.Context(), who, r.PathValue("id"))
	if err != nil {
		g.threadsFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// connectionOp answers pause, unpause and revoke: the owner first (the one 404), then the
// rate limit, then the body (none, or an empty object).
func (g *Gateway) connectionOp(op func(*threads.Service, context.Context, loomtype.Identity, string) (threads.ConnectionView, error)) func(http.ResponseWriter, *http.Request, loomtype.Identity) {
	return func(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
		if _, err := g.cfg.Threads.Connection(r.Context(), who, r.PathValue("id")); err != nil {
			g.threadsFail(w, err)
			return
		}
		if !g.limitPost(w, r, who) || !g.readBody(w, r, &struct{}{}, true) {
			return
		}
		v, err := op(g.cfg.Threads, r.Context(), who, r.PathValue("id"))
		if err != nil {
			g.threadsFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}
