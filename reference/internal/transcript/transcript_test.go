package transcript_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/transcript"
)

const sample = `# first
start id=a
----
a: started

# second
# and more
send id=a text="two words" raw=` + "`x\\y`" + ` nowait
----
delivered
a: waits

# the end
`

func TestParseAndFormatKeepEveryCommandAndComment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(path, []byte(sample), 0o644))
	cases, trailing, err := transcript.Parse(path)
	require.NoError(t, err)
	require.Equal(t, []transcript.Case{
		{Comments: []string{"# first"}, Line: 2, Command: "start id=a", Want: "a: started"},
		{Comments: []string{"# second", "# and more"}, Line: 8, Command: "send id=a text=\"two words\" raw=`x\\y` nowait", Want: "delivered\na: waits"},
	}, cases)
	require.Equal(t, []string{"# the end"}, trailing)
	require.Equal(t, sample, transcript.Format(cases, []string{cases[0].Want, cases[1].Want}, trailing))

	cmd, args, err := transcript.Fields(cases[1].Command)
	require.NoError(t, err)
	require.Equal(t, "send", cmd)
	require.Equal(t, map[string]string{"id": "a", "text": "two words", "raw": `x\y`, "nowait": ""}, args)
	_, _, err = transcript.Fields(`send text="open`)
	require.Error(t, err)

	require.NoError(t, os.WriteFile(path, []byte("start id=a\nstarted\n"), 0o644))
	_, _, err = transcript.Parse(path)
	require.ErrorContains(t, err, "t.txt:1: a command is followed by ----")
}

// recorder is a test that keeps what it is told.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestCheckReportsEachOutputThatDiffers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(path, []byte(sample), 0o644))
	var ran []string
	rec := &recorder{TB: t}
	transcript.Check(rec, path, func(command string) string {
		ran = append(ran, command)
		if command == "start id=a" {
			return "a: started"
		}
		return "refused"
	})
	require.Len(t, ran, 2)
	require.Len(t, rec.errors, 1)
	require.Contains(t, rec.errors[0], "t.txt:8: send id=a")
	require.Contains(t, rec.errors[0], "--- want\ndelivered\na: waits\n--- got\nrefused")
	require.False(t, transcript.Rewrite())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, sample, string(b), "the file is written only with -rewrite")
}
