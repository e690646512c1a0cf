// Package contract checks every exchange between the harness and a system under test against the
// published contract: the OpenAPI document of the HTTP surface (spec.OpenAPI) for requests and
// responses, and the JSON Schemas of package schemas for the data of stream events.
//
// A check never fails as a Go error: it returns the list of Violations it found, empty when the
// exchange conforms. Authentication is not judged here (scenarios test it); everything else the
// document says about a route is: the route itself, its parameters, the request body, the
// response status, the documented response headers and the response body.
//
//	v, err := contract.New()
//	if err != nil {
//		return err
//	}
//	for _, viol := range v.Response(req, reqBody, resp.StatusCode, resp.Header, respBody) {
//		log.Printf("%s %s: %s", viol.Route, viol.Pointer, viol.Message)
//	}
package contract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/loomcheck/loomcheck/schemas"
	"github.com/loomcheck/loomcheck/spec"
)

// Pointers that are not JSON pointers into a body.
const (
	// PointerRoute marks a request whose method and path match no operation of the document.
	PointerRoute = "route"
	// PointerStatus marks a response status the operation does not document.
	PointerStatus = "status"
	// PointerEvent marks a stream event whose type the document does not know.
	PointerEvent = "event"
	// PointerHeaderPrefix starts the pointer of a header: "header:Content-Type".
	PointerHeaderPrefix = "header:"
	// PointerQueryPrefix starts the pointer of a query parameter: "query:cursor".
	PointerQueryPrefix = "query:"
	// PointerPathPrefix starts the pointer of a path parameter: "path:id".
	PointerPathPrefix = "path:"
)

// EventsRoute is the Route of the violations Event reports.
const EventsRoute = "GET /conversations/{id}/events"

// Violation is one way an exchange departs from the contract.
type Violation struct {
	// Route is the operation, as "METHOD /path/template" ("GET /conversations/{id}/history").
	// For a request that matches no operation it is the method and the request's own path.
	Route string
	// Pointer says where: a JSON pointer into the body ("" is the whole body, "/entries/0/text"),
	// "header:<Name>", "query:<name>", "path:<name>", or one of PointerRoute, PointerStatus and
	// PointerEvent.
	Pointer string
	// Message says what was expected, for people. Its wording is not part of the contract.
	Message string
	// Schema says where the contract states what was broken, when known: a JSON pointer into
	// spec/openapi.yaml ("#/paths/~1conversations/post/responses/201/headers/X-Content-Type-Options")
	// for a response, the schema file ("schemas/sse-delta.schema.json") for an event.
	Schema string
}

// String renders the violation on one line: route, pointer and message.
//
//	for _, viol := range v.Request(req, body) {
//		t.Error(viol.String())
//	}
func (v Violation) String() string {
	return fmt.Sprintf("%s %s: %s", v.Route, v.Pointer, v.Message)
}

// Validator checks exchanges against the contract. It is built once by New and is safe for
// concurrent use; it never modifies the requests, headers or bodies it is given.
//
//	v, _ := contract.New()
//	viols := append(v.Request(req, body), v.Response(req, body, status, header, respBody)...)
type Validator struct {
	router routers.Router
	// headers holds the documented headers of each response object. They are removed from the
	// loaded document so that openapi3filter only judges bodies: it stops at the first header
	// problem, and this package reports every one with its own pointer.
	headers map[*openapi3.Response]openapi3.Headers
	// events holds the known event types; the schema of each one's data compiled in New.
	events map[string]bool
	// judges judges bodies and header values against the document's schemas, each compiled
	// once (see judge).
	judges judges
	// asBefore leaves every body and header value to kin-openapi, call by call, as the check
	// did before judges: the tests compare the two.
	asBefore bool
}

// ErrBrokenContract is wrapped by the error New returns: the embedded OpenAPI document does not
// load or validate, or an event schema does not compile. It is a defect of the kit, never of a
// system under test.
var ErrBrokenContract = errors.New("contract: the embedded contract is broken")

