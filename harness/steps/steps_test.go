package steps

import (
	"bytes"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	gherkin "github.com/cucumber/gherkin/go/v42"
	messages "github.com/cucumber/messages/go/v34"

	"github.com/loomcheck/loomcheck/features"
)

// stepUse is one step text of a feature, as godog runs it (a scenario outline's step once per
// example row, with the row's values in it).
type stepUse struct {
	where string // file:line of the step in its feature
	text  string
}

// featureSteps reads every step text of the *.feature files of fsys with the Gherkin parser
// godog uses, outlines expanded into their pickles.
func featureSteps(fsys fs.FS) ([]stepUse, error) {
	names, err := features.Files(fsys)
	if err != nil {
		return nil, err
	}
	var out []stepUse
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ids := (&messages.Incrementing{}).NewId
		doc, err := gherkin.ParseGherkinDocument(bytes.NewReader(b), ids)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		lines := stepLines(doc)
		for _, p := range gherkin.Pickles(*doc, name, ids) {
			for _, st := range p.Steps {
				where := name
				if len(st.AstNodeIds) > 0 {
					where = fmt.Sprintf("%s:%d", name, lines[st.AstNodeIds[0]])
				}
				out = append(out, stepUse{where: where, text: st.Text})
			}
		}
	}
	return out, nil
}

// stepLines maps the id of every step of doc to its line.
func stepLines(doc *messages.GherkinDocument) map[string]int64 {
	lines := map[string]int64{}
	add := func(steps []*messages.Step) {
		for _, st := range steps {
			lines[st.Id] = st.Location.Line
		}
	}
	var children func(bg *messages.Background, sc *messages.Scenario, r *messages.Rule)
	children = func(bg *messages.Background, sc *messages.Scenario, r *messages.Rule) {
		if bg != nil {
			add(bg.Steps)
		}
		if sc != nil {
			add(sc.Steps)
		}
		if r != nil {
			for _, c := range r.Children {
				children(c.Background, c.Scenario, nil)
			}
		}
	}
	if doc.Feature != nil {
		for _, c := range doc.Feature.Children {
			children(c.Background, c.Scenario, c.Rule)
		}
	}
	return lines
}

// vocabularyProblems is what is wrong with a vocabulary used by uses: a pattern registered
// twice, a step text two patterns match (godog would run whichever it met first), a step text
// no pattern matches, a pattern no step text uses. Each problem is one line.
func vocabularyProblems(voc []Step, uses []stepUse) []string {
	var problems []string
	seen := map[string]string{}
	res := make([]*regexp.Regexp, len(voc))
	for i, st := range voc {
		if area, ok := seen[st.Pattern]; ok {
			problems = append(problems, fmt.Sprintf("pattern %s is registered twice (areas %s and %s)", st.Pattern, area, st.Area))
		}
		seen[st.Pattern] = st.Area
		re, err := regexp.Compile(st.Pattern)
		if err != nil {
			problems = append(problems, fmt.Sprintf("pattern %s of %s: %v", st.Pattern, st.Area, err))
			re = regexp.MustCompile(`\A\z.`) // matches nothing
		}
		res[i] = re
	}
	used := make([]int, len(voc))
	ambiguous := map[string]bool{}
	hitsOf := patternHits(res, uses)
	for _, u := range uses {
		hits := hitsOf[u.text]
		for _, i := range hits {
			used[i]++
		}
		switch {
		case len(hits) == 0:
			problems = append(problems, fmt.Sprintf("%s: no pattern matches %q", u.where, u.text))
		case len(hits) > 1:
			var ps []string
			for _, i := range hits {
				ps = append(ps, voc[i].Pattern+" ("+voc[i].Area+")")
			}
			key := strings.Join(ps, " and ")
			if !ambiguous[key] {
				ambiguous[key] = true
				problems = append(problems, fmt.Sprintf("%s: %q is matched by %s", u.where, u.text, key))
			}
		}
	}
	for i, n := range used {
		if n == 0 {
			problems = append(problems, fmt.Sprintf("pattern %s (%s) is used by no feature", voc[i].Pattern, voc[i].Area))
		}
	}
	return problems
}

