package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/stretchr/testify/require"
)

func testMeta(t *testing.T, e *env) {
	st := e.handle(t)
	require.Equal(t, "<none>", metaOf(t, st, "missing"))

	keys := []string{"exec/b", "exec/a", "exec/c/1", "exec", "exed/x", "exe", "other"}
	var inside []string
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		inside = inside[:0]
		for _, k := range keys {
			if err := tx.PutMeta(k, []byte("v:"+k)); err != nil {
				return err
			}
		}
		for _, k := range []string{"exec/a", "nope"} {
			v, ok, err := tx.Meta(k)
			if err != nil {
				return err
			}
			inside = append(inside, fmt.Sprintf("%s=%s ok=%v", k, v, ok))
		}
		return nil
	}))
	require.Equal(t, []string{"exec/a=v:exec/a ok=true", "nope= ok=false"}, inside, "the transaction sees its own writes")
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		return tx.PutMeta("exec/a", []byte("v2"))
	}))

	require.Equal(t, "v2", metaOf(t, st, "exec/a"), "PutMeta replaces")

	kvs, err := st.MetaPrefix(bg, "exec/")
	require.NoError(t, err)
	require.Equal(t, []string{"exec/a=v2", "exec/b=v:exec/b", "exec/c/1=v:exec/c/1"}, kvLines(kvs), "by key order, prefix only")

	kvs, err = st.MetaPrefix(bg, "nothing/")
	require.NoError(t, err)
	require.Empty(t, kvs)

	kvs, err = st.MetaPrefix(bg, "")
	require.NoError(t, err)
	require.Equal(t, []string{"exe=v:exe", "exec=v:exec", "exec/a=v2", "exec/b=v:exec/b", "exec/c/1=v:exec/c/1", "exed/x=v:exed/x", "other=v:other"},
		kvLines(kvs), "the empty prefix lists everything, by key order")
}

func testDeleteMeta(t *testing.T, e *env) {
	st := e.handle(t)
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		for _, k := range []string{"d/a", "d/b", "d/c"} {
			if err := tx.PutMeta(k, []byte("v:"+k)); err != nil {
				return err
			}
		}
		return nil
	}))
	var inside string
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		if err := tx.DeleteMeta("d/b"); err != nil {
			return err
		}
		if err := tx.DeleteMeta("d/none"); err != nil { // not there: nothing to do
			return err
		}
		v, ok, err := tx.Meta("d/b")
		inside = fmt.Sprintf("%q %v", v, ok)
		return err
	}))
	require.Equal(t, `"" false`, inside, "the transaction sees its own delete")
	require.Equal(t, "<none>", metaOf(t, st, "d/b"))
	kvs, err := st.MetaPrefix(bg, "d/")
	require.NoError(t, err)
	require.Equal(t, []string{"d/a=v:d/a", "d/c=v:d/c"}, kvLines(kvs), "a deleted key is not listed")

	undo := errors.New("undo")
	require.ErrorIs(t, st.Update(bg, func(tx store.Tx) error {
		if err := tx.DeleteMeta("d/a"); err != nil {
			return err
		}
		return undo
	}), undo)
	require.Equal(t, "v:d/a", metaOf(t, st, "d/a"), "a delete in a failed Update is undone")

	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		if err := tx.DeleteMeta("d/c"); err != nil {
			return err
		}
		return tx.PutMeta("d/c", []byte("again"))
	}))
	require.Equal(t, "again", metaOf(t, st, "d/c"), "a deleted key can be stored again")
	// A store that counts its writes (WriteCrasher) counts a delete, and not a delete of nothing.
	c, counts := st.(store.WriteCrasher)
	var before int64
	if counts {
		before = c.Writes()
	}
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { return tx.DeleteMeta("d/none") }))
	if counts {
		require.Equal(t, before, c.Writes(), "deleting a key that is not there changes nothing")
	}
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { return tx.DeleteMeta("d/a") }))
	if counts {
		require.Equal(t, before+1, c.Writes(), "deleting a key is a durable write")
	}
	require.NoError(t, st.Close())
	if k, ok := st.(store.Killer); ok {
		within(t, k.Released(), "Released after Close")
	}
	re := e.handle(t)
	kvs, err = re.MetaPrefix(bg, "d/")
	require.NoError(t, err)
	require.Equal(t, []string{"d/c=again"}, kvLines(kvs), "deletes are durable")
}

