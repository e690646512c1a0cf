package kernel

// SetParkHook makes k tell f each time an execution starts waiting (site "receive", "signal N",
// "timer N", "await ID") and when one ends (site "end STATE"). Tests only.
func SetParkHook(k *Kernel, f func(id, site string)) {
	k.x.mu.Lock()
	k.x.onPark = f
	k.x.mu.Unlock()
}
