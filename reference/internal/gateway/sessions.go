package gateway

import (
	"errors"
	"net/http"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// DefaultHeartbeat is how often an idle session stream sends a heartbeat frame.
const DefaultHeartbeat = 15 * time.Second

// KindEnd is the control frame that ends a session stream for good: data {reason}, with the
// reason a sessions.EndReason ("removed"). The reader does not resume.
const KindEnd stream.Kind = "end"

type openBody struct {
	From   *int64  `json:"from,omitempty"`
	Device *string `json:"device,omitempty"`
}

type openAnswer struct {
	Ticket    string `json:"ticket"`
	ExpiresIn int64  `json:"expiresIn"`
	Session   string `json:"session"`
	From      int64  `json:"from"`
	Head      int64  `json:"head"`
	Floor     int64  `json:"floor"`
}

// openStream serves POST /sessions/{id}/stream/open: who may read is decided first (the uniform
// 404, with nothing made), then the body, then the ticket.
func (g *Gateway) openStream(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	var b openBody
	id, ok := g.admitPost(w, r, who, &b, true)
	if !ok {
		return
	}
	var from int64
	if b.From != nil {
		from = *b.From
	}
	dev := ""
	if b.Device != nil {
		dev = *b.Device
	}
	if from < 0 {
		writeError(w, http.StatusBadRequest, "bad request", "from")
		return
	}
	if b.Device != nil && (dev == "" || !sessions.ValidDevice(dev)) {
		writeError(w, http.StatusBadRequest, "bad request", "device")
		return
	}
	op, err := g.cfg.Sessions.Open(r.Context(), who, id, from, dev)
	if err != nil {
		if !quotaRefused(w, err) {
			g.fail(w, err)
		}
		return
	}
	// Whole seconds, rounded up: a ticket of less than a second says 1.
	left := time.Until(op.Expires)
	secs := int64((left + time.Second - 1) / time.Second)
	writeJSON(w, http.StatusOK, openAnswer{Ticket: op.Ticket, ExpiresIn: max(secs, 1),
		Session: op.Session, From: op.From, Head: op.Head, Floor: op.Floor})
}

// ticketRefused answers a refused ticket: 401 with its reason.
func ticketRefused(w http.ResponseWriter, reason sessions.TicketReason) {
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "ticket refused", "reason": string(reason)})
}

type steerBody struct {
	Text      *string     `json:"text,omitempty"`
	Mentions  []string    `json:"mentions,omitempty"`
	Enc       *stream.Enc `json:"enc,omitempty"`
	MessageID *string     `json:"messageId,omitempty"`
	Parent    *string     `json:"parent,omitempty"`
}

