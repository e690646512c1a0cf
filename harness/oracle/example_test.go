package oracle_test

import (
	"fmt"

	"github.com/loomcheck/loomcheck/harness/oracle"
)

// Sign an envelope the way a host does and check it the way a conversation must.
func ExampleSign() {
	key := make([]byte, 32) // the decoded signing.key of the SUT config
	for i := range key {
		key[i] = byte(i)
	}
	e := oracle.Sign(key, oracle.Envelope{ConversationID: "conv-1", Kind: oracle.KindUser, ID: "msg-0001",
		IAT: 1767225599000, Text: "Hello, world!", Asker: oracle.Identity{Actor: "alice"}})
	fmt.Println(e.Sig)

	check := func(payload []byte) string {
		return oracle.Check(oracle.CheckInput{Raw: payload, Keys: [][]byte{key}, ConversationID: "conv-1",
			Now: 1767225600000, Voices: func(id oracle.Identity) bool { return id == oracle.Identity{Actor: "alice"} }})
	}
	fmt.Printf("%q\n", check(e.Wire()))
	e.Text = "Hello, world?" // changed after signing
	fmt.Printf("%q\n", check(e.Wire()))
	// Output:
	// xL5a2ioWAoOaPMCZYzTyk8Qmsy5HAg905MYwstw13e0
	// ""
	// "unauthenticated"
}

// Count tokens without a tokenizer.
func ExampleTokens() {
	fmt.Println(oracle.Tokens("Tokyo 東京 is big"), oracle.Counter{}.Message("abcde"))
	// Output: 6 6
}
