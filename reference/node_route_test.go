package reference

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v4"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
	"github.com/loomcheck/loomcheck/spec"
)

// TestEveryRouteHasARule: every operation of spec/openapi.yaml has a rule of the router, under
// its own pattern, and every rule is an operation of the document.
func TestEveryRouteHasARule(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(spec.OpenAPI(), &doc))
	require.NotEmpty(t, doc.Paths)
	ops := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "post", "put", "patch", "delete":
				ops[strings.ToUpper(method)+" "+path] = true
				// A concrete path: each {name} a segment of its own.
				concrete := strings.NewReplacer("{id}", "x1", "{gate}", "g", "{call}", "c", "{message}", "m", "{role}", "r").Replace(path)
				rule, _, ok := ruleOf(strings.ToUpper(method), concrete)
				require.True(t, ok, "no rule for %s %s", method, path)
				require.Equal(t, path, rule.pattern, "%s %s", method, path)
			}
		}
	}
	for _, rule := range routes {
		require.True(t, ops[rule.method+" "+rule.pattern], "rule for no operation: %s %s", rule.method, rule.pattern)
	}
	require.Len(t, routes, len(ops))
}

// TestRouteDestinations: the partition each kind of route goes to, from its path, its ticket
// or its body.
func TestRouteDestinations(t *testing.T) {
	const p = 4
	n := &Node{}
	const c = "c_0123456789abcdef01234567"
	in := func(key string) destination {
		i, err := partition.Of(key, p)
		require.NoError(t, err)
		return destination{part: i}
	}
	anyPart := destination{anyPart: true}
	// An id of another partition than c's.
	elsewhere := "c_0"
	for k := 1; in(elsewhere) == in(c); k++ {
		elsewhere = "c_" + strconv.Itoa(k)
	}
	for _, tc := range []struct {
		method, target, body string
		want                 destination
	}{
		{"GET", "/conversations/" + c, "", in(c)},
		{"POST", "/conversations/" + c + "/turns", `{"text":"x"}`, in(c)},
		{"GET", "/sessions/" + c + "/stream", "", in(c)},
		{"GET", "/sessions/" + c + "/stream?ticket=tk-1", "", in("tk-1")},
		{"POST", "/sessions/" + c + "/messages/m1/branch", `{}`, in(c)},
		{"POST", "/runs/run:0123/abort", "", in("run:0123")},
		// A route of two parameters goes by {id}, never by the other (whose partition differs).
		{"POST", "/sessions/" + c + "/messages/m2/cancel", `{}`, in(c)},
		{"POST", "/sessions/" + c + "/messages/m2/branch", `{}`, in(c)},
		{"POST", "/runs/run:0123/approvals/g1", `{}`, in("run:0123")},
		{"POST", "/runs/run:0123/human/c1", `{}`, in("run:0123")},
		{"GET", "/runtime/executions/turn:" + c + ":o1:ab/log", "", in(c)},
		{"POST", "/runtime/executions", `{"id":"turn:` + c + `:o1:ab","flow":"f","input":{}}`, in(c)},
		// A start is judged where the conversation its input names lives, whatever its id.
		{"POST", "/runtime/executions", `{"id":"` + elsewhere + `","flow":"f","input":{"conversationId":"` + c + `"}}`, in(c)},
		{"POST", "/runtime/executions", `{"id":"turn:` + c + `:o1:ab","flow":"f","input":{"conversationId":"` + c + `"}}`, in(c)},
		{"POST", "/tasks/tk_1/finish", "", in(partition.ThreadsKey)},
		{"POST", "/peer/v1/texts", `{}`, in(partition.ThreadsKey)},
		{"GET", "/agent-conversations", "", in(partition.ThreadsKey)},
		{"POST", "/conversations", `{"id":"plan-1"}`, in(conversation.ChosenID(anonymous, "plan-1"))},
		{"POST", "/runs", `{"id":"r1","prompt":"p"}`, in(run.ChosenID(anonymous, "r1"))},
		{"POST", "/conversations", `{}`, anyPart},
		{"POST", "/conversations", ``, anyPart},
		{"POST", "/conversations", `not json`, anyPart},
		{"POST", "/runs", `{"prompt":"p"}`, anyPart},
		{"GET", "/.well-known/loom", "", anyPart},
		{"GET", "/nowhere", "", anyPart},
		{"DELETE", "/conversations/" + c, "", anyPart},
	} {
		r := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body))
		got, _ := n.destinationOf(r, p, 1<<10)
		require.Equal(t, tc.want, got, "%s %s %s", tc.method, tc.target, tc.body)
		rest, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.Equal(t, tc.body, string(rest), "the body is read again whole")
	}
	require.NotEqual(t, in("m2"), in(c), "the message's partition differs from the session's")
	require.NotEqual(t, in("g1"), in("run:0123"), "the gate's partition differs from the run's")
	require.NotEqual(t, in("c1"), in("run:0123"), "the call's partition differs from the run's")
	// One partition: everything goes to it.
	got, _ := n.destinationOf(httptest.NewRequest("POST", "/conversations", strings.NewReader(`{"id":"x"}`)), 1, 1<<10)
	require.Equal(t, destination{}, got)
}

