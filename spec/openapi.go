package spec

import (
	_ "embed"
	"slices"
)

//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the HTTP surface (spec/openapi.yaml), the normative
// description every system under test is judged against. Each call returns a fresh copy, so the
// caller may keep or modify it; it is safe for concurrent use.
//
//	doc, err := openapi3.NewLoader().LoadFromData(spec.OpenAPI())
func OpenAPI() []byte { return slices.Clone(openAPI) }
