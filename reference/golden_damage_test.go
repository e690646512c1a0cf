package reference_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/kernel"
)

// TestARecordWhoseInboxEntryIsMissingOrAlteredIsDamage: a user record of journal version 4 names
// its inbox entry instead of holding its text, message id and asker. The owner dialogue's golden
// journal of version 4 is loaded with one thing changed: the first message's text in the inbox,
// the position the first user record names (to one the inbox does not hold, and to the next
// message's), or nothing. Reading the history answers damage (record.ErrInboxRef, which is also
// kernel.ErrUnreadable) in each changed case, never a history with another text or none, and
// reads whole when nothing changed.
func TestARecordWhoseInboxEntryIsMissingOrAlteredIsDamage(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(goldenV4Dir, "owner.json"))
	require.NoError(t, err)
	var d goldenDialogue
	for _, gd := range goldenDialogues {
		if gd.name == "owner" {
			d = gd
		}
	}
	cases := []struct {
		name    string
		change  func(t *testing.T, ex *goldenExecution)
		damaged bool
	}{
		{"intact", func(*testing.T, *goldenExecution) {}, false},
		{"text altered", func(t *testing.T, ex *goldenExecution) {
			ev := &streamOf(t, ex, "in/").Events[0]
			changed := strings.Replace(string(ev.Data), `"text": "hello"`, `"text": "hellO"`, 1)
			require.NotEqual(t, string(ev.Data), changed)
			ev.Data = json.RawMessage(changed)
		}, true},
		{"entry missing", func(t *testing.T, ex *goldenExecution) { renumberFirstUserRecord(t, ex, 99) }, true},
		{"another entry", func(t *testing.T, ex *goldenExecution) { renumberFirstUserRecord(t, ex, 2) }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var g goldenFile
			require.NoError(t, json.Unmarshal(raw, &g))
			ex := &g.Executions[0]
			tc.change(t, ex)
			dir := filepath.Join(t.TempDir(), "data")
			require.NoError(t, os.MkdirAll(dir, 0o700))
			loadGolden(t, ctx, filepath.Join(dir, "loom.db"), g)
			eng := reftest.Open(t, reftest.Dir(dir), reftest.With(func(o *reference.Options) {
				*o = d.options(o.DataDir, &goldenProvider{})
				o.AllowEmpty = true
			}))
			c := g.Conversations[0]
			h, err := wholeHistory(ctx, eng.Conversations(), c.Owner, c.ID)
			if !tc.damaged {
				require.NoError(t, err)
				require.Equal(t, c.History, h)
				return
			}
			require.ErrorIs(t, err, record.ErrInboxRef)
			require.ErrorIs(t, err, kernel.ErrUnreadable)
			require.Nil(t, h)
		})
	}
}

// streamOf is the stream of ex whose name begins with prefix.
func streamOf(t *testing.T, ex *goldenExecution, prefix string) *goldenStream {
	for i := range ex.Streams {
		if strings.HasPrefix(ex.Streams[i].Stream, prefix) {
			return &ex.Streams[i]
		}
	}
	t.Fatalf("%s has no stream %s", ex.ID, prefix)
	return nil
}

// renumberFirstUserRecord makes the first user record of ex's log name inbox position seq.
func renumberFirstUserRecord(t *testing.T, ex *goldenExecution, seq int64) {
	log := streamOf(t, ex, "x/")
	for i, ev := range log.Events {
		var dec struct {
			ID    string `json:"id"`
			Value struct {
				Rec   map[string]any `json:"rec"`
				Turns *int64         `json:"turns,omitempty"`
			} `json:"value"`
		}
		if ev.Kind != "decision" || json.Unmarshal(ev.Data, &dec) != nil || dec.ID != record.UserID(1) {
			continue
		}
		in, ok := dec.Value.Rec["in"].(map[string]any)
		require.True(t, ok, "the first user record names its inbox entry: %s", ev.Data)
		in["seq"] = seq
		b, err := json.Marshal(dec)
		require.NoError(t, err)
		log.Events[i].Data = b
		return
	}
	t.Fatalf("%s: no user record of message 1", ex.ID)
}
