package report

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// RedactedText is what Redact puts in place of a credential.
//
//	if ex.RequestHeaders["Authorization"][0] == report.RedactedText { ... }
const RedactedText = "[redacted]"

// credentialHeaders are the header names (lower case) whose values Redact always replaces, in
// requests and responses alike.
var credentialHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"cookie":              true,
	"set-cookie":          true,
	"x-api-key":           true,
	"api-key":             true,
	"x-auth-token":        true,
}

// IsCredentialHeader reports whether Redact replaces every value of the header called name. The
// comparison ignores case. The headers are Authorization, Proxy-Authorization, Cookie, Set-Cookie,
// X-Api-Key, Api-Key and X-Auth-Token.
//
//	if report.IsCredentialHeader("authorization") { ... } // true
func IsCredentialHeader(name string) bool {
	return credentialHeaders[strings.ToLower(strings.TrimSpace(name))]
}

// Redact returns a copy of r with credentials removed; r itself, and every slice and map it
// shares with the caller, is left untouched.
//
// In the copy, every value of a credential header (see IsCredentialHeader) of every exchange is
// RedactedText, and every occurrence of each non-empty secret is replaced by RedactedText in every
// string of the report: URLs, headers, bodies, events, step text and errors, failures, messages,
// warnings, the target description and baseline reasons. Besides the secret as given, its
// URL-query, URL-path and JSON-string encodings (with and without HTML escaping) are replaced too, so a key inside a query string
// or a JSON body is caught. Pass signing keys, bearer tokens, API keys and passwords as secrets.
// Redact(nil) returns nil.
//
//	safe := report.Redact(r, cfg.Signing.Key, bearerToken)
//	err := report.WriteJSON(os.Stdout, safe)
func Redact(r *Report, secrets ...string) *Report {
	if r == nil {
		return nil
	}
	c := clone(r)
	rep := secretReplacer(secrets)
	s := func(p *string) {
		if rep != nil && *p != "" {
			*p = rep.Replace(*p)
		}
	}
	s(&c.Kit.Name)
	s(&c.Kit.Version)
	s(&c.SpecVersion)
	s(&c.Target.Description)
	s(&c.Target.Implementation)
	for i := range c.Warnings {
		s(&c.Warnings[i])
	}
	for i := range c.Requirements {
		s(&c.Requirements[i].Rule)
		s(&c.Requirements[i].Source)
	}
	if b := c.Baseline; b != nil {
		s(&b.File)
		for _, list := range [][]BaselineEntry{b.Expected, b.Stale} {
			for i := range list {
				s(&list[i].Reason)
			}
		}
		for i := range b.Unexpected {
			s(&b.Unexpected[i])
		}
	}
	for i := range c.Scenarios {
		sc := &c.Scenarios[i]
		s(&sc.Name)
		s(&sc.Message)
		s(&sc.Expected)
		s(&sc.SystemOutput)
		if f := sc.Failure; f != nil {
			s(&f.Rule)
			s(&f.Operation)
			s(&f.Got)
			s(&f.Want)
		}
		for j := range sc.Steps {
			st := &sc.Steps[j]
			s(&st.Text)
			s(&st.Error)
			s(&st.DocString)
			for _, row := range st.Table {
				for k := range row {
					s(&row[k])
				}
			}
		}
		for j := range sc.Notes {
			s(&sc.Notes[j])
		}
		for j := range sc.Exchanges {
			redactExchange(&sc.Exchanges[j], s)
		}
	}
	s(&c.Contract.Rule)
	for i := range c.Contract.Findings {
		f := &c.Contract.Findings[i]
		s(&f.Route)
		s(&f.Location)
		s(&f.Message)
		if f.Example != nil {
			redactExchange(f.Example, s)
		}
	}
	return c
}

// redactExchange applies s to every value of ex (owned by the caller, a clone) and blanks its
// credential headers.
func redactExchange(ex *Exchange, s func(*string)) {
	s(&ex.URL)
	s(&ex.RequestBody)
	s(&ex.ResponseBody)
	redactHeaders(ex.RequestHeaders, s)
	redactHeaders(ex.ResponseHeaders, s)
	for k := range ex.Events {
		s(&ex.Events[k].ID)
		s(&ex.Events[k].Data)
	}
	for k := range ex.Violations {
		s(&ex.Violations[k])
	}
}

// redactHeaders blanks credential headers and applies s to every other value. h must be owned by
// the caller (a clone).
func redactHeaders(h map[string][]string, s func(*string)) {
	for name, vals := range h {
		cred := IsCredentialHeader(name)
		for i := range vals {
			if cred {
				vals[i] = RedactedText
			} else {
				s(&vals[i])
			}
		}
	}
}

// secretReplacer builds one replacer for all secrets and their common encodings, longest first so
// a secret that contains another is replaced whole. It returns nil when there is nothing to replace.
func secretReplacer(secrets []string) *strings.Replacer {
	seen := map[string]bool{}
	var forms []string
	add := func(v string) {
		if v != "" && !seen[v] {
			seen[v] = true
			forms = append(forms, v)
		}
	}
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		add(sec)
		add(url.QueryEscape(sec))
		add(url.PathEscape(sec))
		for _, escapeHTML := range []bool{true, false} {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(escapeHTML)
			if enc.Encode(sec) == nil {
				q := strings.TrimSuffix(b.String(), "\n")
				add(q[1 : len(q)-1])
			}
		}
	}
	if len(forms) == 0 {
		return nil
	}
	slices.SortFunc(forms, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, RedactedText)
	}
	return strings.NewReplacer(pairs...)
}
