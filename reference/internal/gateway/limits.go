package gateway

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/strictjson"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// limitPost applies the per-principal POST rate (a token bucket refilled over a minute, kept by
// Config.Quotas so that every engine draws on one allowance). A store error is a 500.
func (g *Gateway) limitPost(w http.ResponseWriter, r *http.Request, who loomtype.Identity) bool {
	err := g.cfg.Quotas.Take(r.Context(), who, g.cfg.PostsPerMinute, time.Now().UnixMilli())
	switch {
	case err == nil:
		return true
	case errors.Is(err, loomtype.ErrLimit):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too many requests", "")
	case r.Context().Err() == nil: // a client that went away is no internal error
		g.fail(w, err)
	}
	return false
}

// quotaRefused answers a caller past one of its own stream bounds (a *sessions.QuotaError): 429
// with the bound as its reason (spec/stream.md, Limits). It reports whether err was one.
func quotaRefused(w http.ResponseWriter, err error) bool {
	var qe *sessions.QuotaError
	if !errors.As(err, &qe) {
		return false
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too many requests", "reason": string(qe.Reason)})
	return true
}

// readBody enforces the JSON content type (a charset, if given, must be utf-8) and the size
// limit, then decodes with the one strict decoder of every body (strictjson.Decode): members
// named exactly, once each, required ones present, never null, valid UTF-8 only, nothing after
// the value. A refusal is a 400 naming the member ("body" for the body as a whole). An empty
// body (zero bytes) decodes as {} when allowEmpty; white space alone is a bad request.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	if r.ContentLength > g.cfg.MaxBodyBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "payload too large", "")
		return false
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && allowEmpty && r.ContentLength == 0 {
		return true
	}
	mt, params, err := mime.ParseMediaType(ct)
	if cs, ok := params["charset"]; err != nil || mt != "application/json" || ok && !strings.EqualFold(cs, "utf-8") {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported media type", "")
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "payload too large", "")
			return false
		}
		writeError(w, http.StatusBadRequest, "bad request", "body")
		return false
	}
	if len(body) == 0 && allowEmpty { // no body at all; white space alone is no JSON
		return true
	}
	if err := strictjson.Decode(body, v); err != nil {
		f := "body"
		var se *strictjson.Error
		if errors.As(err, &se) && se.Field != "" {
			f = se.Field
		}
		writeError(w, http.StatusBadRequest, "bad request", f)
		return false
	}
	return true
}
