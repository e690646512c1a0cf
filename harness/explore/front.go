// The front between the engine instances of an exploration and the world: each instance's epoch
// on its requests, the gate on model requests, and who sent which error report.

package explore

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/loomcheck/loomcheck/harness/world"
)

// hookReport is one error report, with the epoch of the instance that sent it.
type hookReport struct {
	Epoch  int
	Report world.ErrorReport
}

// front is what the instances reach the world through: it strips the epoch prefix of the path
// ("/e/<epoch>/..."), holds model requests while the gate is shut, marks each model request with
// the epoch's API key (heldKey for one that arrived while the gate was shut), and notes which
// epoch sent each error report.
type front struct {
	w *world.World

	mu    sync.Mutex
	shut  chan struct{} // non-nil while model requests wait
	hooks []hookReport
	// crashed is each epoch's crash channel: once it fired, that epoch's model and tool requests
	// are refused (503) before they reach the world, as a dead process sends none. A scripted
	// answer is then consumed only by an instance that lives to record it.
	crashed map[int]<-chan struct{}
	calls   []toolCall
	held    int // model requests waiting at the shut gate now
}

// toolCall is one tool call as the front saw it: which epoch made it, and how it was answered.
type toolCall struct {
	Epoch     int
	Name, Key string
	Status    int
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (f *front) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/e/")
	i := strings.IndexByte(rest, '/')
	if !ok || i < 0 {
		http.NotFound(rw, r)
		return
	}
	epoch, err := strconv.Atoi(rest[:i])
	if err != nil {
		http.NotFound(rw, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = rest[i:], ""
	f.mu.Lock()
	dead := fired(f.crashed[epoch])
	f.mu.Unlock()
	if dead && (r2.URL.Path == world.PathModel || strings.HasPrefix(r2.URL.Path, world.PathTools)) {
		http.Error(rw, "the instance crashed", http.StatusServiceUnavailable)
		return
	}
	if name, ok := strings.CutPrefix(r2.URL.Path, world.PathTools); ok {
		sw := &statusWriter{ResponseWriter: rw}
		f.w.Handler().ServeHTTP(sw, r2)
		f.mu.Lock()
		f.calls = append(f.calls, toolCall{Epoch: epoch, Name: name, Key: r.Header.Get("Idempotency-Key"), Status: sw.status})
		f.mu.Unlock()
		return
	}
	switch r2.URL.Path {
	case world.PathModel:
		f.mu.Lock()
		shut := f.shut
		f.mu.Unlock()
		key := epochKey(epoch)
		if shut != nil {
			key = heldKey(epoch)
			f.mu.Lock()
			f.held++
			f.mu.Unlock()
			gone := false
			select {
			case <-shut:
			case <-r.Context().Done():
				gone = true
			}
			f.mu.Lock()
			f.held--
			f.mu.Unlock()
			if gone {
				return
			}
		}
		r2.Header.Set("Authorization", "Bearer "+key)
	case world.PathErrorHook:
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var rep world.ErrorReport
		_ = json.Unmarshal(b, &rep)
		f.mu.Lock()
		f.hooks = append(f.hooks, hookReport{Epoch: epoch, Report: rep})
		f.mu.Unlock()
		r2.Body = io.NopCloser(bytes.NewReader(b))
		r2.ContentLength = int64(len(b))
	}
	f.w.Handler().ServeHTTP(rw, r2)
}

// shutModel makes model requests wait until openModel.
func (f *front) shutModel() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shut == nil {
		f.shut = make(chan struct{})
	}
}

func (f *front) openModel() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shut != nil {
		close(f.shut)
		f.shut = nil
	}
}

// waiting is the number of model requests waiting at the shut gate.
func (f *front) waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held
}

func (f *front) toolCalls() []toolCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]toolCall(nil), f.calls...)
}

func (f *front) reports() []hookReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]hookReport(nil), f.hooks...)
}
