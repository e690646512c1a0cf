// stream.mjs drives a page that follows a session stream over the WebSocket with streamclient.js,
// while the Go test (TestWebSocketResume) kills and restarts the server around it.
//
//   node stream.mjs --page URL --cookie-url URL --token TOKEN
//
// It puts TOKEN into the loom_token cookie for --cookie-url (the server: a browser's WebSocket
// cannot send an Authorization header, so the upgrade authenticates with the cookie), opens --page
// and prints {"ready": true}. Then it reads commands from standard input, one JSON object per
// line, and answers each on standard output:
//
//   {"op": "wait", "expr": "<JS expression>", "timeoutMs": N}
//       evaluates expr in the page until it is truthy; answers {"ok": true} or
//       {"ok": false, "error": "...", "state": {...}} when timeoutMs passes first
//   {"op": "finish"}
//       stops the page's client and answers {"result": {...}}: what window.result() returns, the
//       console, page errors, requests and WebSockets ({url, frames, closed}); then closes the
//       browser and exits
//
// Standard input closing before "finish" closes the browser and exits with status 1.

import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { emit, launch, run, settle, watchPage } from './lib.mjs';

run(async () => {
  const { values } = parseArgs({
    options: {
      page: { type: 'string' },
      'cookie-url': { type: 'string' },
      token: { type: 'string' },
    },
  });
  for (const name of ['page', 'cookie-url', 'token']) {
    if (!values[name]) throw new Error(`--${name} is required`);
  }

  const browser = await launch();
  try {
    const { context, page } = browser;
    await context.addCookies([
      { name: 'loom_token', value: values.token, url: values['cookie-url'], httpOnly: true, sameSite: 'Lax' },
    ]);
    const seen = watchPage(page);
    // Playwright reports a page's WebSockets apart from its requests.
    seen.websockets = [];
    page.on('websocket', (ws) => {
      const entry = { url: ws.url(), frames: 0, closed: false };
      seen.websockets.push(entry);
      ws.on('framereceived', () => entry.frames++);
      ws.on('close', () => (entry.closed = true));
    });
    await page.goto(values.page, { waitUntil: 'load' });
    emit({ ready: true });

    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    for await (const line of lines) {
      if (line.trim() === '') continue;
      const cmd = JSON.parse(line);
      if (cmd.op === 'wait') {
        try {
          await page.waitForFunction(cmd.expr, undefined, { timeout: cmd.timeoutMs ?? 10000, polling: 'raf' });
          emit({ ok: true });
        } catch (err) {
          const state = await page.evaluate(() => window.summary()).catch(() => null);
          emit({ ok: false, error: String(err && err.message ? err.message : err), state });
        }
      } else if (cmd.op === 'finish') {
        const recorded = await page.evaluate(() => {
          window.stream.stop();
          return window.result();
        });
        await settle(seen);
        emit({ result: { ...recorded, ...seen } });
        return 0;
      } else {
        emit({ ok: false, error: `unknown op ${JSON.stringify(cmd.op)}` });
      }
    }
    return 1;
  } finally {
    await browser.close();
  }
});
