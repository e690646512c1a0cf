package world

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Summary is one scripted answer of the summarizer: {"summary": Text}, or the refusal Fail. With
// Hold set the summarizer first waits at the hold.
//
//	_ = w.Summarizer().Enqueue(world.Summary{Text: "they talked about cats"})
type Summary struct {
	Text string
	Fail *Failure
	Hold *Hold
}

// SummaryMessage is one message handed to the summarizer.
//
//	m := w.Summarizer().Requests()[0].Messages[0] // world.SummaryMessage{Role: "user", Content: "hi"}
type SummaryMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// SummaryRequest is one recorded call of the summarizer. Index is its 0-based arrival number since
// the last Reset; Answer is the summary sent ("" when refused or not answered).
//
//	prev := w.Summarizer().Requests()[1].Previous
type SummaryRequest struct {
	Index    int
	Messages []SummaryMessage
	Previous string
	Arrived  time.Time
	Answer   string
}

type summarizeRequest struct {
	Messages *[]SummaryMessage `json:"messages"`
	Previous string            `json:"previous"`
}

// Summarizer is the summarization service at POST /summarize. Each call takes the next scripted
// Summary; when none is left it answers the default summary DefaultSummary(len(messages), previous
// != ""). It is safe for concurrent use.
//
//	_ = w.Summarizer().Enqueue(world.Summary{Text: "they talked about cats"})
type Summarizer struct {
	w *World

	mu    sync.Mutex
	sig   signal
	queue []Summary
	log   *journal[SummaryRequest]
}

// DefaultSummary is the summarizer's answer when nothing is scripted: "summary of <n> messages",
// followed by " and a previous summary" when the call carried one.
//
//	world.DefaultSummary(4, true) // "summary of 4 messages and a previous summary"
func DefaultSummary(n int, withPrevious bool) string {
	s := fmt.Sprintf("summary of %d messages", n)
	if withPrevious {
		s += " and a previous summary"
	}
	return s
}

func newSummarizer(w *World) *Summarizer {
	return &Summarizer{w: w, log: newJournal[SummaryRequest](w.opts)}
}

func (s *Summarizer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = nil
	s.log = newJournal[SummaryRequest](s.w.opts)
	s.sig.fire()
}

// Enqueue appends scripted answers; each call takes the next one. It fails with ErrScriptFull when
// the queue would exceed Options.MaxScript (then nothing is added).
//
//	_ = w.Summarizer().Enqueue(world.Summary{Fail: &world.Failure{Status: 500}})
func (s *Summarizer) Enqueue(answers ...Summary) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue)+len(answers) > s.w.opts.MaxScript {
		return ErrScriptFull
	}
	s.queue = append(s.queue, answers...)
	return nil
}

// Requests returns a copy of the recorded calls, oldest first.
//
//	prev := w.Summarizer().Requests()[1].Previous
func (s *Summarizer) Requests() []SummaryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.snapshot()
}

// WaitRequests blocks until at least n calls have arrived. It returns a *WaitError wrapping
// ctx.Err() (or ErrClosed) when ctx ends (or the World closes) first.
//
//	err := w.Summarizer().WaitRequests(ctx, 1)
func (s *Summarizer) WaitRequests(ctx context.Context, n int) error {
	return waitUntil(ctx, &s.mu, &s.sig, s.w.closing, fmt.Sprintf("%d summarizer call(s)", n),
		func() bool { return s.log.total >= n })
}

func (s *Summarizer) serve(rw http.ResponseWriter, r *http.Request) {
	var req summarizeRequest
	body, ok := s.w.readBody(rw, r, &req)
	if !ok {
		return
	}
	if req.Messages == nil {
		s.w.reject(rw, r, http.StatusBadRequest, "messages missing")
		return
	}
	msgs := *req.Messages
	s.mu.Lock()
	ans := Summary{Text: DefaultSummary(len(msgs), req.Previous != "")}
	if len(s.queue) > 0 {
		ans, s.queue = s.queue[0], s.queue[1:]
	}
	log := s.log
	i, _ := log.add(SummaryRequest{Index: log.total, Messages: msgs, Previous: req.Previous, Arrived: time.Now()}, int64(len(body)))
	s.sig.fire()
	s.mu.Unlock()

	if ans.Hold != nil && ans.Hold.wait(r.Context()) != holdReleased {
		return
	}
	if ans.Fail != nil {
		status, b := failureBody(ans.Fail)
		_ = writeRaw(rw, status, b)
		return
	}
	if writeJSON(rw, http.StatusOK, map[string]string{"summary": ans.Text}) == nil {
		s.mu.Lock()
		if rec := log.at(i); rec != nil {
			rec.Answer = ans.Text
		}
		s.sig.fire()
		s.mu.Unlock()
	}
}
