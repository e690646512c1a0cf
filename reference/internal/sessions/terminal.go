package sessions

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// MaxCommandBytes bounds a terminal line.
const MaxCommandBytes = 4096

// ErrBadCommand: a terminal line that is empty, too long, not UTF-8 or holds a control
// character other than a tab.
var ErrBadCommand = errors.New("sessions: bad terminal line")

// Redacted is what a secret in a terminal line is replaced with.
const Redacted = "[redacted]"

// secretValue is the value a rule hides: a quoted string, or a run of characters that are
// neither white space nor quotes.
const secretValue = `('[^']*'|"[^"]*"|[^\s'"]+)`

// secretName is a name that says its value is secret.
const secretName = `(?:password|passwd|secret|token|api[-_]?key|access[-_]?key)`

// secretRE are the rules Redact applies, in order (spec/stream.md, Redaction of terminal lines).
// Each keeps its first group, replaces its second by Redacted and keeps its third, if any. They
// are compiled when a line is first redacted, not when the program starts (a restart that
// redacts nothing does not wait for them).
var secretRE = sync.OnceValue(secretRules)

func secretRules() []*regexp.Regexp {
	return []*regexp.Regexp{
		// a private key block, from its BEGIN marker to its END marker or the end of the line
		regexp.MustCompile(`(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)(.*?)(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`),
		// a JSON member with a secret name: "password": "..."
		regexp.MustCompile(`("(?i:[a-z0-9_-]*` + secretName + `)"\s*:\s*")([^"]*)(")`),
		// an HTTP Authorization header's credentials
		regexp.MustCompile(`(?i)((?:authorization|proxy-authorization)\s*:\s*(?:bearer|basic|token|digest)\s+)` + secretValue),
		// mysql -pSECRET: the password attached to -p
		regexp.MustCompile(`(\b(?i:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlpump|mariadb|mariadb-dump|mariadb-admin)\b[^|;&]*?\s-p)` + secretValue),
		// curl -u user:pass, --user user:pass: what follows the user's colon
		regexp.MustCompile(`(\bcurl\b[^|;&]*?\s(?:-u\s*|--user(?:\s+|=))[^\s:'"]+:)` + secretValue),
		// docker login -p X (and podman, nerdctl, buildah)
		regexp.MustCompile(`(\b(?:docker|podman|nerdctl|buildah)\s+login\b[^|;&]*?\s-p\s+)` + secretValue),
		// sshpass -p X
		regexp.MustCompile(`(\bsshpass\b[^|;&]*?\s-p\s*)` + secretValue),
		// redis-cli -a X
		regexp.MustCompile(`(\bredis-cli\b[^|;&]*?\s-a\s+)` + secretValue),
		// openssl -passin pass:X, -passout pass:X
		regexp.MustCompile(`(-pass(?:in|out)\s+pass:)` + secretValue),
		// a long or short option whose name ends in a secret word: --password x, --client-secret=x
		regexp.MustCompile(`(?i)(--?(?:[a-z0-9]+[-_])*(?:password|passwd|pass|token|secret|api[-_]?key|access[-_]?key|auth)(?:=|\s+))` + secretValue),
		// NAME=value or NAME: value with a secret-looking name (PGPASSWORD=, AWS_SECRET_ACCESS_KEY=, MYSQL_PWD=)
		regexp.MustCompile(`(?i)([a-z0-9_]*(?:` + secretName + `|_pwd)\s*[=:]\s*)` + secretValue),
		// a URL's password
		regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]+:)([^@\s]+)(@)`),
		// a URL's user of 16 characters or more with no password: a token
		regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)([A-Za-z0-9_-]{16,})(@)`),
		// a token of a well-known form, wherever it stands
		regexp.MustCompile(`()\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b`),
	}
}

// Redact returns line with every secret Redact knows replaced by Redacted (see secretRE).
//
//	stream := sessions.Redact("curl -H 'Authorization: Bearer abc' https://x") // ... Bearer [redacted]' ...
func Redact(line string) string {
	for _, re := range secretRE() {
		line = re.ReplaceAllString(line, "${1}"+Redacted+"${3}")
	}
	return line
}

func validCommand(line string) bool {
	if line == "" || len(line) > MaxCommandBytes || !utf8.ValidString(line) {
		return false
	}
	for _, r := range line {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}

// Command logs a line who typed in session id's terminal as a term-command frame: redacted, with
// its typist, never its output. A line typed at a password prompt (secretPrompt) is not logged
// at all; logged says which.
//
// Errors: loomtype.ErrNotFound, ErrBadCommand, store errors.
//
//	f, logged, err := svc.Command(ctx, alice, "c1", "make test", false)
func (s *Service) Command(ctx context.Context, who loomtype.Identity, id, line string, secretPrompt bool) (stream.Frame, bool, error) {
	if err := s.authorize(ctx, who, id); err != nil {
		return stream.Frame{}, false, err
	}
	if !validCommand(line) {
		return stream.Frame{}, false, ErrBadCommand
	}
	if secretPrompt {
		return stream.Frame{}, false, nil
	}
	spec := stream.Spec{Kind: stream.KindTermCommand, Author: s.nameOf(id, who),
		Data: map[string]string{"command": Redact(line), "via": "terminal"}}
	fs, err := s.Append(ctx, who, id, spec)
	if err != nil || len(fs) != 1 {
		return stream.Frame{}, false, err
	}
	return fs[0], true, nil
}
