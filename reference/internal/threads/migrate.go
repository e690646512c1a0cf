package threads

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/loomcheck/loomcheck/reference/kernel"
)

// legacyPrefix begins every key under which engines before the record tables kept the service's
// records, straight in the store's metadata: "thr/" + a kind + "/" + the record's key, a deleted
// record left as the JSON null.
const legacyPrefix = "thr/"

// legacyTables maps each kind of the old layout to the table its records now live in. The
// stand-ins ("standin") are not carried over: Prepare writes them anew.
var legacyTables = map[string]table{
	"ac": tabAC, "th": tabThread, "key": tabTopic, "rm": tabRecvd, "sm": tabSent, "conn": tabConn,
	"pc": tabPC, "pcx": tabPCIndex, "task": tabTask, "run": tabRun, "in": tabTurnIn, "tx": tabText,
	"idem": tabIdem,
}

// migrate brings records of the old layout into the tables, each under the same key, in one
// transaction: a deleted record (null) is dropped, and a key of a kind this engine does not know
// is left where it is (and logged) rather than lost.
func (s *Service) migrate(ctx context.Context) error {
	unknown := map[string]bool{} // a set: fn runs again when the store retries the commit
	n, err := s.k.AdoptMeta(ctx, legacyPrefix, func(tx *kernel.Tx, key string, val []byte) (bool, error) {
		kind, rest, _ := strings.Cut(strings.TrimPrefix(key, legacyPrefix), "/")
		t, known := legacyTables[kind]
		switch {
		case kind == "standin" || string(val) == "null" || len(val) == 0:
			return true, nil
		case !known || rest == "":
			unknown[key] = true
			return false, nil
		}
		return true, t.Put(tx, rest, val)
	})
	if err != nil {
		return err
	}
	if n > 0 {
		s.cfg.Logger.Info("threads: records moved into the record tables", "records", n)
	}
	if len(unknown) > 0 {
		s.cfg.Logger.Warn("threads: stored records of an unknown kind are left as they are", "keys", slices.Sorted(maps.Keys(unknown)))
	}
	return nil
}