// send sends a request and returns the status, the node that served it and the body.
func send(t *testing.T, method, url, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get(NodeHeader), b
}

// idOf is the id member of an answer.
func idOf(t *testing.T, b []byte) string {
	t.Helper()
	var v struct{ ID string }
	require.NoError(t, json.Unmarshal(b, &v), string(b))
	require.NotEmpty(t, v.ID, string(b))
	return v.ID
}

// partOf is the partition of execution id among p.
func partOf(t *testing.T, id string, p int) int {
	t.Helper()
	i, err := partition.Of(partition.KeyOf(id), p)
	require.NoError(t, err)
	return i
}

// TestTheRouterSendsEachRouteToItsOwner: two nodes at four partitions, A holding 0 and 1, B 2
// and 3. Every class of route sent to either node is served by the owner of its partition (the
// owner serves what is sent to it itself); creations land where they are sent, in a partition
// of that node; a conversation made on A is driven through B; a session's ticket is minted in its
// partition and its presentation routed by it.
func TestTheRouterSendsEachRouteToItsOwner(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	withThreads := func(o *Options) {
		o.Threads = &ThreadsConfig{Roles: []threads.Role{{Name: "planner", Prompt: "P"}}, Members: []loomtype.Identity{{Tenant: "acme", Actor: "dana"}}}
	}
	a, baseA := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 }, withThreads)
	waitHeld(t, a, 0, 1)
	b, baseB := partitionedNode(t, url, "node-b", p, nil, withThreads)
	waitHeld(t, b, 2, 3)
	nodes := map[string]*Node{baseA: a, baseB: b}
	owner := func(i int) string { return [...]string{"node-a", "node-a", "node-b", "node-b"}[i] }

	for base, n := range nodes {
		// Creations with no id land where they are sent, in one of that node's partitions.
		for range 4 {
			code, served, body := send(t, "POST", base+"/conversations", `{}`)
			require.Equal(t, 201, code, string(body))
			require.Equal(t, n.ID(), served)
			require.Contains(t, n.held(), partOf(t, idOf(t, body), p))
			code, served, body = send(t, "POST", base+"/runs", `{"prompt":"hello"}`)
			require.Equal(t, 201, code, string(body))
			require.Equal(t, n.ID(), served)
			require.Contains(t, n.held(), partOf(t, idOf(t, body), p))
		}
		// Chosen ids go to their partition's owner, from either node.
		for i := range p {
			chosen := chosenIn(t, i, p)
			code, served, body := send(t, "POST", base+"/conversations", `{"id":"`+chosen+`"}`)
			require.Contains(t, []int{200, 201}, code, string(body))
			require.Equal(t, owner(i), served, "chosen conversation of partition %d", i)
			code, served, body = send(t, "POST", base+"/runs", `{"id":"`+chosen+`","prompt":"hi"}`)
			require.Contains(t, []int{200, 201}, code, string(body))
			id := idOf(t, body)
			require.Equal(t, owner(partOf(t, id, p)), served, "chosen run %s", id)
			_, served, _ = send(t, "GET", base+"/runs/"+id, "")
			require.Equal(t, owner(partOf(t, id, p)), served)
		}
		// The discovery document is the receiving node's; threads routes are the threads
		// partition's owner's.
		_, served, _ := send(t, "GET", base+"/.well-known/loom", "")
		require.Equal(t, n.ID(), served)
		_, served, _ = send(t, "GET", base+"/agent-conversations", "")
		require.Equal(t, owner(partOf(t, partition.ThreadsKey, p)), served)
	}

	// A conversation made on A, driven through B: served by A throughout.
	code, served, body := send(t, "POST", baseA+"/conversations", `{}`)
	require.Equal(t, 201, code)
	require.Equal(t, "node-a", served)
	id := idOf(t, body)
	code, served, _ = send(t, "POST", baseB+"/conversations/"+id+"/turns", `{"text":"via b","messageId":"m1"}`)
	require.Equal(t, 202, code)
	require.Equal(t, "node-a", served)
	h, served := waitHistory(t, baseB, id, 2)
	require.Equal(t, []string{"user via b", "assistant You said: \"via b\""}, h)
	require.Equal(t, "node-a", served)
	_, served = history(t, baseA, id)
	require.Equal(t, "node-a", served, "the owner serves without forwarding")

	checkTickets(t, baseB, id, p)
}

