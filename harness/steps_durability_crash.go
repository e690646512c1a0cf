package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/harness/world"
)

// remembersGeneration remembers the current conversation's generation as who sees it.
func (s *durabilitySteps) remembersGeneration(who string) error {
	st, err := s.statusOf(who)
	if err != nil {
		return err
	}
	s.saved["generation"] = fmt.Sprint(st.Generation)
	return nil
}

// generationMovedOnBy expects the generation to have grown by exactly N since it was remembered.
func (s *durabilitySteps) generationMovedOnBy(n int64) error {
	base, err := atoi(s.saved["generation"])
	if err != nil {
		return harnessErr("no generation was remembered")
	}
	st, err := s.statusOf(s.owner())
	if err != nil {
		return err
	}
	if st.Generation != int64(base)+n {
		return fail("GET /conversations/"+st.ID, fmt.Sprintf("generation %d (%d rotations since it was remembered)", st.Generation, st.Generation-int64(base)),
			fmt.Sprintf("generation %d: exactly %d rotations", int64(base)+n, n))
	}
	return nil
}

// refusesToStartDamaged expects the system to refuse to start on the damaged data directory.
func (s *durabilitySteps) refusesToStartDamaged() error {
	if !s.damaged.refusedStart {
		return fail("restart after the damage", "the system started and answered", "a refusal to start (the stored past is gone)")
	}
	return nil
}

// hasHadTurnsWithReplies has N turns answered as who with replies of N characters each.
func (s *durabilitySteps) hasHadTurnsWithReplies(who string, n, size int) error {
	for range n {
		s.turns++
		text := fmt.Sprintf("question %d", s.turns)
		if err := s.world.Model().EnqueueFor(text, world.Reply{Text: noiseText(s.turns, size)}); err != nil {
			return harnessErr("script the model: %v", err)
		}
		if err := s.mustSend(who, text, s.nextMessageID(), nil); err != nil {
			return err
		}
		t, err := s.waitAnswered(who, text)
		if err != nil {
			return err
		}
		s.turnNo = t
		s.turnText[t] = text
	}
	return nil
}

// systemKilledAndRestarted kills the system and starts it again on the same data directory.
func (s *durabilitySteps) systemKilledAndRestarted() error {
	if err := s.crash(); err != nil {
		return err
	}
	return s.restart()
}

// ackedMsg is one message the system acknowledged with 202.
type ackedMsg struct {
	who, conv, text, id string
	extra               map[string]any
}

// damageState is what the damage steps did and saw.
type damageState struct {
	// answers are the remembered reads, in the order they were made.
	answers []rememberedRead
	// refusedStart: the system refused to start after the damage (a typed refusal of everything).
	refusedStart bool
	// why is that refusal as the driver reported it.
	why string
}

// rememberedRead is one read and what the system answered to it before the damage.
type rememberedRead struct {
	who, path string
	status    int
	body      []byte
}

// storageDamaged is the error code of a read the system refuses because what it stored is damaged
// (spec/http.md).
const storageDamaged = "storage damaged"

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

func (s *durabilitySteps) rememberAnswers() error {
	s.damaged.answers = nil
	for _, name := range sortedKeys(s.convs) {
		c := s.convs[name]
		for _, path := range damageReads(c.id) {
			r, err := s.cl.do(s.ctx, c.owner, http.MethodGet, path, nil, reqOpts{})
			if err != nil {
				return err
			}
			if r.status != http.StatusOK {
				return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "200 (before any damage)")
			}
			s.damaged.answers = append(s.damaged.answers, rememberedRead{who: c.owner, path: path, status: r.status, body: r.body})
		}
	}
	if len(s.damaged.answers) == 0 {
		return harnessErr("no conversation to remember answers about")
	}
	return nil
}

// stopSystem ends the system cleanly (SIGTERM for a process), as an operator stopping it does.
func (s *durabilitySteps) stopSystem() error {
	if err := s.sut(); err != nil {
		return err
	}
	if err := s.drv.Stop(); err != nil {
		return harnessErr("stop the system: %v", err)
	}
	s.transport.CloseIdleConnections()
	s.down = true
	return nil
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

// deleteDataDir removes everything inside the data directory, leaving the directory itself.
func (s *durabilitySteps) deleteDataDir() error {
	dir, err := s.downDataDir()
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return harnessErr("read the data directory: %v", err)
	}
	if len(ents) == 0 {
		return harnessErr("the data directory %s was already empty: nothing was stored to delete", dir)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return harnessErr("delete %s: %v", e.Name(), err)
		}
	}
	return nil
}

