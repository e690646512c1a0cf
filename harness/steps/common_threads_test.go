package steps

import "testing"

// TestThreadsTemplates: a placeholder stands for one value everywhere, a known one for its own
// value alone, and a failed match binds nothing.
func TestThreadsTemplates(t *testing.T) {
	s := &threadsSteps{scenario: &scenario{}}
	s.ready()
	want := `{"id":"{ac A}","root":{"id":"{ac A}","kind":"agent"},"thread":"{thread A}"}`
	if s.match(want, `{"id":"ac_1","root":{"id":"ac_2","kind":"agent"},"thread":"t_0123456789abcdef"}`) {
		t.Fatal("two values for one placeholder matched")
	}
	if len(s.bound) != 0 {
		t.Fatalf("a failed match bound %v", s.bound)
	}
	if s.match(want, `{"id":"ac_1","root":{"id":"ac_1","kind":"agent"},"thread":"t_short"}`) {
		t.Fatal("a thread out of the alphabet's bounds matched")
	}
	if !s.match(want, `{"id":"ac_1","root":{"id":"ac_1","kind":"agent"},"thread":"t_0123456789abcdef"}`) {
		t.Fatal("a good body did not match")
	}
	if s.bound["ac A"] != "ac_1" || s.bound["thread A"] != "t_0123456789abcdef" {
		t.Fatalf("bound %v", s.bound)
	}
	if s.match(`{"thread":"{thread A}"}`, `{"thread":"t_fedcba9876543210"}`) {
		t.Fatal("a known thread matched another id")
	}
	if !s.match("system: You work on task {task T}: Survey.", "system: You work on task tk_9: Survey.") || s.bound["task T"] != "tk_9" {
		t.Fatalf("a task id in a line did not bind: %v", s.bound)
	}
	if got := s.substitute(`{"thread":"{thread A}","x":"{ac B}"}`); got != `{"thread":"t_0123456789abcdef","x":"{ac B}"}` {
		t.Fatalf("substitute gave %s", got)
	}
}
