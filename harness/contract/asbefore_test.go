package contract

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/spec"
)

// recorded is one exchange of a conformance run against the reference, as
// testdata/exchanges.jsonl keeps it: a request the kit sent (kind "req", with its Content-Type)
// or an answer it got (kind "resp", with its status and Content-Type). The file holds one
// exchange of each shape per route and status, none larger than 8 KiB.
type recorded struct {
	Kind   string `json:"kind"`
	Method string `json:"method"`
	URL    string `json:"url"`
	Status int    `json:"status"`
	CT     string `json:"ct"`
	Body   string `json:"body"`
}

func loadRecorded(t *testing.T) []recorded {
	t.Helper()
	f, err := os.Open("testdata/exchanges.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var out []recorded
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r recorded
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "%s", sc.Text())
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	require.Greater(t, len(out), 200, "testdata/exchanges.jsonl holds too few exchanges")
	return out
}

var (
	before     *Validator
	beforeErr  error
	beforeOnce sync.Once
)

// asBefore is a Validator that leaves every body and header value to kin-openapi, call by call:
// the check as it was before the schemas were compiled once.
func asBefore(t *testing.T) *Validator {
	t.Helper()
	beforeOnce.Do(func() {
		before, beforeErr = New()
		if before != nil {
			before.asBefore = true
		}
	})
	require.NoError(t, beforeErr)
	return before
}

// judged renders violations in a fixed order: kin-openapi, and the JSON Schema validator under
// it, report the problems of one object in no fixed order.
func judged(viols []Violation) []string {
	out := make([]string, len(viols))
	for i, v := range viols {
		out[i] = v.String()
	}
	slices.Sort(out)
	return out
}

// sameJudgement judges one answer (status > 0) or request (status 0) with both validators and
// reports whether it passed; it fails t when the two differ in any violation.
func sameJudgement(t *testing.T, now, old *Validator, method, target, ct string, status int, header http.Header, body []byte) bool {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	var a, b []Violation
	if status == 0 {
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		a, b = now.Request(req, body), old.Request(req, body)
	} else {
		if header == nil {
			header = headers(ct)
		}
		a, b = now.Response(req, nil, status, header, body), old.Response(req, nil, status, header, body)
	}
	ja, jb := judged(a), judged(b)
	if !slices.Equal(ja, jb) {
		t.Errorf("%s %s (status %d, %q) with body %s:\njudged now:\n  %s\njudged before:\n  %s",
			method, target, status, ct, body, strings.Join(ja, "\n  "), strings.Join(jb, "\n  "))
	}
	return len(a) == 0
}

// TestJudgedAsBefore: with every schema compiled once, the contract check judges the requests
// and answers of a conformance run against the reference, and many broken variants of them
// (each property removed, values replaced by others of every type, unknown properties added),
// exactly as kin-openapi judged them call by call: the same bodies pass, and the others fail
// with the same violations. Under the race detector it judges every recorded body and a share
// of their variants (share).
func TestJudgedAsBefore(t *testing.T) {
	now, old := validator(t), asBefore(t)
	var passed, failed, mutated int
	count := func(ok bool) {
		if ok {
			passed++
		} else {
			failed++
		}
	}
	for i, r := range loadRecorded(t) {
		count(sameJudgement(t, now, old, r.Method, r.URL, r.CT, r.Status, nil, []byte(r.Body)))
		var root any
		if json.Unmarshal([]byte(r.Body), &root) != nil {
			continue
		}
		if _, isObject := root.(map[string]any); !isObject {
			continue
		}
		variants := share(spread(mutations(t, r.Body)[1:], i), i)
		for _, m := range variants {
			count(sameJudgement(t, now, old, r.Method, r.URL, r.CT, r.Status, nil, []byte(m)))
			mutated++
		}
	}
	t.Logf("%d passed, %d failed, %d of them variants", passed, failed, mutated)
	// The comparison means something only if both verdicts occur, often.
	require.Greater(t, passed, 200)
	require.Greater(t, failed, least(500))
}

// allVariants judges every variant of every recorded body in TestJudgedAsBefore (some 34,000,
// over a minute), not a spread of them.
var allVariants = flag.Bool("all-variants", false, "TestJudgedAsBefore: judge every variant of every recorded body")

// spread picks the variants of the i-th body to judge: all of them with -all-variants, else 12
// (3 with -short) spread over the list, starting at a place that moves with i.
func spread(variants []string, i int) []string {
	n := 12
	if testing.Short() {
		n = 3
	}
	if *allVariants || len(variants) <= n {
		return variants
	}
	out := make([]string, 0, n)
	for k := range n {
		out = append(out, variants[(i+k*len(variants)/n)%len(variants)])
	}
	return out
}

