package live

// Memory is what a hub holds in memory, in counts and bytes, for reporting. Every figure is
// bounded: a subscriber's queue by the cap it was made with (Subscribe, Attach), the subscribers
// of a conversation by the hub's maxSubs, a partial by MaxPartialChars, the output held for
// executions not named yet by a fixed 1 MiB, and the tails by their TailLimits.
//
//	m := hub.Memory()
//	perStream := float64(m.QueuedBytes) / float64(max(m.Subscribers, 1))
type Memory struct {
	// Conversations are the conversations the hub keeps live state for (a live turn, a
	// subscriber or an expected turn execution).
	Conversations int
	// Subscribers are the live subscribers; QueuedBytes is what their queues hold, as their caps
	// count it, and MaxQueuedBytes the most one of them holds.
	Subscribers, QueuedBytes, MaxQueuedBytes int
	// PartialBytes is the text of the replies in progress kept for catch-up.
	PartialBytes int
	// PendingBytes is the live output held for turn executions not named yet.
	PendingBytes int
	// Tails are the conversations someone follows; TailRecords and TailBytes what their tails
	// hold (Record.Size), and Followers their followers.
	Tails, TailRecords, TailBytes, Followers int
}

// Memory reports what the hub holds now.
//
// Concurrency: safe for concurrent use; the figures are each read under its own lock, so they
// may mix moments when the hub is busy.
//
//	m := hub.Memory()
//	fmt.Println(m.Subscribers, m.QueuedBytes, m.TailBytes)
func (h *Hub) Memory() Memory {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := Memory{Conversations: len(h.convs), PendingBytes: h.pendingBytes, Tails: len(h.tails), TailBytes: int(h.tailBytes.Load())}
	for _, c := range h.convs {
		m.PartialBytes += len(c.partial)
		for s := range c.subs {
			s.mu.Lock()
			m.Subscribers++
			m.QueuedBytes += s.bytes
			m.MaxQueuedBytes = max(m.MaxQueuedBytes, s.bytes)
			s.mu.Unlock()
		}
	}
	for _, t := range h.tails {
		t.mu.Lock()
		m.TailRecords += len(t.recs)
		m.Followers += len(t.subs)
		t.mu.Unlock()
	}
	return m
}