// flipStoredBytes inverts the byte at offset off of every regular file under the data directory
// that is longer than off. A system none of whose files reaches off is not damaged by it, and the
// scenario cannot judge it.
func (s *durabilitySteps) flipStoredBytes(off int64) error {
	dir, err := s.downDataDir()
	if err != nil {
		return err
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return harnessErr("walk the data directory: %v", err)
	}
	sort.Strings(files)
	flipped := 0
	for _, p := range files {
		ok, err := flipByte(p, off)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since the walk: no longer stored
		}
		if err != nil {
			return harnessErr("flip a byte of %s: %v", p, err)
		}
		if ok {
			flipped++
		}
	}
	if flipped == 0 {
		return &HarnessError{Err: fmt.Errorf("%w: no stored file is longer than %d bytes", ErrNotApplicable, off)}
	}
	return nil
}

// storedFile is one regular file of the data directory and its size.
type storedFile struct {
	path string
	size int64
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

// cutLargestStored cuts the largest stored file to pct percent of its length, as a disk that
// lost the tail of its writes leaves it.
func (s *durabilitySteps) cutLargestStored(pct int) error {
	if pct <= 0 || pct >= 100 {
		return harnessErr("cut to %d%%: the part kept is between 1 and 99 percent", pct)
	}
	files, err := s.storedFiles()
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return harnessErr("the data directory holds no file to cut")
	}
	f := files[len(files)-1]
	if err := os.Truncate(f.path, f.size*int64(pct)/100); err != nil {
		return harnessErr("cut %s: %v", f.path, err)
	}
	return nil
}

// deleteSmallestStored deletes the n smallest stored files. A system that keeps fewer than n+1
// files cannot be judged by it (the largest is what the scenario cuts).
func (s *durabilitySteps) deleteSmallestStored(n int) error {
	files, err := s.storedFiles()
	if err != nil {
		return err
	}
	if len(files) <= n {
		return &HarnessError{Err: fmt.Errorf("%w: the data directory holds %d files, not more than %d", ErrNotApplicable, len(files), n)}
	}
	for _, f := range files[:n] {
		if err := os.Remove(f.path); err != nil {
			return harnessErr("delete %s: %v", f.path, err)
		}
	}
	return nil
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

// restartDamaged starts the system again on its damaged data directory. Refusing to start is one
// of the outcomes the damage scenarios accept; a harness error stays one.
func (s *durabilitySteps) restartDamaged() error {
	if !s.down {
		return harnessErr("the system is not down")
	}
	err := s.drv.Restart(s.ctx)
	s.down = false
	var se *startError
	if errors.As(err, &se) {
		s.damaged.refusedStart = true
		s.damaged.why = se.Error()
		s.down = true
		return nil
	}
	return err
}

// damagedRefusal reports whether r is the typed refusal of a request whose stored data is
// damaged. Such a refusal names its incident (errorId), which the error hook must have got too.
func (s *scenario) damagedRefusal(r *response) (bool, error) {
	if r.status != http.StatusInternalServerError {
		return false, nil
	}
	var e struct {
		Error   string `json:"error"`
		ErrorID string `json:"errorId"`
	}
	if json.Unmarshal(r.body, &e) != nil || e.Error != storageDamaged {
		return false, nil
	}
	if e.ErrorID == "" {
		return false, fail(r.op, clip(string(r.body), 200), fmt.Sprintf(`500 {"error":%q,"errorId":"..."}`, storageDamaged))
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
				"a report of the "+storageDamaged+" refusal "+r.op+" answered")
		case <-tick.C:
		}
	}
}