// New loads the OpenAPI document and the event schemas, validates the document and builds the
// router. It fails, with an error wrapping ErrBrokenContract, only when the embedded contract
// itself is broken. Building a Validator takes a few milliseconds, and it compiles each schema
// it judges on first use and keeps it; build one and share it.
//
//	v, err := contract.New()
func New() (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("%w: load openapi.yaml: %w", ErrBrokenContract, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("%w: openapi.yaml is invalid: %w", ErrBrokenContract, err)
	}
	v := &Validator{
		headers: map[*openapi3.Response]openapi3.Headers{},
		events:  map[string]bool{},
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, ref := range op.Responses.Map() {
				resp := ref.Value
				if _, done := v.headers[resp]; done {
					continue
				}
				v.headers[resp] = resp.Headers
				resp.Headers = nil
			}
		}
	}
	// The document's server is a relative placeholder; without servers the router matches the
	// request's path alone, whatever host and port it was sent to.
	doc.Servers = nil
	if v.router, err = legacy.NewRouter(doc); err != nil {
		return nil, fmt.Errorf("%w: build router: %w", ErrBrokenContract, err)
	}
	for _, event := range EventTypes() {
		if _, err := schemas.Compile("sse-" + event); err != nil {
			return nil, fmt.Errorf("%w: event %s: %w", ErrBrokenContract, event, err)
		}
		v.events[event] = true
	}
	return v, nil
}

// EventTypes lists the event types of the conversation stream, in the order the surface
// documents them.
//
//	for _, e := range contract.EventTypes() { fmt.Println(e) } // status, partial, message, ...
func EventTypes() []string {
	return []string{"status", "partial", "message", "delta", "reset", "closed", "reconnect", "error"}
}

func (v *Validator) options() *openapi3filter.Options {
	return &openapi3filter.Options{
		MultiError:            true,
		IncludeResponseStatus: true,
		SkipSettingDefaults:   true,
		// Authentication is the business of scenarios, not of the contract check.
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	}
}

// find matches req to an operation by method and path only: the document's server is a
// relative placeholder, so the host and port the request was sent to do not matter.
func (v *Validator) find(req *http.Request) (*routers.Route, map[string]string, []Violation) {
	route, params, err := v.router.FindRoute(req)
	if err == nil && !samePath(route.Path, req.URL.Path) {
		err = routers.ErrPathNotFound
	}
	if err != nil {
		return nil, nil, []Violation{{Route: req.Method + " " + req.URL.Path, Pointer: PointerRoute,
			Message: "the document has no operation for this method and path"}}
	}
	return route, params, nil
}

// samePath reports whether path is an instance of template segment by segment; the router is
// lenient about a trailing slash, the contract is not.
func samePath(template, path string) bool {
	ts, ps := strings.Split(template, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if ps[i] == "" {
				return false
			}
			continue
		}
		if t != ps[i] {
			return false
		}
	}
	return true
}

func routeName(route *routers.Route) string { return route.Method + " " + route.Path }

// Request checks a request the harness sends: that its route exists, that its path, query and
// header parameters have the documented shape, and that its body (body, which may be nil; the
// request's own Body is not read) is what the operation accepts. Credentials are not checked.
// A scenario that sends a malformed request on purpose expects violations here. req must not be
// nil.
//
//	viols := v.Request(req, []byte(`{"text":"hi"}`))
func (v *Validator) Request(req *http.Request, body []byte) []Violation {
	route, params, viols := v.find(req)
	if route == nil {
		return viols
	}
	name := routeName(route)
	opts := v.options()
	op := route.Operation
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		if len(body) > 0 {
			viols = append(viols, Violation{Route: name, Pointer: "", Message: "the operation takes no request body"})
		}
		opts.ExcludeRequestBody = true
	} else if len(body) > 0 {
		ct := req.Header.Get("Content-Type")
		if op.RequestBody.Value.Content.Get(ct) == nil {
			viols = append(viols, Violation{Route: name, Pointer: PointerHeaderPrefix + "Content-Type",
				Message: fmt.Sprintf("request Content-Type %q is not one the operation accepts", ct)})
			opts.ExcludeRequestBody = true
		}
	}
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = nil
	input := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	var bodyViols []Violation
	if !opts.ExcludeRequestBody {
		var judged bool
		if bodyViols, judged = v.requestBody(name, input, op.RequestBody.Value, body); judged {
			opts.ExcludeRequestBody = true
		}
	}
	if err := openapi3filter.ValidateRequest(context.Background(), input); err != nil {
		viols = append(viols, convert(name, err)...)
	}
	// openapi3filter judges the body last, so its violations come last either way.
	viols = append(viols, bodyViols...)
	return dedupe(viols)
}

