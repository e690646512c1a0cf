(function () {
  'use strict';

  // Every string from the report reaches the page through text nodes or setAttribute; nothing
  // from the report is ever parsed as markup.
  var STATUSES = ['passed', 'failed', 'harness-error', 'not-applicable', 'skipped', 'undefined', 'pending'];
  var LABELS = {
    'all': 'All', 'passed': 'Passed', 'failed': 'Failed', 'harness-error': 'Harness error',
    'not-applicable': 'Not applicable', 'skipped': 'Skipped', 'undefined': 'Undefined', 'pending': 'Pending',
    'not-run': 'Not run'
  };
  var TOTAL_KEYS = {
    'passed': 'passed', 'failed': 'failed', 'harness-error': 'harnessError', 'not-applicable': 'notApplicable',
    'skipped': 'skipped', 'undefined': 'undefined', 'pending': 'pending'
  };

  function arr(v) { return Array.isArray(v) ? v : []; }
  function str(v) { return v === undefined || v === null ? '' : String(v); }

  // el builds an element. attrs values are set with setAttribute (class too); children are nodes
  // or strings, strings becoming text nodes.
  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === undefined || v === null || v === false) { return; }
        node.setAttribute(k, v === true ? '' : String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) { append(node, arguments[i]); }
    return node;
  }
  function append(node, child) {
    if (child === undefined || child === null || child === false) { return; }
    if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return; }
    if (typeof child === 'string' || typeof child === 'number') {
      node.appendChild(document.createTextNode(String(child)));
      return;
    }
    node.appendChild(child);
  }
  function setText(id, text) {
    var node = document.getElementById(id);
    if (node) { node.textContent = str(text); }
  }
  function badge(status) { return el('span', { 'class': 'badge', 'data-status': status }, LABELS[status] || str(status)); }

  var data;
  try {
    data = JSON.parse(document.getElementById('report-data').textContent);
  } catch (e) {
    data = null;
  }
  if (!data || typeof data !== 'object') {
    setText('verdict', 'The embedded report could not be read.');
    document.getElementById('verdict').className = 'verdict verdict-error';
    document.body.setAttribute('data-ready', 'true');
    return;
  }

  var scenarios = arr(data.scenarios);
  var indexByID = {};
  scenarios.forEach(function (s, i) { if (!(s.id in indexByID)) { indexByID[s.id] = i; } });
  var requirementsByID = {};
  arr(data.requirements).forEach(function (r) { requirementsByID[r.id] = r; });

  // Header.
  var kit = data.kit || {};
  var target = data.target || {};
  setText('kit', (str(kit.name) + ' ' + str(kit.version)).trim());
  setText('spec-version', data.specVersion);
  var described = str(target.description);
  setText('target', described + (target.driver && described.indexOf(target.driver) < 0 ? ' (' + target.driver + ')' : ''));
  setText('implementation', target.implementation || '–');
  setText('claimed-profiles', arr(target.claimedProfiles).join(', ') || '–');
  // Whole seconds, in UTC: "2026-12-01 14:02:18 UTC".
  setText('started', str(data.startedAt).replace(/\.\d+/, '').replace('T', ' ').replace(/Z$/, ' UTC'));
  setText('duration', (Number(data.durationMs || 0) / 1000).toFixed(1) + ' s');
  document.title = 'loomcheck report: ' + str(target.description);

  var verdict = document.getElementById('verdict');
  var exitCode = Number(data.exitCode);
  verdict.setAttribute('data-conformant', data.conformant ? 'true' : 'false');
  verdict.setAttribute('data-exit-code', String(exitCode));
  verdict.className = 'verdict ' + (data.conformant ? 'verdict-pass' : exitCode === 2 ? 'verdict-error' : 'verdict-fail');
  var excused = (data.scenarios || []).filter(function (sc) { return sc.status === 'failed' && sc.expected; }).length;
  verdict.textContent = data.unstarted ? 'Not conformant: the system did not start (exit code ' + exitCode + '): ' + str(data.unstarted) : (data.conformant && excused > 0
    ? 'No new failures: ' + excused + ' excused by the baseline, so not conformant'
    : data.conformant ? 'Conformant' : 'Not conformant') + ' (exit code ' + exitCode + ')';

  var totals = data.totals || {};
  var totalsList = document.getElementById('totals');
  // Each count is a link to the scenarios of that status (see the filters below).
  STATUSES.forEach(function (s) {
    totalsList.appendChild(el('li', { 'data-total': s },
      el('a', { 'class': 'total-link', href: '#scenarios-section', 'data-filter': s },
        LABELS[s] + ' ', el('span', { 'class': 'count' }, str(totals[TOTAL_KEYS[s]] || 0)))));
  });

  // Profiles.
  var profileBody = document.querySelector('#profiles tbody');
  arr(data.profiles).forEach(function (p) {
    var t = p.totals || {};
    var row = el('tr', { 'data-profile': p.name, 'data-claimed': p.claimed ? 'true' : 'false', 'data-conformant': p.conformant ? 'true' : 'false' },
      el('td', null, str(p.name)),
      el('td', null, p.claimed ? 'yes' : 'no'),
      el('td', null, !p.claimed ? '–' : p.conformant ? 'yes' : p.verdict === 'not-run' ? 'not run' : 'no'));
    STATUSES.forEach(function (s) { row.appendChild(el('td', { 'class': 'num' }, str(t[TOTAL_KEYS[s]] || 0))); });
    profileBody.appendChild(row);
  });

  // Baseline, warnings, contract.
  var baseline = data.baseline;
  if (baseline) {
    var box = document.getElementById('baseline');
    box.hidden = false;
    box.appendChild(el('h2', null, 'Baseline'));
    box.appendChild(el('p', null, 'File: ', el('span', { id: 'baseline-file' }, str(baseline.file))));
    var entry = function (e) { return (str(e.requirement) + ' ' + str(e.scenario)).trim() + ': ' + str(e.reason); };
    [['baseline-stale', 'Stale entries (now passing; remove them)', arr(baseline.stale), entry],
      ['baseline-unexpected', 'Unexpected failures', arr(baseline.unexpected), str],
      ['baseline-expected', 'Expected failures', arr(baseline.expected), entry]].forEach(function (part) {
      var ul = el('ul', { id: part[0] });
      part[2].forEach(function (item) { ul.appendChild(el('li', null, part[3](item))); });
      box.appendChild(el('h3', null, part[1] + ' (' + part[2].length + ')'));
      box.appendChild(ul);
    });
  }
  var warnings = arr(data.warnings);
  if (warnings.length) {
    document.getElementById('warnings-section').hidden = false;
    var wl = document.getElementById('warnings');
    warnings.forEach(function (w) { wl.appendChild(el('li', null, str(w))); });
  }
  var contract = data.contract || {};
  setText('contract', 'Contract: ' + (contract.exchangesValidated || 0) + ' exchanges and ' +
    (contract.eventsValidated || 0) + ' events validated, ' + (contract.violations || 0) + ' violations.');

  // Contract findings: each distinct violation once, with the scenarios that met it.
  var findings = arr(contract.findings);
  if (findings.length) {
    var fbox = document.getElementById('contract-findings');
    fbox.hidden = false;
    var rule = str(contract.rule);
    fbox.appendChild(el('h2', null, 'Contract violations (' + findings.length + ') under ' + str(contract.requirement)));
    if (rule) { fbox.appendChild(el('p', { 'class': 'contract-rule' }, rule)); }
    fbox.appendChild(el('p', null, 'Each is reported once; the scenarios that met it are judged on their behaviour and note it.'));
    var fl = el('ol');
    findings.forEach(function (f) {
      var links = el('span', { 'class': 'finding-scenarios' });
      arr(f.scenarios).forEach(function (id, i) {
        if (i > 0) { links.appendChild(document.createTextNode(' ')); }
        links.appendChild(id in indexByID ? el('a', { 'class': 'scenario-link', href: '#s-' + indexByID[id] }, str(id)) : el('span', null, str(id)));
      });
      var li = el('li', { 'class': 'contract-finding', 'data-route': f.route, 'data-location': f.location },
        el('div', null, el('code', { 'class': 'finding-route' }, str(f.route)), ' ',
          el('code', { 'class': 'finding-location' }, str(f.location)), ': ',
          el('span', { 'class': 'finding-message' }, str(f.message))),
        f.schema ? el('div', { 'class': 'finding-schema' }, 'Contract: ' + str(f.schema)) : null,
        el('div', null, 'Seen ' + (f.occurrences || 0) + ' times, in ', links));
      if (f.example) { li.appendChild(exchange(f.example)); }
      fl.appendChild(li);
    });
    fbox.appendChild(fl);
  }

  // Requirements.
  var reqBody = document.querySelector('#requirements tbody');
  arr(data.requirements).forEach(function (r) {
    var links = el('td');
    arr(r.scenarios).forEach(function (id, i) {
      if (i > 0) {
        links.appendChild(document.createTextNode(' '));
      }
      if (id in indexByID) {
        links.appendChild(el('a', { 'class': 'scenario-link', href: '#s-' + indexByID[id] }, str(id)));
      } else {
        links.appendChild(el('span', { 'class': 'scenario-link' }, str(id)));
      }
    });
    reqBody.appendChild(el('tr', { 'data-requirement': r.id, 'data-level': r.level, 'data-profile': r.profile, 'data-status': r.status },
      el('td', null, str(r.id)), el('td', null, str(r.level)), el('td', null, str(r.profile)),
      el('td', null, badge(r.status)), el('td', null, str(r.rule)), links));
  });

  // Scenarios.
  function headers(cls, h) {
    var box = el('div', { 'class': 'headers ' + cls });
    if (!h) { return box; }
    Object.keys(h).sort().forEach(function (name) {
      arr(h[name]).forEach(function (v) { box.appendChild(el('div', null, name + ': ' + str(v))); });
    });
    return box;
  }
  function exchange(x) {
    var code = Number(x.status || 0);
    var d = el('details', { 'class': 'exchange', 'data-method': x.method, 'data-status-code': String(code) },
      el('summary', null, str(x.method) + ' ', el('span', { 'class': 'exchange-url' }, str(x.url)),
        ' → ' + (code || 'no response') + ' (' + (x.durationMs || 0) + ' ms)'));
    var violations = arr(x.violations);
    if (violations.length) {
      var vl = el('ul', { 'class': 'violations' });
      violations.forEach(function (v) { vl.appendChild(el('li', null, str(v))); });
      d.appendChild(vl);
    }
    d.appendChild(el('div', { 'class': 'label' }, 'Request headers'));
    d.appendChild(headers('request-headers', x.requestHeaders));
    if (x.requestBody) { d.appendChild(el('div', { 'class': 'label' }, 'Request body')); d.appendChild(el('pre', { 'class': 'request-body' }, str(x.requestBody))); }
    d.appendChild(el('div', { 'class': 'label' }, 'Response headers'));
    d.appendChild(headers('response-headers', x.responseHeaders));
    if (x.responseBody) { d.appendChild(el('div', { 'class': 'label' }, 'Response body')); d.appendChild(el('pre', { 'class': 'response-body' }, str(x.responseBody))); }
    var events = arr(x.events);
    if (events.length) {
      var ol = el('ol');
      events.forEach(function (ev) {
        ol.appendChild(el('li', { 'class': 'event', 'data-event': ev.event },
          (ev.id ? 'id: ' + str(ev.id) + '\n' : '') + 'event: ' + str(ev.event) + '\ndata: ' + str(ev.data)));
      });
      d.appendChild(el('details', { 'class': 'events' }, el('summary', null, 'Server-sent events (' + events.length + ')'), ol));
    }
    return d;
  }
  function step(s) {
    var li = el('li', { 'class': 'step', 'data-status': s.status },
      el('span', { 'class': 'step-keyword' }, str(s.keyword).trim()),
      el('span', { 'class': 'step-text' }, str(s.text)), ' ', badge(s.status));
    if (s.docString) { li.appendChild(el('pre', { 'class': 'step-docstring' }, str(s.docString))); }
    var table = arr(s.table);
    if (table.length) {
      var t = el('table', { 'class': 'step-table' });
      table.forEach(function (row) {
        var tr = el('tr');
        arr(row).forEach(function (c) { tr.appendChild(el('td', null, str(c))); });
        t.appendChild(tr);
      });
      li.appendChild(t);
    }
    if (s.error) { li.appendChild(el('pre', { 'class': 'step-error' }, str(s.error))); }
    return li;
  }
  function failure(f) {
    var rule = f.rule || (f.requirement && requirementsByID[f.requirement] ? requirementsByID[f.requirement].rule : '');
    var dl = el('dl', { 'class': 'failure' });
    [['Requirement', 'failure-requirement', f.requirement], ['Rule', 'failure-rule', rule],
      ['Operation', 'failure-operation', f.operation], ['Got', 'failure-got', f.got], ['Want', 'failure-want', f.want]].forEach(function (p) {
      dl.appendChild(el('dt', null, p[0]));
      dl.appendChild(el('dd', { 'class': p[1] }, str(p[2])));
    });
    return dl;
  }

  var container = document.getElementById('scenarios');
  var frag = document.createDocumentFragment();
  var counts = { all: scenarios.length };
  // Failures first (those the baseline does not excuse before those it does), then what did not
  // run to a verdict, then the rest, each group in report order; ids keep the report's index.
  var RANK = { 'failed': 0, 'harness-error': 0, 'undefined': 1, 'pending': 1 };
  var order = scenarios.map(function (s, i) { return i; });
  var rank = function (i) {
    var s = scenarios[i];
    var r = s.status in RANK ? RANK[s.status] : 2;
    return r === 0 && s.expected ? 0.5 : r;
  };
  order.sort(function (a, b) { return rank(a) - rank(b) || a - b; });
  order.forEach(function (i) {
    var s = scenarios[i];
    counts[s.status] = (counts[s.status] || 0) + 1;
    var reqs = el('ul', { 'class': 'scenario-requirements' });
    arr(s.requirements).forEach(function (r) { reqs.appendChild(el('li', null, str(r))); });
    var art = el('article', {
      'class': 'scenario', id: 's-' + i, 'data-status': s.status, 'data-profile': s.profile,
      'data-scenario-id': s.id, 'data-feature': s.feature, 'data-expected': s.expected ? 'true' : null
    });
    art.appendChild(el('div', { 'class': 'scenario-head' }, badge(s.status), el('h3', { 'class': 'scenario-name' }, str(s.name))));
    art.appendChild(el('div', { 'class': 'scenario-meta' },
      el('span', { 'class': 'scenario-feature' }, str(s.feature)),
      el('span', { 'class': 'scenario-id' }, str(s.id)),
      el('span', { 'class': 'scenario-profile' }, str(s.profile)),
      el('span', null, reqs),
      el('span', null, (Number(s.durationMs || 0) / 1000).toFixed(3) + ' s')));
    if (s.expected) { art.appendChild(el('p', { 'class': 'scenario-expected' }, 'Expected to fail by the baseline: ' + str(s.expected))); }
    if (s.message) { art.appendChild(el('p', { 'class': 'scenario-message' }, str(s.message))); }
    var notes = arr(s.notes);
    if (notes.length) {
      var nl = el('ul', { 'class': 'scenario-notes' });
      notes.forEach(function (n) { nl.appendChild(el('li', null, str(n))); });
      art.appendChild(nl);
    }
    if (s.failure) { art.appendChild(failure(s.failure)); }
    var open = s.status === 'failed' || s.status === 'harness-error';
    var body = el('details', { 'class': 'scenario-body', open: open },
      el('summary', null, 'Steps (' + arr(s.steps).length + ')'));
    var ol = el('ol', { 'class': 'steps' });
    arr(s.steps).forEach(function (st) { ol.appendChild(step(st)); });
    body.appendChild(ol);
    art.appendChild(body);
    var xs = arr(s.exchanges);
    if (xs.length) {
      var ex = el('details', { 'class': 'exchanges' }, el('summary', null, 'HTTP exchanges (' + xs.length + ')'));
      xs.forEach(function (x) { ex.appendChild(exchange(x)); });
      art.appendChild(ex);
    }
    if (s.systemOutput) {
      art.appendChild(el('details', { 'class': 'system-output' },
        el('summary', null, 'What the system printed'), el('pre', null, str(s.systemOutput))));
    }
    frag.appendChild(art);
  });
  container.appendChild(frag);

  // Filters.
  var filters = document.getElementById('filters');
  ['all'].concat(STATUSES).forEach(function (f) {
    filters.appendChild(el('button', { type: 'button', 'data-filter': f, 'aria-pressed': 'false' },
      LABELS[f], el('span', { 'class': 'count' }, String(counts[f] || 0))));
  });
  var articles = container.querySelectorAll('article.scenario');
  function applyFilter(f) {
    var shown = 0;
    for (var i = 0; i < articles.length; i++) {
      var hide = f !== 'all' && articles[i].getAttribute('data-status') !== f;
      articles[i].hidden = hide;
      if (!hide) { shown++; }
    }
    container.setAttribute('data-filter', f);
    filters.querySelectorAll('button').forEach(function (b) {
      var on = b.getAttribute('data-filter') === f;
      b.setAttribute('aria-pressed', on ? 'true' : 'false');
      b.classList.toggle('active', on);
    });
    document.getElementById('filter-empty').hidden = shown > 0;
  }
  filters.addEventListener('click', function (e) {
    var b = e.target.closest('button[data-filter]');
    if (b) { applyFilter(b.getAttribute('data-filter')); }
  });
  totalsList.addEventListener('click', function (e) {
    var a = e.target.closest('a.total-link[data-filter]');
    if (a) { applyFilter(a.getAttribute('data-filter')); }
  });
  function revealTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && /^s-\d+$/.test(id) ? document.getElementById(id) : null;
    if (target && target.hidden) {
      applyFilter('all');
      target.scrollIntoView();
    }
  }
  document.getElementById('requirements').addEventListener('click', function (e) {
    var a = e.target.closest('a.scenario-link');
    var target = a ? document.getElementById(a.getAttribute('href').slice(1)) : null;
    if (target && target.hidden) { applyFilter('all'); }
  });
  window.addEventListener('hashchange', revealTarget);
  applyFilter('all');
  revealTarget();
  document.body.setAttribute('data-ready', 'true');
})();
