// streamclient.js: a resumable reader of a session stream (spec/stream.md, "The reader"; the
// routes are in spec/http.md, "The session stream") for a web page, in plain browser JavaScript
// with no build step. Load it with a script tag; it defines window.LoomStream.
//
// The reader holds one number, last: the cursor of the newest frame it delivered. A frame at or
// below last is dropped (a repeat); a frame that starts after last + 1 is a gap, and the reader
// asks again from last; a merged frame (span, data.parts) whose start it already holds is trimmed
// to the parts after last; a reset frame {floor, head} sets last to floor - 1. Nothing is
// acknowledged. Every attempt POSTs /sessions/{id}/stream/open {from: last} (the token in the
// Authorization header when one is given, else the loom_token cookie) and opens the WebSocket
// /sessions/{id}/stream?ticket=T&from=last. After a drop it reconnects at once, then after delays
// that double from backoff.baseMs up to backoff.maxMs, each with up to backoff.jitter of it added
// at random; a delivered frame starts that policy over. Every delivered frame also goes to the
// rendering view (View, rows()): a streaming reply's last 40 characters are held back until its
// text-done, and a text-cut drops them and shows its note.
//
//   var s = new LoomStream({ server: 'http://127.0.0.1:8080', session: 'c1',
//     onFrame: function (f) { draw(f); } });
//   s.start();
(function (global) {
  'use strict';

  var PREFIX = 'session.';

  // Reader is the pure core: frames in, decisions out. take(f) answers {verdict, frame} with
  // verdict one of 'deliver', 'trim' (frame is the trimmed one), 'drop', 'gap', 'reset' or
  // 'pass' (a control or ephemeral frame other than reset, which never moves last).
  function Reader(last) {
    this.last = last || 0;
  }

  Reader.prototype.take = function (f) {
    if (!f || typeof f.cur !== 'number') return { verdict: 'gap', frame: null };
    if (f.cur === 0) {
      if (f.type === PREFIX + 'reset' && f.data && typeof f.data.floor === 'number') {
        this.last = f.data.floor - 1;
        return { verdict: 'reset', frame: f };
      }
      return { verdict: 'pass', frame: f };
    }
    var first = f.span > 1 ? f.cur - f.span + 1 : f.cur;
    if (f.cur <= this.last) return { verdict: 'drop', frame: null };
    if (first > this.last + 1) return { verdict: 'gap', frame: null };
    if (first === this.last + 1) {
      this.last = f.cur;
      return { verdict: 'deliver', frame: f };
    }
    // A merged frame that starts at or below last and ends after it: keep the parts after last.
    var parts = f.data && f.data.parts;
    if (!Array.isArray(parts) || parts.length !== f.span) return { verdict: 'gap', frame: null };
    var keep = parts.slice(this.last - first + 1);
    var t = {};
    for (var k in f) if (Object.prototype.hasOwnProperty.call(f, k)) t[k] = f[k];
    if (keep.length === 1) {
      delete t.span;
      t.data = { text: keep[0] };
    } else {
      t.span = keep.length;
      t.data = { parts: keep };
    }
    this.last = f.cur;
    return { verdict: 'trim', frame: t };
  };

  // HOLDBACK is how many characters (Unicode code points, counted with Array.from, never with
  // .length, which counts UTF-16 units) at the end of a streaming reply are provisional.
  var HOLDBACK = 40;

  // View is the rendering view (spec/stream.md, "The rendering view"): delivered frames in, one
  // row per message out, {message, state, text, note}. While a reply streams (state
  // 'streaming') its text is every delta's text but the last HOLDBACK characters; its text-done
  // shows it whole (state 'done'; the text-done's own text when no delta reached this viewer); a
  // text-cut drops the held-back tail and shows its note (state 'cut'), and nothing after it is
  // shown until a status 'restarted' of that message starts the row again from nothing.
  function View() {
    this.list = [];
    this.index = {};
  }

  function held(s) {
    var cps = Array.from(s);
    return cps.length <= HOLDBACK ? '' : cps.slice(0, cps.length - HOLDBACK).join('');
  }

  View.prototype.take = function (f) {
    var d = (f && f.data) || {};
    var kind = typeof f.type === 'string' && f.type.indexOf(PREFIX) === 0 ? f.type.slice(PREFIX.length) : f.type;
    var key = f.message || d.message;
    if (!key) return;
    var r = this.index[key];
    if (kind === 'status') {
      if (r && d.state === 'restarted') {
        r.row.state = 'streaming';
        r.row.text = r.row.note = r.deltas = '';
      }
      return;
    }
    if (kind !== 'text-delta' && kind !== 'text-done' && kind !== 'text-cut') return;
    if (!r) {
      r = { row: { message: key, state: 'streaming', text: '', note: '' }, deltas: '' };
      this.index[key] = r;
      this.list.push(r);
    }
    if (r.row.state === 'cut') return;
    if (kind === 'text-delta') {
      if (r.row.state === 'done') return;
      if (typeof d.text === 'string') r.deltas += d.text;
      if (Array.isArray(d.parts)) r.deltas += d.parts.join('');
      r.row.text = held(r.deltas);
    } else if (kind === 'text-done') {
      r.row.state = 'done';
      r.row.text = r.deltas === '' && typeof d.text === 'string' ? d.text : r.deltas;
    } else {
      r.row.state = 'cut';
      r.row.note = typeof d.note === 'string' ? d.note : '';
      r.row.text = held(r.deltas);
    }
  };

  // rows is a copy of what the view shows, in the order each message first appeared.
  View.prototype.rows = function () {
    return this.list.map(function (r) {
      return { message: r.row.message, state: r.row.state, text: r.row.text, note: r.row.note };
    });
  };

  // Backoff is the reconnect policy: the first attempt after a drop at once, then baseMs doubling
  // up to maxMs, plus up to jitter of it at random. reset() starts it over.
  function Backoff(opts) {
    opts = opts || {};
    this.baseMs = opts.baseMs || 100;
    this.maxMs = opts.maxMs || 5000;
    this.jitter = opts.jitter === undefined ? 0.2 : opts.jitter;
    this.attempt = 0;
  }

  Backoff.prototype.next = function () {
    this.attempt++;
    if (this.attempt === 1) return 0;
    var d = this.baseMs;
    for (var i = 2; i < this.attempt && d < this.maxMs; i++) d *= 2;
    d = Math.min(d, this.maxMs);
    return d + d * this.jitter * Math.random();
  };

  Backoff.prototype.reset = function () {
    this.attempt = 0;
  };

  // LoomStream follows one session. opts: server (the http(s) base URL), session (its id), token
  // (optional: sent as a bearer header on the open; without it the open carries the cookies),
  // device (optional), from (the cursor to start after, 0 by default), backoff ({baseMs, maxMs,
  // jitter}), onFrame(frame) for each delivered frame, onControl(frame) for a control or ephemeral
  // frame, and onEvent(name, detail) for 'open', 'drop' (a connection ended, detail.why),
  // 'retry' (detail.delayMs), 'gap', 'repeat' and 'reset'.
  function LoomStream(opts) {
    this.opts = opts;
    this.reader = new Reader(opts.from || 0);
    this.view = new View();
    this.backoff = new Backoff(opts.backoff);
    this.attempts = 0;
    this.opens = 0;
    this.stopped = true;
    this.ws = null;
    this.timer = null;
  }

  LoomStream.prototype.last = function () {
    return this.reader.last;
  };

  // rows is what the stream's rendering view shows of the frames delivered so far.
  LoomStream.prototype.rows = function () {
    return this.view.rows();
  };

  LoomStream.prototype.start = function () {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
  };

  LoomStream.prototype.stop = function () {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.ws) {
      var ws = this.ws;
      this.ws = null;
      ws.close();
    }
  };

  LoomStream.prototype.emit = function (name, detail) {
    if (this.opts.onEvent) this.opts.onEvent(name, detail || {});
  };

  LoomStream.prototype.connect = function () {
    var self = this;
    if (self.stopped) return;
    self.timer = null;
    self.attempts++;
    var from = self.reader.last;
    var base = String(self.opts.server).replace(/\/+$/, '');
    var path = '/sessions/' + encodeURIComponent(self.opts.session) + '/stream';
    var headers = { 'Content-Type': 'application/json' };
    if (self.opts.token) headers.Authorization = 'Bearer ' + self.opts.token;
    var body = { from: from };
    if (self.opts.device) body.device = self.opts.device;
    fetch(base + path + '/open', { method: 'POST', headers: headers, credentials: 'include', body: JSON.stringify(body) })
      .then(function (resp) {
        if (!resp.ok) throw new Error('open answered ' + resp.status);
        return resp.json();
      })
      .then(function (op) {
        if (self.stopped) return;
        var url = base.replace(/^http/, 'ws') + path + '?ticket=' + encodeURIComponent(op.ticket) + '&from=' + from;
        if (self.opts.device) url += '&device=' + encodeURIComponent(self.opts.device);
        self.socket(url);
      })
      .catch(function (err) {
        self.dropped('open failed: ' + (err && err.message ? err.message : err));
      });
  };

  LoomStream.prototype.socket = function (url) {
    var self = this;
    var ws = new WebSocket(url);
    var ended = false;
    self.ws = ws;
    function end(why) {
      if (ended) return;
      ended = true;
      if (self.ws === ws) self.ws = null;
      ws.onopen = ws.onmessage = ws.onerror = ws.onclose = null;
      if (ws.readyState === WebSocket.CONNECTING || ws.readyState === WebSocket.OPEN) ws.close();
      self.dropped(why);
    }
    ws.onopen = function () {
      self.opens++;
      self.emit('open', { attempt: self.attempts, from: self.reader.last });
    };
    ws.onmessage = function (e) {
      var f;
      try {
        f = JSON.parse(e.data);
      } catch (err) {
        end('a frame that is not JSON');
        return;
      }
      var before = self.reader.last;
      var r = self.reader.take(f);
      switch (r.verdict) {
        case 'deliver':
        case 'trim':
          self.backoff.reset();
          self.view.take(r.frame);
          if (self.opts.onFrame) self.opts.onFrame(r.frame);
          break;
        case 'reset':
          self.emit('reset', { floor: f.data.floor, head: f.data.head, last: before });
          if (self.opts.onControl) self.opts.onControl(f);
          break;
        case 'pass':
          if (self.opts.onControl) self.opts.onControl(f);
          break;
        case 'drop':
          self.emit('repeat', { cur: f.cur, span: f.span || 1, last: before });
          break;
        case 'gap':
          self.emit('gap', { cur: f.cur, span: f.span || 1, last: before });
          end('gap');
          break;
      }
    };
    ws.onerror = function () {
      end('error');
    };
    ws.onclose = function (e) {
      end('closed ' + e.code);
    };
  };

  LoomStream.prototype.dropped = function (why) {
    if (this.stopped) return;
    var self = this;
    var delay = self.backoff.next();
    self.emit('drop', { why: why, last: self.reader.last });
    self.emit('retry', { delayMs: delay });
    self.timer = setTimeout(function () {
      self.connect();
    }, delay);
  };

  LoomStream.Reader = Reader;
  LoomStream.Backoff = Backoff;
  LoomStream.View = View;
  LoomStream.HOLDBACK = HOLDBACK;
  global.LoomStream = LoomStream;
})(typeof window !== 'undefined' ? window : globalThis);
