package steps

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/loomcheck/loomcheck/harness/sutclient"
	"github.com/loomcheck/loomcheck/harness/world"
)

// The kit's client of a system is package sutclient; these are its names here.
type (
	client   = sutclient.Client
	response = sutclient.Response
	reqOpts  = sutclient.Opts
	stream   = sutclient.Stream
	sseEvent = sutclient.Event
	// SeenViolation is one contract violation and the exchange (or event) that showed it.
	SeenViolation = sutclient.SeenViolation
)

// ContractRequirement is the requirement every exchange is checked against: a violation is one
// finding of the run under it, and fails only the scenarios that judge it.
const ContractRequirement = sutclient.ContractRequirement

func clip(s string, n int) string { return sutclient.Clip(s, n) }

// judgesContract reports whether the scenario is one of the contract requirement's own: only
// then does a violation fail it at once.
func (s *scenario) judgesContract() bool { return slices.Contains(s.reqs, ContractRequirement) }

// The kit's client of a system, as the steps use it:
//
//   - scenario.request sends one request as a principal (or a peer person, or nobody) and keeps
//     the answer as the scenario's last; scenario.ask sends one without keeping it;
//   - scenario.poll asks again until a condition holds or the step's wait ends;
//   - the scenario's client (s.cl, a sutclient.Client) does the exchange beneath both with Do: it
//     checks the request and the answer against the contract and records the exchange for the
//     report;
//   - its OpenStream follows an event stream (SSE) of a conversation, and its DialSession
//     connects to a session stream over SSE or WebSocket (sessionstream.go opens one; the
//     follower that reads it across reconnects is sessionfollower.go).

// request sends one request to the system as who, starting the system first when it is not
// running, and keeps the answer as the scenario's last (and the one before it as prev). who is
// a principal's name, a peer person's name (sent as that person's token) or "" for a request
// without credentials; a POST with neither a body nor a raw body sends {}.
func (s *scenario) request(who, method, path string, body any, o reqOpts) (*response, error) {
	if err := s.sut(); err != nil {
		return nil, err
	}
	r, err := s.ask(who, method, path, body, o)
	if r != nil {
		s.prev, s.last = s.last, r
	}
	return r, err
}

// caller is the name a request is sent as (a token for the threads people).
func caller(who string) string {
	if _, ok := world.PeerPeople[who]; ok {
		return world.PeerToken(who)
	}
	return who
}

// ask sends one request as request does, without starting the system or keeping the answer.
func (s *scenario) ask(who, method, path string, body any, o reqOpts) (*response, error) {
	if who != "" {
		who = caller(who)
	}
	if method == http.MethodPost && body == nil && o.RawBody == nil {
		body = map[string]any{}
	}
	return s.cl.Do(s.ctx, who, method, path, body, o)
}

// poll calls try until it returns true or an error, or until waits step timeouts have passed
// (a step that waits for many model rounds waits more than one); it reports whether try
// returned true. try is called again every 100ms.
func (s *scenario) poll(waits int, try func() (bool, error)) (bool, error) {
	ctx, cancel := s.wait()
	if waits > 1 {
		cancel()
		ctx, cancel = context.WithDeadline(s.ctx, time.Now().Add(time.Duration(waits)*s.run.StepTimeout))
	}
	defer cancel()
	for {
		ok, err := try()
		if err != nil || ok {
			return ok, err
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}
