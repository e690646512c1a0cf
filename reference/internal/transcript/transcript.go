// Package transcript reads and checks the reference's transcripts, and holds the one flag that
// rewrites every expected output its tests keep in files: -rewrite.
//
// A transcript is a script of commands, each followed by the exact output it must give:
//
//	# a comment
//	command key=value key="a value" key=`a raw value` flag ...
//	----
//	expected output, line by line
//	(a blank line ends the case)
//
// Files runs every transcript a pattern matches, each as a subtest with a runner of its own, and
// compares each command's output with the expected one. With -rewrite it writes the outputs the
// code gives into the files instead (comments kept); review the diff. The golden files of the
// reference's other tests are rewritten by the same flag (Rewrite):
//
//	go test ./reference/kernel -run Transcripts -rewrite
//	go test ./reference/ -run TestGoldenJournals -rewrite
package transcript

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "write what the code gives in place of the expected output of the transcripts and golden files")

// Rewrite reports whether the test binary was given -rewrite: a test that keeps expected output
// in a file writes the file from the code then.
func Rewrite() bool { return *rewrite }

// Case is one command of a transcript and the output it must give.
type Case struct {
	// Comments are the comment lines just before the command.
	Comments []string
	// Line is the command's line in the file, from 1.
	Line    int
	Command string
	Want    string
}

// Parse reads the transcript at path: its cases, and the comment lines after the last one.
func Parse(path string) (cases []Case, trailing []string, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	var comments []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			continue
		case strings.HasPrefix(l, "#"):
			comments = append(comments, l)
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			return nil, nil, fmt.Errorf("%s:%d: a command is followed by ----", path, i+1)
		}
		c := Case{Comments: comments, Line: i + 1, Command: l}
		comments = nil
		i++
		var want []string
		for i+1 < len(lines) && lines[i+1] != "" {
			i++
			want = append(want, lines[i])
		}
		c.Want = strings.Join(want, "\n")
		cases = append(cases, c)
	}
	return cases, comments, nil
}

// Format writes cases back as a transcript, with got[i] as the output of cases[i].
func Format(cases []Case, got []string, trailing []string) string {
	var b strings.Builder
	for i, c := range cases {
		for _, l := range c.Comments {
			b.WriteString(l + "\n")
		}
		fmt.Fprintf(&b, "%s\n----\n%s\n\n", c.Command, got[i])
	}
	for _, l := range trailing {
		b.WriteString(l + "\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// Check runs each case of the transcript at path through do, in order, and reports every output
// that is not the expected one; with -rewrite it writes the outputs into the file instead.
func Check(t testing.TB, path string, do func(command string) string) {
	t.Helper()
	cases, trailing, err := Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(cases))
	for i, c := range cases {
		got[i] = do(c.Command)
		if !*rewrite && got[i] != c.Want {
			t.Errorf("%s:%d: %s\n--- want\n%s\n--- got\n%s", path, c.Line, c.Command, c.Want, got[i])
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(Format(cases, got, trailing)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Files checks every transcript the glob pattern matches (at least one), each as a subtest named
// after its file without the extension; start gives the subtest the function that runs one of
// its commands, on a runner of its own.
func Files(t *testing.T, pattern string, start func(t *testing.T) func(command string) string) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts match %s: %v", pattern, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), func(t *testing.T) {
			Check(t, f, start(t))
		})
	}
}

// Fields splits a command line into the command and its arguments: key=value, key="a quoted
// value" or key=`a raw value` (Go's quoting), and a bare word, which is a key with an empty value.
func Fields(line string) (string, map[string]string, error) {
	cmd, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	args := map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		word, more, _ := strings.Cut(rest, " ")
		k, _, ok := strings.Cut(word, "=")
		if !ok {
			args[word], rest = "", more
			continue
		}
		v := rest[len(k)+1:]
		if strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "`") {
			q, err := strconv.QuotedPrefix(v)
			if err != nil {
				return "", nil, fmt.Errorf("bad quoting in %q: %v", line, err)
			}
			args[k], _ = strconv.Unquote(q)
			rest = v[len(q):]
			continue
		}
		val, more, _ := strings.Cut(v, " ")
		args[k], rest = val, more
	}
	return cmd, args, nil
}
