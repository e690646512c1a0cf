package envelope_test

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
)

func ExampleSign() {
	key := bytes.Repeat([]byte{7}, 32)
	e := envelope.Sign(key, envelope.Envelope{
		ConversationID: "conv-1", Kind: envelope.KindUser, ID: "msg-1", IAT: 1767225600000,
		Text: "hi", Asker: envelope.Identity{Actor: "alice"},
	})
	fmt.Println(len(e.Sig), envelope.Verify([][]byte{key}, e) == nil)
	// Output: 43 true
}

func ExampleCanonical() {
	b := envelope.Canonical(envelope.Envelope{
		ConversationID: "conv-1", Kind: envelope.KindUser, ID: "msg-1", IAT: 1767225600000,
		Text: "line\u2028\"two\"", Asker: envelope.Identity{Tenant: "acme", Actor: "alice"},
	})
	fmt.Printf("%q\n", b) // %q shows the 0x00 byte and U+2028 as escapes; the bytes are raw
	// Output: "loom/conversation/envelope/v1\x00{\"asker\":{\"actor\":\"alice\",\"tenant\":\"acme\"},\"conversationId\":\"conv-1\",\"iat\":1767225600000,\"id\":\"msg-1\",\"kind\":\"user\",\"text\":\"line\u2028\\\"two\\\"\"}"
}

func ExampleCheck() {
	current := bytes.Repeat([]byte{1}, 32)
	previous := bytes.Repeat([]byte{2}, 32)
	owner := envelope.Identity{Actor: "alice"}
	now := int64(1767225600000)

	// The host signed this one before its key was rotated.
	e := envelope.Sign(previous, envelope.Envelope{ConversationID: "conv-1", Kind: envelope.KindUser,
		ID: "msg-1", IAT: now - 2000, Text: "hello", Asker: owner})
	raw, _ := json.Marshal(e)

	seen := envelope.NewReplaySet(0)
	in := envelope.CheckInput{Raw: raw, Keys: [][]byte{current, previous}, ConversationID: "conv-1",
		Voices: func(id envelope.Identity) bool { return id == owner }, Now: now, Seen: seen}
	v := envelope.Check(in)
	fmt.Println(v.OK, v.Envelope.Text)
	seen.Add(v.Envelope.ID, v.Envelope.IAT) // consume it in the same durable step as acting on it

	fmt.Println(envelope.Check(in).Reason)
	in.Raw = []byte(`{"kind":"user"}`)
	fmt.Println(envelope.Check(in).Reason)
	// Output:
	// true hello
	// replayed
	// malformed
}

func ExampleReplaySet() {
	s := envelope.NewReplaySet(2)
	s.Add("a", 100)
	s.Add("b", 90)
	s.Add("c", 95) // evicts a: the floor rises to 100
	fmt.Println(s.Contains("a"), s.Floor())
	carry, _ := json.Marshal(s)
	fmt.Println(string(carry))
	restored, err := envelope.ParseReplaySet(carry, 2)
	fmt.Println(err, restored.Floor(), restored.Contains("c"))
	// Output:
	// false 100
	// {"floor":100,"seen":[["b",90],["c",95]]}
	// <nil> 100 true
}

func ExampleTurnExecutionID() {
	key := bytes.Repeat([]byte{1}, 32)
	id := envelope.TurnExecutionID(key, "conv-1", 3)
	fmt.Println(id[:len("turn:conv-1:o3:")], len(id))
	// Output: turn:conv-1:o3: 39
}

func ExampleSenderKey() {
	k := envelope.SenderKey("", "alice", "", "msg-1")
	fmt.Println(len(k), envelope.ValidID(k))
	// Output: 64 true
}
