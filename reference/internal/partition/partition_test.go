package partition_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/internal/transcript"
	"github.com/loomcheck/loomcheck/reference/kernel"
)

// TestOfIsPinned: a key's partition is part of the database's layout, so these values may never
// change (FNV-1a 64 of the key's bytes, modulo P, computed by hand beside the function's own).
func TestOfIsPinned(t *testing.T) {
	for _, c := range []struct {
		key  string
		p    int
		want int
	}{
		{"", 7, int(14695981039346656037 % 7)},
		{"a", 16, int(0xaf63dc4c8601ec8c % 16)},
		{"conv-1", 1, 0},
		{"conv-1", 12, int(fnv64a("conv-1") % 12)},
		{"é𝄞", 31, int(fnv64a("é𝄞") % 31)},
	} {
		got, err := partition.Of(c.key, c.p)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "Of(%q, %d)", c.key, c.p)
	}
	for _, p := range []int{0, -1, partition.MaxPartitions + 1} {
		_, err := partition.Of("x", p)
		assert.True(t, errors.Is(err, partition.ErrCount), "Of with %d partitions: %v", p, err)
		_, err = partition.Assign(p, []string{"a"})
		assert.True(t, errors.Is(err, partition.ErrCount), "Assign with %d partitions: %v", p, err)
	}
	_, err := partition.Of("x", partition.MaxPartitions)
	assert.NoError(t, err)
	// node.partitions is at most 4096 (schemas/sut-config.schema.json).
	_, err = partition.Of("x", 4096)
	assert.NoError(t, err)
	_, err = partition.Of("x", 4097)
	assert.ErrorIs(t, err, partition.ErrCount)
	plan, err := partition.Assign(partition.MaxPartitions, []string{"a"})
	require.NoError(t, err)
	assert.Len(t, plan.Owned("a"), partition.MaxPartitions)
}

// fnv64a is this test's own FNV-1a, written out, not the package's.
func fnv64a(s string) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range []byte(s) {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return h
}

// TestAssignIsBalancedAndTheSameEverywhere: for every count of partitions and nodes tried, every
// partition has an owner among the nodes, each node owns P/N or one more, and the plan does not
// depend on the order the nodes are listed in, on repeats, or on an empty name.
func TestAssignIsBalancedAndTheSameEverywhere(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for p := 1; p <= 40; p++ {
		for n := 1; n <= 9; n++ {
			nodes := names(n)
			plan, err := partition.Assign(p, nodes)
			require.NoError(t, err)
			require.Len(t, plan, p)
			loads := map[string]int{}
			for i, o := range plan {
				require.Contains(t, nodes, o, "p=%d n=%d partition %d", p, n, i)
				loads[o]++
			}
			atCeil := 0
			for _, node := range nodes {
				l := loads[node]
				assert.True(t, l == p/n || l == p/n+1, "p=%d n=%d: node %s owns %d", p, n, node, l)
				if l == p/n+1 {
					atCeil++
				}
				assert.Equal(t, l, len(plan.Owned(node)))
			}
			assert.Equal(t, p%n, atCeil, "p=%d n=%d", p, n)
			shuffled := append(slices.Clone(nodes), nodes[r.IntN(n)], "")
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			again, err := partition.Assign(p, shuffled)
			require.NoError(t, err)
			assert.Equal(t, plan, again, "p=%d n=%d, nodes %v", p, n, shuffled)
		}
	}
	for _, none := range [][]string{nil, {""}, {"", ""}} {
		empty, err := partition.Assign(3, none)
		require.NoError(t, err)
		assert.Equal(t, partition.Plan{"", "", ""}, empty, "nodes %q", none)
		assert.Empty(t, empty.Owned(""))
	}
	withEmpty, err := partition.Assign(4, []string{"", "a"})
	require.NoError(t, err)
	assert.Equal(t, partition.Plan{"a", "a", "a", "a"}, withEmpty, "an empty name is no node")
}

