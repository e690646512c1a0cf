package live

// Note keeps v, while anyone follows conversation id, as what the records of its next commits
// leave to a store the tail does not read (the inbox entry a user record names): the writer notes
// it before it records, and the function that turns a commit into the tail's records reads it
// back (Noted). It replaces what was noted before; with nobody following, nothing is kept.
//
//	hub.Note("c1", asked)
func (h *Hub) Note(id string, v any) {
	h.mu.Lock()
	t := h.tails[id]
	h.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	t.noted = v
	t.mu.Unlock()
}

// Noted returns what was last noted for conversation id while it was followed (nil: nothing).
//
//	v := hub.Noted("c1")
func (h *Hub) Noted(id string) any {
	h.mu.Lock()
	t := h.tails[id]
	h.mu.Unlock()
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.noted
}
