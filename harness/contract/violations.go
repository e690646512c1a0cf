package contract

import (
	"errors"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/loomcheck/loomcheck/schemas"
)

// Event checks the data of one stream event against the schema of its type (schemas
// "sse-<event>"). An unknown event type is a violation at PointerEvent; data that is not JSON is
// one at "". Keep-alive comments are not events and must not be passed here.
//
//	viols := v.Event("delta", []byte(`{"turn":2,"text":"he"}`))
func (v *Validator) Event(event string, data []byte) []Violation {
	viols := v.event(event, data)
	if v.events[event] {
		for i := range viols {
			viols[i].Schema = "schemas/sse-" + event + ".schema.json"
		}
	}
	return viols
}

// event is Event without the Schema of the violations.
func (v *Validator) event(event string, data []byte) []Violation {
	if !v.events[event] {
		return []Violation{{Route: EventsRoute, Pointer: PointerEvent,
			Message: fmt.Sprintf("event type %q is not one of %s", event, strings.Join(EventTypes(), ", "))}}
	}
	err := schemas.Validate("sse-"+event, data)
	if err == nil {
		return nil
	}
	var verr *schemas.ValidationError
	if !errors.As(err, &verr) {
		if errors.Is(err, schemas.ErrNotJSON) {
			return []Violation{{Route: EventsRoute, Pointer: "", Message: event + " event data is not one JSON value"}}
		}
		return []Violation{{Route: EventsRoute, Pointer: "", Message: err.Error()}}
	}
	viols := make([]Violation, 0, len(verr.Problems))
	for _, p := range verr.Problems {
		viols = append(viols, Violation{Route: EventsRoute, Pointer: p.Pointer, Message: event + " event: " + p.Message})
	}
	return viols
}

// convert turns an error of openapi3filter into violations with pointers.
func convert(route string, err error) []Violation {
	var out []Violation
	var walk func(err error)
	walk = func(err error) {
		if me, ok := err.(openapi3.MultiError); ok {
			for _, e := range me {
				walk(e)
			}
			return
		}
		var reqErr *openapi3filter.RequestError
		if errors.As(err, &reqErr) {
			switch {
			case reqErr.Parameter != nil:
				p := reqErr.Parameter
				out = append(out, Violation{Route: route, Pointer: parameterPointer(p), Message: reqErr.Error()})
			case errors.Is(reqErr.Err, openapi3filter.ErrInvalidRequired):
				out = append(out, Violation{Route: route, Pointer: "", Message: "a request body is required"})
			case hasSchemaError(reqErr.Err):
				out = append(out, schemaViolations(route, reqErr.Err)...)
			default:
				out = append(out, Violation{Route: route, Pointer: "", Message: reqErr.Error()})
			}
			return
		}
		var respErr *openapi3filter.ResponseError
		if errors.As(err, &respErr) {
			if hasSchemaError(respErr.Err) {
				out = append(out, schemaViolations(route, respErr.Err)...)
			} else {
				out = append(out, Violation{Route: route, Pointer: "", Message: respErr.Error()})
			}
			return
		}
		var secErr *openapi3filter.SecurityRequirementsError
		if errors.As(err, &secErr) {
			return // authentication is not judged here
		}
		out = append(out, Violation{Route: route, Pointer: "", Message: err.Error()})
	}
	walk(err)
	return out
}

func hasSchemaError(err error) bool {
	var se *openapi3.SchemaError
	return err != nil && errors.As(err, &se)
}

func parameterPointer(p *openapi3.Parameter) string {
	switch p.In {
	case openapi3.ParameterInHeader:
		return PointerHeaderPrefix + p.Name
	case openapi3.ParameterInPath:
		return PointerPathPrefix + p.Name
	case openapi3.ParameterInQuery:
		return PointerQueryPrefix + p.Name
	}
	return p.In + ":" + p.Name
}

// schemaViolations flattens the tree of schema errors kin-openapi builds into its leaves. With
// the JSON Schema 2020-12 validator (used for this OpenAPI 3.1 document) a leaf carries the
// validator's own error, which says exactly which properties are missing or not allowed.
func schemaViolations(route string, err error) []Violation {
	var out []Violation
	var walk func(err error)
	walk = func(err error) {
		if err == nil {
			return
		}
		var me openapi3.MultiError
		if me2, ok := err.(openapi3.MultiError); ok {
			for _, e := range me2 {
				walk(e)
			}
			return
		}
		se, ok := err.(*openapi3.SchemaError)
		if !ok {
			if errors.As(err, &se) {
				walk(se)
				return
			}
			out = append(out, Violation{Route: route, Pointer: "", Message: err.Error()})
			return
		}
		if se.Origin != nil && errors.As(se.Origin, &me) {
			walk(me)
			return
		}
		var jv *jsonschema.ValidationError
		if se.Origin == nil && errors.As(se, &jv) {
			for _, p := range schemas.Flatten(jv) {
				out = append(out, Violation{Route: route, Pointer: p.Pointer, Message: p.Message})
			}
			return
		}
		ptr := schemas.Pointer(se.JSONPointer())
		if extra := unexpectedProperties(se); len(extra) > 0 {
			for _, name := range extra {
				out = append(out, Violation{Route: route, Pointer: ptr + schemas.Pointer([]string{name}), Message: "property is not allowed"})
			}
			return
		}
		msg := se.Reason
		if msg == "" {
			msg = "does not match the schema keyword " + strconv.Quote(se.SchemaField)
		}
		out = append(out, Violation{Route: route, Pointer: ptr, Message: msg})
	}
	walk(err)
	return out
}

// unexpectedProperties names the properties an object holds against "additionalProperties:
// false", for an error of kin-openapi's own (OpenAPI 3.0 style) validator, which it uses for
// schemas without JSON Schema 2020-12 keywords: that validator reports them at the object, naming
// the property only in its prose.
func unexpectedProperties(se *openapi3.SchemaError) []string {
	if se.SchemaField != "properties" || se.Schema == nil {
		return nil
	}
	if has := se.Schema.AdditionalProperties.Has; has == nil || *has || se.Schema.AdditionalProperties.Schema != nil {
		return nil
	}
	obj, ok := se.Value.(map[string]any)
	if !ok {
		return nil
	}
	var names []string
	for name := range obj {
		if _, known := se.Schema.Properties[name]; !known {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func dedupe(viols []Violation) []Violation {
	seen := map[Violation]bool{}
	out := viols[:0]
	for _, v := range viols {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(ct))
	}
	return mt
}

func contentTypes(c openapi3.Content) string {
	var keys []string
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

// listHas reports whether a comma-separated header list names token (case-insensitively), or is
// the wildcard "*".
func listHas(values []string, token string) bool {
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			item = strings.TrimSpace(item)
			if item == "*" || strings.EqualFold(item, token) {
				return true
			}
		}
	}
	return false
}
