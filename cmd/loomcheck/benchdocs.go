package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The markers between which `loomcheck bench --docs FILE` writes the measured table. Everything
// outside them is left as it is.
const (
	docsBegin = "<!-- bench: the latest table, written by `loomcheck bench --docs`; edits between these markers are lost -->"
	docsEnd   = "<!-- bench: end of the latest table -->"
)

// MarkersError: a document holds no place for the table (a marker is missing, repeated, or the
// end comes before the beginning). The document is left unchanged.
type MarkersError struct {
	// Problem says which: "no begin marker", "no end marker", "more than one begin marker",
	// "more than one end marker" or "the end marker comes first".
	Problem string
}

func (e *MarkersError) Error() string {
	return fmt.Sprintf("the document has %s (%q ... %q)", e.Problem, docsBegin, docsEnd)
}

// rewriteBetweenMarkers returns doc with what lies between its two markers replaced by body
// (each marker on a line of its own, body between them, ending in a newline), every byte
// outside the markers kept.
//
// Errors: *MarkersError.
func rewriteBetweenMarkers(doc []byte, body string) ([]byte, error) {
	b, e := bytes.Index(doc, []byte(docsBegin)), bytes.Index(doc, []byte(docsEnd))
	switch {
	case b < 0:
		return nil, &MarkersError{Problem: "no begin marker"}
	case e < 0:
		return nil, &MarkersError{Problem: "no end marker"}
	case bytes.Count(doc, []byte(docsBegin)) > 1:
		return nil, &MarkersError{Problem: "more than one begin marker"}
	case bytes.Count(doc, []byte(docsEnd)) > 1:
		return nil, &MarkersError{Problem: "more than one end marker"}
	case e < b:
		return nil, &MarkersError{Problem: "the end marker comes first"}
	}
	if body != "" && !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	start := b + len(docsBegin)
	var out bytes.Buffer
	out.Write(doc[:start])
	out.WriteString("\n" + body)
	out.Write(doc[e:])
	return out.Bytes(), nil
}

// docsSection is what goes between the markers: when and at which commit the table was
// measured, the command line, then the table as `loomcheck bench` prints it.
func docsSection(started time.Time, commit, command, table string) string {
	return fmt.Sprintf("Measured on %s at commit %s with:\n\n    %s\n\n%s",
		started.UTC().Format("2006-01-02"), commit, command, table)
}

// gitCommit is the short hash of HEAD in the working directory, with "-dirty" when tracked
// files differ from it.
func gitCommit() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse: %w", err)
	}
	rev := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return "", fmt.Errorf("git status: %w", err)
	}
	if len(bytes.TrimSpace(st)) > 0 {
		rev += "-dirty"
	}
	return rev, nil
}

// writeDocs rewrites the table section of the document at path with section; the file is
// replaced only once the new content is whole.
//
// Errors: *MarkersError (the file is left as it was), file errors.
func writeDocs(path, section string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := rewriteBetweenMarkers(doc, section)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(out, doc) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// errDocsQuick: --docs with --quick (a smoke run's numbers are not the figures).
var errDocsQuick = errors.New("--docs takes measured figures: it cannot go with --quick")
