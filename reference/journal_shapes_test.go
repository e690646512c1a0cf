package reference_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
)

// The journal an engine writes today is of version 5: each consumed event holds only the inbox
// position it took ({"seq":N}), since version 2, and since version 4 also the verdict made of
// the message when the two were committed together ({"seq":N,"id":"conv#oK:verify","value":...});
// each acceptance verdict holds only whether the message was accepted, why not, and the turn
// count ({"ok":true,"turns":N}), never the envelope again (the inbox keeps it); each user record of
// an accepted turn names its inbox entry (userRecordOfVersion4). Since version 5 each reply of an
// owner-mode turn that completed names the model response that holds its text
// (replyRecordOfVersion5), and a user record is kept in its message's row, a reply in its
// response's row, as the last member "then". The golden journals pin the same shapes, but only
// when they are rewritten; this test judges what the engine writes on every run.
func TestTheEngineWritesJournalVersion5(t *testing.T) {
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
			var n shapeCounts
			for _, ex := range dumpJournal(t, ctx, filepath.Join(eng.Dir, "loom.db")) {
				for _, s := range ex.Streams {
					if strings.HasPrefix(s.Stream, "x/") {
						n.judge(t, s)
					}
				}
			}
			require.Positive(t, n.consumed, "the dialogue consumed messages")
			require.Positive(t, n.accepted, "the dialogue accepted messages")
			require.LessOrEqual(t, n.accepted+n.refused, n.consumed, "a verdict per consumed message at most")
			require.Positive(t, n.user, "the dialogue recorded accepted turns")
			require.Positive(t, n.joined, "verdicts kept in their consumed event's row")
			require.Positive(t, n.userThen, "user records kept in their message's row")
			require.Positive(t, n.reply, "replies naming their model response")
			require.Positive(t, n.replyThen, "replies kept in their response's row")
		})
	}
}

var (
	verifyID = regexp.MustCompile(`^conv#o[1-9][0-9]*:verify$`)
	accepted = regexp.MustCompile(`^\{"ok":true,"turns":[0-9]+\}$`)
	refused  = regexp.MustCompile(`^\{"ok":false,"reason":"[a-z-]+","turns":[0-9]+\}$`)
)

// shapeRow is a consumed or decision row as journal version 5 writes it: the position a consumed
// event took, the decision the row holds (a consumed row's verdict, since version 4), and the
// decision it keeps after that (version 5).
type shapeRow struct {
	Seq   *int64          `json:"seq"`
	ID    string          `json:"id"`
	Value json.RawMessage `json:"value"`
	Then  *struct {
		ID    string          `json:"id"`
		Value json.RawMessage `json:"value"`
	} `json:"then"`
}

// shapeCounts counts what TestTheEngineWritesJournalVersion5 judged.
type shapeCounts struct {
	consumed, accepted, refused, user, joined, userThen, reply, replyThen int
}

// judge judges each consumed and decision row of log stream s.
func (n *shapeCounts) judge(t *testing.T, s goldenStream) {
	for _, ev := range s.Events {
		if ev.Kind != "consumed" && ev.Kind != "decision" {
			continue
		}
		var row shapeRow
		require.NoError(t, json.Unmarshal(ev.Data, &row))
		at := fmt.Sprintf("%s/%d event %d: %s", s.Stream, s.Gen, ev.Seq, ev.Data)
		if ev.Kind == "consumed" {
			n.consumed++
			require.True(t, row.Seq != nil && *row.Seq > 0, at)
			if row.ID == "" {
				require.Nil(t, row.Then, at)
				continue
			}
			n.joined++
			require.Regexp(t, verifyID, row.ID, at)
		}
		n.decision(t, s, row.ID, row.Value, at)
		if row.Then != nil {
			switch {
			case strings.HasSuffix(row.Then.ID, ":user"):
				require.Regexp(t, verifyID, row.ID, "a user record is kept in its message's verdict's row only: %s", at)
				n.userThen++
			case strings.HasSuffix(row.Then.ID, ":reply"):
				require.True(t, strings.HasSuffix(row.ID, ":response"), "a reply is kept in its response's row only: %s", at)
				n.replyThen++
			default:
				t.Fatalf("a row keeps %s: %s", row.Then.ID, at)
			}
			n.decision(t, s, row.Then.ID, row.Then.Value, at)
		}
	}
}

// decision judges decision id of value v.
func (n *shapeCounts) decision(t *testing.T, s goldenStream, id string, v json.RawMessage, at string) {
	switch {
	case strings.HasSuffix(id, ":user"):
		n.user += userRecordOfVersion4(t, v)
	case strings.HasSuffix(id, ":reply"):
		n.reply += replyRecordOfVersion5(t, s.Events, v)
	case strings.HasSuffix(id, record.VerifySuffix):
		if accepted.Match(v) {
			n.accepted++
			return
		}
		n.refused++
		require.Regexp(t, refused, string(v), at)
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

// replyRecordOfVersion5 fails unless the reply record v (of an owner-mode conversation), when it
// is of a turn that completed, names the model response that holds its text ([position, digest of
// its content], the position among log's events) and holds neither the text nor the asker (journal
// version 5); it returns 1 for such a record, 0 for another.
func replyRecordOfVersion5(t *testing.T, log []goldenEvent, v json.RawMessage) int {
	var val struct {
		Rec map[string]json.RawMessage `json:"rec"`
	}
	require.NoError(t, json.Unmarshal(v, &val))
	if string(val.Rec["status"]) != `"complete"` {
		return 0
	}
	var out record.OutRef
	require.Regexp(t, `^\[[1-9][0-9]*,"[0-9a-f]{8}"\]$`, string(val.Rec["out"]), "%s", v)
	require.NoError(t, json.Unmarshal(val.Rec["out"], &out))
	for _, k := range []string{"text", "asker"} {
		require.NotContains(t, val.Rec, k, "%s", v)
	}
	for _, ev := range log {
		if ev.Seq != out.Seq {
			continue
		}
		var dec struct {
			ID    string `json:"id"`
			Value struct {
				Content string `json:"content"`
			} `json:"value"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &dec))
		require.True(t, strings.HasSuffix(dec.ID, ":response"), "%s names %s", v, dec.ID)
		require.Equal(t, record.TextSum(dec.Value.Content), out.Sum, "%s", v)
		return 1
	}
	t.Fatalf("%s names an event the log does not hold", v)
	return 0
}