// raceShare is the share of the corpus the corpus tests (TestJudgedAsBefore,
// TestEverySchemaJudgedAsBefore, TestComponentsAgreeWithSchemas) judge under the race detector:
// one entry in raceShare. They judge on one goroutine, so the race detector finds nothing in them
// and only makes them three times dearer; the test command's race pass judges a share, and a pass
// without it (make test RACE=1, and a step of .ci/run) judges the whole corpus.
const raceShare = 8

// share returns the entries of the corpus to judge: all of them, or under the race detector every
// raceShare-th, from a place that moves with salt, and at least one, so that every route, status
// and schema whose entries are sampled is still judged.
func share[T any](entries []T, salt int) []T {
	if !raceEnabled || len(entries) == 0 {
		return entries
	}
	var out []T
	for i := salt % raceShare; i < len(entries); i += raceShare {
		out = append(out, entries[i])
	}
	if len(out) == 0 {
		out = append(out, entries[salt%len(entries)])
	}
	return out
}

// least is a lower bound on what a corpus test judges, for the share of the corpus it judges.
func least(whole int) int {
	if raceEnabled {
		return whole / raceShare
	}
	return whole
}

// TestEverySchemaJudgedAsBefore: every JSON body the document describes, of every request and
// every documented answer, judges values of every kind (and bodies of other routes) as
// kin-openapi did, and so do the documented response headers. Under the race detector it judges
// a share of the bodies of each request and answer, and of the values of each header (share).
func TestEverySchemaJudgedAsBefore(t *testing.T) {
	now, old := validator(t), asBefore(t)
	doc, err := openapi3.NewLoader().LoadFromData(spec.OpenAPI())
	require.NoError(t, err)
	pool := []string{`{}`, `[]`, `null`, `"x"`, `0`, `-1`, `1.5`, `true`, `{"error":"not found"}`, `{"zz":1}`, `[{}]`, "{", `{"a":1} {"b":2}`}
	var others []string
	for _, r := range loadRecorded(t) {
		if strings.HasPrefix(r.Body, "{") {
			others = append(others, r.Body)
		}
	}
	var paths []string
	for p := range doc.Paths.Map() {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	bodies, n, lists := 0, 0, 0
	next := func() string { n++; return others[n%len(others)] }
	// sample is the share of one list of bodies that is judged; every list has its turn.
	sample := func(list []string) []string { lists++; return share(list, lists) }
	for _, p := range paths {
		target := concrete(p)
		item := doc.Paths.Value(p)
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"} {
			op := item.GetOperation(method)
			if op == nil {
				continue
			}
			if rb := op.RequestBody; rb != nil && rb.Value != nil && rb.Value.Content.Get("application/json") != nil {
				for _, b := range sample(append(slices.Clone(pool), next(), next(), next())) {
					sameJudgement(t, now, old, method, target, "application/json", 0, nil, []byte(b))
					bodies++
				}
			}
			for code, ref := range op.Responses.Map() {
				status, err := strconv.Atoi(code)
				if err != nil || ref.Value == nil || ref.Value.Content.Get("application/json") == nil {
					continue
				}
				for _, b := range sample(append(slices.Clone(pool), next(), next(), next())) {
					sameJudgement(t, now, old, method, target, jsonCT, status, nil, []byte(b))
					bodies++
				}
			}
		}
	}
	require.Greater(t, bodies, least(1000), "too few bodies judged: does the document still describe its routes?")

	// The headers every answer may carry, each with values of every kind.
	values := []string{"nosniff", "NOSNIFF", "", "*", "true", "false", "0", "600", "-1", "Origin", "http://a.example", "GET, POST", "x y"}
	names := []string{"X-Content-Type-Options", "Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Vary",
		"Access-Control-Allow-Methods", "Access-Control-Allow-Headers", "Access-Control-Max-Age", "Retry-After"}
	for j, name := range names {
		for _, value := range share(values, j) {
			h := headers(jsonCT, "Vary", "Origin")
			h.Set(name, value)
			sameJudgement(t, now, old, "GET", "/conversations/c1", jsonCT, 200, h, []byte(status))
			sameJudgement(t, now, old, "OPTIONS", "/conversations", jsonCT, 204, h, nil)
		}
	}
}

