package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrNilReport is returned by every writer given a nil *Report.
//
//	if errors.Is(err, report.ErrNilReport) { ... }
var ErrNilReport = errors.New("report: nil report")

// File names WriteAll writes into its directory.
//
//	r, err := report.Load(filepath.Join(dir, report.JSONFile))
const (
	JSONFile     = "report.json"
	JUnitFile    = "junit.xml"
	CucumberFile = "cucumber.json"
	SummaryFile  = "summary.md"
	HTMLFile     = "report.html"
)

// WriteError says which output file WriteAll could not write. It unwraps to the cause, so
// errors.Is(err, fs.ErrPermission) and the like work.
//
//	var we *report.WriteError
//	if errors.As(err, &we) { log.Printf("could not write %s", we.File) }
type WriteError struct {
	// File is the path of the file that was being written.
	File string
	Err  error
}

// Error names the file and the cause.
func (e *WriteError) Error() string { return "report: writing " + e.File + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *WriteError) Unwrap() error { return e.Err }

// WriteJSON writes r as indented report.json, the form schemas/report.schema.json describes.
//
// The output is deterministic: the same Report always gives the same bytes (map keys are sorted,
// slices keep their order). Slices the schema requires are written as [] when nil, never null;
// r is not modified. Writers write r as given: call Redact first, or use WriteAll, which does.
//
//	err := report.WriteJSON(os.Stdout, report.Redact(r, token))
func WriteJSON(w io.Writer, r *Report) error {
	if r == nil {
		return ErrNilReport
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(normalized(r))
}

// WriteAll writes report.json, junit.xml, cucumber.json, summary.md and report.html into dir,
// creating dir (and its parents) when missing. It first redacts r with Redact(r, secrets...), so no
// credential header and no secret reaches any file; r itself is not modified.
//
// Each file is written to a temporary name in dir and renamed into place, so a reader never sees a
// half-written file. A failure is returned as a *WriteError naming the file; files already written
// stay.
//
//	if err := report.WriteAll("reports", r, signingKey, bearerToken); err != nil { ... }
func WriteAll(dir string, r *Report, secrets ...string) error {
	if r == nil {
		return ErrNilReport
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &WriteError{File: dir, Err: err}
	}
	safe := Redact(r, secrets...)
	outputs := []struct {
		name  string
		write func(io.Writer, *Report) error
	}{
		{JSONFile, WriteJSON},
		{JUnitFile, WriteJUnit},
		{CucumberFile, WriteCucumber},
		{SummaryFile, WriteSummary},
		{HTMLFile, WriteHTML},
	}
	for _, o := range outputs {
		path := filepath.Join(dir, o.name)
		if err := writeFile(path, safe, o.write); err != nil {
			return &WriteError{File: path, Err: err}
		}
	}
	return nil
}

// writeFile writes through a temporary file in the same directory and renames it over path.
func writeFile(path string, r *Report, write func(io.Writer, *Report) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err = write(f, r); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// errWriter remembers the first write error so text writers can check once at the end.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
