package world

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// The peer box the World plays for profile threads (spec/peer.md): the connection it offers and
// its tokens.
//
//	url := w.URL() + world.PathPeerBase + world.PathPeerTexts // where the system sends
const (
	// PathPeerBase is the connection's url below the World's URL; texts arrive at
	// PathPeerBase + PathPeerTexts.
	PathPeerBase = "/lab"
	// PathPeerTexts is where a box receives texts, below its base.
	PathPeerTexts = "/peer/v1/texts"
	// PeerConnection is the id of the one connection of the configuration.
	PeerConnection = "lab"
	// PeerSendToken is the token the system presents when it sends to the peer.
	PeerSendToken = "lab-send-7Qe2v"
	// PeerAcceptToken is the token the peer presents when it sends to the system.
	PeerAcceptToken = "lab-accept-Zr81k"
	// PeerMaxText is the largest text in bytes.
	PeerMaxText = 16384
)

// PeerRoles are the roles of the peer box: a text to any other role is answered 404 role.
//
//	to := world.PeerConnection + "/" + world.PeerRoles[0] // "lab/analyst", as peer.send names it
var PeerRoles = []string{"analyst", "critic"}

// Thread and message ids: 16 to 64 (thread) or 1 to 64 (message) of A-Za-z0-9_-.
var (
	threadRE  = regexp.MustCompile(`^[A-Za-z0-9_-]{16,64}$`)
	messageRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	roleRE    = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)
)

// ValidThread reports whether s may name an agent conversation on the wire.
//
//	ok := world.ValidThread("t_0123456789abcdef")
func ValidThread(s string) bool { return threadRE.MatchString(s) }

// ValidMessage reports whether s may name a text on the wire.
//
//	ok := world.ValidMessage("m1")
func ValidMessage(s string) bool { return messageRE.MatchString(s) }

// PeerText is the body of one text on the wire.
//
//	t := world.PeerText{V: 1, Thread: "t_0123456789abcdef", Message: "m1", From: "analyst", To: "planner", Text: "hi"}
type PeerText struct {
	V       int    `json:"v"`
	Thread  string `json:"thread"`
	Message string `json:"message"`
	From    string `json:"from"`
	To      string `json:"to"`
	Text    string `json:"text"`
}

// PeerDelivery is one request the peer received, whole: the Authorization header, the raw body,
// the text decoded from it (when it decoded), what was wrong with it (Problem, empty for a
// well-formed request with the send token) and how the peer answered.
//
//	for _, d := range w.Peer().Deliveries() { fmt.Println(d.Text.Thread, d.Status) }
type PeerDelivery struct {
	Arrived       time.Time
	Authorization string
	Body          []byte
	Text          PeerText
	Problem       string
	Status        int
	Answer        []byte
}

// PeerAnswer is how the peer answers one well-formed text: Status 0 or 200 acknowledges it;
// any other status answers {"reason": Reason}. A Hold makes the answer wait until it is released
// (a request whose sender goes away first is not answered). Times repeats the answer for that
// many texts (1 when zero).
//
//	_ = w.Peer().Script(world.PeerAnswer{Status: 503, Reason: "busy", Times: 2})
type PeerAnswer struct {
	Status int
	Reason string
	Hold   *Hold
	Times  int
}

// Peer is the peer box's end of the connection at PathPeerBase + PathPeerTexts. It records every
// request (bounded like every recording of the World), checks it against spec/peer.md and
// answers each well-formed text as scripted (200 ack by default). Its methods are safe for
// concurrent use.
//
//	_ = w.Peer().Script(world.PeerAnswer{Hold: h})
//	err := w.Peer().WaitDeliveries(ctx, 1)
type Peer struct {
	w *World

	mu     sync.Mutex
	sig    signal
	script []PeerAnswer
	always *PeerAnswer
	log    *journal[PeerDelivery]
	// earlier are the threads of the texts received before the last reset. A box that serves
	// scenario after scenario (a remote target) may still send on them, retrying a text an
	// earlier scenario left unanswered: such a text is acknowledged, and neither recorded nor
	// answered from the script, since it belongs to no scenario that runs now.
	earlier map[string]bool
}