// compareAnswers asks every remembered read again: each answer is byte for byte the one before the
// damage, or the typed refusal. A system that refused to start refused them all.
func (s *durabilitySteps) compareAnswers() error {
	if s.damaged.refusedStart {
		return nil
	}
	if len(s.damaged.answers) == 0 {
		return harnessErr("no answers were remembered before the damage")
	}
	for _, a := range s.damaged.answers {
		r, err := s.cl.do(s.ctx, a.who, http.MethodGet, a.path, nil, reqOpts{})
		if err != nil {
			return err
		}
		if ok, err := s.damagedRefusal(r); err != nil || ok {
			if err != nil {
				return err
			}
			continue
		}
		if r.status != a.status || string(r.body) != string(a.body) {
			return fail(r.op+" after the stored files were damaged", fmt.Sprintf("%d %s", r.status, clip(string(r.body), 400)),
				fmt.Sprintf("the answer before the damage (%d %s), or 500 %q", a.status, clip(string(a.body), 400), storageDamaged))
		}
	}
	return nil
}

// resendAcked sends every acknowledged message again, with its id: each is refused as damaged or
// acknowledged as a repeat (202), and none reaches the model again.
func (s *durabilitySteps) resendAcked() error {
	if s.damaged.refusedStart {
		return nil
	}
	if len(s.acked) == 0 {
		return harnessErr("no message was acknowledged before the damage")
	}
	before := s.world.Model().Count()
	// repeated are the conversations in which some repeat was answered as a repeat, oldest first.
	var repeated []ackedMsg
	for _, m := range s.acked {
		body := map[string]any{"text": m.text, "messageId": m.id}
		for k, v := range m.extra {
			body[k] = v
		}
		r, err := s.cl.do(s.ctx, m.who, http.MethodPost, "/conversations/"+url.PathEscape(m.conv)+"/turns", body, reqOpts{})
		if err != nil {
			return err
		}
		if ok, err := s.damagedRefusal(r); err != nil || ok {
			if err != nil {
				return err
			}
			continue
		}
		var ack struct {
			Delivered *bool `json:"delivered"`
		}
		if r.status != http.StatusAccepted || json.Unmarshal(r.body, &ack) != nil || ack.Delivered == nil || *ack.Delivered {
			return fail(r.op+" (message id "+m.id+" again, after the damage)", fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)),
				fmt.Sprintf(`202 {"delivered": false} (a repeat) or 500 %q`, storageDamaged))
		}
		if !slices.ContainsFunc(repeated, func(o ackedMsg) bool { return o.conv == m.conv }) {
			repeated = append(repeated, m)
		}
	}
	// The sentinel: one new message to each conversation that took a repeat, sent once every repeat
	// has been answered as one. A conversation's messages run in the order they were accepted, so
	// a repeat taken for new would have run its turn before the new message's turn is answered.
	for _, m := range repeated {
		if err := s.sentinelAfterRepeats(m); err != nil {
			return err
		}
	}
	if got, want := s.world.Model().Count(), before+len(repeated); got != want {
		return fail("the model after acknowledged messages were sent again", fmt.Sprintf("%d more requests", got-before),
			fmt.Sprintf("%d (one for each new message sent after the repeats): an acknowledged message id runs once", len(repeated)))
	}
	return nil
}

