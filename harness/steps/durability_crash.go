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
	"slices"
	"sort"
	"strings"

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

func (s *durabilitySteps) rememberAnswers() error {
	s.damaged.answers = nil
	for _, name := range sortedKeys(s.convs) {
		c := s.convs[name]
		for _, path := range damageReads(c.id) {
			r, err := s.cl.Do(s.ctx, c.owner, http.MethodGet, path, nil, reqOpts{})
			if err != nil {
				return err
			}
			if r.Status != http.StatusOK {
				return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200 (before any damage)")
			}
			s.damaged.answers = append(s.damaged.answers, rememberedRead{who: c.owner, path: path, status: r.Status, body: r.Body})
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

// restartDamaged starts the system again on its damaged data directory. Refusing to start is one
// of the outcomes the damage scenarios accept; a harness error stays one.
func (s *durabilitySteps) restartDamaged() error {
	if !s.down {
		return harnessErr("the system is not down")
	}
	err := s.drv.Restart(s.ctx)
	s.transport.CloseIdleConnections() // a request answered as the system stopped may have lent one back
	s.down = false
	var se *StartError
	if errors.As(err, &se) {
		s.damaged.refusedStart = true
		s.damaged.why = se.Error()
		s.down = true
		return nil
	}
	return err
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
		r, err := s.cl.Do(s.ctx, a.who, http.MethodGet, a.path, nil, reqOpts{})
		if err != nil {
			return err
		}
		if ok, err := s.damagedRefusal(r); err != nil || ok {
			if err != nil {
				return err
			}
			continue
		}
		if r.Status != a.status || string(r.Body) != string(a.body) {
			return fail(r.Op+" after the stored files were damaged", fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 400)),
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
		r, err := s.cl.Do(s.ctx, m.who, http.MethodPost, "/conversations/"+url.PathEscape(m.conv)+"/turns", body, reqOpts{})
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
		if r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &ack) != nil || ack.Delivered == nil || *ack.Delivered {
			return fail(r.Op+" (message id "+m.id+" again, after the damage)", fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)),
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

func (s *scenario) crash() error {
	if err := s.sut(); err != nil {
		return err
	}
	crash := s.drv.Crash
	if oc, ok := s.drv.(ownerCrasher); ok {
		if node, probe := s.answers.newest(); node != "" {
			crash = func() error { return oc.crashOwner(node, probe) }
		}
	}
	if err := crash(); err != nil {
		return err
	}
	s.transport.CloseIdleConnections()
	s.areas.durability.down = true
	return nil
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
