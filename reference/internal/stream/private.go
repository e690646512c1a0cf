package stream

import (
	"encoding/json"
	"errors"
)

// Enc is the opaque body of a private message: the ciphertext and the names of the algorithm and
// the key it was sealed with. The stream relays it as it came and never reads it.
//
//	ev := stream.Event{Kind: stream.EventPrivate, Message: "m1", Enc: &stream.Enc{Alg: "mls-1", Kid: "k7", CT: "AAEC"}}
type Enc struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	CT  string `json:"ct"`
}

// The errors of ValidateUserMessage.
var (
	// ErrNotObject: the data is not one JSON object.
	ErrNotObject = errors.New("stream: user-message data is not a JSON object")
	// ErrNoMessage: the data names no message.
	ErrNoMessage = errors.New("stream: user-message names no message")
	// ErrUnknownState: the state is missing or not one the stream knows.
	ErrUnknownState = errors.New("stream: user-message state is unknown")
	// ErrTextAndEnc: a message carries both a text and an encrypted body.
	ErrTextAndEnc = errors.New("stream: user-message has both text and enc")
	// ErrNoBody: a sent or queued message carries neither a text nor an encrypted body.
	ErrNoBody = errors.New("stream: user-message has neither text nor enc")
)

// EncError is the error of a user-message whose enc is not an object (Field "enc") or lacks one
// of alg, kid and ct as a non-empty string (Field names which).
//
//	var ee *stream.EncError
//	if errors.As(stream.ValidateUserMessage(data), &ee) { log.Print(ee.Field) }
type EncError struct{ Field string }

func (e *EncError) Error() string { return "stream: user-message enc: bad or missing " + e.Field }

var userStates = map[string]bool{"sent": true, "queued": true, "picked-up": true, "cancelled": true, "rejected": true}

// ValidateUserMessage checks the data of a user-message frame: a message id, a known state, and
// for a sent or queued message exactly one of text and enc, where enc is {alg, kid, ct}, each a
// non-empty string. The ciphertext is not read.
//
// Errors: ErrNotObject, ErrNoMessage, ErrUnknownState, ErrTextAndEnc, ErrNoBody, *EncError.
//
//	err := stream.ValidateUserMessage([]byte(`{"message":"m1","state":"sent","enc":{"alg":"mls","kid":"k1","ct":"AAEC"}}`))
func ValidateUserMessage(data []byte) error {
	var d map[string]json.RawMessage
	if err := decodeJSON(data, &d); err != nil || d == nil {
		return ErrNotObject
	}
	var msg, state string
	if json.Unmarshal(d["message"], &msg) != nil || msg == "" {
		return ErrNoMessage
	}
	if json.Unmarshal(d["state"], &state) != nil || !userStates[state] {
		return ErrUnknownState
	}
	_, hasText := d["text"]
	rawEnc, hasEnc := d["enc"]
	if hasText && hasEnc {
		return ErrTextAndEnc
	}
	if hasEnc {
		var enc map[string]json.RawMessage
		if json.Unmarshal(rawEnc, &enc) != nil || enc == nil {
			return &EncError{Field: "enc"}
		}
		for _, k := range []string{"alg", "kid", "ct"} {
			var s string
			if json.Unmarshal(enc[k], &s) != nil || s == "" {
				return &EncError{Field: k}
			}
		}
		return nil
	}
	if !hasText && (state == "sent" || state == "queued") {
		return ErrNoBody
	}
	return nil
}

// IsEncrypted reports whether f is a private message: a user-message whose data carries enc
// (the relayed object, or the logged mark enc: true). Search, memory and export skip such a
// frame.
//
//	if stream.IsEncrypted(f) { continue }
func IsEncrypted(f Frame) bool {
	if f.Kind() != KindUserMessage {
		return false
	}
	var d struct {
		Enc json.RawMessage `json:"enc"`
	}
	if json.Unmarshal(f.Data, &d) != nil || len(d.Enc) == 0 {
		return false
	}
	var mark bool
	if json.Unmarshal(d.Enc, &mark) == nil {
		return mark
	}
	var obj map[string]json.RawMessage
	return json.Unmarshal(d.Enc, &obj) == nil && obj != nil
}

// LoggedShape is what the durable record keeps of a user-message's data: for a private message
// only {message, state, enc: true}, that one passed, never its ciphertext or key name; any other
// user-message's data as it is (a copy). The data is checked first (ValidateUserMessage).
//
// Errors: those of ValidateUserMessage.
//
//	rec, err := stream.LoggedShape(f.Data) // {"enc":true,"message":"m1","state":"sent"}
func LoggedShape(data []byte) (json.RawMessage, error) {
	if err := ValidateUserMessage(data); err != nil {
		return nil, err
	}
	var d struct {
		Message string          `json:"message"`
		State   string          `json:"state"`
		Enc     json.RawMessage `json:"enc"`
	}
	_ = json.Unmarshal(data, &d)
	if len(d.Enc) == 0 {
		return append(json.RawMessage(nil), data...), nil
	}
	out, _ := json.Marshal(map[string]any{"message": d.Message, "state": d.State, "enc": true})
	return out, nil
}
