package reference

import (
	"context"

	"github.com/loomcheck/loomcheck/reference/internal/quota"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store"
)

// openBounds is the counter of the per-principal bounds of engine e, and the kernel it keeps them
// with (nil: none). An engine that runs every execution of its store (no partitions: a standalone
// engine, or the one node holding a database's single lease) is the whole system, so it counts in
// its own memory, as the bounds were before partitions, and its POSTs write nothing to the store;
// an engine of one partition of several shares the counts with the other partitions' (openQuotas).
// Counts in memory start again at a restart or a takeover, as the streams and tickets they count
// do.
func (e *Engine) openBounds(ctx context.Context, root store.Store, holder string, opt Options) (*kernel.Kernel, quota.Counter, error) {
	if e.owns == nil {
		return nil, &quota.Memory{}, nil
	}
	return openQuotas(ctx, root, holder, opt)
}

// closeKernel closes k unless it is nil.
func closeKernel(k *kernel.Kernel) {
	if k != nil {
		k.Close()
	}
}

// openQuotas opens the per-principal bounds every engine of the store shares (docs/partitions.md
// §2): a kernel of their own on the global namespace of root, which must be the store's root as
// the engine writes it (fenced by its lease on a shared database), never a partition's view; the
// counts are taken as holder, the name of the lease the engine runs under (leaseName while one
// engine runs a store's executions, its partition's lease once each partition has one). Opening
// raises holder's epoch, which frees every slot an earlier engine of holder left behind. The
// caller closes the kernel after the parts that use the counts.
//
// Errors: quota.OpenShared's, store errors.
func openQuotas(ctx context.Context, root store.Store, holder string, opt Options) (*kernel.Kernel, *quota.Shared, error) {
	g, err := store.Namespace(root, quota.Namespace)
	if err != nil {
		return nil, nil, err
	}
	k, err := kernel.Open(ctx, g, kernel.Options{Logger: opt.Logger})
	if err != nil {
		return nil, nil, err
	}
	q, err := quota.OpenShared(ctx, k, holder)
	if err != nil {
		k.Close()
		return nil, nil, err
	}
	return k, q, nil
}
