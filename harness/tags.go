package harness

import (
	"fmt"
	"strings"
	"unicode"
)

// TagExprError is a tag expression that cannot be parsed. Pos is the 1-based position (in
// runes) of the first character that is wrong, or one past the end when the expression stops
// too early.
type TagExprError struct {
	Expr   string
	Pos    int
	Reason string
}

func (e *TagExprError) Error() string {
	return fmt.Sprintf("tag expression %q, position %d: %s", e.Expr, e.Pos, e.Reason)
}

// Is makes errors.Is(err, ErrUsage) true: a malformed filter is a usage error.
func (e *TagExprError) Is(target error) bool { return target == ErrUsage }

// TagExpr is a parsed tag filter in the syntax the runner accepts (godog's): terms joined by
// "&&" (and), groups of those joined by "," (or, binding loosest); a term is a tag name with
// an optional leading "@", negated by a leading "~". There are no parentheses.
type TagExpr struct {
	// Or holds the alternatives; each is a list of terms that must all hold.
	Or [][]TagTerm
}

// TagTerm is one tag of an expression, possibly negated.
type TagTerm struct {
	Name string // without "@"
	Not  bool
}

// ParseTagExpr parses a tag filter. An empty (or all-blank) string is no filter and yields a
// nil expression. Any other malformed input (an empty alternative, a dangling "&&", a "~" with
// no tag, a stray "@", "&", "~" or blank inside a name) is a *TagExprError naming the position;
// the parser never panics.
//
//	e, err := harness.ParseTagExpr("@profile:core && ~@crash, @req:ADR0122-D1-02")
//	if err != nil { return err } // errors.Is(err, harness.ErrUsage)
//	e.Match([]string{"@profile:core"}) // true
func ParseTagExpr(s string) (*TagExpr, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	rs := []rune(s)
	p := &tagParser{src: s, rs: rs}
	e := &TagExpr{}
	for {
		and, err := p.alternative()
		if err != nil {
			return nil, err
		}
		e.Or = append(e.Or, and)
		p.blanks()
		if p.i == len(rs) {
			return e, nil
		}
		if rs[p.i] != ',' {
			return nil, p.fail(p.i, fmt.Sprintf("expected \",\" or \"&&\", found %q", rs[p.i]))
		}
		p.i++
	}
}

type tagParser struct {
	src string
	rs  []rune
	i   int
}

func (p *tagParser) fail(at int, reason string) error {
	return &TagExprError{Expr: p.src, Pos: at + 1, Reason: reason}
}

func (p *tagParser) blanks() {
	for p.i < len(p.rs) && unicode.IsSpace(p.rs[p.i]) {
		p.i++
	}
}

// alternative reads terms joined by "&&".
func (p *tagParser) alternative() ([]TagTerm, error) {
	var out []TagTerm
	for {
		t, err := p.term()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		p.blanks()
		if p.i+1 < len(p.rs) && p.rs[p.i] == '&' && p.rs[p.i+1] == '&' {
			p.i += 2
			continue
		}
		if p.i < len(p.rs) && p.rs[p.i] == '&' {
			return nil, p.fail(p.i, "a single \"&\": write \"&&\" for and")
		}
		return out, nil
	}
}

// term reads ["~"] ["@"] name.
func (p *tagParser) term() (TagTerm, error) {
	p.blanks()
	var t TagTerm
	if p.i < len(p.rs) && p.rs[p.i] == '~' {
		t.Not = true
		p.i++
		p.blanks()
	}
	if p.i < len(p.rs) && p.rs[p.i] == '@' {
		p.i++
	}
	start := p.i
	for p.i < len(p.rs) && !unicode.IsSpace(p.rs[p.i]) && !strings.ContainsRune(",&~@()", p.rs[p.i]) {
		p.i++
	}
	if p.i == start {
		if p.i == len(p.rs) {
			return t, p.fail(p.i, "expected a tag name, found the end of the expression")
		}
		return t, p.fail(p.i, fmt.Sprintf("expected a tag name, found %q", p.rs[p.i]))
	}
	if p.i < len(p.rs) && strings.ContainsRune("~@()", p.rs[p.i]) {
		return t, p.fail(p.i, fmt.Sprintf("%q cannot appear inside a tag name", p.rs[p.i]))
	}
	t.Name = string(p.rs[start:p.i])
	return t, nil
}

// Match reports whether a scenario with these tags (with or without "@") is selected. A nil
// expression selects everything.
func (e *TagExpr) Match(tags []string) bool {
	if e == nil {
		return true
	}
	has := map[string]bool{}
	for _, t := range tags {
		has[strings.TrimPrefix(t, "@")] = true
	}
	for _, and := range e.Or {
		ok := true
		for _, t := range and {
			if has[t.Name] == t.Not {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// String is the expression in the canonical form the scenario runner is given.
func (e *TagExpr) String() string {
	if e == nil {
		return ""
	}
	var alts []string
	for _, and := range e.Or {
		var ts []string
		for _, t := range and {
			s := "@" + t.Name
			if t.Not {
				s = "~" + s
			}
			ts = append(ts, s)
		}
		alts = append(alts, strings.Join(ts, "&&"))
	}
	return strings.Join(alts, ",")
}