// patternHits maps each distinct text of uses to the patterns of res (their indices, in order)
// that match it. Most step texts recur across the features, so each distinct text is matched
// once; and a pattern is tried only when the text holds its literal prefix (at its start, for a
// pattern anchored there), which any match must begin with: that spares the matcher most of the
// patterns a text is checked against.
func patternHits(res []*regexp.Regexp, uses []stepUse) map[string][]int {
	type guard struct {
		prefix   string
		anchored bool
	}
	guards := make([]guard, len(res))
	for i, re := range res {
		prefix, _ := re.LiteralPrefix()
		guards[i] = guard{prefix: prefix, anchored: strings.HasPrefix(re.String(), "^")}
	}
	hitsOf := map[string][]int{}
	for _, u := range uses {
		if _, ok := hitsOf[u.text]; ok {
			continue
		}
		var hits []int
		for i, re := range res {
			g := guards[i]
			may := strings.Contains(u.text, g.prefix)
			if g.anchored {
				may = strings.HasPrefix(u.text, g.prefix)
			}
			if may && re.MatchString(u.text) {
				hits = append(hits, i)
			}
		}
		hitsOf[u.text] = hits
	}
	return hitsOf
}

// TestStepVocabulary: every step pattern is registered once, every step text of features/ is
// matched by exactly one pattern, and every pattern is used by some feature.
func TestStepVocabulary(t *testing.T) {
	uses, err := featureSteps(features.FS)
	if err != nil {
		t.Fatal(err)
	}
	if len(uses) < 1000 {
		t.Fatalf("read %d step texts from features/; the parser found too few", len(uses))
	}
	voc := Vocabulary()
	for _, p := range vocabularyProblems(voc, uses) {
		t.Error(p)
	}
	for _, st := range voc {
		if st.Meaning == "" || strings.Contains(st.Meaning, "\n") {
			t.Errorf("pattern %s (%s) needs a one-line meaning, has %q", st.Pattern, st.Area, st.Meaning)
		}
	}
}

// TestVocabularyProblems: the check finds each kind of problem it names.
func TestVocabularyProblems(t *testing.T) {
	voc := []Step{
		{Pattern: `^(\w+) sends "([^"]*)"$`, Area: "conversation"},
		{Pattern: `^(\w+) sends "([^"]*)"$`, Area: "gateway"},
		{Pattern: `^(\w+) sends "hi"$`, Area: "live"},
		{Pattern: `^the model replies "([^"]*)"$`, Area: "model"},
		{Pattern: `^nobody says this$`, Area: "setup"},
	}
	uses := []stepUse{
		{"a.feature:3", `alice sends "hi"`},
		{"a.feature:4", `the model replies "ok"`},
		{"a.feature:5", `something undefined`},
	}
	got := vocabularyProblems(voc, uses)
	want := []string{
		`pattern ^(\w+) sends "([^"]*)"$ is registered twice (areas conversation and gateway)`,
		`a.feature:3: "alice sends \"hi\"" is matched by ^(\w+) sends "([^"]*)"$ (conversation) and ^(\w+) sends "([^"]*)"$ (gateway) and ^(\w+) sends "hi"$ (live)`,
		`a.feature:5: no pattern matches "something undefined"`,
		`pattern ^nobody says this$ (setup) is used by no feature`,
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWhiteSpaceIsTheUnicodeProperty: the blank texts the steps send are made of exactly the
// characters of Unicode's White_Space property, the list spec/http.md gives.
func TestWhiteSpaceIsTheUnicodeProperty(t *testing.T) {
	in := map[rune]bool{}
	for _, r := range whiteSpace {
		in[r] = true
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.Is(unicode.White_Space, r) != in[r] {
			t.Errorf("U+%04X: White_Space %v, in the steps' list %v", r, unicode.Is(unicode.White_Space, r), in[r])
		}
	}
	if len(whiteSpace) != 25 || len(in) != 25 {
		t.Errorf("the list holds %d code points (%d distinct), spec/http.md names 25", len(whiteSpace), len(in))
	}
	for i := range 100 {
		if b := blankText(i); strings.TrimFunc(b, unicode.IsSpace) != "" || b == "" {
			t.Errorf("blank text %d is %q", i, b)
		}
	}
}