func testMetaPrefixFindsKeysAfterAnyByte(t *testing.T, e *env) {
	st := e.handle(t)
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		for _, k := range []string{"p/\xff", "p/\xff\xff", "p/a", "q/a", "\xffz", "p/\x00", "p\x00"} {
			if err := tx.PutMeta(k, []byte("v")); err != nil {
				return err
			}
		}
		return nil
	}))
	keys := func(prefix string) []string {
		kvs, err := st.MetaPrefix(bg, prefix)
		require.NoError(t, err)
		out := []string{}
		for _, kv := range kvs {
			out = append(out, kv.Key)
		}
		return out
	}
	require.Equal(t, []string{"p/\x00", "p/a", "p/\xff", "p/\xff\xff"}, keys("p/"), "by byte order")
	require.Equal(t, []string{"p/\xff", "p/\xff\xff"}, keys("p/\xff"))
	require.Equal(t, []string{"\xffz"}, keys("\xff"))
	require.Equal(t, []string{"p\x00", "p/\x00", "p/a", "p/\xff", "p/\xff\xff", "q/a", "\xffz"}, keys(""),
		"the empty prefix lists every key, 0xFF-first ones included")
}

func testRememberKeepsTheNewest(t *testing.T, e *env) {
	st := e.handle(t)
	remember := func(scope, key string, keep int) bool {
		t.Helper()
		var fresh bool
		require.NoError(t, st.Update(bg, func(tx store.Tx) error {
			var err error
			fresh, err = tx.Remember(scope, key, keep)
			return err
		}))
		return fresh
	}

	var transcript []string
	for _, k := range []string{"k1", "k2", "k3", "k1", "k4", "k1", "k2", "k5", "k4"} {
		transcript = append(transcript, fmt.Sprintf("%s fresh=%v", k, remember("dd", k, 3)))
	}
	require.Equal(t, []string{
		"k1 fresh=true",
		"k2 fresh=true",
		"k3 fresh=true",
		"k1 fresh=false", // a duplicate, with exactly keep keys remembered; it does not make k1 newer
		"k4 fresh=true",  // the set keeps 3: k1, the oldest, is forgotten
		"k1 fresh=true",  // so it is new again, and k2 goes
		"k2 fresh=true",  // ... and k3 goes
		"k5 fresh=true",  // ... and k4 goes
		"k4 fresh=true",
	}, transcript)

	// The set holds the newest keep keys, every one of them.
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		require.True(t, remember("window", k, 3), "key %s", k)
	}
	for _, k := range []string{"e", "d", "c"} {
		require.False(t, remember("window", k, 3), "key %s is one of the newest 3", k)
	}
	require.True(t, remember("window", "b", 3), "key b, the fourth newest, is forgotten")

	require.True(t, remember("other", "k4", 3), "scopes are separate")
	require.False(t, remember("other", "k4", 3))

	// Two keys remembered in one transaction: the second sees the first.
	var both []bool
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		both = both[:0]
		for _, k := range []string{"x", "x"} {
			fresh, err := tx.Remember("one-tx", k, 3)
			if err != nil {
				return err
			}
			both = append(both, fresh)
		}
		return nil
	}))
	require.Equal(t, []bool{true, false}, both)

	// keep <= 0 never forgets.
	for i := range 50 {
		require.True(t, remember("all", fmt.Sprint(i), 0), "key %d", i)
	}
	for i := range 50 {
		require.False(t, remember("all", fmt.Sprint(i), 0), "key %d", i)
	}
}
