// Package schemas holds the JSON Schemas (draft 2020-12) of every object that crosses the boundary
// of a Loom system: the bodies of its HTTP surface, the data of its stream events, the signed
// envelope, the configuration document handed to a system under test and the kit's own report.
//
// Each schema lives in <name>.schema.json and carries the $id
// https://loomcheck.dev/schemas/<name>.schema.json; schemas refer to each other by that $id, and
// every embedded schema is registered under it, so references never leave the binary. Format
// assertions (date-time, uri, ...) are on.
//
// All functions are safe for concurrent use. A schema is compiled at most once, on first use, and
// the result (or the compile error) is kept for the life of the process.
//
//	if err := schemas.Validate("entry", body); err != nil {
//		var verr *schemas.ValidationError
//		if errors.As(err, &verr) {
//			for _, p := range verr.Problems {
//				fmt.Println(p.Pointer, p.Message)
//			}
//		}
//	}
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// printer renders the messages of problems in English.
var printer = message.NewPrinter(language.English)

//go:embed *.json
var files embed.FS

// BaseURL is the prefix of every schema's $id; the full $id of schema name is
// BaseURL + name + ".schema.json".
const BaseURL = "https://loomcheck.dev/schemas/"

const suffix = ".schema.json"

// ErrUnknownSchema is returned (wrapped) for a schema name that is not embedded.
//
//	if _, err := schemas.Raw("nope"); errors.Is(err, schemas.ErrUnknownSchema) { ... }
var ErrUnknownSchema = errors.New("schemas: unknown schema")

// ErrNotJSON is returned (wrapped) by Validate for a document that is not one JSON value.
var ErrNotJSON = errors.New("schemas: document is not JSON")

// ErrInvalidSchema is returned (wrapped) by Compile and Validate when an embedded schema does not
// compile: it is not valid JSON, not a valid draft 2020-12 schema, or refers to a schema that is
// not embedded.
var ErrInvalidSchema = errors.New("schemas: schema does not compile")

// Problem is one failing location of a document. The same pointer may appear in more than one
// Problem when a value breaks several rules; their messages then differ.
//
//	for _, p := range verr.Problems {
//		fmt.Printf("%s: %s\n", p.Pointer, p.Message)
//	}
type Problem struct {
	// Pointer is the JSON pointer (RFC 6901) of the failing value inside the document; "" is the
	// document itself. A missing required property or an unexpected one is reported at the
	// pointer of that property.
	Pointer string
	// Message says what the schema expected there, for people. Its wording is not part of the
	// contract: compare pointers, not messages.
	Message string
}

// ValidationError is the error of a document that does not satisfy its schema. It lists every
// failing location, in the order the validator found them, without exact duplicates.
//
//	var verr *schemas.ValidationError
//	if errors.As(schemas.Validate("status", doc), &verr) {
//		log.Printf("%s: %d problems", verr.Schema, len(verr.Problems))
//	}
type ValidationError struct {
	// Schema is the name of the schema the document was validated against.
	Schema string
	// Problems holds one entry per failing location; it is never empty.
	Problems []Problem
}

// Error summarises the problems in one line.
//
//	log.Print(verr) // schemas: document does not match status: /turns: ...
func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schemas: document does not match %s:", e.Schema)
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString(";")
		}
		ptr := p.Pointer
		if ptr == "" {
			ptr = "(root)"
		}
		fmt.Fprintf(&b, " %s: %s", ptr, p.Message)
	}
	return b.String()
}

// Names lists the names of the embedded schemas, sorted: "entry", "error", "sut-config", ...
// It includes "report" when schemas/report.schema.json was present at build time.
//
//	for _, name := range schemas.Names() {
//		fmt.Println(schemas.URL(name))
//	}
func Names() []string {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), suffix); ok && !e.IsDir() {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// URL is the $id a schema of this name has: BaseURL + name + ".schema.json". It does not check
// that the schema exists.
//
//	schemas.URL("entry") // "https://loomcheck.dev/schemas/entry.schema.json"
func URL(name string) string { return BaseURL + name + suffix }

// Raw returns a copy of the bytes of schema name, as embedded. An unknown name is ErrUnknownSchema.
//
//	b, err := schemas.Raw("envelope")
func Raw(name string) ([]byte, error) {
	if !validName(name) {
		return nil, fmt.Errorf("%w: %q", ErrUnknownSchema, name)
	}
	b, err := files.ReadFile(name + suffix)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownSchema, name)
	}
	return b, nil
}