// steer serves POST /sessions/{id}/messages: a message sent now when the assistant is idle, or
// queued until the next safe point while it works; with a parent, a thread reply to a message
// the session's log holds (400 naming parent otherwise, and for a private message).
func (g *Gateway) steer(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	var b steerBody
	id, ok := g.admitPost(w, r, who, &b, false)
	if !ok {
		return
	}
	mid := ""
	if b.MessageID != nil {
		mid = *b.MessageID
		if !validMessageID(mid) {
			writeError(w, http.StatusBadRequest, "bad request", "messageId")
			return
		}
	}
	parent := ""
	if b.Parent != nil {
		parent = *b.Parent
		if !validMessageID(parent) {
			writeError(w, http.StatusBadRequest, "bad request", "parent")
			return
		}
	}
	var res sessions.Sent
	var err error
	switch {
	case (b.Text == nil) == (b.Enc == nil):
		writeError(w, http.StatusBadRequest, "bad request", "text")
		return
	case b.Enc != nil && b.Parent != nil:
		// A private message is relayed as it came; it is no thread reply here.
		writeError(w, http.StatusBadRequest, "bad request", "parent")
		return
	case b.Enc != nil:
		res, err = g.cfg.Sessions.SendPrivate(r.Context(), who, id, mid, *b.Enc)
		var ee *stream.EncError
		if errors.As(err, &ee) {
			writeError(w, http.StatusBadRequest, "bad request", "enc."+ee.Field)
			return
		}
	default:
		res, err = g.cfg.Sessions.SendThread(r.Context(), who, id, *b.Text, mid, parent, b.Mentions...)
		if errors.Is(err, sessions.ErrBadMentions) {
			writeError(w, http.StatusBadRequest, "bad request", "mentions")
			return
		}
		if errors.Is(err, sessions.ErrUnknownParent) {
			writeError(w, http.StatusBadRequest, "bad request", "parent")
			return
		}
	}
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

// unqueue serves POST /sessions/{id}/messages/{message}/cancel: the sender takes a waiting
// message back; again answers the same; one already picked up is a 409 with reason picked-up.
func (g *Gateway) unqueue(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	id := r.PathValue("id")
	if err := g.cv.Authorize(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return
	}
	if !g.limitPost(w, r, who) {
		return
	}
	res, err := g.cfg.Sessions.Cancel(r.Context(), who, id, r.PathValue("message"))
	if errors.Is(err, sessions.ErrPickedUp) {
		writeJSON(w, http.StatusConflict, map[string]string{"error": "conflict", "reason": "picked-up"})
		return
	}
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func validMessageID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// stopTurn serves POST /sessions/{id}/stop: the running turn is stopped, its stopping status
// logged first. Nothing running is a 409 with reason idle; a turn without abort checkpoints a
// 409 with reason no-checkpoints.
func (g *Gateway) stopTurn(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	id := r.PathValue("id")
	if err := g.cv.Authorize(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return
	}
	if !g.limitPost(w, r, who) {
		return
	}
	turn, err := g.cfg.Sessions.Stop(r.Context(), who, id)
	switch {
	case errors.Is(err, sessions.ErrIdle):
		writeJSON(w, http.StatusConflict, map[string]string{"error": "conflict", "reason": "idle"})
	case errors.Is(err, sessions.ErrNoCheckpoints):
		writeJSON(w, http.StatusConflict, map[string]string{"error": "conflict", "reason": "no-checkpoints"})
	case err != nil:
		g.fail(w, err)
	default:
		writeJSON(w, http.StatusAccepted, map[string]any{"turn": turn, "stopping": true})
	}
}

type termBody struct {
	Line   string  `json:"line"`
	Prompt *string `json:"prompt,omitempty"`
}

// termCommand serves POST /sessions/{id}/terminal: a line the caller typed in the session's
// terminal, logged redacted as a term-command frame; one typed at a password prompt is not
// logged.
func (g *Gateway) termCommand(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	var b termBody
	id, ok := g.admitPost(w, r, who, &b, false)
	if !ok {
		return
	}
	secret := false
	if b.Prompt != nil {
		switch *b.Prompt {
		case "shell":
		case "password":
			secret = true
		default:
			writeError(w, http.StatusBadRequest, "bad request", "prompt")
			return
		}
	}
	f, logged, err := g.cfg.Sessions.Command(r.Context(), who, id, b.Line, secret)
	if errors.Is(err, sessions.ErrBadCommand) {
		writeError(w, http.StatusBadRequest, "bad request", "line")
		return
	}
	if err != nil {
		g.fail(w, err)
		return
	}
	ans := map[string]any{"logged": logged}
	if logged {
		ans["cur"] = f.Cur
	}
	writeJSON(w, http.StatusAccepted, ans)
}

type reactBody struct {
	Message string `json:"message"`
	Emoji   string `json:"emoji"`
	On      *bool  `json:"on,omitempty"`
}

type pinBody struct {
	Message string `json:"message"`
	On      *bool  `json:"on,omitempty"`
}

// react serves POST /sessions/{id}/reactions and (pin true) POST /sessions/{id}/pins.
func (g *Gateway) react(pin bool) func(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	return func(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
		var pb pinBody
		var rb reactBody
		var body any = &rb
		if pin {
			body = &pb
		}
		id, ok := g.admitPost(w, r, who, body, false)
		if !ok {
			return
		}
		msg, emoji, onp := rb.Message, rb.Emoji, rb.On
		if pin {
			msg, emoji, onp = pb.Message, "", pb.On
		}
		on := onp == nil || *onp
		f, err := g.cfg.Sessions.React(r.Context(), who, id, msg, emoji, on, pin)
		switch {
		case errors.Is(err, sessions.ErrUnknownMessage):
			writeError(w, http.StatusBadRequest, "bad request", "message")
		case errors.Is(err, sessions.ErrBadEmoji):
			writeError(w, http.StatusBadRequest, "bad request", "emoji")
		case err != nil:
			g.fail(w, err)
		default:
			writeJSON(w, http.StatusAccepted, map[string]int64{"cur": f.Cur})
		}
	}
}

type presenceBody struct {
	State string  `json:"state"`
	Doing *string `json:"doing,omitempty"`
}

// presence serves POST /sessions/{id}/presence: an ephemeral presence frame to every reader.
func (g *Gateway) presence(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	id := r.PathValue("id")
	if err := g.cv.Authorize(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return
	}
	var b presenceBody
	if !g.readBody(w, r, &b, false) {
		return
	}
	doing := ""
	if b.Doing != nil {
		doing = *b.Doing
	}
	sent, err := g.cfg.Sessions.Presence(r.Context(), who, id, b.State, doing)
	switch {
	case errors.Is(err, sessions.ErrBadPresence):
		writeError(w, http.StatusBadRequest, "bad request", "state")
	case err != nil:
		g.fail(w, err)
	default:
		writeJSON(w, http.StatusAccepted, map[string]bool{"sent": sent})
	}
}

type readBody struct {
	Upto int64 `json:"upto"`
}

// markRead serves POST /sessions/{id}/read: the caller's read marker, stored per person and
// sent to that person's own readers alone.
func (g *Gateway) markRead(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	var b readBody
	id, ok := g.admitPost(w, r, who, &b, false)
	if !ok {
		return
	}
	n, err := g.cfg.Sessions.MarkRead(r.Context(), who, id, b.Upto)
	switch {
	case errors.Is(err, sessions.ErrBadMarker):
		writeError(w, http.StatusBadRequest, "bad request", "upto")
	case err != nil:
		g.fail(w, err)
	default:
		writeJSON(w, http.StatusOK, map[string]int64{"upto": n})
	}
}

type editBody struct {
	Text *string `json:"text,omitempty"`
}

// editMessage serves POST /sessions/{id}/messages/{message}/edit (retry false) and
// .../retry (retry true): a person re-asks their own message, with an Idempotency-Key.
func (g *Gateway) editMessage(retry bool) func(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	return func(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
		var b editBody
		id, ok := g.admitPost(w, r, who, &b, retry)
		if !ok {
			return
		}
		text := ""
		if !retry {
			if b.Text == nil {
				writeError(w, http.StatusBadRequest, "bad request", "text")
				return
			}
			text = *b.Text
		} else if b.Text != nil {
			writeError(w, http.StatusBadRequest, "bad request", "text")
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if key != "" && !validMessageID(key) {
			writeError(w, http.StatusBadRequest, "bad request", "Idempotency-Key")
			return
		}
		res, err := g.cfg.Sessions.Edit(r.Context(), who, id, r.PathValue("message"), text, key)
		switch {
		case errors.Is(err, sessions.ErrNoKey):
			writeError(w, http.StatusBadRequest, "bad request", "Idempotency-Key")
		case errors.Is(err, sessions.ErrBadText):
			writeError(w, http.StatusBadRequest, "bad request", "text")
		case err != nil:
			g.fail(w, err)
		default:
			writeJSON(w, http.StatusAccepted, res)
		}
	}
}

// branchMessage serves POST /sessions/{id}/messages/{message}/branch: a person starts a new
// conversation of their own from a message of the session, with an Idempotency-Key (201
// {"session", "from", "message"}; the same key again answers the same).
func (g *Gateway) branchMessage(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	var b struct{}
	id, ok := g.admitPost(w, r, who, &b, true)
	if !ok {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key != "" && !validMessageID(key) {
		writeError(w, http.StatusBadRequest, "bad request", "Idempotency-Key")
		return
	}
	res, err := g.cfg.Sessions.Branch(r.Context(), who, id, r.PathValue("message"), key)
	switch {
	case errors.Is(err, sessions.ErrNoKey):
		writeError(w, http.StatusBadRequest, "bad request", "Idempotency-Key")
	case errors.Is(err, sessions.ErrKeyReused):
		writeJSON(w, http.StatusConflict, map[string]string{"error": "conflict", "reason": "key-reused"})
	case errors.Is(err, sessions.ErrBadText):
		writeError(w, http.StatusBadRequest, "bad request", "text")
	case err != nil:
		g.fail(w, err)
	default:
		w.Header().Set("Location", "/conversations/"+res.Session)
		writeJSON(w, http.StatusCreated, res)
	}
}