// checkTickets: a session's ticket, opened through base on a node that does not own the
// session's partition, is minted in that partition, and its presentation is routed by it, on the
// session's path (served) and on another session's (refused, as one engine refuses it).
func checkTickets(t *testing.T, baseB, id string, p int) {
	// The ticket is minted in the session's partition and routed by it, even on another path.
	code, served, body := send(t, "POST", baseB+"/sessions/"+id+"/stream/open", `{}`)
	require.Equal(t, 200, code, string(body))
	require.Equal(t, "node-a", served)
	var opened struct{ Ticket string }
	require.NoError(t, json.Unmarshal(body, &opened))
	require.Equal(t, partOf(t, id, p), partOf(t, opened.Ticket, p))
	other := chosenIn(t, 2, p)
	otherID := conversation.ChosenID(anonymous, other)
	req, err := http.NewRequest("GET", baseB+"/sessions/"+otherID+"/stream?ticket="+opened.Ticket, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, "node-a", resp.Header.Get(NodeHeader), "routed by the ticket, not the path")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a ticket of another session is refused, as one engine refuses it")
	code, served, body = send(t, "POST", baseB+"/sessions/"+id+"/stream/open", `{}`)
	require.Equal(t, 200, code, string(body))
	require.Equal(t, "node-a", served)
	require.NoError(t, json.Unmarshal(body, &opened))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err = http.NewRequestWithContext(ctx, "GET", baseB+"/sessions/"+id+"/stream?ticket="+opened.Ticket, nil)
	require.NoError(t, err)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "node-a", resp.Header.Get(NodeHeader))
}

