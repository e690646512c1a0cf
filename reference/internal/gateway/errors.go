package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// fail maps an error of the conversation layer to its response.
func (g *Gateway) fail(w http.ResponseWriter, err error) {
	var le *loomtype.LimitError
	var br *loomtype.BadRequestError
	switch {
	case errors.Is(err, loomtype.ErrNotFound):
		writeNotFound(w)
	case errors.Is(err, loomtype.ErrInvalidCursor):
		writeError(w, http.StatusBadRequest, "invalid cursor", "")
	case errors.Is(err, loomtype.ErrInvalidID):
		writeError(w, http.StatusBadRequest, "invalid id", "")
	case errors.As(err, &br):
		writeError(w, http.StatusBadRequest, "bad request", br.Detail())
	case errors.Is(err, loomtype.ErrBadRequest):
		writeError(w, http.StatusBadRequest, "bad request", "")
	case errors.Is(err, loomtype.ErrConflict), errors.Is(err, loomtype.ErrClosed):
		writeError(w, http.StatusConflict, "conflict", "")
	case errors.As(err, &le):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too many requests", "")
	case errors.Is(err, conversation.ErrDelegation):
		writeError(w, http.StatusForbidden, "delegation refused", "")
	case errors.Is(err, loomtype.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="loom"`)
		writeError(w, http.StatusUnauthorized, "unauthenticated", "")
	case errors.Is(err, loomtype.ErrCorrupt):
		g.report(w, "storage damaged", err)
	default:
		g.internal(w, err)
	}
}

// internal answers a fixed 500 body with an errorId; the real error goes only to OnError. An
// error that is the request's own cancellation (its client went away) is no internal error: the
// request is abandoned (http.ErrAbortHandler: the connection is closed without an answer) and
// nothing is reported or logged.
func (g *Gateway) internal(w http.ResponseWriter, err error) { g.report(w, "internal", err) }

// report answers a 500 with the error code and an errorId; the real error goes only to OnError.
// A read or write that met damaged storage is "storage damaged": the system refuses rather than
// serving less or other data. A request whose client went away is abandoned, as by internal.
func (g *Gateway) report(w http.ResponseWriter, code string, err error) {
	if clientGone(w, err) {
		panic(http.ErrAbortHandler)
	}
	id := loomtype.NewErrorID()
	if g.cfg.OnError != nil {
		g.cfg.OnError(id, err)
	} else {
		g.log.Error("gateway: "+code, "errorId", id, "err", err)
	}
	writeJSON(w, http.StatusInternalServerError, map[string]string{"error": code, "errorId": id})
}

// clientGone says whether err comes from the request's own context being cancelled, as it is
// when the client goes away (or its request deadline cut the body short).
func clientGone(w http.ResponseWriter, err error) bool {
	nw, ok := w.(*notFoundWriter)
	if !ok || nw.ctx == nil || nw.ctx.Err() == nil {
		return false
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// notFoundWriter turns the mux's own 404 and 405 pages into the uniform JSON bodies.
type notFoundWriter struct {
	http.ResponseWriter
	// ctx is the request's context: when it is done, the client went away.
	ctx   context.Context
	wrote bool
	skip  bool
}

func (n *notFoundWriter) WriteHeader(code int) {
	if !n.wrote && (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) &&
		n.Header().Get("Content-Type") == "text/plain; charset=utf-8" {
		n.wrote, n.skip = true, true
		n.Header().Del("Allow")
		writeNotFound(n.ResponseWriter)
		return
	}
	n.wrote = true
	n.ResponseWriter.WriteHeader(code)
}

func (n *notFoundWriter) Write(b []byte) (int, error) {
	if n.skip {
		return len(b), nil
	}
	if !n.wrote {
		n.wrote = true
	}
	return n.ResponseWriter.Write(b)
}

func (n *notFoundWriter) Unwrap() http.ResponseWriter { return n.ResponseWriter }

// Flush lets the stream handler flush through the wrapper.
func (n *notFoundWriter) Flush() {
	if f, ok := n.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

var notFoundBody = []byte(`{"error":"not found"}`)

// writeNotFound writes the one 404 every refusal shares, byte for byte.
func writeNotFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(notFoundBody)))
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write(notFoundBody)
}

func writeError(w http.ResponseWriter, status int, code, detail string) {
	body := map[string]string{"error": code}
	if detail != "" {
		body["detail"] = detail
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
