package reference

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// routeKey is what a route's partition is taken from.
type routeKey int

const (
	// keyAny: the route names no execution; any engine serves it (the discovery document).
	keyAny routeKey = iota
	// keyPath: the execution the path's second segment names (the third under /runtime).
	keyPath
	// keyTicket: the session stream, by the ticket the query carries (minted in its session's
	// partition), else by the path.
	keyTicket
	// keyThreads: every record of profile threads lives in one partition.
	keyThreads
	// keyConversation, keyRun: a creation; an id the client chose is made the owner's
	// (conversation.ChosenID, run.ChosenID), which needs the caller; without one the engine that
	// serves it mints an id of its own partition.
	keyConversation
	keyRun
	// keyRuntime: a start at the runtime door, by the conversation its input names (see
	// runtimeKey), else by the body's id.
	keyRuntime
)

// routeRule is the partition key of one route of spec/openapi.yaml.
type routeRule struct {
	method, pattern string
	key             routeKey
}

// routes is every route of the surface. A request no rule matches (a wrong method, an unknown
// path) is served by any engine, which answers it as one engine would (404 or 405).
var routes = []routeRule{
	{"GET", "/.well-known/loom", keyAny},
	{"POST", "/conversations", keyConversation},
	{"GET", "/conversations/{id}", keyPath},
	{"POST", "/conversations/{id}/turns", keyPath},
	{"POST", "/conversations/{id}/close", keyPath},
	{"GET", "/conversations/{id}/history", keyPath},
	{"GET", "/conversations/{id}/events", keyPath},
	{"GET", "/conversations/{id}/participants", keyPath},
	{"POST", "/conversations/{id}/participants", keyPath},
	{"POST", "/runtime/executions", keyRuntime},
	{"POST", "/runtime/executions/{id}/messages", keyPath},
	{"GET", "/runtime/executions/{id}/log", keyPath},
	{"POST", "/runs", keyRun},
	{"GET", "/runs/{id}", keyPath},
	{"POST", "/runs/{id}/abort", keyPath},
	{"POST", "/runs/{id}/cancel", keyPath},
	{"POST", "/runs/{id}/approvals/{gate}", keyPath},
	{"POST", "/runs/{id}/human/{call}", keyPath},
	{"POST", "/sessions/{id}/stream/open", keyPath},
	{"GET", "/sessions/{id}/stream", keyTicket},
	{"POST", "/sessions/{id}/messages", keyPath},
	{"POST", "/sessions/{id}/messages/{message}/cancel", keyPath},
	{"POST", "/sessions/{id}/stop", keyPath},
	{"POST", "/sessions/{id}/terminal", keyPath},
	{"POST", "/sessions/{id}/reactions", keyPath},
	{"POST", "/sessions/{id}/pins", keyPath},
	{"POST", "/sessions/{id}/presence", keyPath},
	{"POST", "/sessions/{id}/read", keyPath},
	{"POST", "/sessions/{id}/messages/{message}/edit", keyPath},
	{"POST", "/sessions/{id}/messages/{message}/retry", keyPath},
	{"POST", "/sessions/{id}/messages/{message}/branch", keyPath},
	{"POST", "/peer/v1/texts", keyThreads},
	{"GET", "/roles/{role}/conversation", keyThreads},
	{"POST", "/roles/{role}/conversation", keyThreads},
	{"DELETE", "/roles/{role}/conversation", keyThreads},
	{"POST", "/roles/{role}/conversation/messages", keyThreads},
	{"POST", "/roles/{role}/send", keyThreads},
	{"GET", "/roles/{role}/agent-history", keyThreads},
	{"POST", "/tasks", keyThreads},
	{"GET", "/tasks/{id}", keyThreads},
	{"DELETE", "/tasks/{id}", keyThreads},
	{"POST", "/tasks/{id}/members", keyThreads},
	{"POST", "/tasks/{id}/finish", keyThreads},
	{"POST", "/tasks/{id}/runs", keyThreads},
	{"GET", "/threads/runs/{id}", keyThreads},
	{"GET", "/agent-conversations", keyThreads},
	{"GET", "/agent-conversations/{id}", keyThreads},
	{"POST", "/agent-conversations/{id}/stop", keyThreads},
	{"GET", "/connections/{id}", keyThreads},
	{"POST", "/connections/{id}/pause", keyThreads},
	{"POST", "/connections/{id}/unpause", keyThreads},
	{"POST", "/connections/{id}/revoke", keyThreads},
}

// routeSegments are the segments of each rule's pattern, by the rule's index in routes.
var routeSegments = func() [][]string {
	out := make([][]string, len(routes))
	for i, rule := range routes {
		out[i] = strings.Split(strings.TrimPrefix(rule.pattern, "/"), "/")
	}
	return out
}()

