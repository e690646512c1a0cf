package model

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// BuiltinEchoRunes is how much of the user's text the builtin model repeats.
const BuiltinEchoRunes = 200

// Builtin returns a Provider that needs no network: a small deterministic model for trying a
// server by hand. Its answer to a request is
//
//	You said: "<the first BuiltinEchoRunes runes of the last user message>"
//
// (an empty quote when there is no user message), with FinishReason "stop". It streams the answer
// to onDelta in word-sized pieces (each word with the space before it), never calls tools, and
// gives the same answer to the same request. When ctx ends it stops between two pieces and returns
// the text so far with an error wrapping ctx.Err(). It is safe for concurrent use.
//
//	p := model.Builtin()
//	resp, _ := p.Complete(ctx, model.Request{Messages: []model.Message{{Role: "user", Content: "hi"}}}, nil)
//	// resp.Content == `You said: "hi"`
func Builtin() Provider { return builtin{} }

// BuiltinSlow is Builtin waiting delay before each streamed piece, so that a person watching the
// event stream sees the answer arrive piece by piece. A ctx that ends during a wait stops it at
// once, as between two pieces. A delay of 0 or less is Builtin.
//
//	p := model.BuiltinSlow(50 * time.Millisecond)
func BuiltinSlow(delay time.Duration) Provider { return builtin{delay: delay} }

type builtin struct{ delay time.Duration }

func (b builtin) Complete(ctx context.Context, req Request, onDelta func(text string)) (Response, error) {
	last := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == RoleUser {
			last = req.Messages[i].Content
			break
		}
	}
	answer := `You said: "` + firstRunes(last, BuiltinEchoRunes) + `"`
	var out strings.Builder
	for _, piece := range wordPieces(answer) {
		if b.delay > 0 {
			t := time.NewTimer(b.delay)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if err := ctx.Err(); err != nil {
			return Response{Content: out.String()}, fmt.Errorf("model: request interrupted: %w", err)
		}
		out.WriteString(piece)
		if onDelta != nil {
			onDelta(piece)
		}
	}
	return Response{Content: out.String(), FinishReason: FinishStop}, nil
}

// firstRunes returns at most n runes of s, never splitting a character.
func firstRunes(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	count := 0
	for i := range s {
		if count == n {
			return s[:i]
		}
		count++
	}
	return s
}

// wordPieces splits s into pieces that each start with the spaces before a word; joined they
// give s back.
func wordPieces(s string) []string {
	var pieces []string
	start := 0
	inWord := false
	for i, r := range s {
		space := r == ' ' || r == '\n' || r == '\t'
		if space && inWord {
			pieces = append(pieces, s[start:i])
			start = i
			inWord = false
		} else if !space {
			inWord = true
		}
	}
	if start < len(s) {
		pieces = append(pieces, s[start:])
	}
	return pieces
}
