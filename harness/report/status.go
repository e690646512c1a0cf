package report

// statusOrder lists every Status from best to worst. Its order is the one Worse folds by.
var statusOrder = [...]Status{Passed, NotApplicable, Skipped, Pending, Undefined, Failed, HarnessError}

// Statuses returns every known Status, best first. The slice is new on each call.
//
//	for _, s := range report.Statuses() { fmt.Println(s, totals.Count(s)) }
func Statuses() []Status {
	out := make([]Status, len(statusOrder))
	copy(out, statusOrder[:])
	return out
}

// rank is the position of s in statusOrder, or -1 for an unknown value.
func rank(s Status) int {
	for i, v := range statusOrder {
		if v == s {
			return i
		}
	}
	return -1
}

// Valid reports whether s is one of the declared Status values.
//
//	if !s.Valid() { return fmt.Errorf("unknown status %q", s) }
func (s Status) Valid() bool { return rank(s) >= 0 }

// Failing reports whether s holds a run back: a failure of the system under test or of the kit.
//
//	if sc.Status.Failing() && sc.Expected == "" { unexpected++ }
func (s Status) Failing() bool { return s == Failed || s == HarnessError }

// Worse returns the worse of a and b in the order Passed, NotApplicable, Skipped, Pending,
// Undefined, Failed, HarnessError. An unknown value counts as worse than every known one, so a
// typo is never folded away; an empty Status counts as the best, so it is the natural start of a fold.
//
//	st := report.Status("")
//	for _, step := range sc.Steps { st = report.Worse(st, step.Status) }
func Worse(a, b Status) Status {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	ra, rb := rank(a), rank(b)
	if ra < 0 {
		return a
	}
	if rb < 0 {
		return b
	}
	if rb > ra {
		return b
	}
	return a
}

// Add counts one outcome s. An unknown status is not counted.
//
//	var t report.Totals
//	for _, sc := range r.Scenarios { t.Add(sc.Status) }
func (t *Totals) Add(s Status) {
	if p := t.field(s); p != nil {
		*p++
	}
}

// Count returns how many outcomes s were counted.
//
//	failed := r.Totals.Count(report.Failed)
func (t Totals) Count(s Status) int {
	if p := t.field(s); p != nil {
		return *p
	}
	return 0
}

// Total returns the number of outcomes counted, whatever they were.
//
//	fmt.Printf("%d scenarios\n", r.Totals.Total())
func (t Totals) Total() int {
	return t.Passed + t.Failed + t.NotApplicable + t.Skipped + t.Undefined + t.Pending + t.HarnessError
}

func (t *Totals) field(s Status) *int {
	switch s {
	case Passed:
		return &t.Passed
	case Failed:
		return &t.Failed
	case NotApplicable:
		return &t.NotApplicable
	case Skipped:
		return &t.Skipped
	case Undefined:
		return &t.Undefined
	case Pending:
		return &t.Pending
	case HarnessError:
		return &t.HarnessError
	}
	return nil
}
