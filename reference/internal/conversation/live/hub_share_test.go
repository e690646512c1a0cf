package live_test

import (
	"errors"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestAttachShare: a principal holds at most its share of a conversation's subscribers, an
// unsubscribe gives the slot back, and other principals fill the rest up to the bound.
func TestAttachShare(t *testing.T) {
	h := live.NewHub(3)
	attach := func(who string) (*live.Sub, error) {
		at, err := h.AttachShare("c1", who, 2, 1<<10)
		return at.Sub, err
	}
	var lim *loomtype.LimitError
	b1, err := attach("acme/bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := attach("acme/bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := attach("acme/bob"); !errors.As(err, &lim) {
		t.Fatalf("bob's third subscriber: got %v, want a limit error", err)
	}
	h.Unsubscribe("c1", b1)
	if _, err := attach("acme/bob"); err != nil {
		t.Fatalf("the slot bob gave back: %v", err)
	}
	h.Unsubscribe("c1", b1) // twice: changes nothing
	if _, err := attach("acme/bob"); !errors.As(err, &lim) {
		t.Fatalf("bob past his share after a repeated unsubscribe: got %v, want a limit error", err)
	}
	if _, err := attach("acme/alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := attach("acme/alice"); !errors.As(err, &lim) {
		t.Fatalf("past the conversation's bound: got %v, want a limit error", err)
	}
}
