package steps

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
)

// writesWait makes every later memory write wait, once recorded and applied, before it is answered.
func (s *writeBackSteps) writesWait() error {
	s.hold = s.world.NewHold()
	s.world.Memory().HoldWrites(s.hold)
	return nil
}

// writesReleased answers every memory write that waits, and those that come later.
func (s *writeBackSteps) writesReleased() error {
	if s.hold == nil {
		return harnessErr("the memory's writes were not made to wait")
	}
	s.hold.Release()
	return nil
}

// writtenTimes waits until N memory writes have arrived.
func (s *writeBackSteps) writtenTimes(n int) error {
	ctx, cancel := s.wait()
	defer cancel()
	if err := s.world.Memory().WaitWrites(ctx, n); err != nil {
		return fail("the memory", fmt.Sprintf("%d writes", len(s.world.Memory().Writes())), fmt.Sprintf("%d writes", n))
	}
	return nil
}

// renderEntries writes entries as `role: text`, ` (tainted)` after a tainted one, joined by " / ".
func renderEntries(es []world.MemoryEntry) string {
	var parts []string
	for _, e := range es {
		p := e.Role + ": " + e.Text
		if e.Tainted {
			p += " (tainted)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " / ")
}

// renderOp writes one memory operation as its table row would say it.
func renderOp(op world.MemoryOp) string {
	stored := ""
	if op.Op == world.OpWrite {
		stored = fmt.Sprint(len(op.Stored))
	}
	return fmt.Sprintf("[%s %s {%s} %s]", op.Op, op.Scope, renderEntries(op.Entries), stored)
}

// memoryLog expects the memory's whole log to be exactly the table (op, scope, entries, stored):
// entries as `role: text` joined by " / ", stored the number of entries a write appended. Every
// entry of a write must carry an id. Ids derive from the run or turn and the text (spec/http.md,
// Run write-back), so the same words written by another run rightly carry other ids; a repeated
// write that changed its ids is seen in its stored count, which is then not 0.
func (s *writeBackSteps) memoryLog(t *godog.Table) error {
	var want []string
	for _, row := range t.Rows[1:] {
		if len(row.Cells) != 4 {
			return harnessErr("a memory log row has op, scope, entries, stored")
		}
		want = append(want, fmt.Sprintf("[%s %s {%s} %s]", row.Cells[0].Value, row.Cells[1].Value, unescape(row.Cells[2].Value), row.Cells[3].Value))
	}
	ops := s.world.Memory().Log()
	var got []string
	for _, op := range ops {
		got = append(got, renderOp(op))
		if op.Op != world.OpWrite {
			continue
		}
		for _, e := range op.Entries {
			if e.ID == "" {
				return fail("the memory log", fmt.Sprintf("an entry without an id (%s: %q)", e.Role, clip(e.Text, 40)), "every written entry under an id")
			}
		}
	}
	if g, w := strings.Join(got, " "), strings.Join(want, " "); g != w {
		return fail("GET /control/memory/log", g, w)
	}
	return nil
}

// memoryLogEmpty expects the memory never to have been read or written.
func (s *writeBackSteps) memoryLogEmpty() error {
	var got []string
	for _, op := range s.world.Memory().Log() {
		got = append(got, renderOp(op))
	}
	if len(got) != 0 {
		return fail("GET /control/memory/log", strings.Join(got, " "), "no memory operation")
	}
	return nil
}

// entriesOf reads a table of entries: role, text, tainted (true or false).
func entriesOf(t *godog.Table) ([]world.MemoryEntry, error) {
	var out []world.MemoryEntry
	for _, row := range t.Rows[1:] {
		if len(row.Cells) != 3 {
			return nil, harnessErr("an entry row has role, text, tainted")
		}
		out = append(out, world.MemoryEntry{Role: row.Cells[0].Value, Text: unescape(row.Cells[1].Value), Tainted: row.Cells[2].Value == "true"})
	}
	return out, nil
}

// sameEntries compares entries by role, text and mark, and expects an id on each, none twice.
func sameEntries(op string, got, want []world.MemoryEntry) error {
	seen := map[string]bool{}
	for _, e := range got {
		if e.ID == "" || seen[e.ID] {
			return fail(op, fmt.Sprintf("entry %s: %q under id %q", e.Role, clip(e.Text, 40), e.ID), "each entry under an id of its own")
		}
		seen[e.ID] = true
	}
	if g, w := renderEntries(got), renderEntries(want); g != w {
		return fail(op, g, w)
	}
	return nil
}

// scopeHolds expects who's memory scope to hold exactly the table's entries, oldest first.
func (s *writeBackSteps) scopeHolds(who string, t *godog.Table) error {
	if _, ok := principals[who]; !ok {
		return harnessErr("unknown principal %q", who)
	}
	want, err := entriesOf(t)
	if err != nil {
		return err
	}
	scope := memoryScope(who)
	return sameEntries("the memory scope "+scope, s.world.Memory().Scope(scope), want)
}

// toolAskedToWrite expects every call of the tool to have carried who's scope and exactly the
// table's entries, each with an id.
func (s *writeBackSteps) toolAskedToWrite(name, who string, t *godog.Table) error {
	if _, ok := principals[who]; !ok {
		return harnessErr("unknown principal %q", who)
	}
	want, err := entriesOf(t)
	if err != nil {
		return err
	}
	calls := s.world.Tools().CallsOf(name)
	if len(calls) == 0 {
		return fail("the tool "+name, "never called", "a write-back through it")
	}
	scope := memoryScope(who)
	for i, c := range calls {
		var body struct {
			Scope   string              `json:"scope"`
			Entries []world.MemoryEntry `json:"entries"`
		}
		op := fmt.Sprintf("call %d of the tool %s", i+1, name)
		if err := json.Unmarshal(c.Args, &body); err != nil {
			return fail(op, clip(string(c.Args), 200), `{"scope", "entries"}`)
		}
		if body.Scope != scope {
			return fail(op, fmt.Sprintf("scope %q", body.Scope), fmt.Sprintf("scope %q", scope))
		}
		if err := sameEntries(op, body.Entries, want); err != nil {
			return err
		}
	}
	return nil
}

// agentMemoryVocabulary lists the steps of features/agent/memory.feature.
func agentMemoryVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the memory's writes wait$`, a.writeBack.writesWait, "makes every later memory write wait, once recorded and applied, before it is answered"},
		{`^the memory's writes are released$`, a.writeBack.writesReleased, "answers every memory write that waits, and those that come later"},
		{`^the memory has been written (\d+) times?$`, a.writeBack.writtenTimes, "waits until N memory writes have arrived"},
		{`^the memory log is:$`, a.writeBack.memoryLog, "expects the memory's whole log to be exactly the table (op, scope, entries, stored)"},
		{`^the memory log is empty$`, a.writeBack.memoryLogEmpty, "expects the memory never to have been read or written"},
		{`^(\w[\w' ]*?)'s memory scope holds exactly:$`, a.writeBack.scopeHolds, "expects who's memory scope to hold exactly the table's entries (role, text, tainted), oldest first, each under an id of its own"},
		{`^the tool "([\w-]+)" was asked to write to (\w[\w' ]*?)'s memory scope:$`, a.writeBack.toolAskedToWrite, "expects every call of the tool to have carried who's scope and exactly the table's entries (role, text, tainted), each with an id"},
	}
}
