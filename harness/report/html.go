package report

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
)

//go:embed html/report.html html/report.css html/report.js
var htmlAssets embed.FS

// htmlHead and htmlTail are the page around the embedded report JSON, built once from the assets.
var htmlHead, htmlTail = buildHTMLShell()

// buildHTMLShell fills the shell with the inline style and script and a Content-Security-Policy
// that allows exactly those two (by hash) and nothing from any network.
func buildHTMLShell() (head, tail string) {
	read := func(name string) string {
		b, err := htmlAssets.ReadFile(name)
		if err != nil {
			panic("report: embedded asset missing: " + name)
		}
		// Browsers hash inline code after turning CRLF into LF; do the same so the hashes hold
		// even for a checkout with Windows line endings.
		return strings.ReplaceAll(string(b), "\r\n", "\n")
	}
	shell, css, js := read("html/report.html"), read("html/report.css"), read("html/report.js")
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	csp := "default-src 'none'; script-src " + hash(js) + "; style-src " + hash(css) +
		"; img-src data:; base-uri 'none'; form-action 'none'"
	shell = strings.Replace(shell, "{{csp}}", csp, 1)
	shell = strings.Replace(shell, "{{style}}", css, 1)
	shell = strings.Replace(shell, "{{script}}", js, 1)
	head, tail, ok := strings.Cut(shell, "{{data}}")
	if !ok {
		panic("report: report.html has no data marker")
	}
	return head, tail
}

// WriteHTML writes r as one self-contained HTML page: inline style and script, no fonts, images
// or other resources, and a Content-Security-Policy that forbids every network fetch. The page
// shows the verdict, the kit, spec version and target, a table per profile, the requirement matrix
// and every scenario with its steps, failure (operation, got, want, rule) and, folded away, its
// HTTP exchanges and server-sent events; buttons filter the scenarios by status.
//
// The report is embedded as JSON (the normalized form WriteJSON writes, unindented) in a
// <script type="application/json"> element with "<", ">" and "&" written as \u escapes, so no
// string in the report can close the element; the script puts report text into the page only as
// text nodes. The element ids, classes and data attributes tests may rely on are listed in the
// comment at the top of html/report.html. The output is deterministic.
//
//	err := report.WriteHTML(f, report.Redact(r, token))
func WriteHTML(w io.Writer, r *Report) error {
	if r == nil {
		return ErrNilReport
	}
	var data bytes.Buffer
	enc := json.NewEncoder(&data)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(normalized(r)); err != nil {
		return err
	}
	payload := bytes.TrimRight(data.Bytes(), "\n")
	// SetEscapeHTML already escapes "<"; this guard keeps the guarantee should that ever change.
	payload = bytes.ReplaceAll(payload, []byte("<"), []byte(`\u003c`))
	if _, err := io.WriteString(w, htmlHead); err != nil {
		return err
	}
	if _, err := w.Write(payload); err != nil {
		return err
	}
	_, err := io.WriteString(w, htmlTail)
	return err
}
