package reftest

import "time"

// ClosesWithin reports whether ch closes before a test's bound (30 s, far beyond any wake-up a
// test waits for), so that a channel never closed fails the test rather than hanging it.
func ClosesWithin(ch <-chan struct{}) bool {
	bound := time.NewTimer(30 * time.Second)
	defer bound.Stop()
	select {
	case <-ch:
		return true
	case <-bound.C:
		return false
	}
}

// IsClosed reports whether ch is closed now.
func IsClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
