package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// bare is the baseline server of the HTTP figures: a net/http server answering the routes the
// figures use as simply as it can. POST /conversations makes a conversation; POST .../turns
// answers 202 and puts the fixed reply on the conversation's event stream; GET .../events is an
// SSE stream that writes each event it is handed at once. It keeps nothing on disk and runs no
// model: what the engine does on top of it is what the figures measure.
type bare struct {
	mu    sync.Mutex
	n     int
	convs map[string]*bareConv
	// raw, when set, makes the durable writes a turn of the engine makes: accept commits before the
	// 202, reply commits before the reply goes on the stream (openDurableBare).
	raw           *sqlite.Raw
	accept, reply int
}

type bareConv struct {
	mu    sync.Mutex
	turns int64
	// events carries the events to write to the stream.
	events chan bareEvent
}

type bareEvent struct {
	name string
	data []byte
}

// openBare serves a bare server on a loopback port.
func openBare() (*target, *bare, error) {
	return serveBare(&bare{convs: map[string]*bareConv{}})
}

// openDurableBare serves a bare server that makes, for every turn, the durable commits a turn of
// the engine makes, as raw single-row SQLite INSERTs on raw: accept of them before it answers the
// POST (the acknowledgement is durable) and reply of them before it puts the reply on the stream.
func openDurableBare(raw *sqlite.Raw, accept, reply int) (*target, *bare, error) {
	return serveBare(&bare{convs: map[string]*bareConv{}, raw: raw, accept: accept, reply: reply})
}

// commit makes n of the durable commits, if the server makes any.
func (b *bare) commit(ctx context.Context, n int, data []byte) error {
	for range n {
		if err := b.raw.Insert(ctx, data); err != nil {
			return err
		}
	}
	return nil
}

func serveBare(b *bare) (*target, *bare, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /conversations", b.start)
	mux.HandleFunc("POST /conversations/{id}/turns", b.turn)
	mux.HandleFunc("GET /conversations/{id}/events", b.events)
	t, err := serveHandler(mux)
	return t, b, err
}

func (b *bare) conv(id string) *bareConv {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.convs[id]
}

func (b *bare) start(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	b.mu.Lock()
	b.n++
	id := fmt.Sprintf("c_bare%d", b.n)
	b.convs[id] = &bareConv{events: make(chan bareEvent, 4096)}
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%q,"mode":"owner","state":"open","turns":0,"generation":0}`, id)
}

func (b *bare) turn(w http.ResponseWriter, r *http.Request) {
	c := b.conv(r.PathValue("id"))
	if c == nil {
		http.NotFound(w, r)
		return
	}
	var body struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":"malformed"}`, http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.turns++
	turn := c.turns
	c.mu.Unlock()
	reply, _ := json.Marshal(entry{Turn: turn, Role: "assistant", Status: "complete", Text: `You said: "` + body.Text + `"`})
	if err := b.commit(r.Context(), b.accept, []byte(body.Text)); err != nil {
		http.Error(w, `{"error":"unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, `{"messageId":"m-%d","delivered":true}`, turn)
	if b.reply > 0 {
		w.(http.Flusher).Flush() // the acknowledgement goes out before the reply's commits, as the engine's does
	}
	if err := b.commit(context.Background(), b.reply, reply); err != nil {
		return // the client waits for a reply that never comes: the figure fails, as it should
	}
	c.events <- bareEvent{"message", reply}
}

// delta hands text to the conversation's stream as a live delta of its newest turn, as a
// provider hands a delta to the engine.
func (b *bare) delta(id string, turn int64, text string) {
	data, _ := json.Marshal(map[string]any{"turn": turn, "text": text})
	b.conv(id).events <- bareEvent{"delta", data}
}

func (b *bare) events(w http.ResponseWriter, r *http.Request) {
	c := b.conv(r.PathValue("id"))
	if c == nil {
		http.NotFound(w, r)
		return
	}
	fl := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	c.mu.Lock()
	turns := c.turns
	c.mu.Unlock()
	fmt.Fprintf(w, "event: status\ndata: {\"turns\":%d}\n\n", turns)
	fl.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-c.events:
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, ev.data); err != nil {
				return
			}
			fl.Flush()
		}
	}
}
