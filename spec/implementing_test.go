package spec

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImplementingGuideHolds: docs/implementing.md names only routes the contract has, every
// profile of the catalogue once in its build order, and only catalogued requirement ids, so the
// page a newcomer follows first cannot drift from the spec.
func TestImplementingGuideHolds(t *testing.T) {
	b, err := os.ReadFile("../docs/implementing.md")
	require.NoError(t, err)
	page := string(b)
	doc := loadOpenAPI(t)

	routes := regexp.MustCompile("`(GET|POST|PUT|DELETE|PATCH|OPTIONS) (/[^`\\s]*)`").FindAllStringSubmatch(page, -1)
	require.NotEmpty(t, routes)
	for _, m := range routes {
		item := doc.Paths.Find(m[2])
		require.NotNil(t, item, "docs/implementing.md names %s %s, a path spec/openapi.yaml does not have", m[1], m[2])
		require.NotNil(t, item.GetOperation(m[1]), "docs/implementing.md names %s %s, an operation spec/openapi.yaml does not have", m[1], m[2])
	}

	cat, err := LoadCatalogue()
	require.NoError(t, err)
	_, after, ok := strings.Cut(page, "## The order to build the profiles in")
	require.True(t, ok)
	section, _, _ := strings.Cut(after, "\n## ")
	var order []string
	for _, m := range regexp.MustCompile("(?m)^\\d+\\. `([a-z-]+)`").FindAllStringSubmatch(section, -1) {
		order = append(order, m[1])
	}
	want := cat.ProfileNames()
	require.ElementsMatch(t, want, order, "the build order names every profile once")
	require.Equal(t, "core", order[0])
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(order))), len(order))

	for _, id := range regexp.MustCompile(`ADR[0-9]{4}-[A-Z][A-Za-z0-9]*-[0-9]{2}`).FindAllString(page, -1) {
		_, ok := cat.Get(id)
		require.True(t, ok, "docs/implementing.md names %s, which is not catalogued", id)
	}
}
