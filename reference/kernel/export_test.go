package kernel

// LogStream and InboxStream name an execution's log and inbox in the store, for the tests that
// read or damage the store under a kernel.
func LogStream(id string) string   { return logStream(id) }
func InboxStream(id string) string { return inboxStream(id) }

// SetParkHook makes k tell f each time an execution starts waiting (site "receive", "signal N",
// "timer N", "await ID") and when one ends (site "end STATE"). Tests only.
func SetParkHook(k *Kernel, f func(id, site string)) {
	k.x.mu.Lock()
	k.x.onPark = f
	k.x.mu.Unlock()
}

// InfoKey is the metadata key an execution's record is stored under, for tests that plant one.
func InfoKey(id string) string { return metaKey(id) }

// SetEndLookHook makes k tell f each time AwaitEnd has found an execution open and is about to
// wake it. Tests only.
func SetEndLookHook(k *Kernel, f func(id string)) {
	k.x.mu.Lock()
	k.x.onEndLook = f
	k.x.mu.Unlock()
}

// Running reports whether execution id is in k's running set.
func Running(k *Kernel, id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.running[id] != nil
}
