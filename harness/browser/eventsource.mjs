// eventsource.mjs drives a page that follows a conversation's event stream with the browser's own
// EventSource, while the Go test (TestEventSourceResume) changes the world around it.
//
//   node eventsource.mjs --page URL --cookie-url URL --token TOKEN
//
// It puts TOKEN into the loom_token cookie for --cookie-url (the server: EventSource cannot send an
// Authorization header), opens --page and prints {"ready": true}. Then it reads commands from
// standard input, one JSON object per line, and answers each on standard output:
//
//   {"op": "wait", "expr": "<JS expression>", "timeoutMs": N}
//       evaluates expr in the page until it is truthy; answers {"ok": true} or
//       {"ok": false, "error": "..."} when timeoutMs passes first
//   {"op": "finish"}
//       answers {"result": {...}}: everything the page recorded, the console, page errors and
//       requests; then closes the browser and exits
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
        const recorded = await page.evaluate(() => ({
          log: window.log,
          opens: window.opens,
          failures: window.failures,
          readyState: window.stream.readyState,
        }));
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
