// report.mjs opens a written report.html from disk in chromium, reads the rendered page through
// the hooks documented at the top of harness/report/html/report.html, presses the "failed"
// filter, takes a full-page screenshot and prints one JSON object on standard output for the Go
// test (TestHTMLReportRenders) to judge.
//
//   node report.mjs --file /abs/path/report.html --screenshot /abs/path/shot.png --flag NAME
//
// --flag names the window property the test's script-injection payloads would set if they ever ran.

import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { emit, launch, run, settle, watchPage } from './lib.mjs';

run(async () => {
  const { values } = parseArgs({
    options: {
      file: { type: 'string' },
      screenshot: { type: 'string' },
      flag: { type: 'string' },
      'timeout-ms': { type: 'string', default: '15000' },
    },
  });
  for (const name of ['file', 'screenshot', 'flag']) {
    if (!values[name]) throw new Error(`--${name} is required`);
  }
  const timeout = Number(values['timeout-ms']);
  const url = pathToFileURL(values.file).href;

  const browser = await launch();
  try {
    const { page } = browser;
    const seen = watchPage(page);
    await page.goto(url, { waitUntil: 'load', timeout });
    await page.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout });

    const scenarioState = () =>
      page.$$eval('article.scenario', (arts) =>
        arts.map((a) => ({
          id: a.id,
          scenarioId: a.getAttribute('data-scenario-id'),
          status: a.getAttribute('data-status'),
          hidden: a.hidden,
          visible: a.offsetParent !== null,
          name: a.querySelector('.scenario-name')?.textContent ?? null,
          nameElements: a.querySelector('.scenario-name')?.children.length ?? -1,
        })),
      );

    const before = await page.evaluate((flag) => {
      const verdict = document.getElementById('verdict');
      const attr = (el, name) => (el ? el.getAttribute(name) : null);
      const count = (sel) => document.querySelector(sel)?.textContent ?? null;
      return {
        url: location.href,
        verdict: verdict
          ? {
              conformant: attr(verdict, 'data-conformant'),
              exitCode: attr(verdict, 'data-exit-code'),
              className: verdict.className,
              text: verdict.textContent,
            }
          : null,
        profiles: [...document.querySelectorAll('#profiles tbody tr')].map((tr) => ({
          profile: attr(tr, 'data-profile'),
          claimed: attr(tr, 'data-claimed'),
          conformant: attr(tr, 'data-conformant'),
        })),
        requirements: [...document.querySelectorAll('#requirements tbody tr')].map((tr) => ({
          requirement: attr(tr, 'data-requirement'),
          status: attr(tr, 'data-status'),
          links: tr.querySelectorAll('a.scenario-link').length,
        })),
        totals: Object.fromEntries(
          [...document.querySelectorAll('#totals [data-total]')].map((li) => [
            attr(li, 'data-total'),
            li.querySelector('.count')?.textContent ?? null,
          ]),
        ),
        filterCounts: Object.fromEntries(
          [...document.querySelectorAll('#filters button[data-filter]')].map((b) => [
            attr(b, 'data-filter'),
            b.querySelector('.count')?.textContent ?? null,
          ]),
        ),
        filter: attr(document.getElementById('scenarios'), 'data-filter'),
        findings: [...document.querySelectorAll('#contract-findings li.contract-finding')].map((li) => ({
          route: attr(li, 'data-route'),
          location: attr(li, 'data-location'),
          message: li.querySelector('.finding-message')?.textContent ?? null,
          links: li.querySelectorAll('.finding-scenarios a.scenario-link').length,
          examples: li.querySelectorAll('details.exchange').length,
        })),
        notes: document.querySelectorAll('article.scenario .scenario-notes li').length,
        systemOutput: [...document.querySelectorAll('article.scenario details.system-output pre')].map((p) => p.textContent),
        failedCount: count('#totals [data-total="failed"] .count'),
        scriptElements: document.scripts.length,
        width: { page: document.documentElement.scrollWidth, viewport: window.innerWidth },
        flag: Object.prototype.hasOwnProperty.call(window, flag) ? String(window[flag]) : null,
        text: document.documentElement.textContent,
      };
    }, values.flag);
    before.scenarios = await scenarioState();

    await page.click('#filters button[data-filter="failed"]', { timeout });
    await page.waitForSelector('#scenarios[data-filter="failed"]', { state: 'attached', timeout });
    const after = await page.evaluate(() => {
      const pressed = document.querySelector('#filters button[aria-pressed="true"]');
      return {
        filter: document.getElementById('scenarios').getAttribute('data-filter'),
        pressed: pressed ? pressed.getAttribute('data-filter') : null,
        pressedActive: pressed ? pressed.classList.contains('active') : false,
        emptyHidden: document.getElementById('filter-empty').hidden,
      };
    });
    after.scenarios = await scenarioState();

    // A count in the summary is a link to its scenarios.
    await page.click('#totals a.total-link[data-filter="harness-error"]', { timeout });
    await page.waitForSelector('#scenarios[data-filter="harness-error"]', { state: 'attached', timeout });
    after.totalLink = await page.evaluate(() => ({
      filter: document.getElementById('scenarios').getAttribute('data-filter'),
      shown: [...document.querySelectorAll('article.scenario')].filter((a) => !a.hidden).map((a) => a.getAttribute('data-status')),
    }));

    // The screenshot is of the page as a reader first sees it.
    await page.click('#filters button[data-filter="all"]', { timeout });
    await page.waitForSelector('#scenarios[data-filter="all"]', { state: 'attached', timeout });
    await page.screenshot({ path: values.screenshot, fullPage: true, timeout });

    const flagAtEnd = await page.evaluate(
      (flag) => (Object.prototype.hasOwnProperty.call(window, flag) ? String(window[flag]) : null),
      values.flag,
    );
    await settle(seen);
    emit({ result: { fileURL: url, before, after, flagAtEnd, ...seen } });
    return 0;
  } finally {
    await browser.close();
  }
});
