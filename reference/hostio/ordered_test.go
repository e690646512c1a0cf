package hostio

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestOrderedReportsArriveInOrder: reports added one after another reach the hook in that order,
// even when the first is slow to deliver.
func TestOrderedReportsArriveInOrder(t *testing.T) {
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep ErrorReport
		_ = json.NewDecoder(r.Body).Decode(&rep)
		if rep.ErrorID == "err_0" {
			time.Sleep(50 * time.Millisecond)
		}
		mu.Lock()
		got = append(got, rep.ErrorID)
		if len(got) == 20 {
			close(done)
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	q := NewOrderedReports(&ErrorHook{URL: srv.URL})
	for i := range 20 {
		q.Add(ErrorReport{ErrorID: fmt.Sprintf("err_%d", i), Error: "boom"})
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reports did not all arrive")
	}
	mu.Lock()
	defer mu.Unlock()
	for i, id := range got {
		if id != fmt.Sprintf("err_%d", i) {
			t.Fatalf("arrival order %v, want err_0 to err_19 in order", got)
		}
	}
}
