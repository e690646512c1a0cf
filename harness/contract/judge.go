package contract

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/loomcheck/loomcheck/schemas"
)

// The document is OpenAPI 3.1, so kin-openapi judges a value against a schema with a JSON Schema
// 2020-12 validator (santhosh-tekuri/jsonschema) that it builds and compiles again on every call
// of Schema.VisitJSON, and throws away: a large share of the kit's CPU in a conformance run. A
// judge makes the same decisions with the compiling done once per schema. It follows what
// kin-openapi v0.153 does in Schema.VisitJSON with EnableJSONSchema2020 (useJSONSchema2020 and
// newJSONSchemaValidator in openapi3/schema_jsonschema_validator.go):
//
//   - a schema that uses none of the JSON Schema 2020-12 keywords kin-openapi lists, and either
//     refers to a component schema (#/components/schemas/...) or does not compile, is judged by
//     kin-openapi's own OpenAPI 3.0 validator;
//   - any other schema that compiles is judged by the schema compiled from the document
//     kin-openapi compiles: the schema as kin-openapi marshals it, each component schema it
//     refers to (directly or through another) copied into its $defs and the reference pointed
//     there, with the same format checks;
//   - anything else is left to kin-openapi, call by call, as before: a schema with 2020-12
//     keywords that does not compile, one whose references are not all plain references to
//     component schemas by name (a reference with sibling keywords, a local or remote one, its
//     own $defs, $id or anchors, which the copying could treat otherwise), and one that says
//     "nullable", which kin-openapi's fallback reads differently in this mode.
//
// TestJudgedAsBefore holds a judge to kin-openapi's own verdicts on the answers of the reference
// and many broken variants of them.

// judgeKind is how a judge decides.
type judgeKind int

const (
	// judgeByKin calls kin-openapi's VisitJSON with JSON Schema 2020-12 enabled, as before.
	judgeByKin judgeKind = iota
	// judgeByLegacy calls kin-openapi's VisitJSON without it: the OpenAPI 3.0 validator, which
	// kin-openapi falls back to for this schema (after compiling it for nothing).
	judgeByLegacy
	// judgeByCompiled validates with the schema compiled once.
	judgeByCompiled
)

// judge decides whether values match one schema of the document. It is safe for concurrent use.
type judge struct {
	kind     judgeKind
	schema   *openapi3.Schema
	compiled *jsonschema.Schema
}

// judges holds one judge per schema of the document, each made on first use.
type judges struct {
	m sync.Map // *openapi3.Schema -> *lazyJudge
}

type lazyJudge struct {
	once sync.Once
	j    *judge
}

// of returns the judge of schema, making it the first time.
func (js *judges) of(schema *openapi3.Schema) *judge {
	e, ok := js.m.Load(schema)
	if !ok {
		e, _ = js.m.LoadOrStore(schema, &lazyJudge{})
	}
	lj := e.(*lazyJudge)
	lj.once.Do(func() { lj.j = newJudge(schema) })
	return lj.j
}

// newJudge decides how schema is judged, and compiles it when it is judged compiled.
func newJudge(schema *openapi3.Schema) *judge {
	j := &judge{kind: judgeByKin, schema: schema}
	if schema == nil || saysNullable(schema) {
		return j
	}
	uses2020 := usesJSONSchema2020Features(schema)
	b, err := json.Marshal(schema)
	if err != nil {
		return j
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return j
	}
	if containsComponentRef(doc) {
		if !uses2020 {
			j.kind = judgeByLegacy
			return j
		}
		var ok bool
		if doc, ok = withComponentDefs(doc, componentTargets(schema)); !ok {
			return j
		}
	}
	compiled, err := compileAsKin(doc)
	if err != nil {
		if !uses2020 {
			j.kind = judgeByLegacy
		}
		return j
	}
	j.kind, j.compiled = judgeByCompiled, compiled
	return j
}

// visit judges value as schema.VisitJSON(value, opts..., openapi3.EnableJSONSchema2020()) does.
// A value the compiled schema refuses gives its validation error (verr), whose leaves are the
// leaves of the error kin-openapi would have built from it; any other refusal is the error
// kin-openapi returns (err).
func (j *judge) visit(value any, opts ...openapi3.SchemaValidationOption) (verr *jsonschema.ValidationError, err error) {
	switch j.kind {
	case judgeByCompiled:
		err := j.compiled.Validate(value)
		if err == nil {
			return nil, nil
		}
		if errors.As(err, &verr) {
			return verr, nil
		}
		// kin-openapi passes on an error that is not a validation error as it is.
		return nil, err
	case judgeByLegacy:
		return nil, j.schema.VisitJSON(value, opts...)
	default:
		return nil, j.schema.VisitJSON(value, append(slices.Clip(opts), openapi3.EnableJSONSchema2020())...)
	}
}