// TestAssignMovesLittle: a node joining or leaving moves a bounded share of the partitions
// (at most twice the share one node owns after the change, plus one, over many sets: 1.5 shares
// at most for 64 and 256 partitions, more where P is near N), where a plan by
// position (partition i to node i mod N) would move most of them.
func TestAssignMovesLittle(t *testing.T) {
	for _, p := range []int{8, 12, 64, 256} {
		worst := 0.0
		for n := 1; n <= 8; n++ {
			before, _ := partition.Assign(p, names(n))
			after, _ := partition.Assign(p, names(n+1))
			share := (p + n) / (n + 1) // ceil(p/(n+1))
			moved := partition.Moves(before, after)
			assert.LessOrEqual(t, moved, 2*share+1, "p=%d: %d to %d nodes moved %d", p, n, n+1, moved)
			back := partition.Moves(after, before)
			assert.Equal(t, moved, back)
			worst = max(worst, float64(moved)/float64(share))
		}
		t.Logf("p=%d: worst moves on a join, in shares of one node: %.2f", p, worst)
	}
	assert.Equal(t, 2, partition.Moves(partition.Plan{"a", "b"}, partition.Plan{"a", "b", "c", "d"}))
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "node-" + strconv.Itoa(i+1)
	}
	return out
}

// TestTranscripts replays testdata/transcripts: a cluster's plan as nodes join and leave.
//
//	plan p=8 nodes=a,b    the plan for the nodes, and what moved since the last plan
//	key key=conv-1 p=8    the partition of a key
func TestTranscripts(t *testing.T) {
	transcript.Files(t, filepath.Join("testdata", "transcripts", "*.txt"), func(t *testing.T) func(string) string {
		var last partition.Plan
		return func(command string) string {
			cmd, args, err := transcript.Fields(command)
			if err != nil {
				return "error: " + err.Error()
			}
			p, _ := strconv.Atoi(args["p"])
			switch cmd {
			case "plan":
				var nodes []string
				if args["nodes"] != "" {
					nodes = strings.Split(args["nodes"], ",")
				}
				plan, err := partition.Assign(p, nodes)
				if err != nil {
					return "error: " + err.Error()
				}
				var b strings.Builder
				for i, o := range plan {
					fmt.Fprintf(&b, "%d:%s ", i, o)
				}
				b.WriteString("\n")
				slices.Sort(nodes)
				for _, n := range slices.Compact(nodes) {
					fmt.Fprintf(&b, "%s owns %v\n", n, plan.Owned(n))
				}
				if last != nil {
					fmt.Fprintf(&b, "moved %d\n", partition.Moves(last, plan))
				}
				last = plan
				return strings.TrimRight(b.String(), "\n ")
			case "key":
				got, err := partition.Of(args["key"], p)
				if err != nil {
					return "error: " + err.Error()
				}
				return strconv.Itoa(got)
			}
			return "unknown command " + cmd
		}
	})
}

// TestKeyOf: the key of every shape of execution id the engine makes, and of the shapes around
// them (each part varied alone).
func TestKeyOf(t *testing.T) {
	long := strings.Repeat("r", 127) + "é" // 129 bytes: the cut falls inside é
	for _, c := range []struct{ id, want string }{
		{"c_0123456789abcdef01234567", "c_0123456789abcdef01234567"},
		{"chosen.0123456789abcdef01234567", "chosen.0123456789abcdef01234567"},
		{"turn:c_1:o7:0a1b2c3d4e5f60718293a4b5", "c_1"},
		{"turn:c_1:o8:ffffffffffffffffffffffff", "c_1"},
		{"turn:c_2:o7:0a1b2c3d4e5f60718293a4b5", "c_2"},
		{"turn:", ""},
		{"turns:c_1:o7", "turns:c_1:o7"},
		{"thr:agent:ac_1:3", partition.ThreadsKey},
		{"thr:", partition.ThreadsKey},
		{"thread:ac_1", "thread:ac_1"},
		{"run:0123456789abcdef01234567", "run:0123456789abcdef01234567"},
		{"run:0123456789abcdef01234567/search~0011223344556677", "run:0123456789abcdef01234567"},
		{"run:0123456789abcdef01234567/search~0011223344556677/deeper~8899aabbccddeeff", "run:0123456789abcdef01234567"},
		{"turn:c_1:o7:0a1b/tool~0011223344556677", "c_1"},
		{long, strings.Repeat("r", 127)},
		{long + "/child~0011223344556677", strings.Repeat("r", 127)},
		{strings.Repeat("s", 128), strings.Repeat("s", 128)},
		{strings.Repeat("s", 129), strings.Repeat("s", 128)},
		// No rune starts in the first 129 bytes: the only boundary within 128 is the start.
		{strings.Repeat("\x80", 129), ""},
		{strings.Repeat("\x80", 129) + "/child~0011223344556677", ""},
		{"", ""},
	} {
		assert.Equal(t, c.want, partition.KeyOf(c.id), "KeyOf(%q)", c.id)
	}
}

