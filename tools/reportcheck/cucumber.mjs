// cucumber.mjs reads a cucumber.json with Cucumber's own converter, which accepts a document only
// when it is valid against the schema of one of Cucumber's implementations (cucumber-js,
// cucumber-jvm, cucumber-ruby, behave). It prints one JSON line: {"ok": true, "features": N,
// "scenarios": N, "steps": N} or {"ok": false, "error": "..."}; the exit status is 0 either way,
// 2 when the file cannot be read.
//
//   node cucumber.mjs /abs/path/cucumber.json
import { readFileSync } from 'node:fs';
import { convert } from '@cucumber/cucumber-json-converter';

let doc;
try {
  doc = JSON.parse(readFileSync(process.argv[2], 'utf8'));
} catch (e) {
  console.error(String(e));
  process.exit(2);
}
try {
  const out = convert(doc);
  let scenarios = 0;
  let steps = 0;
  for (const f of out.features) {
    for (const sc of f.elements) {
      scenarios++;
      steps += sc.steps.length;
    }
  }
  console.log(JSON.stringify({ ok: true, implementation: out.implementation, features: out.features.length, scenarios, steps }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: String(e && e.message ? e.message : e).slice(0, 20000) }));
}
