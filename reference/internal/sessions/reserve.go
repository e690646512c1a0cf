package sessions

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Frames without waiting for the disk. The frame log is a resume buffer, not the record, so a
// commit of frames is relaxed (kernel.UpdateRelaxed): it survives a crash of the process at once,
// and a crash of the machine may lose it. What must never be lost is a cursor a reader holds
// (spec/stream.md, "What a cursor promises across a crash"), so cursors are reserved ahead:
//
//   - the position keeps Reserved, the newest cursor the session may hand out. A commit whose
//     frames go past it waits for the disk and raises it to the new head plus reserveAhead, so
//     one commit in reserveAhead frames waits; Reserved itself is only ever raised by a synced
//     commit, and so survives any crash;
//   - the position keeps the store's loss epoch it was written under. A session loaded with a
//     position of another epoch may have lost relaxed frames up to Reserved: their cursors are
//     filled with placeholder frames, up to Reserved+1, and the floor goes above them, in one
//     synced commit. Every reader holding a cursor (at most Reserved) is then reset and resumes
//     from the floor: none finds a gap or another frame at a cursor it holds. The projection goes
//     on from the position the store kept, so the records after it are shown again, above.
//
// A commit that also stores the steering queue waits for the disk as before: the sender of a
// queued message was told it is kept.
//
// The reservation is moved on before it runs out, off the frames' path, where the store can sync
// its relaxed commits apart from a commit (store.RelaxedSync): once half of it is used, the next
// frame commit writes the new reservation as Ahead, relaxed like the frames, and a sync apart
// (kernel.SyncRelaxed) is started after it; when the sync returns, Ahead is durable and becomes
// the session's reservation, which the next commit writes as Reserved. Neither the frames nor the
// store's writer wait for that sync, so a frame waits for the disk only when it outruns it (its
// commit then raises the reservation as above). Reserved is only ever a value the disk has, as
// before. Ahead is counted on only after a possible loss: a position of another loss epoch
// covers the cursors up to Ahead as well (whichever of its sync and the crash came first, no
// reader holds a cursor past it), while a crash of the process alone keeps the session going from
// Reserved, and the next sync apart starts again.

// reserveAhead is how many cursors a synced commit reserves past its head.
const reserveAhead = 256

// posRecordLocked is the position to store with a commit that moves the projection to next,
// the newest reply projected being reply (ss.mu held).
func (ss *session) posRecordLocked(next loomtype.Cursor, reply int64) posRecord {
	rec := posRecord{Next: next.String(), LastReply: reply, LastAsked: ss.lastAskedTurn, LastAsker: ss.lastAsker, Room: ss.storedRoomLocked(), Handles: ss.handles,
		Reserved: ss.reserved, Epoch: ss.svc.k.LossEpoch(), Floor: ss.floor}
	if t, ok := ss.svc.owners.get(ss.id); ok {
		rec.Owner = &t
	}
	if ss.ahead > ss.reserved {
		rec.Ahead = ss.ahead
	}
	return rec
}

// reserveLocked raises rec's reservation when the log's head has gone past it, and reports
// whether it did: the commit must then wait for the disk (ss.mu held).
func (ss *session) reserveLocked(rec *posRecord) bool {
	head := ss.log.Head()
	if head <= ss.reserved {
		return false
	}
	rec.Reserved = head + reserveAhead
	return true
}

// reserveAheadLocked writes in rec a reservation to be synced apart from the commit, once half of
// the session's reservation is used and no such sync is running, and returns it (0: none). A store
// that cannot sync apart leaves the reservation to the commit that outruns it (ss.mu held).
func (ss *session) reserveAheadLocked(rec *posRecord) int64 {
	head := ss.log.Head()
	if ss.syncing || ss.svc.noSyncApart.Load() || head+reserveAhead/2 <= ss.reserved {
		return 0
	}
	rec.Ahead = max(head+reserveAhead, ss.ahead)
	return rec.Ahead
}

// syncAheadLocked starts the sync apart that makes the reservation ahead, just committed, durable,
// and makes it the session's reservation when it returns under the same loss epoch (ss.mu held).
// A sync that fails changes nothing: the reservation is moved on by the commit that outruns it,
// or by the next sync apart.
func (ss *session) syncAheadLocked(ahead int64) {
	svc := ss.svc
	svc.syncMu.Lock()
	if svc.syncClosed {
		svc.syncMu.Unlock()
		return
	}
	svc.syncs.Add(1)
	svc.syncMu.Unlock()
	ss.ahead, ss.syncing = ahead, true
	epoch := ss.epoch
	go func() {
		defer svc.syncs.Done()
		err := svc.k.SyncRelaxed(context.Background())
		if errors.Is(err, kernel.ErrNoSync) {
			svc.noSyncApart.Store(true)
		}
		ss.mu.Lock()
		defer ss.mu.Unlock()
		ss.syncing = false
		if err == nil && epoch == ss.epoch && svc.k.LossEpoch() == epoch && ahead > ss.reserved {
			ss.reserved = ahead
		}
	}()
}

