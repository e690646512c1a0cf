package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// ownedIn returns an Owns for partition i of p.
func ownedIn(i, p int) func(string) bool {
	return func(id string) bool {
		got, err := partition.Of(partition.KeyOf(id), p)
		return err == nil && got == i
	}
}

// idsIn returns n ids of the form "c-<k>" in partition i of p.
func idsIn(t *testing.T, i, p, n int) []string {
	var out []string
	for k := 0; len(out) < n; k++ {
		id := "c-" + strings.Repeat("x", k%3) + string(rune('a'+k%26)) + string(rune('a'+k/26))
		if ownedIn(i, p)(id) {
			out = append(out, id)
		}
	}
	return out
}

// bodies counts, per execution, the times a kernel ran its flow's body (a start, or a replay
// after a restart).
type bodies struct {
	mu  sync.Mutex
	ran map[string]int
}

func (b *bodies) flow(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
	b.mu.Lock()
	b.ran[c.ID()]++
	b.mu.Unlock()
	for {
		m, err := c.Receive()
		if err != nil {
			return nil, err
		}
		if string(m.Payload) == `"stop"` {
			return json.RawMessage(`"done"`), nil
		}
	}
}

func (b *bodies) snapshot() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, v := range b.ran {
		out[k] = v
	}
	return out
}

// TestAKernelRunsItsPartitionAlone: two kernels, each owning one partition of a store (each in its
// own namespace, and again both on the store's root), start, answer and recover the executions of
// their own partition only; every call naming the other's ids answers ErrNotHere and writes
// nothing.
func TestAKernelRunsItsPartitionAlone(t *testing.T) {
	for _, namespaced := range []bool{true, false} {
		t.Run(map[bool]string{true: "namespaces", false: "one root"}[namespaced], func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "loom.db")
			ids := [2][]string{idsIn(t, 0, 2, 3), idsIn(t, 1, 2, 3)}
			var runs [2]*bodies
			open := func() (*sqlite.SQLite, [2]*kernel.Kernel) {
				raw, err := sqlite.Open(ctx, path, sqlite.Options{})
				require.NoError(t, err)
				var ks [2]*kernel.Kernel
				for i := range ks {
					var st store.Store = raw
					if namespaced {
						st, err = store.Namespace(raw, store.PartitionNamespace(i))
						require.NoError(t, err)
					}
					runs[i] = &bodies{ran: map[string]int{}}
					ks[i], err = kernel.Open(ctx, st, kernel.Options{Flows: map[string]kernel.Flow{"f": runs[i].flow}, Owns: ownedIn(i, 2)})
					require.NoError(t, err)
				}
				return raw, ks
			}
			raw, ks := open()
			for i, k := range ks {
				other := ks[1-i]
				for _, id := range ids[i] {
					_, err := k.Start(ctx, kernel.StartRequest{ID: id, Flow: "f", Principal: alice})
					require.NoError(t, err)
					_, err = other.Start(ctx, kernel.StartRequest{ID: id, Flow: "f", Principal: alice})
					assert.ErrorIs(t, err, kernel.ErrNotHere, "start of %s on the other kernel", id)
					notHere(t, other, id)
				}
			}
			before := metaKeys(t, raw)
			for i, k := range ks {
				for _, id := range ids[1-i] {
					notHere(t, k, id)
				}
			}
			assert.Equal(t, before, metaKeys(t, raw), "refused calls wrote nothing")
			// The last id of each partition ends; the others stay open across a crash.
			for i, k := range ks {
				last := ids[i][len(ids[i])-1]
				_, err := k.Send(ctx, last, alice, "m-stop", json.RawMessage(`"stop"`))
				require.NoError(t, err)
				info, err := k.Await(ctx, last)
				require.NoError(t, err)
				assert.Equal(t, kernel.StateCompleted, info.State)
			}
			raw.Kill()
			for _, k := range ks {
				k.Close()
			}
			raw, ks = open()
			defer raw.Close()
			for i, k := range ks {
				<-k.Recovered()
				defer k.Close()
				want := map[string]int{}
				for _, id := range ids[i][:len(ids[i])-1] {
					want[id] = 1
				}
				assert.Equal(t, want, runs[i].snapshot(), "partition %d recovered its own open executions, and only them", i)
			}
		})
	}
}

// notHere checks that every call of k naming id answers ErrNotHere.
func notHere(t *testing.T, k *kernel.Kernel, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := k.Info(ctx, id)
	assert.ErrorIs(t, err, kernel.ErrNotHere, "Info %s", id)
	delivered, err := k.Send(ctx, id, alice, "m-x", json.RawMessage(`"hi"`))
	assert.ErrorIs(t, err, kernel.ErrNotHere, "Send %s", id)
	assert.False(t, delivered, "Send %s delivered", id)
	delivered, err = k.Signal(ctx, id, "s", "k", nil)
	assert.ErrorIs(t, err, kernel.ErrNotHere, "Signal %s", id)
	assert.False(t, delivered, "Signal %s delivered", id)
	assert.ErrorIs(t, k.Cancel(ctx, id, "no"), kernel.ErrNotHere, "Cancel %s", id)
	_, err = k.Await(ctx, id)
	assert.ErrorIs(t, err, kernel.ErrNotHere, "Await %s", id)
	assert.False(t, errors.Is(err, kernel.ErrStopped))
}

func metaKeys(t *testing.T, st store.Store) []string {
	kvs, err := st.MetaPrefix(context.Background(), "")
	require.NoError(t, err)
	var out []string
	for _, kv := range kvs {
		out = append(out, kv.Key+"="+string(kv.Val))
	}
	return out
}

// TestMintDrawsAnIdOfTheKernelsPartition: the ids a kernel of one partition mints are all its
// own, drawn again as often as needed; a kernel that owns every id takes the first draw.
func TestMintDrawsAnIdOfTheKernelsPartition(t *testing.T) {
	ctx := context.Background()
	raw, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	defer raw.Close()
	const p = 4
	k, err := kernel.Open(ctx, raw, kernel.Options{Owns: ownedIn(2, p)})
	require.NoError(t, err)
	defer k.Close()
	n := 0
	gen := func() string { n++; return "x" + strconv.Itoa(n) }
	for range 20 {
		id := k.Mint(gen)
		require.True(t, k.Owns(id), id)
		i, err := partition.Of(partition.KeyOf(id), p)
		require.NoError(t, err)
		require.Equal(t, 2, i, id)
	}
	require.Greater(t, n, 20, "some draws fell in other partitions and were drawn again")

	all, err := kernel.Open(ctx, raw, kernel.Options{})
	require.NoError(t, err)
	defer all.Close()
	n = 0
	require.Equal(t, "x1", all.Mint(gen))
}
