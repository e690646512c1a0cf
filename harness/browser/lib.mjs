// Shared pieces of the browser scripts: launching Debian's chromium through playwright-core, and
// the line protocol the Go tests read (one JSON object per line on stdout).

import { chromium } from 'playwright-core';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export const CHROMIUM = '/usr/bin/chromium';

// Without the background-networking switches chromium keeps trying to reach its update, sync and
// safe-browsing services, which on a machine without a network only produces refused connections.
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

// launch starts chromium on a fresh, empty profile directory and returns its context (which
// already has one page) and a close function that also removes the profile.
export async function launch() {
  const profile = await fs.mkdtemp(path.join(os.tmpdir(), 'loomcheck-chromium-'));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1280, height: 900 },
    });
  } catch (err) {
    await fs.rm(profile, { recursive: true, force: true });
    throw err;
  }
  const page = context.pages()[0] ?? (await context.newPage());
  const close = async () => {
    try {
      await context.close();
    } finally {
      await fs.rm(profile, { recursive: true, force: true });
    }
  };
  return { context, page, close };
}

// emit writes one protocol line.
export function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// watchPage records what a page says and asks for: console messages, uncaught errors, every
// request with the headers the tests care about, and failed requests.
export function watchPage(page) {
  const seen = { console: [], pageErrors: [], requests: [], failedRequests: [] };
  page.on('console', (msg) => {
    seen.console.push({ type: msg.type(), text: msg.text(), location: msg.location() });
  });
  page.on('pageerror', (err) => {
    seen.pageErrors.push(String(err && err.stack ? err.stack : err));
  });
  const entries = new WeakMap();
  page.on('request', (req) => {
    const entry = { url: req.url(), method: req.method(), resourceType: req.resourceType(), status: null };
    entries.set(req, entry);
    seen.requests.push(entry);
    // allHeaders includes those the network stack adds (Cookie among them); it settles once the
    // request has gone out, so fill the entry in later.
    entry.pending = req
      .allHeaders()
      .then((h) => {
        entry.lastEventId = h['last-event-id'] ?? null;
        entry.cookies = (h['cookie'] ?? '')
          .split(';')
          .map((c) => c.trim().split('=')[0])
          .filter((name) => name !== '');
      })
      .catch(() => {});
  });
  page.on('response', (resp) => {
    const entry = entries.get(resp.request());
    if (entry) entry.status = resp.status();
  });
  page.on('requestfailed', (req) => {
    seen.failedRequests.push({ url: req.url(), error: req.failure()?.errorText ?? '' });
  });
  return seen;
}

// settle waits (at most timeoutMs) for the header look-ups watchPage started and drops the
// bookkeeping field; a request whose headers never became known keeps headersKnown: false.
export async function settle(seen, timeoutMs = 5000) {
  let timer;
  const deadline = new Promise((resolve) => {
    timer = setTimeout(resolve, timeoutMs);
  });
  await Promise.race([Promise.all(seen.requests.map((r) => r.pending)), deadline]);
  clearTimeout(timer);
  for (const r of seen.requests) {
    delete r.pending;
    r.headersKnown = r.cookies !== undefined;
  }
  return seen;
}

// run calls main, reporting an uncaught failure as a {"fatal": ...} line and exit status 1.
export function run(main) {
  main().then(
    (code) => process.exit(code ?? 0),
    (err) => {
      emit({ fatal: String(err && err.stack ? err.stack : err) });
      process.exit(1);
    },
  );
}