// saysNullable reports whether schema or one of its subschemas says "nullable": kin-openapi's
// OpenAPI 3.0 validator ignores it when it stands in for the 2020-12 one, and honours it when
// called on its own.
func saysNullable(schema *openapi3.Schema) bool {
	found := errors.New("nullable")
	err := openapi3.NewSchemaRef("", schema).WalkSubtree(func(_ string, ref *openapi3.SchemaRef) error {
		if ref.Value.Nullable {
			return found
		}
		return nil
	})
	return errors.Is(err, found)
}

// usesJSONSchema2020Features is kin-openapi's schemaUsesJSONSchema2020Features: whether a
// keyword that keeps it from falling back to its OpenAPI 3.0 validator appears in the schema.
func usesJSONSchema2020Features(schema *openapi3.Schema) bool {
	found := errors.New("2020-12 keyword")
	err := openapi3.NewSchemaRef("", schema).WalkSubtree(func(_ string, ref *openapi3.SchemaRef) error {
		s := ref.Value
		if s.Const != nil ||
			len(s.PrefixItems) != 0 || s.Contains != nil ||
			len(s.PatternProperties) != 0 ||
			len(s.DependentSchemas) != 0 || s.PropertyNames != nil ||
			s.UnevaluatedItems.Has != nil || s.UnevaluatedItems.Schema != nil ||
			s.UnevaluatedProperties.Has != nil || s.UnevaluatedProperties.Schema != nil ||
			s.If != nil || s.Then != nil || s.Else != nil ||
			len(s.DependentRequired) != 0 || len(s.Defs) != 0 ||
			s.ContentSchema != nil {
			return found
		}
		return nil
	})
	return errors.Is(err, found)
}

// containsComponentRef is kin-openapi's containsInternalSchemaRef: whether the marshalled schema
// refers to a component schema.
func containsComponentRef(node any) bool {
	switch node := node.(type) {
	case map[string]any:
		if ref, ok := node["$ref"].(string); ok && strings.HasPrefix(ref, componentRefPrefix) {
			return true
		}
		for _, value := range node {
			if containsComponentRef(value) {
				return true
			}
		}
	case []any:
		if slices.ContainsFunc(node, containsComponentRef) {
			return true
		}
	}
	return false
}

// componentRefPrefix starts every reference to a component schema.
const componentRefPrefix = "#/components/schemas/"

// componentTargets maps each reference to a component schema found under schema, as kin-openapi's
// walkSubtreeRefs finds them (the same keywords, each schema entered once, every reference
// reported), to the schema it resolves to; a reference resolved to different schemas in
// different places maps to nil.
func componentTargets(schema *openapi3.Schema) map[string]*openapi3.Schema {
	targets := map[string]*openapi3.Schema{}
	entered := map[*openapi3.Schema]bool{}
	var visit func(sr *openapi3.SchemaRef)
	visits := func(srs openapi3.SchemaRefs) {
		for _, sr := range srs {
			visit(sr)
		}
	}
	visitMap := func(m openapi3.Schemas) {
		for _, sr := range m {
			visit(sr)
		}
	}
	visit = func(sr *openapi3.SchemaRef) {
		if sr == nil || sr.Value == nil {
			return
		}
		if strings.HasPrefix(sr.Ref, componentRefPrefix) {
			if t, seen := targets[sr.Ref]; !seen {
				targets[sr.Ref] = sr.Value
			} else if t != sr.Value {
				targets[sr.Ref] = nil
			}
		}
		s := sr.Value
		if entered[s] {
			return
		}
		entered[s] = true
		visitMap(s.Properties)
		visit(s.Items)
		visit(s.AdditionalProperties.Schema)
		visits(s.AllOf)
		visits(s.AnyOf)
		visits(s.OneOf)
		visit(s.Not)
		visits(s.PrefixItems)
		visit(s.Contains)
		visitMap(s.PatternProperties)
		visitMap(s.DependentSchemas)
		visit(s.PropertyNames)
		visit(s.If)
		visit(s.Then)
		visit(s.Else)
		visit(s.UnevaluatedItems.Schema)
		visit(s.UnevaluatedProperties.Schema)
		visit(s.ContentSchema)
		visitMap(s.Defs)
	}
	visit(openapi3.NewSchemaRef("", schema))
	return targets
}

