package harness

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/loomcheck/loomcheck/spec"
)

// DidYouMean is the hint a usage error about an unknown name carries: ` (did you mean "x"?)` for
// the candidate closest to word, when one is close enough to be a slip of the keyboard (at most a
// third of its characters differ, case aside), and "" otherwise.
//
//	fmt.Printf("unknown profile %q%s\n", p, harness.DidYouMean(p, names))
func DidYouMean(word string, candidates []string) string {
	best, bestD := "", -1
	w := strings.ToLower(word)
	for _, c := range candidates {
		d := editDistance(w, strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD == 0 && best == word || bestD*3 > max(len(word), len(best)) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance counts the insertions, deletions and substitutions of bytes that turn a into b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// reqTag finds the requirement ids a tag expression names.
var reqTag = regexp.MustCompile(`@req:([A-Za-z0-9-]+)`)

// unknownRequirements says which requirement ids of a tag expression the catalogue does not
// hold, each with its hint, or "" when it holds them all.
func unknownRequirements(tags string, cat *spec.Catalogue) string {
	ids := make([]string, 0, len(cat.Requirements))
	for _, q := range cat.Requirements {
		ids = append(ids, q.ID)
	}
	var out []string
	for _, m := range reqTag.FindAllStringSubmatch(tags, -1) {
		if _, ok := cat.Get(m[1]); !ok {
			out = append(out, fmt.Sprintf("%s is not a requirement of the catalogue%s", m[1], DidYouMean(m[1], ids)))
		}
	}
	return strings.Join(out, "; ")
}
