package reference

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// runChosenIn is a chosen run id whose run (run.ChosenID of anonymous) falls in partition i of p.
func runChosenIn(t *testing.T, i, p int) string {
	t.Helper()
	for k := 0; ; k++ {
		chosen := "run-" + strconv.Itoa(i) + "-" + strconv.Itoa(k)
		if partOf(t, run.ChosenID(anonymous, chosen), p) == i {
			return chosen
		}
	}
}

// finishedRun starts the run chosen at base with prompt and scope, waits until it completed and
// returns its output and the node that served the last read.
func finishedRun(t *testing.T, base, chosen, prompt, scope string) (string, string) {
	t.Helper()
	code, _, body := send(t, "POST", base+"/runs", `{"id":"`+chosen+`","prompt":"`+prompt+`","cacheScope":"`+scope+`"}`)
	require.Equal(t, 201, code, string(body))
	id := idOf(t, body)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, served, body := send(t, "GET", base+"/runs/"+id, "")
		require.Equal(t, 200, code, string(body))
		var v struct {
			Status string
			Output string
		}
		require.NoError(t, json.Unmarshal(body, &v), string(body))
		if v.Status == run.StatusCompleted {
			return v.Output, served
		}
		require.Equal(t, run.StatusRunning, v.Status, string(body))
		require.True(t, time.Now().Before(deadline), "run %s never completed", id)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTheResponseCacheIsSharedByEveryPartition: two nodes at four partitions, the response cache
// on. Runs of one principal and one scope asking the same thing, one in each partition (two on
// each node), ask the model once: the first run's answer serves the other three, wherever their
// ids put them. Another scope asks again once, and its answer then serves its own runs.
func TestTheResponseCacheIsSharedByEveryPartition(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	m := scriptmodel.Echo("said: ")
	withCache := func(o *Options) {
		o.ResponseCache = true
		o.Deps.Provider = m
	}
	a, baseA := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 }, withCache)
	waitHeld(t, a, 0, 1)
	b, baseB := partitionedNode(t, url, "node-b", p, func(i int) bool { return i >= 2 }, withCache)
	waitHeld(t, b, 2, 3)
	owner := [...]string{"node-a", "node-a", "node-b", "node-b"}

	first := ""
	for i := range p {
		out, served := finishedRun(t, baseA, runChosenIn(t, i, p), "same question", "scope-1")
		require.Equal(t, owner[i], served, "the run of partition %d", i)
		if i == 0 {
			first = out
		}
		require.Equal(t, first, out, "the run of partition %d", i)
		require.Equal(t, 1, m.Calls(), "model calls after the run of partition %d", i)
	}
	for i := range p {
		chosen := runChosenIn(t, (i+1)%p, p) + "-other"
		finishedRun(t, baseB, chosen, "same question", "scope-2")
		require.Equal(t, 2, m.Calls(), "model calls after run %d of another scope", i)
	}
}
