package model

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTrip is an http.RoundTripper made of a function, to hand the client a response whose body
// misbehaves exactly as a test needs.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// body reads as text, then runs then (if set) and ends with err (io.EOF if nil).
type body struct {
	text string
	then func()
	err  error
	off  int
}

func (b *body) Read(p []byte) (int, error) {
	n := copy(p, b.text[b.off:])
	b.off += n
	if b.off < len(b.text) {
		return n, nil
	}
	if b.then != nil {
		b.then()
		b.then = nil
	}
	if b.err != nil {
		return n, b.err
	}
	return n, io.EOF
}

func (b *body) Close() error { return nil }

func clientFor(status int, contentType string, b *body, opts ClientOptions) *Client {
	opts.BaseURL = "http://model.invalid/v1"
	opts.HTTPClient = &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		if contentType != "" {
			h.Set("Content-Type", contentType)
		}
		return &http.Response{StatusCode: status, Header: h, Body: b, Request: r}, nil
	})}
	return NewClient(opts)
}

var errBroken = errors.New("connection reset")

// An error status is a ProviderError with the body read so far, unless the request was
// interrupted while reading it; a body that reads whole is a ProviderError even if the context
// ends just then.
func TestErrorStatusBodies(t *testing.T) {
	t.Run("body cut, context alive", func(t *testing.T) {
		_, err := clientFor(503, "", &body{text: "bus", err: errBroken}, ClientOptions{}).Complete(context.Background(), Request{}, nil)
		require.Equal(t, &ProviderError{Status: 503, Body: "bus"}, err)
	})
	t.Run("body whole, context ends while reading", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err := clientFor(503, "", &body{text: "busy", then: cancel}, ClientOptions{}).Complete(ctx, Request{}, nil)
		require.Equal(t, &ProviderError{Status: 503, Body: "busy"}, err)
	})
	t.Run("body cut, context ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err := clientFor(503, "", &body{text: "bu", then: cancel, err: errBroken}, ClientOptions{}).Complete(ctx, Request{}, nil)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, "model: request interrupted: context canceled", err.Error())
	})
}

// Every status outside 200..299 is the provider's refusal: 300 as much as 500.
func TestStatusBounds(t *testing.T) {
	ok := `{"choices":[{"message":{"content":"fine"}}]}`
	for _, status := range []int{199, 300, 301, 500} {
		_, err := clientFor(status, "application/json", &body{text: "no"}, ClientOptions{}).Complete(context.Background(), Request{}, nil)
		require.Equal(t, &ProviderError{Status: status, Body: "no"}, err, "status %d", status)
	}
	for _, status := range []int{200, 299} {
		resp, err := clientFor(status, "application/json", &body{text: ok}, ClientOptions{}).Complete(context.Background(), Request{}, nil)
		require.NoError(t, err, "status %d", status)
		require.Equal(t, Response{Content: "fine"}, resp)
	}
}

// A plain answer whose body breaks off is a transport failure, not a malformed answer.
func TestPlainBodyCutIsTransportError(t *testing.T) {
	_, err := clientFor(200, "application/json", &body{text: `{"choices":[{"mess`, err: errBroken}, ClientOptions{}).
		Complete(context.Background(), Request{}, nil)
	var te *TransportError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, errBroken)
}

// A streamed answer whose body breaks off is a transport failure too, with the text so far.
func TestStreamBodyCutIsTransportError(t *testing.T) {
	resp, err := clientFor(200, "text/event-stream", &body{text: "data: " + contentChunk("so far") + "\n\n", err: errBroken},
		ClientOptions{Stream: true}).Complete(context.Background(), Request{}, nil)
	var te *TransportError
	require.ErrorAs(t, err, &te)
	require.Equal(t, Response{Content: "so far"}, resp)
}

// Each malformed answer is refused for its own reason.
func TestMalformedAnswerReasons(t *testing.T) {
	for _, c := range []struct {
		name, body, reason string
		stream             bool
	}{
		{"not json", `{"choices":`, "answer is not a chat completion", false},
		{"no choices", `{"choices":[]}`, "answer has no choices", false},
		{"stream without end", "data: " + contentChunk("ok") + "\n\n", "event stream ended before [DONE]", true},
		{"stream bad chunk", "data: {nope\n\n", "event is not a completion chunk", true},
	} {
		ct := "application/json"
		if c.stream {
			ct = "text/event-stream"
		}
		_, err := clientFor(200, ct, &body{text: c.body}, ClientOptions{Stream: c.stream}).Complete(context.Background(), Request{}, nil)
		var pe *ProtocolError
		require.ErrorAs(t, err, &pe, c.name)
		require.Equal(t, c.reason, pe.Reason, c.name)
	}
}

