package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// docWith is a document with text before, between and after the markers.
func docWith(before, between, after string) string {
	return before + docsBegin + between + docsEnd + after
}

// TestRewriteKeepsWhatLiesOutsideTheMarkers: the section between the markers is replaced by the
// new one, every byte before the begin marker and after the end marker is kept (Windows line
// ends, trailing spaces, a missing final newline included), and a second rewrite with the same
// section changes nothing.
func TestRewriteKeepsWhatLiesOutsideTheMarkers(t *testing.T) {
	before := "# Performance\r\n\nSome text  \n\n## The latest table\n\n"
	after := "\n\nThe records after it. \n| a | b |\n|---|---|"
	doc := docWith(before, "\nold table\n| x |\n", after)
	section := docsSection(time.Date(2026, 12, 7, 23, 30, 0, 0, time.FixedZone("x", -5*3600)), "abc1234-dirty",
		"loomcheck bench --figures fanout --docs docs/performance.md", "| figure |\n|---|\n| fanout |\n")

	got, err := rewriteBetweenMarkers([]byte(doc), section)
	require.NoError(t, err)
	s := string(got)
	require.True(t, strings.HasPrefix(s, before+docsBegin), "the text before the markers is kept")
	require.True(t, strings.HasSuffix(s, docsEnd+after), "the text after the markers is kept")
	require.NotContains(t, s, "old table")
	require.Equal(t, docWith(before, "\n"+
		"Measured on 2026-12-08 at commit abc1234-dirty with:\n\n"+
		"    loomcheck bench --figures fanout --docs docs/performance.md\n\n"+
		"| figure |\n|---|\n| fanout |\n", after), s, "the date is the run's start in UTC")

	again, err := rewriteBetweenMarkers(got, section)
	require.NoError(t, err)
	require.Equal(t, s, string(again))
}

// TestRewriteRefusesADocumentWithoutItsPlace: a missing, repeated or misplaced marker is a
// MarkersError naming the problem, and the file on disk is left byte for byte as it was.
func TestRewriteRefusesADocumentWithoutItsPlace(t *testing.T) {
	for doc, problem := range map[string]string{
		"# Performance\n\nno markers at all\n":                "no begin marker",
		"text\n" + docsBegin + "\ntable\n":                    "no end marker",
		"text\n" + docsEnd + "\ntable\n":                      "no begin marker",
		docsEnd + "\n" + docsBegin + "\n":                     "the end marker comes first",
		docWith("a", "b", "c") + docsBegin:                    "more than one begin marker",
		docWith("a", "b", "c") + "\n" + docsEnd + "\ntrailer": "more than one end marker",
	} {
		_, err := rewriteBetweenMarkers([]byte(doc), "section\n")
		var me *MarkersError
		require.True(t, errors.As(err, &me), "%q: %v", doc, err)
		require.Equal(t, problem, me.Problem, "%q", doc)

		path := filepath.Join(t.TempDir(), "performance.md")
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))
		err = writeDocs(path, "section\n")
		require.True(t, errors.As(err, &me), "%q: %v", doc, err)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, doc, string(b), "the file is unchanged")
	}
}

// TestBenchDocsUsage: --docs with --quick, a document without markers and one that does not
// exist are usage errors that measure nothing and leave the document as it was.
func TestBenchDocsUsage(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.md")
	doc := docWith("before\n", "\nold\n", "\nafter\n")
	require.NoError(t, os.WriteFile(good, []byte(doc), 0o644))
	bad := filepath.Join(dir, "bad.md")
	require.NoError(t, os.WriteFile(bad, []byte("no markers\n"), 0o644))
	for _, args := range [][]string{
		{"bench", "--figures", "store-append", "--quick", "--rounds", "1", "--docs", good},
		{"bench", "--figures", "store-append", "--rounds", "1", "--docs", bad},
		{"bench", "--figures", "store-append", "--rounds", "1", "--docs", filepath.Join(dir, "missing.md")},
	} {
		code, stdout, errOut := run(t, args...)
		require.Equal(t, exitUsage, code, strings.Join(args, " "))
		require.Empty(t, stdout)
		require.NotContains(t, errOut, "round 1", "measured nothing")
	}
	for path, want := range map[string]string{good: doc, bad: "no markers\n"} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, want, string(b))
	}
}

// TestBenchDocsRewritesTheTable: a measured run with --docs writes, between the markers, the
// date, the commit, the command line and the table it printed, and nothing else changes.
func TestBenchDocsRewritesTheTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "performance.md")
	before, after := "# Performance\n\n## The latest table\n\n", "\n\nWhat the records hold.\n"
	require.NoError(t, os.WriteFile(path, []byte(docWith(before, "\nold\n", after)), 0o644))
	commit, err := gitCommit()
	require.NoError(t, err)
	code, stdout, errOut := run(t, "bench", "--figures", "store-append", "--rounds", "1", "--docs", path)
	require.Equal(t, exitConformant, code, errOut)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(b)
	require.True(t, strings.HasPrefix(s, before+docsBegin+"\nMeasured on "), s)
	require.True(t, strings.HasSuffix(s, docsEnd+after), s)
	require.Contains(t, s, " at commit "+commit+" with:\n\n    loomcheck bench --figures store-append --rounds 1 --docs "+path+"\n\n")
	_, table, ok := strings.Cut(stdout, "\n\n") // what follows the printed "Measured at ..." line
	require.True(t, ok)
	require.Contains(t, s, "\n\n"+table+docsEnd, "the table as printed")
	require.NotContains(t, s, "\nold\n")
}
