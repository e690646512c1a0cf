package steps

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// damageReads are the reads remembered for one conversation: its status, its whole history in
// one page each way, and a short page of each.
func damageReads(id string) []string {
	base := "/conversations/" + url.PathEscape(id)
	return []string{
		base,
		base + "/history?limit=500",
		base + "/history?direction=backward&limit=500",
		base + "/history?limit=2",
		base + "/history?direction=backward&limit=2",
	}
}

// downDataDir is the data directory of a system that is down, for a damage step.
func (s *durabilitySteps) downDataDir() (string, error) {
	if !s.down {
		return "", harnessErr("the data directory is damaged only while the system is down (kill it first)")
	}
	if s.cfg.DataDir == "" {
		return "", harnessErr("the system was given no data directory")
	}
	if s.cfg.Storage.URL != "" {
		return "", &HarnessError{Err: fmt.Errorf("%w: the system keeps its state in the server database of storage.url, not in the data directory", ErrNotApplicable)}
	}
	return s.cfg.DataDir, nil
}

// storedFiles lists the regular files under the data directory of the system that is down,
// smallest first (ties by path).
func (s *durabilitySteps) storedFiles() ([]storedFile, error) {
	dir, err := s.downDataDir()
	if err != nil {
		return nil, err
	}
	var files []storedFile
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, storedFile{path: p, size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, harnessErr("walk the data directory: %v", err)
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].size != files[j].size {
			return files[i].size < files[j].size
		}
		return files[i].path < files[j].path
	})
	return files, nil
}

func flipByte(path string, off int64) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	if st.Size() <= off {
		return false, nil
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		return false, err
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		return false, err
	}
	return true, f.Sync()
}

// damagedRefusal reports whether r is the typed refusal of a request whose stored data is
// damaged. Such a refusal names its incident (errorId), which the error hook must have got too.
func (s *scenario) damagedRefusal(r *response) (bool, error) {
	if r.Status != http.StatusInternalServerError {
		return false, nil
	}
	var e struct {
		Error   string `json:"error"`
		ErrorID string `json:"errorId"`
	}
	if json.Unmarshal(r.Body, &e) != nil || e.Error != storageDamaged {
		return false, nil
	}
	if e.ErrorID == "" {
		return false, fail(r.Op, clip(string(r.Body), 200), fmt.Sprintf(`500 {"error":%q,"errorId":"..."}`, storageDamaged))
	}
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, h := range s.world.ErrorHook().Errors() {
			if h.ErrorID == e.ErrorID {
				return true, nil
			}
		}
		select {
		case <-ctx.Done():
			return false, fail("the error hook", fmt.Sprintf("%d reports, none with errorId %s", len(s.world.ErrorHook().Errors()), e.ErrorID),
				"a report of the "+storageDamaged+" refusal "+r.Op+" answered")
		case <-tick.C:
		}
	}
}

// historyBeforeDamage is the whole history of m's conversation (at base) as m's sender read it
// before the damage.
func (s *durabilitySteps) historyBeforeDamage(m ackedMsg, base string) ([]json.RawMessage, error) {
	var past []json.RawMessage
	for _, a := range s.damaged.answers {
		if a.who == m.who && a.path == base+"/history?limit=500" && a.status == http.StatusOK {
			var p page
			if err := json.Unmarshal(a.body, &p); err != nil || !p.Done {
				return nil, harnessErr("the remembered history of %s is not one whole page", m.conv)
			}
			past = p.Entries
		}
	}
	if past == nil {
		return nil, harnessErr("no history of %s was remembered before the damage", m.conv)
	}
	return past, nil
}

// sentinelAfterRepeats sends one new message to m's conversation and waits for its turn to be
// answered, then compares the whole history with the one remembered before the damage: the same
// records, then the new message and its answer, and nothing else.
func (s *durabilitySteps) sentinelAfterRepeats(m ackedMsg) error {
	base := "/conversations/" + url.PathEscape(m.conv)
	past, err := s.historyBeforeDamage(m, base)
	if err != nil {
		return err
	}
	text := "a new message after the repeats"
	r, err := s.cl.Do(s.ctx, m.who, http.MethodPost, base+"/turns", map[string]any{"text": text, "messageId": s.nextMessageID()}, reqOpts{})
	if err != nil {
		return err
	}
	if ok, err := s.damagedRefusal(r); err != nil || ok {
		if err != nil {
			return err
		}
		// The conversation took the repeats but refuses what is new: nothing can be written to it,
		// a repeat included, yet the kit has no sentinel to prove it.
		return &HarnessError{Err: fmt.Errorf("%w: the conversation refused a new message as damaged, so nothing orders a repeat's turn before an observation", ErrNotApplicable)}
	}
	if r.Status != http.StatusAccepted {
		return fail(r.Op+" (a new message after the repeats)", fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "202")
	}
	pastEs, err := decodeEntries(past)
	if err != nil {
		return harnessErr("the remembered history of %s: %v", m.conv, err)
	}
	var lastTurn int64
	for _, e := range pastEs {
		lastTurn = max(lastTurn, e.Turn)
	}
	answered := func(es []entry) bool {
		for _, e := range es {
			if e.Role == "user" && e.text() == text && e.Turn > 0 {
				for _, a := range es {
					if a.Role == "assistant" && a.Turn == e.Turn && a.Status != "accepted" {
						return true
					}
				}
			}
		}
		return false
	}
	var es, last []entry
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for es == nil {
		got, err := s.historyOf(ctx, m.who, m.conv, true)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if err == nil {
			last = got
			if answered(got) {
				es = got
				break
			}
		}
		select {
		case <-ctx.Done():
			return fail("the transcript after a new message following the repeats", describeEntries(last), "the new message's turn answered")
		case <-tick.C:
		}
	}
	want := fmt.Sprintf("the %d records before the damage, then user %q (turn %d) and its answer", len(pastEs), text, lastTurn+1)
	ok := len(es) == len(pastEs)+2
	for i := 0; ok && i < len(pastEs); i++ {
		ok = string(es[i].raw) == string(past[i])
	}
	if ok {
		u, a := es[len(pastEs)], es[len(pastEs)+1]
		ok = u.Role == "user" && u.text() == text && u.Turn == lastTurn+1 && a.Role == "assistant" && a.Turn == lastTurn+1 && a.Status == "complete"
	}
	if !ok {
		return fail("the history after the acknowledged messages were sent again and a new one followed", describeEntries(es), want)
	}
	return nil
}

// restart launches the SUT again on the same data directory. A system that does not come back
// after a crash breaks durability: that is a failure, not a harness error.
func (s *scenario) restart() error {
	var err error
	if s.areas.durability.down {
		err = s.drv.Restart(s.ctx)
		s.transport.CloseIdleConnections() // a request answered as the system stopped may have lent one back
	}
	s.areas.durability.down = false
	var se *StartError
	if errors.As(err, &se) {
		return fail("restart after a crash", se.Error()+logsOf(s.drv), "the system answering again on the same data directory")
	}
	return err
}
