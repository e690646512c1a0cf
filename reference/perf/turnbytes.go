package perf

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// durableCommits is the number of durable commits the rules require of a turn: the acknowledged
// message, the user's record before the model is called, and the reply. It is a constant, not
// counted from the engine: a commit the engine adds shows as its overhead, never as more
// baseline.
const durableCommits = 3

// turnText is what the byte figure's turns say.
const turnText = "what is the status of order 1234?"

// turnInformation is the bytes of what one turn of the byte figure means: the message as its
// asker signed it (the conversation, the kind, the envelope's id and time, the text, the asker
// and the signature, in the shape of spec/envelopes.md), the message id it was sent with, and the
// reply's text. Everything else a journal holds is derived from these or is bookkeeping.
func turnInformation(convID, actor, msgID, reply string) int {
	env, _ := json.Marshal(map[string]any{
		"conversationId": convID, "kind": "user", "id": strings.Repeat("0", 64), "iat": time.Now().UnixMilli(),
		"text": turnText, "asker": map[string]string{"tenant": "perf", "actor": actor},
		"sig": strings.Repeat("A", 43), // a base64url HMAC-SHA-256
	})
	return len(env) + len(msgID) + len(reply)
}

// turnBytes: what one turn of one conversation stores (the bytes of the rows it adds) beside what
// it means (turnInformation), and what it writes to storage beside a bare server that makes the
// durableCommits commits of a turn as raw SQLite INSERTs, synchronous FULL.
func turnBytes(e *env) ([]Row, error) {
	turns := 40
	if e.cfg.Quick {
		turns = 5
	}
	dir := filepath.Join(e.dir, "bytes")
	engT, _, err := e.openEngine(dir, "", nil)
	if err != nil {
		return nil, err
	}
	defer engT.close()
	raw, err := sqlite.OpenRaw(e.ctx, filepath.Join(e.dir, "bytes-raw.db"), false)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	bareT, _, err := openDurableBare(raw, 1, durableCommits-1)
	if err != nil {
		return nil, err
	}
	defer bareT.close()
	ec, err := engT.newConv(e.ctx, 0)
	if err != nil {
		return nil, err
	}
	defer ec.stop()
	bc, err := bareT.newConv(e.ctx, 0)
	if err != nil {
		return nil, err
	}
	defer bc.stop()
	for _, c := range []*conv{ec, bc} {
		if err := c.listen(e.ctx); err != nil {
			return nil, err
		}
		if _, err := c.turn(e.ctx, "warm up"); err != nil {
			return nil, err
		}
	}
	info := float64(turnInformation(ec.id, "user-0", "m-00000000", `You said: "`+turnText+`"`))
	stored := Row{Measure: "rows stored per turn", Unit: "bytes", BaselineName: "what the turn means",
		Goal: Goal{Text: "<= 2x", Of: "ratio", AtMost: true, Bound: 2},
		Note: fmt.Sprintf("the bytes of the rows %d turns of one conversation add (events, metadata, remembered keys; text and blobs at their length, integers 8 bytes each) beside the signed message, its id and the reply's text", turns)}
	written := Row{Measure: "bytes written to storage per turn, synchronous FULL", Unit: "bytes",
		BaselineName: fmt.Sprintf("bare net/http + %d raw SQLite INSERT commits per turn", durableCommits),
		Goal:         Goal{Text: "<= 1.5x", Of: "ratio", AtMost: true, Bound: 1.5},
		Note:         "write_bytes of /proc/self/io over the turns, a page counted each time a clean page is dirtied"}
	pages := Row{Measure: "pages appended to the write-ahead log per turn", Unit: "pages",
		BaselineName: fmt.Sprintf("bare net/http + %d raw SQLite INSERT commits per turn", durableCommits),
		Note: "frames SQLite appended to the database's write-ahead log over the turns (one page each, counted from the log itself); " +
			"a round in which a checkpoint started the log again is left out"}
	_, counted := storageWritten()
	for r := range e.rounds() {
		rd, err := bytesRoundOf(e, ec, bc, turns)
		if err != nil {
			return nil, err
		}
		stored.Measured = append(stored.Measured, rd.rows)
		stored.Baseline = append(stored.Baseline, info)
		if counted {
			written.Measured = append(written.Measured, rd.engine.written)
			written.Baseline = append(written.Baseline, rd.bare.written)
		}
		if rd.pagesOK {
			pages.Measured = append(pages.Measured, rd.engine.pages)
			pages.Baseline = append(pages.Baseline, rd.bare.pages)
		}
		e.logf("round %d: rows %.0f bytes per turn for %.0f of information; written: bare %.0f, engine %.0f bytes per turn; "+
			"log pages per turn: bare %.2f, engine %.2f (%v); commits per turn: bare %.2f, engine %.2f",
			r+1, rd.rows, info, rd.bare.written, rd.engine.written, rd.bare.pages, rd.engine.pages, rd.pagesOK, rd.bare.commits, rd.engine.commits)
	}
	out := []Row{stored}
	if counted {
		out = append(out, written)
	}
	if len(pages.Measured) > 0 {
		out = append(out, pages)
	}
	return out, nil
}

