package steps

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/cucumber/godog"
)

// receivedExactly expects the frames received (but heartbeats), with their verdicts, to be
// exactly the table.
func (s *streamSteps) receivedExactly(who, transport string, t *godog.Table) error {
	f, err := s.reader(who, transport)
	if err != nil {
		return err
	}
	if _, err := streamFrames.header(t); err != nil {
		return err
	}
	count := func(fw followed) int {
		k := 0
		for _, r := range fw.raw {
			if r.Kind() != "heartbeat" {
				k++
			}
		}
		return k
	}
	fw, err := s.framesFor(f, t, "frames received", count)
	if err != nil {
		return err
	}
	var rows []map[string]string
	for i, r := range fw.raw {
		if r.Kind() != "heartbeat" {
			rows = append(rows, frameCells(r, &fw.verdicts[i]))
		}
	}
	if err := streamFrames.judge(who+"'s "+transport+" reader received", t, rows); err != nil {
		return err
	}
	return fw.sutErr
}

// modelGoesOnEvery releases the newest paced answer's holds one by one in the background, each
// the interval after its piece was sent.
func (s *streamSteps) modelGoesOnEvery(ms int) error {
	if len(s.paced) == 0 {
		return harnessErr("no paced answer was scripted")
	}
	a := s.paced[len(s.paced)-1]
	ctx := s.ctx
	go func() {
		for _, h := range a.holds {
			if h.WaitReached(ctx) != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(ms) * time.Millisecond):
			}
			h.Release()
		}
	}()
	return nil
}

// sameFrames expects two readers to have received the same frames but heartbeats, member for
// member.
func (s *streamSteps) sameFrames(who1, tr1, who2, tr2 string) error {
	a, err := s.reader(who1, tr1)
	if err != nil {
		return err
	}
	b, err := s.reader(who2, tr2)
	if err != nil {
		return err
	}
	canon := func(f *follower) ([]string, error) {
		fw := f.snapshot()
		if fw.kitErr != nil {
			return nil, fw.kitErr
		}
		var out []string
		for _, r := range fw.raw {
			if r.Kind() == "heartbeat" {
				continue
			}
			var v any
			_ = json.Unmarshal(r.Raw, &v)
			c, _ := json.Marshal(v)
			out = append(out, string(c))
		}
		return out, nil
	}
	x, err := canon(a)
	if err != nil {
		return err
	}
	y, err := canon(b)
	if err != nil {
		return err
	}
	if len(x) == 0 {
		return harnessErr("%s's %s reader received nothing to compare", who1, tr1)
	}
	if !slicesEqual(x, y) {
		return fail(who2+"'s "+tr2+" reader", clip(strings.Join(y, "\n"), 3000), "the same frames as "+who1+"'s "+tr1+" reader:\n"+clip(strings.Join(x, "\n"), 3000))
	}
	return nil
}

// noMergedFrame expects no frame the reader received to be a merged one (a span over more than
// its own cursor, or parts): a reader that follows from before a reply's first frame gets every
// frame as it is logged, and a live frame is never merged (spec/stream.md, Replay). How many
// deltas a reply streams in is the system's own: the fold of the deltas judges their text.
func (s *streamSteps) noMergedFrame(who, transport string) error {
	_, fw, err := s.received(who, transport)
	if err != nil {
		return err
	}
	for _, fr := range fw.raw {
		if fr.Span > 1 || fr.Payload().Parts != nil {
			return fail(who+"'s "+transport+" reader", "a merged frame: "+strings.Join(frameRow(fr), " "),
				"no merged frame: every frame it received was sent live, as it was logged")
		}
	}
	return fw.sutErr
}

// streamResumeVocabulary lists the steps of features/stream/resume.feature.
func streamResumeVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^` + readerPat + ` received exactly these frames:$`, a.stream.receivedExactly, "waits for as many frames as the table has rows and expects every frame received but heartbeats, as sent, with the reader's verdict, to be exactly the table"},
		{`^` + readerPat + ` and ` + readerPat + ` received the same frames$`, a.stream.sameFrames, "expects the two readers to have received the same frames but heartbeats, member for member, in the same order"},
		{`^` + readerPat + ` received no merged frame$`, a.stream.noMergedFrame, "expects no frame the reader received to be merged (a span over more than one cursor, or parts): a live frame is never merged"},
		{`^the model goes on after every piece, one every (\d+) ms$`, a.stream.modelGoesOnEvery, "lets the newest paced answer go on after each of its pieces in turn, each the interval after the piece reached its hold, while the scenario goes on"},
	}
}