func newPeer(w *World) *Peer {
	return &Peer{w: w, log: newJournal[PeerDelivery](w.opts)}
}

func (p *Peer) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.script = nil
	p.always = nil
	if p.earlier == nil {
		p.earlier = map[string]bool{}
	}
	for _, d := range p.log.snapshot() {
		if d.Text.Thread != "" {
			p.earlier[d.Text.Thread] = true
		}
	}
	p.log = newJournal[PeerDelivery](p.w.opts)
	p.sig.fire()
}

// Script appends answers for the next well-formed texts, in order; texts past the script are
// acknowledged (or answered as Always says). It fails with ErrScriptFull past Options.MaxScript
// answers.
//
//	_ = w.Peer().Script(world.PeerAnswer{Status: 409, Reason: "thread"})
func (p *Peer) Script(answers ...PeerAnswer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, a := range p.script {
		n += max(a.Times, 1)
	}
	for _, a := range answers {
		n += max(a.Times, 1)
	}
	if n > p.w.opts.MaxScript {
		return ErrScriptFull
	}
	p.script = append(p.script, answers...)
	return nil
}

// Always makes every text past the script answered as a (nil: acknowledged again).
//
//	w.Peer().Always(&world.PeerAnswer{Hold: h})
func (p *Peer) Always(a *PeerAnswer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.always = a
}

// Deliveries returns a copy of the requests the peer received, oldest first.
//
//	n := len(w.Peer().Deliveries())
func (p *Peer) Deliveries() []PeerDelivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.snapshot()
}

// Count is how many requests the peer received (including those past the recording's bound).
//
//	n := w.Peer().Count()
func (p *Peer) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.total
}

// WaitDeliveries blocks until at least n requests have arrived. It returns a *WaitError wrapping
// ctx.Err() (or ErrClosed) when ctx ends (or the World closes) first.
//
//	err := w.Peer().WaitDeliveries(ctx, 2)
func (p *Peer) WaitDeliveries(ctx context.Context, n int) error {
	return waitUntil(ctx, &p.mu, &p.sig, p.w.closing, fmt.Sprintf("%d text(s) at the peer", n),
		func() bool { return p.log.total >= n })
}

// ThreadsConfig is the threads configuration of a box connected to this peer: the roles planner
// and scout (each issued its principal of PeerPeople), the member dana, and the connection lab
// (its url the peer's base, owned by olga).
//
//	cfg.Threads = w.Peer().ThreadsConfig()
func (p *Peer) ThreadsConfig() sutconfig.ThreadsConfig {
	return sutconfig.ThreadsConfig{
		Roles: []sutconfig.RoleConfig{
			{Name: "planner", Prompt: "You plan the work.", Principals: []sutconfig.Principal{PeerPeople["role:planner"]}},
			{Name: "scout", Prompt: "You scout ahead.", Principals: []sutconfig.Principal{PeerPeople["role:scout"]}},
		},
		Members: []sutconfig.Principal{PeerPeople["dana"]},
		Connections: []sutconfig.ConnectionConfig{{
			ID: PeerConnection, URL: p.w.URL() + PathPeerBase, Send: PeerSendToken, Accept: PeerAcceptToken,
			Owner: PeerPeople["olga"],
		}},
	}
}

// PeerPeople are the principals of the box under test that threads scenarios use beside the
// common ones: the connection's owner, a member, the roles (actor "role:<name>", each issued to
// its role by the configuration), and impostor, of another tenant, whose actor is spelled like
// the role planner's but who was issued to no role.
//
//	_ = w.Identity().Add(world.PeerToken("olga"), world.PeerPeople["olga"])
var PeerPeople = map[string]sutconfig.Principal{
	"olga":         {Tenant: "acme", Actor: "olga"},
	"dana":         {Tenant: "acme", Actor: "dana"},
	"role:planner": {Tenant: "acme", Actor: "role:planner"},
	"role:scout":   {Tenant: "acme", Actor: "role:scout"},
	"impostor":     {Tenant: "globex", Actor: "role:planner"},
}

// PeerToken is the bearer token of one of PeerPeople: "tok-" and the name, ":" written "-".
//
//	tok := world.PeerToken("olga")
func PeerToken(name string) string {
	return "tok-" + strings.ReplaceAll(name, ":", "-")
}

