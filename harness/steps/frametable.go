package steps

import (
	"fmt"
	"strings"
	"time"

	"github.com/cucumber/godog"
)

// settle is how long a table step waits, once it has as many frames as rows, for a frame too
// many to come.
const settle = 200 * time.Millisecond

// frameTable is how the steps read a table of session-stream frames: the columns a step knows,
// in the order its error names them, and how a cell of the table is read (nil keeps it as
// written). Every step that judges frames against a table goes through judge, so the rule is
// written once: the frames, reduced to the table's columns, equal the table's rows, in order.
type frameTable struct {
	columns []string
	cell    func(col, v string) (string, error)
}

// header is the table's columns, or a kit error when it has no header row or names a column
// the step does not know.
func (ft frameTable) header(t *godog.Table) ([]string, error) {
	if t == nil || len(t.Rows) == 0 {
		return nil, harnessErr("the step needs a table with a header row")
	}
	var cols []string
	for _, c := range t.Rows[0].Cells {
		known := false
		for _, k := range ft.columns {
			known = known || k == c.Value
		}
		if !known {
			return nil, harnessErr("unknown column %q (%s)", c.Value, strings.Join(ft.columns, ", "))
		}
		cols = append(cols, c.Value)
	}
	return cols, nil
}

// judge expects frames (each frame's cells by column) to be exactly the table's rows; op names
// what delivered them.
func (ft frameTable) judge(op string, t *godog.Table, frames []map[string]string) error {
	cols, err := ft.header(t)
	if err != nil {
		return err
	}
	render := func(cells []string) string { return "| " + strings.Join(cells, " | ") + " |" }
	var want, got []string
	for _, r := range t.Rows[1:] {
		var cells []string
		for i, c := range r.Cells {
			v := c.Value
			if ft.cell != nil {
				if v, err = ft.cell(cols[i], v); err != nil {
					return err
				}
			}
			cells = append(cells, v)
		}
		want = append(want, render(cells))
	}
	for _, m := range frames {
		var cells []string
		for _, c := range cols {
			cells = append(cells, m[c])
		}
		got = append(got, render(cells))
	}
	if !slicesEqual(want, got) {
		return fail(op, "\n"+strings.Join(got, "\n"), "exactly\n"+strings.Join(want, "\n"))
	}
	return nil
}

// framesFor waits until the reader holds as many frames, counted by count, as the table has
// rows, then a moment (settle) for one too many, and returns what the reader holds; what names
// the frames counted ("frames delivered"). A kit error of the reader is returned as the error.
func (s *scenario) framesFor(f *follower, t *godog.Table, what string, count func(followed) int) (followed, error) {
	n := len(t.Rows) - 1
	ctx, cancel := s.wait()
	defer cancel()
	if _, err := f.waitFor(ctx, fmt.Sprintf("%d %s", n, what), func(fw followed) bool { return count(fw) >= n }); err != nil {
		return followed{}, err
	}
	time.Sleep(settle)
	fw := f.snapshot()
	return fw, fw.kitErr
}

// delivered counts the frames a reader delivered.
func delivered(fw followed) int { return len(fw.delivered) }

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
