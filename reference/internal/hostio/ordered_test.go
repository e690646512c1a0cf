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

// TestOrderedReportsAreBounded: while the hook is stuck, the queue holds MaxQueuedReports reports
// (the one being delivered is no longer queued) and drops and counts every further one.
func TestOrderedReportsAreBounded(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan string, MaxQueuedReports+8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep ErrorReport
		_ = json.NewDecoder(r.Body).Decode(&rep)
		arrived <- rep.ErrorID
		<-release
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	defer close(release)
	q := NewOrderedReports(&ErrorHook{URL: srv.URL})
	q.Add(ErrorReport{ErrorID: "first", Error: "boom"})
	select {
	case id := <-arrived: // the first is out of the queue and held by the hook
		if id != "first" {
			t.Fatalf("first delivery %q", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first report did not arrive")
	}
	for i := range MaxQueuedReports + 5 {
		q.Add(ErrorReport{ErrorID: fmt.Sprintf("err_%d", i), Error: "boom"})
	}
	if got := q.Dropped(); got != 5 {
		t.Fatalf("dropped %d, want 5", got)
	}
}
