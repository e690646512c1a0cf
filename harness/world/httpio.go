package world

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// Reasons recorded in a Rejection.
const (
	reasonTooLarge = "payload too large"
	reasonBadJSON  = "body is not the expected JSON"
	reasonNotJSON  = "Content-Type is not application/json"
)

// readBody reads the whole request body (to its end, so the server notices a client that goes
// away later) within the size limit and decodes it into v. On failure it answers the request
// itself and returns false.
//
// A request whose Content-Type is missing or is not application/json (parameters such as charset
// and the case of the media type do not matter) is answered 415 without reading the body.
func (w *World) readBody(rw http.ResponseWriter, r *http.Request, v any) ([]byte, bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		w.reject(rw, r, http.StatusUnsupportedMediaType, reasonNotJSON)
		return nil, false
	}
	b, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, w.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			w.reject(rw, r, http.StatusRequestEntityTooLarge, reasonTooLarge)
		} else {
			w.reject(rw, r, http.StatusBadRequest, "body could not be read")
		}
		return nil, false
	}
	if err := json.Unmarshal(b, v); err != nil {
		w.reject(rw, r, http.StatusBadRequest, reasonBadJSON)
		return nil, false
	}
	return b, true
}

// reject records a refused request and answers status with {"error": reason}, or, on the model's
// path, with the error object of an OpenAI-compatible provider,
// {"error": {"message": reason, "type": "invalid_request_error" (or "server_error" for a 5xx)}}.
func (w *World) reject(rw http.ResponseWriter, r *http.Request, status int, reason string) {
	w.rejMu.Lock()
	w.rejections.add(Rejection{Arrived: time.Now(), Method: r.Method, Path: r.URL.Path, Status: status, Reason: reason}, 0)
	w.rejMu.Unlock()
	if strings.HasPrefix(r.URL.Path, modelBasePath+"/") {
		kind := "invalid_request_error"
		if status >= 500 {
			kind = "server_error"
		}
		_ = writeJSON(rw, status, map[string]any{"error": map[string]any{"message": reason, "type": kind}})
		return
	}
	_ = writeJSON(rw, status, map[string]string{"error": reason})
}

// writeJSON answers status with the JSON encoding of v. It returns the error of the write.
func writeJSON(rw http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal"}`)
	}
	return writeRaw(rw, status, b)
}

// writeRaw answers status with a body that is sent as it is. It returns the error of the write.
func writeRaw(rw http.ResponseWriter, status int, body []byte) error {
	rw.Header().Set("Content-Type", "application/json; charset=utf-8")
	rw.WriteHeader(status)
	_, err := rw.Write(body)
	return err
}

// failureBody is the body of a scripted Failure outside the model: Body as it is, else
// {"error": Message}.
func failureBody(f *Failure) (int, []byte) {
	status := f.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if f.Body != "" {
		return status, []byte(f.Body)
	}
	msg := f.Message
	if msg == "" {
		msg = "scripted failure"
	}
	b, _ := json.Marshal(map[string]string{"error": msg})
	return status, b
}

// Failure is a scripted refusal: the endpoint answers Status (500 when zero) with Body exactly as
// given, or, when Body is empty, with {"error": Message} (the model endpoint uses the OpenAI form
// {"error": {"message": Message, "type": "server_error"}} instead).
//
//	w.Tools().Enqueue("lookup", world.Behavior{Fail: &world.Failure{Status: 503, Message: "down"}})
type Failure struct {
	Status  int
	Message string
	Body    string
}
