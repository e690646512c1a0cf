// junit.mjs reads a junit.xml with test-results-parser, a JUnit reader CI dashboards use, and
// prints one JSON line: the totals it counts and each test case's status (PASS, FAIL or SKIP) by
// suite and name; {"ok": false, "error": "..."} when it cannot read the file.
//
//   node junit.mjs /abs/path/junit.xml
import { parse } from 'test-results-parser';

try {
  const r = parse({ type: 'junit', files: [process.argv[2]] });
  const cases = [];
  for (const s of r.suites) {
    for (const c of s.cases) {
      cases.push({ suite: s.name, name: c.name, status: c.status });
    }
  }
  console.log(JSON.stringify({ ok: true, total: r.total, passed: r.passed, failed: r.failed, errors: r.errors, skipped: r.skipped, cases }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: String(e && e.message ? e.message : e) }));
}