// withComponentDefs is what kin-openapi's addInternalSchemaRefs makes of the marshalled schema
// doc: every component schema it refers to, directly or through another, marshalled (the schema
// the reference resolves to, from targets) into its $defs as "ref0", "ref1" ... (kin-openapi
// numbers them in another order, which changes nothing the check reports), and every such
// reference pointed there. It reports false, leaving the schema to kin-openapi, for a document
// where that copying could mean something else or where kin-openapi could resolve a reference
// otherwise: a reference that is not to a component schema, or resolves to none or to several,
// a reference with sibling keywords, a $defs (kin-openapi replaces the schema's own), an $id, an
// anchor or a dynamic reference.
func withComponentDefs(doc any, targets map[string]*openapi3.Schema) (any, bool) {
	root, isMap := doc.(map[string]any)
	if !isMap {
		return nil, false
	}
	defs := map[string]any{}
	ids := map[string]string{}
	var queue []any
	var walk func(node any) bool
	walk = func(node any) bool {
		switch node := node.(type) {
		case map[string]any:
			for _, k := range []string{"$defs", "definitions", "$id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveAnchor", "$recursiveRef"} {
				if _, has := node[k]; has {
					return false
				}
			}
			if r, has := node["$ref"]; has {
				ref, isString := r.(string)
				if !isString || !strings.HasPrefix(ref, componentRefPrefix) || len(node) != 1 {
					return false
				}
				id, seen := ids[ref]
				if !seen {
					target := targets[ref]
					if target == nil {
						return false
					}
					b, err := json.Marshal(target)
					if err != nil {
						return false
					}
					var copied any
					if err := json.Unmarshal(b, &copied); err != nil {
						return false
					}
					id = "ref" + strconv.Itoa(len(ids))
					ids[ref] = id
					defs[id] = copied
					queue = append(queue, copied)
				}
				node["$ref"] = "#/$defs/" + id
				return true
			}
			for _, v := range node {
				if !walk(v) {
					return false
				}
			}
		case []any:
			for _, v := range node {
				if !walk(v) {
					return false
				}
			}
		}
		return true
	}
	queue = append(queue, root)
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		if !walk(next) {
			return nil, false
		}
	}
	if len(defs) > 0 {
		root["$defs"] = defs
	}
	return root, true
}

// compileAsKin compiles the marshalled schema doc (which refers to no component schema) as
// kin-openapi's newJSONSchemaValidator does: draft 2020-12 by default, one resource at the same
// address, and every format the schema names checked by kin-openapi's format validators (a
// format they do not know passes).
func compileAsKin(doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	schemaMap, _ := doc.(map[string]any)
	formats := map[string]struct{}{}
	collectFormats(schemaMap, formats)
	if len(formats) > 0 {
		for format := range formats {
			c.RegisterFormat(&jsonschema.Format{Name: format, Validate: kinFormat(format)})
		}
		c.AssertFormat()
	}
	const url = "https://example.com/schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// collectFormats is kin-openapi's collectFormats: every "format" string in the document.
func collectFormats(node any, formats map[string]struct{}) {
	switch node := node.(type) {
	case map[string]any:
		if format, ok := node["format"].(string); ok && format != "" {
			formats[format] = struct{}{}
		}
		for _, value := range node {
			collectFormats(value, formats)
		}
	case []any:
		for _, value := range node {
			collectFormats(value, formats)
		}
	}
}

// kinFormat is kin-openapi's formatValidator with no per-validation format validators (the
// contract check sets none): the globally defined ones, looked up when a value is checked.
func kinFormat(format string) func(any) error {
	return func(value any) error {
		switch value := value.(type) {
		case string:
			f, ok := openapi3.SchemaStringFormats[format]
			if !ok {
				return nil
			}
			return f.Validate(value)
		case json.Number:
			if number, err := value.Float64(); err == nil {
				return kinNumberFormat(format, number)
			}
		case float64:
			return kinNumberFormat(format, value)
		case float32:
			return kinNumberFormat(format, float64(value))
		case int:
			return kinNumberFormat(format, float64(value))
		case int32:
			return kinNumberFormat(format, float64(value))
		case int64:
			return kinNumberFormat(format, float64(value))
		}
		return nil
	}
}

// kinNumberFormat is kin-openapi's validateNumberFormat with no per-validation validators.
func kinNumberFormat(format string, value float64) error {
	if value == math.Trunc(value) && !math.IsInf(value, 0) {
		if f, ok := openapi3.SchemaIntegerFormats[format]; ok {
			return f.Validate(int64(value))
		}
	}
	f, ok := openapi3.SchemaNumberFormats[format]
	if !ok {
		return nil
	}
	return f.Validate(value)
}

// leafViolations are the violations kin-openapi's error for verr turns into in
// schemaViolations: each leaf of the tree, flattened, in order.
func leafViolations(route string, verr *jsonschema.ValidationError) []Violation {
	var out []Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		for _, p := range schemas.Flatten(e) {
			out = append(out, Violation{Route: route, Pointer: p.Pointer, Message: p.Message})
		}
	}
	walk(verr)
	return out
}
