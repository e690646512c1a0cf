package partition

import (
	"strings"
	"unicode/utf8"
)

// ThreadsKey is the key of every execution and record of the threads profile (agent
// conversations between boxes): they index one another across roots and connections, so they
// live in one partition.
const ThreadsKey = "threads"

// rootLimit is how much of a parent's id a child's id keeps (kernel.ChildID clips it there).
const rootLimit = 128

// KeyOf returns the key an execution's partition is computed from, Of(KeyOf(id), P): an
// execution that belongs to another lives where that one does.
//
//   - A child, "<parent>/<name>~<16 hex>", and its children: the key of the root it descends
//     from. The root is the id up to its first "/", cut to 128 bytes on a rune boundary, as a
//     child's id keeps it; a root is keyed by that same cut, so a root and its descendants always
//     agree.
//
//   - A shared-mode turn, "turn:<conversation>:o<ord>:<mac>": its conversation's id (a
//     conversation id holds no ":"), so a conversation, its session stream, its participants and
//     its turns share a partition.
//
//   - An execution of the threads profile, "thr:...": ThreadsKey.
//
//   - Anything else (a conversation, a run, an execution started at the runtime door): the root
//     itself.
//
//     partition.KeyOf("turn:c_1:o7:0a1b") // "c_1"
func KeyOf(id string) string {
	root, _, _ := strings.Cut(id, "/")
	root = clip(root, rootLimit)
	switch {
	case strings.HasPrefix(root, "turn:"):
		conv, _, _ := strings.Cut(root[len("turn:"):], ":")
		return conv
	case strings.HasPrefix(root, "thr:"):
		return ThreadsKey
	}
	return root
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