func validName(name string) bool {
	return name != "" && !strings.ContainsAny(name, `/\`) && name != "." && name != ".."
}

// set is the process-wide compiler with every embedded schema registered by its $id.
var set = struct {
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	loadErr  error
	compiled map[string]compiled
}{compiled: map[string]compiled{}}

type compiled struct {
	schema *jsonschema.Schema
	err    error
}

// Compile returns the compiled schema name, with format assertions on and every embedded schema
// available to its references. An unknown name is ErrUnknownSchema; a schema that does not
// compile is ErrInvalidSchema. The result is cached; the returned schema is safe for concurrent
// use and must not be modified.
//
//	sch, err := schemas.Compile("history-page")
//	if err == nil {
//		err = sch.Validate(value) // value from jsonschema.UnmarshalJSON
//	}
func Compile(name string) (*jsonschema.Schema, error) {
	if _, err := Raw(name); err != nil {
		return nil, err
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if c, ok := set.compiled[name]; ok {
		return c.schema, c.err
	}
	if set.compiler == nil && set.loadErr == nil {
		set.compiler, set.loadErr = newCompiler()
	}
	if set.loadErr != nil {
		return nil, set.loadErr
	}
	sch, err := set.compiler.Compile(URL(name))
	if err != nil {
		err = fmt.Errorf("%w: %s: %w", ErrInvalidSchema, name, err)
		// A failed compilation may leave the compiler in an unknown state for the schemas it
		// was working on; start afresh for the next name.
		set.compiler = nil
	}
	set.compiled[name] = compiled{schema: sch, err: err}
	return sch, err
}

// newCompiler registers every embedded schema under its $id (and under URL(name) when the two
// differ) and refuses to load anything else.
func newCompiler() (*jsonschema.Compiler, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refuseLoader{})
	for _, name := range Names() {
		raw, err := Raw(name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			// Registering it would fail anyway; leave it out so the others still compile and
			// report the problem when this one is asked for.
			continue
		}
		urls := []string{URL(name)}
		if obj, ok := doc.(map[string]any); ok {
			if id, ok := obj["$id"].(string); ok && id != URL(name) {
				urls = append(urls, id)
			}
		}
		for _, u := range urls {
			if err := c.AddResource(u, doc); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrInvalidSchema, name, err)
			}
		}
	}
	return c, nil
}

// refuseLoader keeps compilation offline: every schema the set knows was added as a resource.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%w: %s is not embedded", ErrUnknownSchema, url)
}

// Validate checks doc (one JSON value) against schema name. It returns nil when doc is valid,
// a *ValidationError listing every failing location when it is not, and otherwise an error
// wrapping ErrUnknownSchema, ErrInvalidSchema or ErrNotJSON.
//
//	err := schemas.Validate("turn-request", []byte(`{"text":"hi","extra":1}`))
//	// err is a *ValidationError with one problem at "/extra"
func Validate(name string, doc []byte) error {
	sch, err := Compile(name)
	if err != nil {
		return err
	}
	value, err := decode(doc)
	if err != nil {
		return err
	}
	err = sch.Validate(value)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return fmt.Errorf("%w: %s: %w", ErrInvalidSchema, name, err)
	}
	return &ValidationError{Schema: name, Problems: Flatten(verr)}
}

func decode(doc []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	// Only the end of the input may follow: another value, or bytes that are no JSON at all.
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: more than one value, or bytes after the value", ErrNotJSON)
	}
	return v, nil
}

// Flatten turns the tree of a jsonschema validation error into one Problem per failing location:
// the leaves of the tree. A missing required property, a property refused by
// additionalProperties, a dependent requirement or a refused property name is reported at the
// pointer of that property. Problems with the same pointer and message are reported once.
//
//	var verr *jsonschema.ValidationError
//	if errors.As(sch.Validate(v), &verr) {
//		problems := schemas.Flatten(verr)
//	}
func Flatten(verr *jsonschema.ValidationError) []Problem {
	var out []Problem
	seen := map[Problem]bool{}
	add := func(p Problem) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		at := Pointer(e.InstanceLocation)
		msg := e.ErrorKind.LocalizedString(printer)
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, p := range k.Missing {
				add(Problem{Pointer: at + "/" + escape(p), Message: "required property is missing"})
			}
			return
		case *kind.AdditionalProperties:
			for _, p := range k.Properties {
				add(Problem{Pointer: at + "/" + escape(p), Message: "property is not allowed"})
			}
			return
		case *kind.DependentRequired:
			for _, p := range k.Missing {
				add(Problem{Pointer: at + "/" + escape(p), Message: msg})
			}
			return
		}
		add(Problem{Pointer: at, Message: msg})
	}
	walk(verr)
	if len(out) == 0 {
		out = append(out, Problem{Pointer: Pointer(verr.InstanceLocation), Message: verr.ErrorKind.LocalizedString(printer)})
	}
	return out
}

// Pointer joins unescaped reference tokens into a JSON pointer: ["a", "b/c"] is "/a/b~1c" and
// no token is "".
//
//	schemas.Pointer([]string{"entries", "0", "text"}) // "/entries/0/text"
func Pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escape(t))
	}
	return b.String()
}

func escape(token string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(token)
}