// requestBody judges body as openapi3filter.ValidateRequestBody does (with the options of
// Validator.options), with the operation's schema compiled once, and reports whether it did: it
// does so for a JSON body that is not empty, and leaves everything else to openapi3filter.
func (v *Validator) requestBody(route string, input *openapi3filter.RequestValidationInput, rb *openapi3.RequestBody, body []byte) ([]Violation, bool) {
	if v.asBefore || len(body) == 0 {
		return nil, false
	}
	header := input.Request.Header
	mt := rb.Content.Get(header.Get("Content-Type"))
	value, ok, err := decodeJSONBody(mt, header, body)
	if !ok {
		return nil, false
	}
	if err != nil {
		return convert(route, &openapi3filter.RequestError{Input: input, RequestBody: rb, Reason: "failed to decode request body", Err: err}), true
	}
	verr, err := v.judges.of(mt.Schema.Value).visit(value, openapi3.VisitAsRequest(), openapi3.MultiErrors())
	if verr != nil {
		return leafViolations(route, verr), true
	}
	if err != nil {
		return convert(route, &openapi3filter.RequestError{Input: input, RequestBody: rb,
			Reason: "doesn't match schema" + schemaIdentifier(mt.Schema), Err: err}), true
	}
	return nil, true
}

// decodeJSONBody decodes body as openapi3filter's decodeBody does for the media type mt when that
// is plain JSON: with the body decoder openapi3filter registers for application/json. It reports
// false, leaving the body to openapi3filter, for anything else: no schema, another media type,
// an encoding, a binary string.
func decodeJSONBody(mt *openapi3.MediaType, header http.Header, body []byte) (value any, ok bool, err error) {
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil || mt.Encoding[""] != nil {
		return nil, false, nil
	}
	media, _, _ := strings.Cut(header.Get("Content-Type"), ";")
	if strings.ToLower(strings.TrimSpace(media)) != "application/json" {
		return nil, false, nil
	}
	if s := mt.Schema.Value; s.Type.Is("string") && s.Format == "binary" {
		return nil, false, nil
	}
	decode := openapi3filter.RegisteredBodyDecoder("application/json")
	if decode == nil {
		return nil, false, nil
	}
	encoding := func(name string) *openapi3.Encoding { return mt.Encoding[name] }
	value, err = decode(bytes.NewReader(body), header, mt.Schema, encoding)
	return value, true, err
}

// schemaIdentifier names a schema in a message as openapi3filter does: " " and its reference or
// its title, or nothing.
func schemaIdentifier(ref *openapi3.SchemaRef) string {
	id := strings.TrimSpace(ref.Ref)
	if id == "" && ref.Value != nil {
		id = strings.TrimSpace(ref.Value.Title)
	}
	if id != "" {
		id = " " + id
	}
	return id
}

// Response checks the answer to req (sent with body reqBody): that the operation documents the
// status, that every documented header is present when required and well-formed when present
// (X-Content-Type-Options: nosniff on every response; Vary naming Origin whenever
// Access-Control-Allow-Origin is sent), that the Content-Type is one the response documents and
// that the body matches its schema. An event stream (text/event-stream) is judged on its status
// and headers only; check its events one by one with Event. An undocumented status is reported
// alone, as nothing else can be judged. req must not be nil; header and the bodies may be.
//
//	viols := v.Response(req, nil, resp.StatusCode, resp.Header, body)
func (v *Validator) Response(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) []Violation {
	viols := v.response(req, reqBody, status, header, body)
	if len(viols) == 0 {
		return viols
	}
	route, _, _ := v.find(req)
	if route == nil {
		return viols
	}
	for i := range viols {
		if viols[i].Schema == "" {
			viols[i].Schema = responseSchema(route, status, header.Get("Content-Type"), viols[i].Pointer)
		}
	}
	return viols
}

// responseSchema is the JSON pointer into the OpenAPI document of what a response violation at
// pointer broke: the operation's responses for an undocumented status, the header's
// declaration, the documented content types, or the schema of the body.
func responseSchema(route *routers.Route, status int, ct, pointer string) string {
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	base := "#/paths/" + esc.Replace(route.Path) + "/" + strings.ToLower(route.Method) + "/responses"
	key := ""
	if ref := route.Operation.Responses.Status(status); ref != nil {
		for k, r := range route.Operation.Responses.Map() {
			if r == ref {
				key = k
			}
		}
	}
	switch {
	case pointer == PointerStatus || key == "":
		return base
	case pointer == PointerHeaderPrefix+"Content-Type":
		return base + "/" + key + "/content"
	case strings.HasPrefix(pointer, PointerHeaderPrefix):
		return base + "/" + key + "/headers/" + esc.Replace(strings.TrimPrefix(pointer, PointerHeaderPrefix))
	}
	return base + "/" + key + "/content/" + esc.Replace(mediaType(ct)) + "/schema"
}