// TestAChildLivesWithItsRoot: whatever its root and name (long, multi-byte, holding "/"), a
// child that kernel.ChildID names, and its children, have their root's key.
func TestAChildLivesWithItsRoot(t *testing.T) {
	roots := []string{"c_1", "turn:c_1:o2:ab", "thr:agent:ac_1:1", "run:x", strings.Repeat("é", 70), strings.Repeat("r", 127) + "𝄞", "a/b", strings.Repeat("\x80", 200)}
	for _, root := range roots {
		for _, name := range []string{"search", "a/b", strings.Repeat("n", 80)} {
			child := kernel.ChildID(root, name)
			assert.Equal(t, partition.KeyOf(root), partition.KeyOf(child), "root %q, child %q", root, child)
			assert.Equal(t, partition.KeyOf(root), partition.KeyOf(kernel.ChildID(child, name)), "root %q, grandchild", root)
		}
	}
}

// TestPartitionOfAnID is the golden table of where an execution lives: (id, key, P, partition),
// the partitions worked out by hand from FNV-1a (64 bits) of the key, so that a change to KeyOf
// or Of, which would move stored executions, shows here.
func TestPartitionOfAnID(t *testing.T) {
	const conv = "c_0123456789abcdef01234567"
	for _, c := range []struct {
		id, key string
		at      [3]int // the partition at P = 1, 4 and 12
	}{
		{conv, conv, [3]int{0, 3, 11}},
		{"turn:" + conv + ":o3:0a1b2c3d4e5f60718293a4b5", conv, [3]int{0, 3, 11}},
		{conv + "/search~0011223344556677", conv, [3]int{0, 3, 11}},
		{"run:0123456789abcdef01234567", "run:0123456789abcdef01234567", [3]int{0, 0, 8}},
		{"thr:agent:ac_1:3", partition.ThreadsKey, [3]int{0, 2, 6}},
		{"chosen.0123456789abcdef01234567", "chosen.0123456789abcdef01234567", [3]int{0, 3, 7}},
	} {
		assert.Equal(t, c.key, partition.KeyOf(c.id), "KeyOf(%q)", c.id)
		for i, p := range []int{1, 4, 12} {
			got, err := partition.Of(partition.KeyOf(c.id), p)
			require.NoError(t, err)
			assert.Equal(t, c.at[i], got, "%q at P = %d", c.id, p)
		}
	}
}

// Rebalance keeps what live nodes hold: a node leaving moves its partitions alone, a node
// joining takes only what the others hold beyond their new shares, and every plan is balanced.
func TestRebalanceMovesOnlyWhatMust(t *testing.T) {
	for _, p := range []int{4, 12, 13} {
		three := []string{"node-1", "node-2", "node-3"}
		held, err := partition.Assign(p, three)
		require.NoError(t, err)
		for gone := range three {
			var live []string
			for i, n := range three {
				if i != gone {
					live = append(live, n)
				}
			}
			after, err := partition.Rebalance(p, live, held)
			require.NoError(t, err)
			for i, owner := range held {
				if owner != three[gone] {
					require.Equal(t, owner, after[i], "P = %d, %s gone: partition %d of a survivor moved", p, three[gone], i)
				}
			}
			requireBalanced(t, after, live)
			back, err := partition.Rebalance(p, three, after)
			require.NoError(t, err)
			requireBalanced(t, back, three)
			moved := 0
			for i := range back {
				if back[i] != after[i] {
					moved++
					require.Equal(t, three[gone], back[i], "P = %d: partition %d moved to another than the node that joined", p, i)
				}
			}
			require.Equal(t, len(back.Owned(three[gone])), moved, "P = %d: the joining node takes exactly its share", p)
		}
	}
}