// CheckPeerText checks a body against spec/peer.md's members in their order and returns the text
// and the first member that is missing, of the wrong type or out of bounds ("" when none).
//
//	t, bad := world.CheckPeerText(body)
func CheckPeerText(body []byte) (PeerText, string) {
	var raw map[string]json.RawMessage
	var t PeerText
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return t, "v"
	}
	var v float64
	if json.Unmarshal(raw["v"], &v) != nil || v != 1 {
		return t, "v"
	}
	t.V = 1
	str := func(name string, ok func(string) bool) (string, bool) {
		var s string
		if r, has := raw[name]; !has || json.Unmarshal(r, &s) != nil || !ok(s) {
			return "", false
		}
		return s, true
	}
	var good bool
	if t.Thread, good = str("thread", ValidThread); !good {
		return t, "thread"
	}
	if t.Message, good = str("message", ValidMessage); !good {
		return t, "message"
	}
	if t.From, good = str("from", roleRE.MatchString); !good {
		return t, "from"
	}
	if t.To, good = str("to", roleRE.MatchString); !good {
		return t, "to"
	}
	if t.Text, good = str("text", func(s string) bool { return len(s) >= 1 && len(s) <= PeerMaxText && utf8.ValidString(s) }); !good {
		return t, "text"
	}
	return t, ""
}

func (p *Peer) serve(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, p.w.opts.MaxBodyBytes))
	d := PeerDelivery{Arrived: time.Now(), Authorization: r.Header.Get("Authorization"), Body: body}
	var answer PeerAnswer
	switch {
	case err != nil:
		d.Problem, d.Status = "body could not be read", http.StatusBadRequest
		d.Answer = []byte(`{"reason":"bad-request","detail":"v"}`)
	case d.Authorization != "Bearer "+PeerSendToken:
		d.Problem, d.Status = "not the send token: "+d.Authorization, http.StatusUnauthorized
		d.Answer = []byte(`{"reason":"connection"}`)
	default:
		var bad string
		d.Text, bad = CheckPeerText(body)
		switch {
		case bad != "":
			d.Problem, d.Status = "member "+bad+" missing or out of bounds", http.StatusBadRequest
			d.Answer, _ = json.Marshal(map[string]string{"reason": "bad-request", "detail": bad})
		case !isPeerRole(d.Text.To):
			d.Status, d.Answer = http.StatusNotFound, []byte(`{"reason":"role"}`)
		case p.sentEarlier(d.Text.Thread):
			ack, _ := json.Marshal(map[string]any{"ack": true, "thread": d.Text.Thread, "message": d.Text.Message})
			_ = writeRaw(rw, http.StatusOK, ack)
			return
		default:
			answer = p.next()
			if answer.Status == 0 || answer.Status == http.StatusOK {
				d.Status = http.StatusOK
				d.Answer, _ = json.Marshal(map[string]any{"ack": true, "thread": d.Text.Thread, "message": d.Text.Message})
			} else {
				d.Status = answer.Status
				d.Answer, _ = json.Marshal(map[string]string{"reason": answer.Reason})
			}
		}
	}
	p.mu.Lock()
	p.log.add(d, int64(len(body)))
	p.sig.fire()
	p.mu.Unlock()
	if answer.Hold != nil && answer.Hold.wait(r.Context()) != holdReleased {
		return
	}
	if d.Status == http.StatusTooManyRequests {
		rw.Header().Set("Retry-After", "1")
	}
	_ = writeRaw(rw, d.Status, d.Answer)
}

// sentEarlier reports whether thread is one of the threads texts arrived on before the last
// reset (Peer.earlier).
func (p *Peer) sentEarlier(thread string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.earlier[thread]
}

// next takes the answer for the next well-formed text.
func (p *Peer) next() PeerAnswer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.script) == 0 {
		if p.always != nil {
			return *p.always
		}
		return PeerAnswer{}
	}
	a := p.script[0]
	if a.Times > 1 {
		p.script[0].Times--
	} else {
		p.script = p.script[1:]
	}
	return a
}

func isPeerRole(name string) bool {
	for _, r := range PeerRoles {
		if r == name {
			return true
		}
	}
	return false
}