// TestAForwardToAFormerOwnerIsAskedAgain: a node sent a forward for a partition it no longer
// holds answers 421 (before reading the body), and the sender forwards the request to the new
// holder, which serves it once.
func TestAForwardToAFormerOwnerIsAskedAgain(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	var aTakes3, bKeeps3 atomic.Bool
	bKeeps3.Store(true)
	a, baseA := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 || i == 3 && aTakes3.Load() }, nil)
	waitHeld(t, a, 0, 1)
	b, baseB := partitionedNode(t, url, "node-b", p, func(i int) bool { return i != 3 || bKeeps3.Load() }, nil)
	waitHeld(t, b, 2, 3)
	c, baseC := partitionedNode(t, url, "node-c", p, func(int) bool { return false }, nil)

	chosen := chosenIn(t, 3, p)
	id := conversation.ChosenID(anonymous, chosen)
	code, served, _ := send(t, "POST", baseC+"/conversations", `{"id":"`+chosen+`"}`)
	require.Equal(t, 201, code)
	require.Equal(t, "node-b", served)
	c.refreshHolder(context.Background(), 3)
	c.mu.Lock()
	stale := c.parts[3].holder
	c.mu.Unlock()
	require.Equal(t, "node-b", stale.Holder)

	// Partition 3 moves from B to A.
	bKeeps3.Store(false)
	b.release(3)
	aTakes3.Store(true)
	a.wake <- struct{}{}
	waitHeld(t, a, 0, 1, 3)
	require.Equal(t, []int{2}, b.held())

	// B answers a forward for partition 3 with 421, naming itself.
	req, err := http.NewRequest("POST", baseB+"/conversations/"+id+"/turns", strings.NewReader(`{"text":"x","messageId":"m0"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(forwardedHeader, c.mark())
	req.Header.Set(partitionHeader, "3")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
	require.Equal(t, "node-b", resp.Header.Get(NodeHeader))

	// C still believes B holds partition 3: its forward meets the 421 and goes to A.
	c.mu.Lock()
	stale.Expires = time.Now().Add(time.Hour)
	c.parts[3].holder, c.parts[3].seenAt = stale, time.Now().Add(time.Hour)
	c.mu.Unlock()
	code, served, body := send(t, "POST", baseC+"/conversations/"+id+"/turns", `{"text":"moved","messageId":"m1"}`)
	require.Equal(t, 202, code, string(body))
	require.Equal(t, "node-a", served)
	h, _ := waitHistory(t, baseA, id, 2)
	require.Equal(t, []string{"user moved", "assistant You said: \"moved\""}, h)
	require.True(t, slices.Equal(a.held(), []int{0, 1, 3}), strconv.Itoa(len(a.held())))
}

// TestABranchIsMadeWhereItsConversationRuns: a session's branch whose conversation falls in
// another partition is made by that partition's engine, on this node or on the holder, and its
// first turn is answered there once, a retry under the same key finding the same branch.
func TestABranchIsMadeWhereItsConversationRuns(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	a, baseA := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 }, nil)
	waitHeld(t, a, 0, 1)
	b, baseB := partitionedNode(t, url, "node-b", p, nil, nil)
	waitHeld(t, b, 2, 3)
	owner := func(i int) string { return [...]string{"node-a", "node-a", "node-b", "node-b"}[i] }

	code, _, body := send(t, "POST", baseA+"/conversations", `{}`)
	require.Equal(t, 201, code)
	id := idOf(t, body)
	code, _, _ = send(t, "POST", baseA+"/conversations/"+id+"/turns", `{"text":"hello","messageId":"m1"}`)
	require.Equal(t, 202, code)
	waitHistory(t, baseA, id, 2)

	seen := map[int]bool{}
	for k := 0; len(seen) < p && k < 64; k++ {
		key := "k" + strconv.Itoa(k)
		var branch string
		for try := range 2 { // a retry under the same key finds the same branch
			req, err := http.NewRequest("POST", baseB+"/sessions/"+id+"/messages/m1/branch", nil)
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", key)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, 201, resp.StatusCode, string(out))
			var res struct{ Session string }
			require.NoError(t, json.Unmarshal(out, &res))
			if try == 1 {
				require.Equal(t, branch, res.Session)
			}
			branch = res.Session
		}
		i := partOf(t, branch, p)
		seen[i] = true
		h, served := waitHistory(t, baseB, branch, 2)
		require.Equal(t, []string{"user hello", "assistant You said: \"hello\""}, h, "branch %s in partition %d", branch, i)
		require.Equal(t, owner(i), served)
	}
	require.Len(t, seen, p, "branches fell in every partition")
}