// response is Response without the Schema of the violations.
func (v *Validator) response(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) []Violation {
	route, params, viols := v.find(req)
	if route == nil {
		return viols
	}
	name := routeName(route)
	ref := route.Operation.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return []Violation{{Route: name, Pointer: PointerStatus,
			Message: fmt.Sprintf("status %d is not documented for this operation", status)}}
	}
	resp := ref.Value
	if header == nil {
		header = http.Header{}
	}
	viols = append(viols, v.checkHeaders(name, resp, header)...)

	if len(resp.Content) == 0 {
		if len(body) > 0 {
			viols = append(viols, Violation{Route: name, Pointer: "", Message: "this response has no body"})
		}
		return dedupe(viols)
	}
	ct := header.Get("Content-Type")
	mt := resp.Content.Get(ct)
	if mt == nil || ct == "" {
		viols = append(viols, Violation{Route: name, Pointer: PointerHeaderPrefix + "Content-Type",
			Message: fmt.Sprintf("Content-Type %q is not documented for status %d (want one of %s)", ct, status, contentTypes(resp.Content))})
		return dedupe(viols)
	}
	if mediaType(ct) != "application/json" {
		// The event stream: its body cannot be judged as a whole.
		return dedupe(viols)
	}

	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	r.ContentLength = int64(len(reqBody))
	r.GetBody = nil
	opts := v.options()
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts},
		Status:                 status,
		Header:                 header.Clone(),
		Options:                opts,
	}
	input.SetBodyBytes(slices.Clone(body))
	bodyViols, judged := v.responseBody(name, input, mt, body)
	if judged {
		opts.ExcludeResponseBody = true
	}
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		viols = append(viols, convert(name, err)...)
	}
	viols = append(viols, bodyViols...)
	return dedupe(viols)
}

// responseBody judges body as openapi3filter.ValidateResponse does (with the options of
// Validator.options; the documented headers are judged apart), with the response's schema
// compiled once, and reports whether it did: it does so for a JSON body, and leaves everything
// else to openapi3filter, including the answers to HEAD and the statuses it never judges.
func (v *Validator) responseBody(route string, input *openapi3filter.ResponseValidationInput, mt *openapi3.MediaType, body []byte) ([]Violation, bool) {
	if v.asBefore || input.RequestValidationInput.Request.Method == http.MethodHead {
		return nil, false
	}
	switch input.Status {
	case http.StatusNotModified, http.StatusPermanentRedirect, http.StatusTemporaryRedirect, http.StatusMovedPermanently:
		return nil, false
	}
	value, ok, err := decodeJSONBody(mt, input.Header, body)
	if !ok {
		return nil, false
	}
	if err != nil {
		return convert(route, &openapi3filter.ResponseError{Input: input, Reason: "failed to decode response body", Err: err}), true
	}
	verr, err := v.judges.of(mt.Schema.Value).visit(value, openapi3.MultiErrors(), openapi3.VisitAsResponse())
	if verr != nil {
		return leafViolations(route, verr), true
	}
	if err != nil {
		return convert(route, &openapi3filter.ResponseError{Input: input,
			Reason: "response body doesn't match schema" + schemaIdentifier(mt.Schema), Err: err}), true
	}
	return nil, true
}

// checkHeaders judges the documented headers of resp, plus the one rule between headers the
// surface states: a response that names an allowed origin varies on Origin.
func (v *Validator) checkHeaders(route string, resp *openapi3.Response, header http.Header) []Violation {
	var viols []Violation
	documented := v.headers[resp]
	names := make([]string, 0, len(documented))
	for name := range documented {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		h := documented[name].Value
		values := header.Values(name)
		if len(values) == 0 {
			if h.Required {
				viols = append(viols, Violation{Route: route, Pointer: PointerHeaderPrefix + name, Message: "required header is missing"})
			}
			continue
		}
		if h.Schema == nil || h.Schema.Value == nil {
			continue
		}
		value := strings.Join(values, ", ")
		var err error
		if v.asBefore {
			err = h.Schema.Value.VisitJSON(value, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors())
		} else if verr, kinErr := v.judges.of(h.Schema.Value).visit(value, openapi3.MultiErrors()); verr != nil {
			err = verr
		} else {
			err = kinErr
		}
		if err != nil {
			viols = append(viols, Violation{Route: route, Pointer: PointerHeaderPrefix + name,
				Message: fmt.Sprintf("header value %q does not match its schema", value)})
		}
	}
	if header.Get("Access-Control-Allow-Origin") != "" && !listHas(header.Values("Vary"), "Origin") {
		viols = append(viols, Violation{Route: route, Pointer: PointerHeaderPrefix + "Vary",
			Message: "Vary must name Origin when Access-Control-Allow-Origin is sent"})
	}
	return viols
}