// turnSide is what one side's turns of a round cost per turn: bytes written to storage, and the
// pages and commits appended to its write-ahead log.
type turnSide struct {
	written, pages, commits float64
}

// bytesRound is one round of the byte figure: the bare server's turns, then the engine's.
type bytesRound struct {
	rows         float64
	bare, engine turnSide
	pagesOK      bool // both logs were counted over their turns
}

func bytesRoundOf(e *env, ec, bc *conv, turns int) (bytesRound, error) {
	var rd bytesRound
	db := filepath.Join(e.dir, "bytes", "loom.db")
	bare, bareOK, err := sideOf(filepath.Join(e.dir, "bytes-raw.db-wal"), func() error { return turnsOf(e, bc, turns) }, turns)
	if err != nil {
		return rd, fmt.Errorf("bare: %w", err)
	}
	r0, err := sqlite.RowBytes(e.ctx, db)
	if err != nil {
		return rd, err
	}
	engine, engineOK, err := sideOf(db+"-wal", func() error { return turnsOf(e, ec, turns) }, turns)
	if err != nil {
		return rd, err
	}
	r1, err := sqlite.RowBytes(e.ctx, db)
	if err != nil {
		return rd, err
	}
	rd.rows, rd.bare, rd.engine, rd.pagesOK = float64(r1-r0)/float64(turns), bare, engine, bareOK && engineOK
	return rd, nil
}

// sideOf runs one side's turns and measures them; ok reports that the log at wal was counted
// (no checkpoint started it again meanwhile).
func sideOf(wal string, run func() error, turns int) (turnSide, bool, error) {
	before, err := readWAL(wal)
	if err != nil {
		return turnSide{}, false, err
	}
	written, err := writtenOver(run, turns)
	if err != nil {
		return turnSide{}, false, err
	}
	after, err := readWAL(wal)
	if err != nil {
		return turnSide{}, false, err
	}
	frames, commits, ok := walAppended(before, after)
	return turnSide{written: written, pages: float64(frames) / float64(turns), commits: float64(commits) / float64(turns)}, ok, nil
}

// turnsOf has c send n turns, one after the other, each waiting for its reply.
func turnsOf(e *env, c *conv, n int) error {
	for range n {
		if _, err := c.turn(e.ctx, turnText); err != nil {
			return err
		}
	}
	return nil
}

// writtenOver is the bytes the process wrote to storage per turn while run ran its turns (0 where
// that is not counted).
func writtenOver(run func() error, turns int) (float64, error) {
	w0, ok0 := storageWritten()
	if err := run(); err != nil {
		return 0, err
	}
	w1, ok1 := storageWritten()
	w, _ := writtenPerTurn(w0, ok0, w1, ok1, turns)
	return w, nil
}
