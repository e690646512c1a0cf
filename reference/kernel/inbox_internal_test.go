package kernel

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

// An inbox entry of either journal version reads as the same message: version 1 wrote the key
// and a zero position and time, version 2 derives the key and takes both from the event.
func TestInboxEntryOfEitherVersionReadsTheSame(t *testing.T) {
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	payload := json.RawMessage(`{"text":"hello"}`)
	v1, err := json.Marshal(Message{Sender: alice, MessageID: "m1", Key: SenderKey(alice, "m1"), Payload: payload})
	require.NoError(t, err)
	v2 := encodeInbox(alice, "m1", payload)
	require.Less(t, len(v2), len(v1), "version 2 stores less")
	require.NotContains(t, string(v2), SenderKey(alice, "m1"), "version 2 does not store the derived key")
	want := Message{Seq: 7, Sender: alice, MessageID: "m1", Key: SenderKey(alice, "m1"), Payload: payload, Time: 1234}
	for _, data := range [][]byte{v1, v2} {
		m, err := decodeInbox(store.Event{Stream: inboxStream("c1"), Seq: 7, Kind: kindMessage, Data: data, Time: 1234})
		require.NoError(t, err)
		require.Equal(t, want, m, "%s", data)
	}
	_, err = decodeInbox(store.Event{Data: []byte(`{"sender":`)})
	require.Error(t, err)
}
