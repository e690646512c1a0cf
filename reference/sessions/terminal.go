package sessions

import (
	"context"
	"errors"
	"regexp"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/stream"
)

// MaxCommandBytes bounds a terminal line.
const MaxCommandBytes = 4096

// ErrBadCommand: a terminal line that is empty, too long, not UTF-8 or holds a control
// character other than a tab.
var ErrBadCommand = errors.New("sessions: bad terminal line")

// Redacted is what a secret in a terminal line is replaced with.
const Redacted = "[redacted]"

// secretRE finds the secrets Redact hides: the value after a secret-looking name given with =
// or : (password=..., token: ...), after a secret-looking long option (--password x,
// --token=x), after an HTTP Authorization header's scheme, and the password of a URL.
var secretRE = []*regexp.Regexp{
	regexp.MustCompile(`(?i)((?:authorization|proxy-authorization)\s*:\s*(?:bearer|basic|token)\s+)(\S+)`),
	regexp.MustCompile(`(?i)(--?(?:password|passwd|pass|token|secret|api[-_]?key|access[-_]?key|auth)(?:=|\s+))(\S+)`),
	regexp.MustCompile(`(?i)((?:[a-z0-9_]*(?:password|passwd|secret|token|api[-_]?key|access[-_]?key))\s*[=:]\s*)(\S+)`),
	regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]+:)([^@\s]+)(@)`),
}

// Redact returns line with every secret Redact knows replaced by Redacted (see secretRE).
//
//	stream := sessions.Redact("curl -H 'Authorization: Bearer abc' https://x") // ... Bearer [redacted]' ...
func Redact(line string) string {
	for _, re := range secretRE {
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
	if err := s.cv.Authorize(ctx, who, id); err != nil {
		return stream.Frame{}, false, err
	}
	if !validCommand(line) {
		return stream.Frame{}, false, ErrBadCommand
	}
	if secretPrompt {
		return stream.Frame{}, false, nil
	}
	spec := stream.Spec{Kind: stream.KindTermCommand, Author: "person:" + who.Actor,
		Data: map[string]string{"command": Redact(line), "via": "terminal"}}
	fs, err := s.Append(ctx, who, id, spec)
	if err != nil || len(fs) != 1 {
		return stream.Frame{}, false, err
	}
	return fs[0], true, nil
}
