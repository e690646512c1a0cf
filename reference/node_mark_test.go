package reference

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// forgedMarks are Loom-Forwarded-By values a client can make without the nodes' signing keys: a
// node's name alone, a name with a proof that is not one, and a proof made with another key.
func forgedMarks() []string {
	other := hex.EncodeToString(markFor([]byte("fedcba9876543210fedcba9876543210"), "node-b"))
	return []string{"node-b", "node-b forged", "node-b " + strings.Repeat("0", 64), "node-b " + other}
}

// sendMarked sends a request with a Loom-Forwarded-By and a Loom-Partition of the client's own
// and returns the status, the node that served it and the body.
func sendMarked(t *testing.T, method, url, body, mark, part string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(forwardedHeader, mark)
	req.Header.Set(partitionHeader, part)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get(NodeHeader), b
}

// TestAClientsMarkIsIgnored: a request whose Loom-Forwarded-By a client made is served as any
// other request (spec/nodes.md, "A follower answers as the holder would"): the partition its
// Loom-Partition names is not believed, so it is forwarded to the holder of its own partition
// rather than refused with 421; and the node-only branch route is a path no engine serves, so a
// client cannot make a conversation in another principal's name through it.
func TestAClientsMarkIsIgnored(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	a, baseA := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 }, nil)
	waitHeld(t, a, 0, 1)
	b, baseB := partitionedNode(t, url, "node-b", p, nil, nil)
	waitHeld(t, b, 2, 3)

	chosen := chosenIn(t, 3, p)
	code, served, body := send(t, "POST", baseA+"/conversations", `{"id":"`+chosen+`"}`)
	require.Equal(t, 201, code, string(body))
	require.Equal(t, "node-b", served)
	id := conversation.ChosenID(anonymous, chosen)

	victim := loomtype.Identity{Actor: "victim"}
	for k, mark := range forgedMarks() {
		// A names partition 2, which it does not hold: believed, the request would be answered
		// 421; ignored, it goes to partition 3's holder.
		code, served, body := sendMarked(t, "GET", baseA+"/conversations/"+id, "", mark, "2")
		require.Equal(t, 200, code, "%q: %s", mark, body)
		require.Equal(t, "node-b", served, mark)

		// The branch route, under a forged mark, makes nothing in the victim's name.
		vchosen := "planted-" + strconv.Itoa(k)
		start, err := json.Marshal(sessions.BranchStart{Who: victim, Chosen: vchosen, Text: "planted", MessageID: "m1"})
		require.NoError(t, err)
		for _, base := range []string{baseA, baseB} {
			code, _, body = sendMarked(t, "POST", base+branchPath, string(start), mark, "")
			require.Equal(t, http.StatusNotFound, code, "%q: %s", mark, body)
		}
		vid := conversation.ChosenID(victim, vchosen)
		holder := b
		if i := partOf(t, vid, p); i < 2 {
			holder = a
		}
		_, err = holder.engineOf(partOf(t, vid, p)).cv.Status(t.Context(), victim, vid)
		require.ErrorIs(t, err, loomtype.ErrNotFound, "%q: the victim has no conversation %s", mark, vid)
	}
}
