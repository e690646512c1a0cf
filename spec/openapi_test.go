package spec

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPI())
	require.NoError(t, err)
	return doc
}

func TestOpenAPIValidates(t *testing.T) {
	doc := loadOpenAPI(t)
	require.True(t, doc.IsOpenAPI31OrLater())
	require.NoError(t, doc.Validate(context.Background()))
}

func TestOpenAPIReturnsACopy(t *testing.T) {
	a := OpenAPI()
	a[0] = 'X'
	assert.NotEqual(t, a[0], OpenAPI()[0])
}

// routeInProse matches a route written in spec/http.md or spec/peer.md: `GET /path`.
var routeInProse = regexp.MustCompile("`(GET|POST|PUT|PATCH|DELETE) (/[^`\\s]*)`")

// TestOpenAPICoversEveryRouteOfTheProse reads spec/http.md and spec/peer.md and checks that each
// route they name is an operation of the document, and the other way round.
func TestOpenAPICoversEveryRouteOfTheProse(t *testing.T) {
	want := map[string]bool{}
	for _, name := range []string{"http.md", "peer.md"} {
		prose, err := os.ReadFile(name)
		require.NoError(t, err)
		n := len(want)
		for _, m := range routeInProse.FindAllStringSubmatch(string(prose), -1) {
			want[m[1]+" "+m[2]] = true
		}
		require.Greater(t, len(want), n, "routes found in %s", name)
	}
	require.GreaterOrEqual(t, len(want), 11, "routes found")

	doc := loadOpenAPI(t)
	have := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if method != "OPTIONS" {
				have[method+" "+path] = true
			}
		}
	}
	for route := range want {
		assert.True(t, have[route], "route of the prose missing from openapi.yaml: %s", route)
	}
	for route := range have {
		assert.True(t, want[route], "route of openapi.yaml not in http.md or peer.md: %s", route)
	}
	assert.True(t, have["GET /.well-known/loom"])
}

// TestEveryResponseSaysNosniff checks the convention that every response of every operation
// declares the X-Content-Type-Options header as required.
func TestEveryResponseSaysNosniff(t *testing.T) {
	doc := loadOpenAPI(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, ref := range op.Responses.Map() {
				h := ref.Value.Headers["X-Content-Type-Options"]
				if assert.NotNil(t, h, "%s %s %s", method, path, status) {
					assert.True(t, h.Value.Required, "%s %s %s", method, path, status)
				}
			}
		}
	}
}

// TestErrorResponses checks that every operation documents the error statuses its kind of route
// can produce.
func TestErrorResponses(t *testing.T) {
	doc := loadOpenAPI(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			var want []string
			switch {
			case method == "OPTIONS":
				want = []string{"403", "500"}
			case path == "/.well-known/loom":
				want = []string{"403", "429", "500"}
			default:
				want = []string{"401", "403", "429", "500"}
				if strings.Contains(path, "{id}") {
					want = append(want, "404")
				}
				if method == "POST" {
					want = append(want, "400", "413", "415")
				}
				if slices.ContainsFunc(op.Parameters, func(p *openapi3.ParameterRef) bool { return p.Value.Name == "cursor" }) {
					want = append(want, "400")
				}
			}
			for _, status := range want {
				assert.NotNil(t, op.Responses.Value(status), "%s %s lacks %s", method, path, status)
			}
			if method != "OPTIONS" {
				assert.NotEmpty(t, op.OperationID)
			}
		}
	}
}