// errLossEpoch: the store may have lost frames of the session while it was loaded (a server
// under it started again): the session is loaded afresh, which fills what was lost.
var errLossEpoch = errors.New("sessions: the store may have lost frames since the session was loaded")

// sameEpochLocked refuses a commit after the store's loss epoch moved (ss.mu held).
func (ss *session) sameEpochLocked() error {
	if ss.svc.k.LossEpoch() != ss.epoch {
		return errLossEpoch
	}
	return nil
}

// write runs fn as one kernel transaction, relaxed unless synced.
func (ss *session) write(ctx context.Context, synced bool, fn func(*kernel.Tx) error) error {
	if synced {
		return ss.svc.k.Update(ctx, fn)
	}
	return ss.svc.k.UpdateRelaxed(ctx, fn)
}

// restorePosition takes the reservation and the floor from the stored position p of a session
// whose log was just restored; ok is false when there is none (ss.mu held, or not yet shared).
func (ss *session) restorePosition(p posRecord, ok bool) {
	ss.reserved = ss.log.Head() // a position written before reservations: every frame was synced
	if ok && p.Reserved > ss.reserved {
		ss.reserved = p.Reserved
	}
	if ok && p.Ahead > ss.reserved && p.Epoch != ss.svc.k.LossEpoch() {
		// A possible loss: a reader may hold any cursor up to a reservation written ahead.
		ss.reserved = p.Ahead
	}
	if ok && p.Floor > 0 {
		ss.floor = p.Floor
		ss.log.DropBelow(p.Floor)
	}
}

// lostFrame is the placeholder at a cursor a crash of the machine took: below the floor, never
// served.
var lostFrame = stream.Spec{Kind: stream.KindStatus, Data: map[string]string{"state": "lost"}}

// fillLost is what a session loaded with a position of another loss epoch than the store's
// does (see above): when its head is below its reservation, it fills the cursors up to
// Reserved+1 with placeholders and raises the floor above them, in one synced commit. A
// position of the store's epoch, or one with nothing reserved past the head, changes nothing.
func (ss *session) fillLost(ctx context.Context, p posRecord, ok bool) error {
	epoch := ss.svc.k.LossEpoch()
	ss.epoch = epoch
	head := ss.log.Head()
	if !ok || p.Epoch == epoch || head >= ss.reserved {
		return nil
	}
	now := ss.svc.cfg.Now()
	evs := make([]kernel.AuxEvent, 0, ss.reserved+1-head)
	for ss.log.Head() <= ss.reserved {
		f, err := ss.log.Append(lostFrame, now)
		if err != nil {
			return err
		}
		b, err := json.Marshal(diskFrame{F: f})
		if err != nil {
			return err
		}
		evs = append(evs, kernel.AuxEvent{Kind: frameEventKind, Data: b})
	}
	ss.floor = ss.log.Head() + 1
	ss.log.DropBelow(ss.floor)
	rec := p
	rec.Reserved, rec.Epoch, rec.Floor = ss.log.Head(), epoch, ss.floor
	err := ss.svc.k.Update(ctx, func(tx *kernel.Tx) error {
		if _, err := tx.AppendAux(ss.id, framesStream, head, evs...); err != nil {
			return err
		}
		return positions.Put(tx, ss.id, rec)
	})
	if err != nil {
		return err
	}
	ss.reserved = rec.Reserved
	return nil
}

// storedRoom is the room as a position record keeps it. Its encoding is made once per room
// version and reused by every commit until the room changes: the room of a chat of many people
// is the largest part of a position, which every frame's commit writes.
type storedRoom struct {
	stream.Room
	enc []byte // Room encoded as JSON (nil: encoded when marshalled)
}

func (r storedRoom) MarshalJSON() ([]byte, error) {
	if r.enc != nil {
		return r.enc, nil
	}
	return json.Marshal(r.Room)
}

func (r *storedRoom) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &r.Room) }

// storedRoomLocked is the session's room for its position record, with the encoding made at
// this room version (ss.mu held). Every change of the room makes a new version (stream.Room.Apply).
func (ss *session) storedRoomLocked() *storedRoom {
	if ss.roomEnc == nil || ss.roomEncVer != ss.room.Ver {
		b, err := json.Marshal(ss.room)
		if err != nil {
			return &storedRoom{Room: ss.room}
		}
		ss.roomEnc, ss.roomEncVer = b, ss.room.Ver
	}
	return &storedRoom{Room: ss.room, enc: ss.roomEnc}
}
