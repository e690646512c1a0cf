package reference_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
)

// The journal an engine writes today is of version 2: each consumed event holds only the inbox
// position it took ({"seq":N}), and each acceptance verdict only whether the message was
// accepted, why not, and the turn count ({"ok":true,"turns":N}), never the envelope again (the
// inbox keeps it). The golden journals of version 2 pin the same shapes, but only when they are
// rewritten; this test judges what the engine writes on every run.
func TestTheEngineWritesJournalVersion2(t *testing.T) {
	consumed := regexp.MustCompile(`^\{"seq":[1-9][0-9]*\}$`)
	accepted := regexp.MustCompile(`^\{"ok":true,"turns":[0-9]+\}$`)
	refused := regexp.MustCompile(`^\{"ok":false,"reason":"[a-z-]+","turns":[0-9]+\}$`)
	ctx := context.Background()
	for _, d := range goldenDialogues {
		if d.name != "owner" && d.name != "rotation" {
			continue
		}
		t.Run(d.name, func(t *testing.T) {
			p := &goldenProvider{slow: make(chan struct{}, 1), held: make(chan struct{}, 1)}
			eng := reftest.Open(t, reftest.With(func(o *reference.Options) { *o = d.options(o.DataDir, p) }))
			if !d.run(t, ctx, eng, p) {
				require.NoError(t, eng.Close())
			}
			var nConsumed, nAccepted, nRefused int
			for _, ex := range dumpJournal(t, ctx, filepath.Join(eng.Dir, "loom.db")) {
				for _, s := range ex.Streams {
					if !strings.HasPrefix(s.Stream, "x/") {
						continue
					}
					for _, ev := range s.Events {
						switch ev.Kind {
						case "consumed":
							nConsumed++
							require.Regexp(t, consumed, string(ev.Data), "%s/%d event %d", s.Stream, s.Gen, ev.Seq)
						case "decision":
							var dec struct {
								ID    string          `json:"id"`
								Value json.RawMessage `json:"value"`
							}
							require.NoError(t, json.Unmarshal(ev.Data, &dec))
							if !strings.HasSuffix(dec.ID, record.VerifySuffix) {
								continue
							}
							if accepted.Match(dec.Value) {
								nAccepted++
								continue
							}
							nRefused++
							require.Regexp(t, refused, string(dec.Value), "%s/%d verdict %s", s.Stream, s.Gen, dec.ID)
						}
					}
				}
			}
			require.Positive(t, nConsumed, "the dialogue consumed messages")
			require.Positive(t, nAccepted, "the dialogue accepted messages")
			require.LessOrEqual(t, nAccepted+nRefused, nConsumed, "a verdict per consumed message at most")
		})
	}
}
