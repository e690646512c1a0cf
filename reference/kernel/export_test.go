package kernel

// LogStream and InboxStream name an execution's log and inbox in the store, for the tests that
// read or damage the store under a kernel.
func LogStream(id string) string   { return logStream(id) }
func InboxStream(id string) string { return inboxStream(id) }
