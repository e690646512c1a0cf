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

// The journal an engine writes today is of version 4: each consumed event holds only the inbox
// position it took ({"seq":N}), since version 2, and since version 4 also the verdict made of
// the message when the two were committed together ({"seq":N,"id":"conv#oK:verify","value":...});
// each acceptance verdict holds only whether the message was accepted, why not, and the turn
// count ({"ok":true,"turns":N}), never the envelope again (the inbox keeps it); and each user
// record of an accepted turn names its inbox entry (userRecordOfVersion4). The golden journals
// pin the same shapes, but only when they are rewritten; this test judges what the engine writes
// on every run.
func TestTheEngineWritesJournalVersion4(t *testing.T) {
	consumed := regexp.MustCompile(`^\{"seq":[1-9][0-9]*(,"id":"(conv#o[1-9][0-9]*:verify)","value":(.*))?\}$`)
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
			var nConsumed, nAccepted, nRefused, nUser, nJoined int
			for _, ex := range dumpJournal(t, ctx, filepath.Join(eng.Dir, "loom.db")) {
				for _, s := range ex.Streams {
					if !strings.HasPrefix(s.Stream, "x/") {
						continue
					}
					for _, ev := range s.Events {
						switch ev.Kind {
						case "consumed":
							nConsumed++
							m := consumed.FindStringSubmatch(string(ev.Data))
							require.NotNil(t, m, "%s/%d event %d: %s", s.Stream, s.Gen, ev.Seq, ev.Data)
							if m[1] == "" {
								continue
							}
							nJoined++
							if accepted.MatchString(m[3]) {
								nAccepted++
								continue
							}
							nRefused++
							require.Regexp(t, refused, m[3], "%s/%d verdict %s", s.Stream, s.Gen, m[2])
						case "decision":
							var dec struct {
								ID    string          `json:"id"`
								Value json.RawMessage `json:"value"`
							}
							require.NoError(t, json.Unmarshal(ev.Data, &dec))
							if strings.HasSuffix(dec.ID, ":user") {
								nUser += userRecordOfVersion4(t, dec.Value)
								continue
							}
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
			require.Positive(t, nUser, "the dialogue recorded accepted turns")
			require.Positive(t, nJoined, "verdicts kept in their consumed event's row")
		})
	}
}

// userRecordOfVersion4 fails unless the user record v, when it is of an accepted turn, names its
// inbox entry (a position and a digest) and holds neither the text, the message id, the asker
// nor the edited record, which the entry holds (journal version 4); it returns 1 for such a
// record, 0 for a rejected one.
func userRecordOfVersion4(t *testing.T, v json.RawMessage) int {
	var val struct {
		Rec map[string]json.RawMessage `json:"rec"`
	}
	require.NoError(t, json.Unmarshal(v, &val))
	if string(val.Rec["status"]) != `"accepted"` {
		return 0
	}
	require.Regexp(t, `^\{"seq":[1-9][0-9]*,"sum":"[0-9a-f]{16}"\}$`, string(val.Rec["in"]), "%s", v)
	for _, k := range []string{"text", "messageId", "asker", "editOf"} {
		require.NotContains(t, val.Rec, k, "%s", v)
	}
	return 1
}
