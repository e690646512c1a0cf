package kernel

// Owns reports whether this kernel runs execution id (Options.Owns; every id when it is nil).
func (k *Kernel) Owns(id string) bool { return k.here(id) == nil }

// mintTries bounds the draws of Mint: far above the partition count a node may be configured
// with, so that running out means a generator that cannot reach this kernel's partition.
const mintTries = 1 << 16

// Mint returns the first id gen draws that this kernel owns, for an execution whose id the engine
// chooses (random ids are spread evenly over the partitions, so a kernel of one partition in P
// draws P times on average). A kernel that owns every id takes the first draw.
//
//	id := k.Mint(func() string { return "c_" + randomHex() })
func (k *Kernel) Mint(gen func() string) string {
	id := gen()
	for range mintTries {
		if k.Owns(id) {
			break
		}
		id = gen()
	}
	return id
}
