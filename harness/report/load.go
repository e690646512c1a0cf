package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrInvalidReport is matched (errors.Is) by every error Load and Decode return for input that is
// not a usable report.json: bad JSON, a value of the wrong type, trailing data or an unknown status.
//
//	if _, err := report.Load(p); errors.Is(err, report.ErrInvalidReport) { os.Exit(2) }
var ErrInvalidReport = errors.New("report: invalid report.json")

// DecodeError explains why input is not a usable report.json. errors.Is(err, ErrInvalidReport)
// holds for it; Unwrap gives the underlying cause (a *json.SyntaxError, *json.UnmarshalTypeError,
// or nil for a semantic problem).
//
//	var de *report.DecodeError
//	if errors.As(err, &de) { fmt.Fprintln(os.Stderr, de.Path, de.Reason) }
type DecodeError struct {
	// Path is the file read, when known.
	Path string
	// Reason says what is wrong, in words.
	Reason string
	Err    error
}

// Error names the input and says what is wrong with it.
func (e *DecodeError) Error() string {
	where := "report.json"
	if e.Path != "" {
		where = e.Path
	}
	msg := "report: " + where + " is not a valid report: " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the JSON decoder's error, if there was one.
func (e *DecodeError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalidReport) true.
func (e *DecodeError) Is(target error) bool { return target == ErrInvalidReport }

// Load reads a report.json written by WriteJSON or WriteAll. A file that cannot be read gives the
// *fs.PathError from os (errors.Is(err, fs.ErrNotExist) works); content that is not a report gives
// a *DecodeError.
//
//	old, err := report.Load("previous/report.json")
//	if errors.Is(err, report.ErrInvalidReport) { ... }
func Load(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := Decode(bytes.NewReader(b))
	var de *DecodeError
	if errors.As(err, &de) {
		de.Path = path
	}
	return r, err
}

// Decode reads one report from rd, as Load does for a file. Fields it does not know are ignored, so
// a report from a newer kit still loads; every scenario, step and requirement status must be one
// of the declared Status values.
//
//	r, err := report.Decode(os.Stdin)
func Decode(rd io.Reader) (*Report, error) {
	dec := json.NewDecoder(rd)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &DecodeError{Reason: "empty input"}
		}
		return nil, &DecodeError{Reason: "bad JSON", Err: err}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &DecodeError{Reason: "data after the report", Err: err}
	}
	if raw[0] != '{' {
		return nil, &DecodeError{Reason: "not a JSON object"}
	}
	var r Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, &DecodeError{Reason: "bad JSON", Err: err}
	}
	if err := checkStatuses(&r); err != nil {
		return nil, err
	}
	return &r, nil
}

func checkStatuses(r *Report) error {
	bad := func(where string, s Status) error {
		return &DecodeError{Reason: fmt.Sprintf("%s has unknown status %q", where, s)}
	}
	for _, sc := range r.Scenarios {
		if !sc.Status.Valid() {
			return bad("scenario "+sc.ID, sc.Status)
		}
		for i, st := range sc.Steps {
			if !st.Status.Valid() {
				return bad(fmt.Sprintf("step %d of scenario %s", i+1, sc.ID), st.Status)
			}
		}
	}
	for _, q := range r.Requirements {
		if !q.Status.Valid() && q.Status != NotRun {
			return bad("requirement "+q.ID, q.Status)
		}
	}
	return nil
}