// concrete fills the parameters of a path template: /conversations/{id} is /conversations/c1.
func concrete(template string) string {
	var b bytes.Buffer
	for i, seg := range strings.Split(template, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		if strings.HasPrefix(seg, "{") {
			fmt.Fprint(&b, "c1")
			continue
		}
		b.WriteString(seg)
	}
	return b.String()
}

// TestBodySchemasAreCompiledOnce: no schema of a request or answer body is left to kin-openapi
// call by call (which compiles it on every call): each is compiled once, or judged by the OpenAPI
// 3.0 validator kin-openapi falls back to for it.
func TestBodySchemasAreCompiledOnce(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(spec.OpenAPI())
	require.NoError(t, err)
	var js judges
	kinds := map[judgeKind]int{}
	for p, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			var schemas []*openapi3.SchemaRef
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil {
					schemas = append(schemas, mt.Schema)
				}
			}
			for _, ref := range op.Responses.Map() {
				if mt := ref.Value.Content.Get("application/json"); mt != nil {
					schemas = append(schemas, mt.Schema)
				}
			}
			for _, s := range schemas {
				if s == nil || s.Value == nil {
					continue
				}
				j := js.of(s.Value)
				kinds[j.kind]++
				if j.kind == judgeByKin {
					t.Errorf("%s %s: a body schema is left to kin-openapi call by call", method, p)
				}
			}
		}
	}
	t.Logf("compiled once %d, kin-openapi's 3.0 validator %d", kinds[judgeByCompiled], kinds[judgeByLegacy])
	require.Greater(t, kinds[judgeByCompiled], 100)
}

// FuzzJudgedAsBefore judges an arbitrary body as the answer to each operation (with an arbitrary
// status and Content-Type) and as its request, with the schemas compiled once and with
// kin-openapi call by call. Invariant: the same violations, or none for both.
//
// Seeds: answers and requests of the reference, broken variants, testdata/fuzz.
func FuzzJudgedAsBefore(f *testing.F) {
	f.Add(uint8(2), uint16(200), uint8(1), []byte(status))
	f.Add(uint8(5), uint16(200), uint8(0), []byte(`{"entries":[`+accepted+`,`+reply+`,`+hidden+`],"nextCursor":"0.9","done":true}`))
	f.Add(uint8(5), uint16(200), uint8(0), []byte(`{"entries":[{"cursor":1}],"nextCursor":"0.9","done":true}`))
	f.Add(uint8(3), uint16(202), uint8(0), []byte(`{"messageId":"m1","delivered":true}`))
	f.Add(uint8(3), uint16(200), uint8(0), []byte(`{"text":"hi","messageId":"m1","editOf":1}`))
	f.Add(uint8(1), uint16(201), uint8(0), []byte(`{"id":"c1","mode":"shared","participants":[{"tenant":"t","actor":"a"}]}`))
	f.Add(uint8(3), uint16(404), uint8(0), []byte(`{"error":"not found","errorId":"e1"}`))
	f.Add(uint8(8), uint16(200), uint8(0), []byte(`{"op":"add","identity":{"actor":"b","tenant":"t"}}`))
	f.Add(uint8(12), uint16(999), uint8(4), []byte("\xff"))
	f.Fuzz(func(t *testing.T, route uint8, code uint16, ct uint8, body []byte) {
		now, old := fuzzValidator(t), asBefore(t)
		rq := fuzzRequests[int(route)%len(fuzzRequests)]
		ctype := fuzzCTs[int(ct)%len(fuzzCTs)]
		sameJudgement(t, now, old, rq.method, rq.path, ctype, int(code)%600, nil, body)
		sameJudgement(t, now, old, rq.method, rq.path, ctype, 0, nil, body)
	})
}

// TestShareLeavesNothingUnjudged: the share of a list the corpus tests judge is the whole list
// without the race detector, and under it every raceShare-th entry and never none.
func TestShareLeavesNothingUnjudged(t *testing.T) {
	for size := 1; size <= 3*raceShare; size++ {
		list := make([]int, size)
		for i := range list {
			list[i] = i
		}
		for salt := range 2 * raceShare {
			got := share(list, salt)
			if !raceEnabled {
				require.Equal(t, list, got)
				continue
			}
			require.NotEmpty(t, got, "size %d, salt %d", size, salt)
			require.LessOrEqual(t, len(got), (size+raceShare-1)/raceShare)
			for k := 1; k < len(got); k++ {
				require.Equal(t, raceShare, got[k]-got[k-1])
			}
		}
	}
	require.Empty(t, share([]int(nil), 3))
}