// requireBalanced fails unless plan gives every partition to one of nodes, each p/n or one more.
func requireBalanced(t *testing.T, plan partition.Plan, nodes []string) {
	t.Helper()
	lo := len(plan) / len(nodes)
	for _, n := range nodes {
		got := len(plan.Owned(n))
		require.True(t, got == lo || got == lo+1, "%s owns %d of %d", n, got, len(plan))
	}
	for i, o := range plan {
		require.Contains(t, nodes, o, "partition %d", i)
	}
}

// writtenPlan is the plan as docs/partitions.md describes it (The plan, exactly), written out
// here apart from the package's: its own FNV-1a, finalizer and sorts.
func writtenPlan(p int, nodes []string, held partition.Plan) partition.Plan {
	var set []string
	for _, n := range nodes {
		if n != "" && !slices.Contains(set, n) {
			set = append(set, n)
		}
	}
	sort.Strings(set)
	plan := make(partition.Plan, p)
	if len(set) == 0 {
		return plan
	}
	w := func(x string, j int) uint64 {
		z := fnv64a(x + "\x00" + strconv.Itoa(j))
		z ^= z >> 30
		z *= 0xbf58476d1ce4e5b9
		z ^= z >> 27
		z *= 0x94d049bb133111eb
		return z ^ z>>31
	}
	// Room: P/n each, one more for the P mod n heaviest own weights (a stable sort keeps equal
	// weights in name order).
	byOwn := slices.Clone(set)
	sort.SliceStable(byOwn, func(a, b int) bool { return w(byOwn[a], -1) > w(byOwn[b], -1) })
	room := map[string]int{}
	for i, x := range byOwn {
		room[x] = p / len(set)
		if i < p%len(set) {
			room[x]++
		}
	}
	// The pairs, built in name then partition order, sorted heaviest first (stably: equal weights
	// keep that order).
	type pr struct {
		x string
		j int
		w uint64
	}
	var prs []pr
	for _, x := range set {
		for j := range p {
			prs = append(prs, pr{x, j, w(x, j)})
		}
	}
	sort.SliceStable(prs, func(a, b int) bool { return prs[a].w > prs[b].w })
	for _, keep := range []bool{true, false} {
		for _, q := range prs {
			if plan[q.j] != "" || room[q.x] == 0 || keep && (q.j >= len(held) || held[q.j] != q.x) {
				continue
			}
			plan[q.j] = q.x
			room[q.x]--
		}
	}
	return plan
}

// TestRebalanceIsTheWrittenPlan: Assign and Rebalance give the plan docs/partitions.md writes
// out, for every count of partitions and nodes tried, without holders and with holders drawn at
// random (members, nodes that left, none; some holding more than their share).
func TestRebalanceIsTheWrittenPlan(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for p := 1; p <= 40; p++ {
		for n := 1; n <= 9; n++ {
			nodes := names(n)
			plan, err := partition.Assign(p, nodes)
			require.NoError(t, err)
			require.Equal(t, writtenPlan(p, nodes, nil), plan, "Assign(%d, %d nodes)", p, n)
			holders := append(names(n+2), "")
			for range 3 {
				held := make(partition.Plan, r.IntN(p+2)) // shorter or longer than P as well
				for i := range held {
					held[i] = holders[r.IntN(len(holders))]
				}
				got, err := partition.Rebalance(p, nodes, held)
				require.NoError(t, err)
				require.Equal(t, writtenPlan(p, nodes, held), got, "Rebalance(%d, %d nodes, %v)", p, n, held)
			}
		}
	}
}
