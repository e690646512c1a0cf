package postgres

// ListenerPID is the backend process id of the store's listening connection (0 while it
// reconnects), for tests that end it from the server's side.
func (s *Postgres) ListenerPID() uint32 { return s.listenPID.Load() }

// PayloadOf is payloadOf.
var PayloadOf = payloadOf

// LayoutOf is layoutOf; StoreLayout is layout.
var LayoutOf, StoreLayout = layoutOf, layout

// WritesWaitingForASlot is how many writes wait for a write slot, for tests that queue one.
func (s *Postgres) WritesWaitingForASlot() int32 { return s.slotWaits.Load() }
