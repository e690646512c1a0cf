package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// What the service keeps goes through the kernel: each session's frame log is the auxiliary
// stream framesStream of the conversation's execution, and the rest lives in four record tables,
// written in the same kernel transaction as the frames they go with:
//
//	sessions.pos     session id               how far the projection has got (posRecord)
//	sessions.queue   session id               the steering queue (queueRecord)
//	sessions.branch  [caller key, idem key]   a branch under its caller's key (branchRecord); in
//	                                          the store's global namespace instead when the
//	                                          service has one (Config.Shared, shareKeys)
//	sessions.read    [caller key, session id] a person's read marker (the newest cursor read)
//
// The frame stream is stored as "frames/<id>", the name every frame log was written under
// before the kernel kept it, so a log written then is read as it is. The four records lived under
// metadata prefixes of their own (legacyPrefixes); Service.Resume moves what it finds there into
// the tables once (kernel.AdoptMeta). The golden files under testdata/golden-stream pin both
// shapes.

// framesStream names the frame log among the execution's auxiliary streams.
const framesStream = "frames"

// The tables of the service.
var (
	// Version 2 of sessions.pos reserves cursors ahead of the frames (Reserved, Epoch, Floor): a
	// version 1 engine would serve the frames a version 2 one put below the floor.
	positions = kernel.NewTable[posRecord]("sessions.pos", 2)
	queues    = kernel.NewTable[queueRecord]("sessions.queue", 1)
	branches  = kernel.NewTable[branchRecord]("sessions.branch", 1)
	markers   = kernel.NewTable[int64]("sessions.read", 1)
)

// The metadata prefixes the records were kept under before the tables; the rest of each key is
// the record's key in its table.
const (
	legacyPrefix       = "stream/"
	legacyPosPrefix    = "stream/pos/"
	legacyQueuePrefix  = "stream/queue/"
	legacyBranchPrefix = "stream/branch/"
	legacyReadPrefix   = "stream/read/"
)

// prepare opens the tables (refusing a store a newer engine wrote) and adopts every record of
// the earlier layout into them, in one transaction; a store written since holds none, and costs
// one read.
func (s *Service) prepare(ctx context.Context) error {
	for _, open := range []func(context.Context, *kernel.Kernel) error{positions.Open, queues.Open, branches.Open, markers.Open} {
		if err := open(ctx, s.k); err != nil {
			return err
		}
	}
	_, err := s.k.AdoptMeta(ctx, legacyPrefix, func(tx *kernel.Tx, key string, val []byte) (bool, error) {
		switch {
		case strings.HasPrefix(key, legacyPosPrefix):
			return adopt(tx, positions, key, key[len(legacyPosPrefix):], val, nil)
		case strings.HasPrefix(key, legacyQueuePrefix):
			return adopt(tx, queues, key, key[len(legacyQueuePrefix):], val, nil)
		case strings.HasPrefix(key, legacyBranchPrefix):
			return adopt(tx, branches, key, key[len(legacyBranchPrefix):], val, nil)
		case strings.HasPrefix(key, legacyReadPrefix):
			// A read marker was kept as a decimal number, which is its JSON too.
			return adopt(tx, markers, key, key[len(legacyReadPrefix):], val, func(b []byte) (int64, error) { return strconv.ParseInt(string(b), 10, 64) })
		}
		return false, nil // no record of this service's: left as it is
	})
	if err != nil {
		return err
	}
	return s.shareKeys(ctx)
}

// shareKeys moves the branch keys kept with the service's own records into the global namespace,
// when the service has one (Config.Shared): a store whose partitions each kept the keys of their
// sessions' branches is read as one with every key in one place. Each key is moved in two
// transactions, the copy (never over a key the global namespace holds: the first one bound
// wins, as a live branch would) and then the removal; a crash between them copies it again at
// the next start, which changes nothing.
func (s *Service) shareKeys(ctx context.Context) error {
	if s.cfg.Shared == nil {
		return nil
	}
	if err := branches.Open(ctx, s.cfg.Shared); err != nil {
		return err
	}
	rows, err := branches.All(ctx, s.k, "")
	if err != nil {
		return err
	}
	for _, row := range rows {
		err := s.cfg.Shared.Update(ctx, func(tx *kernel.Tx) error {
			_, seen, err := branches.Get(ctx, tx, row.Key)
			if err != nil || seen {
				return err
			}
			return branches.Put(tx, row.Key, row.Value)
		})
		if err != nil {
			return err
		}
		if err := s.k.Update(ctx, func(tx *kernel.Tx) error { return branches.Delete(tx, row.Key) }); err != nil {
			return err
		}
	}
	return nil
}

// adopt puts the earlier layout's pair (key, val) into tbl under rest, decoded as JSON (or by
// decode). A pair that does not decode fails the adoption, and nothing is moved: the store is
// damaged, and the engine refuses to start saying so.
func adopt[T any](tx *kernel.Tx, tbl kernel.Table[T], key, rest string, val []byte, decode func([]byte) (T, error)) (bool, error) {
	if rest == "" {
		return false, nil
	}
	var v T
	var err error
	if decode != nil {
		v, err = decode(val)
	} else {
		err = json.Unmarshal(val, &v)
	}
	if err != nil {
		return false, &kernel.RecordError{Table: tbl.Name(), Key: key, Err: fmt.Errorf("stored before record tables: %w", err)}
	}
	return true, tbl.Put(tx, rest, v)
}

// FrameError is a stored frame of a session's log that cannot be read back as the frame at its
// cursor. It matches loomtype.ErrCorrupt.
type FrameError struct {
	Session string
	Cur     int64
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("sessions: frame %d of session %s does not decode", e.Cur, e.Session)
}

// Unwrap makes a FrameError match loomtype.ErrCorrupt.
func (e *FrameError) Unwrap() error { return loomtype.ErrCorrupt }

// diskFrameBytes is diskFrame{F: f, G: g} encoded, f given as its encoding (enc): the bytes are
// those json.Marshal makes of the diskFrame, without encoding the frame a second time.
func diskFrameBytes(enc []byte, g guard) ([]byte, error) {
	b := make([]byte, 0, len(enc)+8)
	b = append(b, `{"f":`...)
	b = append(b, enc...)
	if g != (guard{}) {
		gb, err := json.Marshal(g)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"g":`...)
		b = append(b, gb...)
	}
	return append(b, '}'), nil
}
