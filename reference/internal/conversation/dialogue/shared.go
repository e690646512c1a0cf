package dialogue

import (
	"context"
	"slices"
	"strings"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// participants reads the current participant set of a shared conversation (owner first) from
// the book the client shares.
func (cv *Dialogue) participants(ctx context.Context, k *kernel.Kernel, id string) ([]loomtype.Identity, error) {
	c, err := cv.book.Read(ctx, k, id)
	return c.Members, err
}

func (cv *Dialogue) isService(id loomtype.Identity) bool {
	return cv.cfg.Shared.Service != nil && cv.cfg.Shared.Service.Equal(id)
}

// sharedVoices admits any identity but the service's: the host signed the envelope; whether the
// asker is still a participant is a recorded verdict of its own (not-a-participant).
func (cv *Dialogue) sharedVoices(c *kernel.Context, st *state) func(envelope.Identity) bool {
	return func(id envelope.Identity) bool { return !cv.isService(loomtype.Identity(id)) && id.Actor != "" }
}

// stillParticipant records whether the asker is a participant when the turn is dequeued.
func (cv *Dialogue) stillParticipant(c *kernel.Context, st *state, asker loomtype.Identity) (bool, error) {
	var ok bool
	err := cv.decide(c, record.MemberID(st.Ord), &ok, func() (any, error) {
		set, err := cv.participants(c.Ctx(), c.Kernel(), c.ID())
		if err != nil {
			return nil, err
		}
		return slices.Contains(set, asker), nil
	})
	return ok, err
}

// visibleWindow is the part of the window the asker's turn may see: in shared mode a recorded
// verdict that keeps a turn only when its answer is unrestricted, the asker's own, or one the
// asker is cleared for; a restricted turn is excluded whole.
func (cv *Dialogue) visibleWindow(c *kernel.Context, st *state, asker loomtype.Identity) ([]turnMem, error) {
	if st.Mode != ModeShared {
		return st.Window, nil
	}
	var ords []int64
	err := cv.decide(c, record.VisibleID(st.Ord), &ords, func() (any, error) {
		cache := map[string]bool{}
		out := []int64{}
		for _, t := range st.Window {
			if len(t.Classes) == 0 || t.Asker.Equal(asker) || record.ClearedCached(c.Ctx(), cv.deps.Cleared, asker, t.Classes, cache) {
				out = append(out, t.Ord)
			}
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	var out []turnMem
	for _, t := range st.Window {
		if slices.Contains(ords, t.Ord) {
			out = append(out, t)
		}
	}
	return out, nil
}

// contextClasses are the classes of what fed the turn's context: every visible turn's classes and,
// for an edit, the edited turn's. The question is stamped with them.
func (cv *Dialogue) contextClasses(c *kernel.Context, st *state, asker loomtype.Identity, window []turnMem, env *record.EnvelopeJSON) ([]string, error) {
	if st.Mode != ModeShared {
		return nil, nil
	}
	var cls []string
	for _, t := range window {
		cls = append(cls, t.Classes...)
	}
	if env.EditOf != nil {
		for _, t := range st.Window {
			if t.UserRec == *env.EditOf {
				cls = append(cls, t.Classes...)
			}
		}
	}
	return record.ClassSet(cls), nil
}

// answerClasses are the classes of an answer: its context's, the declared class of every tool it
// called (unclassified for a tool without one) and its memory class, if it drew on memory.
func (cv *Dialogue) answerClasses(context []string, tools []string) []string {
	cls := append([]string{}, context...)
	for _, t := range tools {
		if strings.HasPrefix(t, record.MemoryClassPrefix) {
			cls = append(cls, t)
			continue
		}
		if c := cv.cfg.ToolClasses[t]; c != "" {
			cls = append(cls, c)
		} else {
			cls = append(cls, Unclassified)
		}
	}
	return record.ClassSet(cls)
}

// sameAsker reports whether an inbox message is an envelope for conversation id signed for asker
// (a participant's follow-up interrupts only their own running turn; a payload nobody signed
// interrupts nobody's).
func (cv *Dialogue) sameAsker(id string, m kernel.Message, asker loomtype.Identity) bool {
	a, ok := record.SignedAskerOf(cv.cfg.Keys, id, m.Payload)
	return ok && a.Equal(asker)
}