// An error member of any non-null value, however short, makes the answer a ProviderError.
func TestShortErrorMembers(t *testing.T) {
	plain := `{"error":1,"choices":[{"message":{"content":"x"}}]}`
	_, err := clientFor(200, "application/json", &body{text: plain}, ClientOptions{}).Complete(context.Background(), Request{}, nil)
	require.Equal(t, &ProviderError{Status: 200, Body: plain}, err)
	chunk := `{"error":1,"choices":[{"delta":{"content":"x"}}]}`
	_, err = clientFor(200, "text/event-stream", &body{text: "data: " + chunk + "\n\n"}, ClientOptions{Stream: true}).
		Complete(context.Background(), Request{}, nil)
	require.Equal(t, &ProviderError{Status: 200, Body: chunk}, err)
}

// A stream that ends without [DONE] after a finish reason is complete.
func TestStreamEndingWithFinishReasonIsComplete(t *testing.T) {
	b := "data: " + contentChunk("all") + "\n\n" + "data: " + finishChunk("stop") + "\n\n"
	resp, err := clientFor(200, "text/event-stream", &body{text: b}, ClientOptions{Stream: true}).Complete(context.Background(), Request{}, nil)
	require.NoError(t, err)
	require.Equal(t, Response{Content: "all", FinishReason: "stop"}, resp)
}

// The answer bound is on the body and inclusive: a streamed body of exactly MaxResponseBytes is
// read, one byte less allowed is "answer too large"; a configured bound of 1 is a bound of 1, not
// the default. (The text of a stream is always shorter than its body, so the bound on the text
// that applyChunk also keeps is never the one that trips.)
func TestStreamedAnswerBound(t *testing.T) {
	var b strings.Builder
	for _, p := range []string{"12345", "67890"} {
		b.WriteString("data: " + contentChunk(p) + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	stream := b.String()
	for _, c := range []struct {
		max  int64
		want error
	}{{int64(len(stream)), nil}, {int64(len(stream)) - 1, &ProtocolError{Reason: "answer too large"}}, {1, &ProtocolError{Reason: "answer too large"}}} {
		resp, err := clientFor(200, "text/event-stream", &body{text: stream}, ClientOptions{Stream: true, MaxResponseBytes: c.max}).
			Complete(context.Background(), Request{}, nil)
		if c.want != nil {
			require.Equal(t, c.want, err, "bound %d", c.max)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, Response{Content: "1234567890"}, resp)
	}
	plain := `{"choices":[{"message":{"content":"fine"}}]}`
	for _, c := range []struct {
		max  int64
		want error
	}{{int64(len(plain)), nil}, {int64(len(plain)) - 1, &ProtocolError{Reason: "answer too large"}}, {1, &ProtocolError{Reason: "answer too large"}}} {
		_, err := clientFor(200, "application/json", &body{text: plain}, ClientOptions{MaxResponseBytes: c.max}).
			Complete(context.Background(), Request{}, nil)
		if c.want == nil {
			require.NoError(t, err, "bound %d", c.max)
		} else {
			require.Equal(t, c.want, err, "bound %d", c.max)
		}
	}
}

// One event may carry up to MaxLineBytes of data over several data lines, and not one byte more.
func TestEventDataBound(t *testing.T) {
	event := func(total int) string {
		first := contentChunk("x")
		var b strings.Builder
		b.WriteString("data: " + first + "\n")
		left := total - len(first)
		for left > 0 {
			n := min(left, 4000)
			b.WriteString("data: " + strings.Repeat(" ", n) + "\n") // JSON white space
			left -= n
		}
		return b.String() + "\ndata: [DONE]\n\n"
	}
	resp, err := clientFor(200, "text/event-stream", &body{text: event(MaxLineBytes)}, ClientOptions{Stream: true}).
		Complete(context.Background(), Request{}, nil)
	require.NoError(t, err)
	require.Equal(t, "x", resp.Content)
	_, err = clientFor(200, "text/event-stream", &body{text: event(MaxLineBytes + 1)}, ClientOptions{Stream: true}).
		Complete(context.Background(), Request{}, nil)
	require.Equal(t, &ProtocolError{Reason: "event too large"}, err)
}

// wordPieces keeps runs of white space with the word after them.
func TestWordPieces(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"a  b\tc", []string{"a", "  b", "\tc"}},
		{"one\n\ntwo ", []string{"one", "\n\ntwo", " "}},
		{"  lead", []string{"  lead"}},
		{"", nil},
	} {
		got := wordPieces(c.in)
		assert.Equal(t, c.want, got, "wordPieces(%q)", c.in)
		assert.Equal(t, c.in, strings.Join(got, ""))
	}
}
