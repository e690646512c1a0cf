package selftest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A defect judged by a package's tests is, like one judged by scenarios, not judged when the
// self-test is cancelled, and the control run of its tests comes first.
func TestCancelledTestsDefectIsNotJudged(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	opt := Options{Root: root, Defects: filepath.Join(root, "fixtures", "defects")}
	defects, err := Load(opt.Defects)
	require.NoError(t, err)
	var d Defect
	for _, x := range defects {
		if x.Tests != "" {
			d = x
			break
		}
	}
	require.NotEmpty(t, d.Name, "a defect judged by a package's tests")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := judge(ctx, opt, d)
	require.True(t, res.Interrupted)
	require.Equal(t, NotJudged, res.Error)
	require.ErrorIs(t, controlTests(ctx, opt, []Defect{d}), ErrInterrupted)
}

// readTestRun tells a failed test, a binary that failed once a test ran (a time limit), a build
// that failed, and a run where every test skipped apart.
func TestReadTestRun(t *testing.T) {
	tr := readTestRun(`{"Action":"run","Test":"TestA"}
{"Action":"pass","Test":"TestA"}
{"Action":"run","Test":"TestB"}
{"Action":"run","Test":"TestB/sub"}
{"Action":"fail","Test":"TestB/sub"}
{"Action":"fail","Test":"TestB"}
{"Action":"fail"}`)
	require.Equal(t, []string{"TestA", "TestB", "TestB/sub"}, tr.ran)
	require.Equal(t, []string{"TestB/sub", "TestB"}, tr.failed)
	require.True(t, tr.pkgFailed)
	require.Zero(t, tr.skipped)

	tr = readTestRun(`{"Action":"run","Test":"TestA"}
{"Action":"output","Test":"TestA","Output":"panic: test timed out after 5m0s\n"}
{"Action":"fail"}`)
	require.Equal(t, []string{"TestA"}, tr.ran)
	require.Empty(t, tr.failed)
	require.True(t, tr.pkgFailed)

	tr = readTestRun(`# example.com/p
p.go:3:6: no new variables on left side of :=
{"Action":"build-output","Output":"p.go:4:1: undefined: x\n"}
{"Action":"fail"}`)
	require.Empty(t, tr.ran)
	require.True(t, tr.pkgFailed)
	require.Equal(t, []string{"# example.com/p", "p.go:3:6: no new variables on left side of :=", "p.go:4:1: undefined: x"}, tr.output)

	tr = readTestRun(`{"Action":"run","Test":"TestA"}
{"Action":"skip","Test":"TestA"}
{"Action":"pass"}`)
	require.Equal(t, []string{"TestA"}, tr.ran)
	require.Empty(t, tr.failed)
	require.False(t, tr.pkgFailed)
	require.Equal(t, 1, tr.skipped)
}