// ruleOf is the rule of r's method and path, and the path's {id} ("" when it has none).
func ruleOf(method, path string) (routeRule, string, bool) {
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, rule := range routes {
		if rule.method != method && !(method == http.MethodHead && rule.method == http.MethodGet) {
			continue
		}
		if id, ok := matchPattern(routeSegments[i], seg); ok {
			return rule, id, true
		}
	}
	return routeRule{}, "", false
}

// matchPattern matches path segments against a pattern's: a literal equal, a {name} any non-empty
// segment; id is the segment {id} matched.
func matchPattern(pat, seg []string) (id string, ok bool) {
	if len(pat) != len(seg) {
		return "", false
	}
	for i, p := range pat {
		switch {
		case strings.HasPrefix(p, "{"):
			if seg[i] == "" {
				return "", false
			}
			if p == "{id}" {
				id = seg[i]
			}
		case p != seg[i]:
			return "", false
		}
	}
	return id, true
}

// destination is where a request goes: partition part, or (anyPart) whichever partition this
// node serves.
type destination struct {
	part    int
	anyPart bool
}

// destinationOf is where r goes among p partitions. For a creation it reads the body (at most
// max bytes; a body over it, or one that does not parse, is served anywhere and refused there as
// one engine would) and leaves r.Body to be read again from its start: the returned bytes, nil
// when the body was not read.
func (n *Node) destinationOf(r *http.Request, p int, max int64) (destination, []byte) {
	rule, id, ok := ruleOf(r.Method, r.URL.Path)
	if !ok || p == 1 {
		return destination{anyPart: p > 1}, nil
	}
	of := func(key string) destination {
		i, err := partition.Of(key, p)
		if err != nil {
			return destination{anyPart: true}
		}
		return destination{part: i}
	}
	switch rule.key {
	case keyPath:
		return of(partition.KeyOf(id)), nil
	case keyTicket:
		if tk := r.URL.Query().Get("ticket"); tk != "" {
			return of(partition.KeyOf(tk)), nil
		}
		return of(partition.KeyOf(id)), nil
	case keyThreads:
		return of(partition.ThreadsKey), nil
	case keyConversation, keyRun, keyRuntime:
		body, chosen := readChosen(r, max)
		if chosen == "" {
			return destination{anyPart: true}, body
		}
		if rule.key == keyRuntime {
			return of(partition.KeyOf(runtimeKey(body, chosen))), body
		}
		who, err := n.caller(r)
		if err != nil {
			return destination{anyPart: true}, body // refused wherever it is served
		}
		if rule.key == keyRun {
			return of(partition.KeyOf(run.ChosenID(who, chosen))), body
		}
		return of(partition.KeyOf(conversation.ChosenID(who, chosen))), body
	}
	return destination{anyPart: true}, nil
}

// forwardedTo is the destination of a forward whose partitionHeader says part: that partition,
// or any this node holds when it names none (or none there is).
func (n *Node) forwardedTo(part string) destination {
	i, err := strconv.Atoi(part)
	if err != nil || i < 0 || i >= len(n.parts) {
		return destination{anyPart: true}
	}
	return destination{part: i}
}

// readChosen reads r's body (at most max bytes) and returns it with the id it chooses, if any;
// r.Body is left to read the same bytes again. A body over max is left unread (nil).
func readChosen(r *http.Request, max int64) ([]byte, string) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength > max {
		return nil, ""
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	rest := io.MultiReader(bytes.NewReader(body), r.Body)
	r.Body = struct {
		io.Reader
		io.Closer
	}{rest, r.Body}
	if err != nil || int64(len(body)) > max {
		return nil, ""
	}
	var b struct {
		ID *string `json:"id"`
	}
	if json.Unmarshal(body, &b) != nil || b.ID == nil {
		return body, ""
	}
	return body, *b.ID
}

// runtimeKey is what a start at the runtime door is routed by: the conversation its input
// names, where the door judges the caller and the id (a start's id must lie in that
// conversation's turn ids, whose partition key is the conversation's), so that the answer is
// the same whichever partition the id alone would fall in; the body's id when the input names
// none.
func runtimeKey(body []byte, id string) string {
	var b struct {
		Input struct {
			ConversationID string `json:"conversationId"`
		} `json:"input"`
	}
	if json.Unmarshal(body, &b) != nil || b.Input.ConversationID == "" {
		return id
	}
	return b.Input.ConversationID
}

// caller is the identity r authenticates as, by the gateway configuration the nodes share.
func (n *Node) caller(r *http.Request) (loomtype.Identity, error) {
	auth := n.opt.Gateway.Authenticate
	if auth == nil {
		return loomtype.Identity{Actor: "anonymous"}, nil
	}
	who, err := auth(r)
	if err == nil && !who.Valid() {
		err = gateway.ErrUnauthenticated
	}
	return who, err
}
