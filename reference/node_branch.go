package reference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// branchPath is the node-only route a node makes a branch's conversation through on the node
// that holds its partition. It is served only under another node's forwarding mark; without
// one it is a path like any other, which no engine serves.
const branchPath = "/.loom-node/branch"

// errBranchFailed: the node that holds a branch's partition could not make it (it logged why).
var errBranchFailed = errors.New("node: the branch's conversation could not be made where it runs")

// branch kinds: how the holder's refusal of a branch is told to the node that asked.
const (
	branchConflict = "conflict"
	branchBad      = "bad request"
	branchLimit    = "limit"
	branchFailed   = "failed"
)

// branchElsewhere makes the conversation of branch b where its partition runs: this node's
// engine of that partition, else the partition's holder, asked again (after a moment) until it
// answers or the node's wait for a holder ends. Making a branch is idempotent (sessions.StartBranch),
// so a request the holder may have seen before it died is sent again.
func (n *Node) branchElsewhere(ctx context.Context, b sessions.BranchStart) error {
	i, err := partition.Of(partition.KeyOf(conversation.ChosenID(b.Who, b.Chosen)), len(n.parts))
	if err != nil {
		return err
	}
	body, err := json.Marshal(b)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(n.followWait())
	for {
		if eng, leave := n.enterPart(i); eng != nil {
			defer leave()
			return sessions.StartBranch(ctx, eng.cv, b)
		}
		if holder := n.holderOf(ctx, i); holder.Note != "" {
			err := n.callBranch(ctx, holder.Note, body)
			if err == nil || !errors.Is(err, errMisdirected) && !errors.Is(err, errNotReached) {
				return err
			}
			n.forget(i)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: no holder of partition %d", errBranchFailed, i)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// errNotReached: the holder gave no answer (it could not be reached, or died meanwhile).
var errNotReached = errors.New("node: no answer from the holder")

// callBranch asks the node at base to make a branch: nil once it did, errMisdirected when it
// does not hold the partition, errNotReached when no answer came, else the refusal it answered.
func (n *Node) callBranch(ctx context.Context, base string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+branchPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(forwardedHeader, n.mark())
	resp, err := (&http.Client{Transport: n.tr, Timeout: n.followWait()}).Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", errNotReached, err)
	}
	defer resp.Body.Close()
	var answer struct{ Kind string }
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<10)).Decode(&answer)
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return nil
	case resp.StatusCode == http.StatusMisdirectedRequest:
		return errMisdirected
	case answer.Kind == branchConflict:
		return loomtype.ErrConflict
	case answer.Kind == branchBad:
		return loomtype.ErrBadRequest
	case answer.Kind == branchLimit:
		return &loomtype.LimitError{Limit: "branch"}
	}
	return fmt.Errorf("%w: answered %d", errBranchFailed, resp.StatusCode)
}

// serveBranch makes the branch another node asked for, if this node holds its partition (421
// otherwise).
func (n *Node) serveBranch(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(NodeHeader, n.id)
	var b sessions.BranchStart
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4*n.maxBody())).Decode(&b); err != nil || !b.Who.Valid() {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	i, err := partition.Of(partition.KeyOf(conversation.ChosenID(b.Who, b.Chosen)), len(n.parts))
	if err != nil {
		w.WriteHeader(http.StatusMisdirectedRequest)
		return
	}
	eng, leave := n.enterPart(i)
	if eng == nil {
		w.WriteHeader(http.StatusMisdirectedRequest)
		return
	}
	defer leave()
	err = sessions.StartBranch(r.Context(), eng.cv, b)
	var le *loomtype.LimitError
	kind, code := branchFailed, http.StatusInternalServerError
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
		return
	case errors.Is(err, loomtype.ErrConflict), errors.Is(err, loomtype.ErrClosed):
		kind, code = branchConflict, http.StatusConflict
	case errors.Is(err, loomtype.ErrBadRequest), errors.Is(err, loomtype.ErrInvalidID):
		kind, code = branchBad, http.StatusBadRequest
	case errors.As(err, &le):
		kind, code = branchLimit, http.StatusTooManyRequests
	default:
		n.logger.Error("node: a branch asked by another node failed", "error", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"kind": kind})
}
