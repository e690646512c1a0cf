package sessions

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// legacyRig is a store holding the given metadata pairs, as the service stored its records before
// the record tables, and a service over a kernel opened on it (Resume not called yet).
func legacyRig(t *testing.T, meta map[string]string) (*Service, *kernel.Kernel, store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		for k, v := range meta {
			if err := tx.PutMeta(k, []byte(v)); err != nil {
				return err
			}
		}
		return nil
	}))
	dl, err := conversation.New(conversation.Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}}, conversation.Deps{}, live.NewHub(0))
	require.NoError(t, err)
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: dl.Flows()})
	require.NoError(t, err)
	svc := New(k, dl.Client(k), Config{})
	t.Cleanup(func() {
		svc.Close()
		k.Close()
		st.Close()
	})
	return svc, k, st
}

// TestResumeAdoptsTheEarlierLayout: the position, queue, branch and read-marker records a store
// kept under the earlier metadata prefixes are in the tables after Resume, read back as they were
// written, and nothing is left under the old prefixes.
func TestResumeAdoptsTheEarlierLayout(t *testing.T) {
	ctx := context.Background()
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	bk, rk := branchKey(alice, "b-1"), readKey(alice, "c1")
	svc, k, st := legacyRig(t, map[string]string{
		legacyPosPrefix + "c1":   `{"next":"0.7","lastReply":2,"lastAsked":2,"room":{"ver":1},"handles":{"2":1}}`,
		legacyQueuePrefix + "c1": `{"items":[{"message":"q1","text":"later","who":{"tenant":"acme","actor":"alice"},"state":"cancelled"}]}`,
		legacyBranchPrefix + bk:  `{"from":"c1","message":"m2","session":"branch-x"}`,
		legacyReadPrefix + rk:    `5`,
		"stream/other":           `kept`, // no record of the service's prefixes: left as it is
	})
	require.NoError(t, svc.Resume(ctx))

	p, ok, err := positions.Get(ctx, k, "c1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, posRecord{Next: "0.7", LastReply: 2, LastAsked: 2, Room: p.Room, Handles: map[int64]int64{2: 1}}, p)
	require.Equal(t, int64(1), p.Room.Ver)
	q, ok, err := queues.Get(ctx, k, "c1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, q.Items, 1)
	require.Equal(t, "q1", q.Items[0].Message)
	b, ok, err := branches.Get(ctx, k, bk)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, branchRecord{From: "c1", Message: "m2", Session: "branch-x"}, b)
	n, err := svc.readMarker(ctx, alice, "c1")
	require.NoError(t, err)
	require.Equal(t, int64(5), n)

	kvs, err := st.MetaPrefix(ctx, "stream/")
	require.NoError(t, err)
	require.Len(t, kvs, 1)
	require.Equal(t, "stream/other", kvs[0].Key)
	require.NoError(t, svc.Resume(ctx), "a second open finds nothing to move")
}

// TestResumeRefusesADamagedEarlierRecord: a record of the earlier layout that does not decode
// fails Resume as damage (loomtype.ErrCorrupt), and nothing is moved.
func TestResumeRefusesADamagedEarlierRecord(t *testing.T) {
	ctx := context.Background()
	svc, k, st := legacyRig(t, map[string]string{
		legacyPosPrefix + "c1": `{"next":"0.7"}`,
		legacyPosPrefix + "c2": `{"next":`,
	})
	err := svc.Resume(ctx)
	require.ErrorIs(t, err, loomtype.ErrCorrupt)
	var re *kernel.RecordError
	require.ErrorAs(t, err, &re)
	require.Equal(t, legacyPosPrefix+"c2", re.Key)
	_, ok, err := positions.Get(ctx, k, "c1")
	require.NoError(t, err)
	require.False(t, ok, "nothing is moved")
	kvs, err := st.MetaPrefix(ctx, legacyPosPrefix)
	require.NoError(t, err)
	require.Len(t, kvs, 2)
}

// TestLoadRefusesADamagedFrameLog: a stored frame that does not decode, or a stored position
// whose cursor does not parse, fails the session's load as damage (loomtype.ErrCorrupt), naming
// what is damaged.
func TestLoadRefusesADamagedFrameLog(t *testing.T) {
	ctx := context.Background()
	svc, _, st := legacyRig(t, nil)
	require.NoError(t, svc.Resume(ctx))
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Append("frames/c1", 0, 0, store.NewEvent{Kind: frameEventKind, Data: []byte(`{"f":`)})
		return err
	}))
	_, err := svc.load(ctx, "c1")
	require.ErrorIs(t, err, loomtype.ErrCorrupt)
	var fe *FrameError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, FrameError{Session: "c1", Cur: 1}, *fe)

	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		return tx.PutMeta("tbl/12:sessions.pos/c2", []byte(`{"next":"not a cursor"}`))
	}))
	_, err = svc.load(ctx, "c2")
	require.ErrorIs(t, err, loomtype.ErrCorrupt)
	var re *kernel.RecordError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "c2", re.Key)
}

// A frame is stored as the encoding of its diskFrame; commit builds it around the frame's own
// encoding, which must give the same bytes, guard or none, whatever the frame holds.
func TestADiskFrameIsBuiltAsEncoded(t *testing.T) {
	f := stream.Frame{V: 1, ID: "f1", Cur: 7, Session: "c1", Turn: 2, Type: "session.text-delta",
		Time: "2026-01-02T03:04:05Z", Author: "assistant:a", Data: json.RawMessage(`{"text":"<b>&é\u2028"}`)}
	guards := []guard{{}, {Asker: loomtype.Identity{Tenant: "t", Actor: "alice"}, Classes: "a,b", Live: true, Cursor: "c-9", Ver: 1},
		{AskerKey: "t/bob"}}
	for _, g := range guards {
		want, err := json.Marshal(diskFrame{F: f, G: g})
		require.NoError(t, err)
		enc, err := json.Marshal(f)
		require.NoError(t, err)
		got, err := diskFrameBytes(enc, g)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
}