// sentinelAfterRepeats sends one new message to m's conversation and waits for its turn to be
// answered, then compares the whole history with the one remembered before the damage: the same
// records, then the new message and its answer, and nothing else.
func (s *durabilitySteps) sentinelAfterRepeats(m ackedMsg) error {
	base := "/conversations/" + url.PathEscape(m.conv)
	var past []json.RawMessage
	for _, a := range s.damaged.answers {
		if a.who == m.who && a.path == base+"/history?limit=500" && a.status == http.StatusOK {
			var p page
			if err := json.Unmarshal(a.body, &p); err != nil || !p.Done {
				return harnessErr("the remembered history of %s is not one whole page", m.conv)
			}
			past = p.Entries
		}
	}
	if past == nil {
		return harnessErr("no history of %s was remembered before the damage", m.conv)
	}
	text := "a new message after the repeats"
	r, err := s.cl.do(s.ctx, m.who, http.MethodPost, base+"/turns", map[string]any{"text": text, "messageId": s.nextMessageID()}, reqOpts{})
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
	if r.status != http.StatusAccepted {
		return fail(r.op+" (a new message after the repeats)", fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "202")
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

func (s *scenario) crash() error {
	if err := s.sut(); err != nil {
		return err
	}
	if err := s.drv.Crash(); err != nil {
		return err
	}
	s.transport.CloseIdleConnections()
	s.areas.durability.down = true
	return nil
}

// restart launches the SUT again on the same data directory. A system that does not come back
// after a crash breaks durability: that is a failure, not a harness error.
func (s *scenario) restart() error {
	var err error
	if s.areas.durability.down {
		err = s.drv.Restart(s.ctx)
	}
	s.areas.durability.down = false
	var se *startError
	if errors.As(err, &se) {
		return fail("restart after a crash", se.Error()+logsOf(s.drv), "the system answering again on the same data directory")
	}
	return err
}

// requestHoldsNewestOf expects request N to the model to hold, before the text, the newest one
// or more of the listed turns (a run that ends with the last of them), each turn's question and
// reply exactly as the history has them, and nothing else: which of the runs is free.
func (s *budgetSteps) requestHoldsNewestOf(i int, list, text string) error {
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	turns := splitList(list)
	got := strings.Join(renderMessages(req.Messages), "\n")
	var runs []string
	for k := len(turns) - 1; k >= 0; k-- {
		var want []string
		for _, t := range turns[k:] {
			for _, m := range []string{"user: {turn " + t + "}", "assistant: {reply " + t + "}"} {
				line, err := s.expandMessage(m)
				if err != nil {
					return err
				}
				want = append(want, line)
			}
		}
		want = append(want, "user: "+unescape(text))
		if got == strings.Join(want, "\n") {
			return nil
		}
		runs = append(runs, strings.Join(turns[k:], ", "))
	}
	return fail(fmt.Sprintf("request %d to the model (every message, in order)", i), clip(describeAll(req.Messages), 400),
		fmt.Sprintf("the questions and replies of turns %s, each whole, then %q", strings.Join(runs, " or of turns "), unescape(text)))
}

// durabilityCrashVocabulary lists the steps of features/durability/crash.feature.
func durabilityCrashVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^request (\d+) to the model holds the newest of turns (.+), at least one, each whole, then "((?:[^"\\]|\\.)*)"$`, a.budget.requestHoldsNewestOf, "expects request N to the model to hold, before the text, the newest one or more of the listed turns, each turn's question and reply exactly as the history has them, and nothing else"},
		{`^(\w[\w' ]*?) remembers the generation$`, a.durability.remembersGeneration, "remembers the current conversation's generation as who sees it"},
		{`^the generation has moved on by (\d+)$`, a.durability.generationMovedOnBy, "expects the generation to have grown by exactly N since it was remembered"},
		{`^every answer about the conversations is remembered$`, a.durability.rememberAnswers, "remembers every answer about the scenario's conversations (history, status, pages)"},
		{`^the system is stopped$`, a.durability.stopSystem, "stops the system cleanly"},
		{`^the data directory's files are deleted$`, a.durability.deleteDataDir, "deletes the files of the system's data directory"},
		{`^a byte in every stored file is flipped at offset (\d+)$`, a.durability.flipStoredBytes, "flips one byte at the offset in every file of the data directory"},
		{`^the largest stored file is cut to (\d+)% of its length$`, a.durability.cutLargestStored, "cuts the largest file of the data directory to the given part of its length"},
		{`^the (\d+) smallest stored files are deleted$`, a.durability.deleteSmallestStored, "deletes the N smallest files of the data directory"},
		{`^the system restarts after the damage$`, a.durability.restartDamaged, "starts the system again on the damaged data directory"},
		{`^the system refuses to start on the damaged data directory$`, a.durability.refusesToStartDamaged, "expects the system to refuse to start on the damaged data directory"},
		{`^every remembered answer is given again unchanged or refused as storage damaged$`, a.durability.compareAnswers, "expects every remembered answer again, unchanged or refused as storage damaged"},
		{`^every acknowledged message sent again is not run again$`, a.durability.resendAcked, "sends every acknowledged message again and expects none to run a second time"},
		{`^(\w[\w' ]*?) has had (\d+) turns answered with replies of (\d+) characters$`, a.durability.hasHadTurnsWithReplies, "has N turns answered as who with replies of N characters each"},
		{`^the system is killed and restarted$`, a.durability.systemKilledAndRestarted, "kills the system and starts it again on the same data directory"},
		{`^the system is killed$`, a.durability.crash, "kills the system (SIGKILL, or the in-process crash)"},
	}
}
