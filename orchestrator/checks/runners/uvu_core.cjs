// middle's record of a uvu run, test by test (uvu.py): uvu prints a failing test's name but never a
// passing one's, so its public API (`suite`, `test` and their `.only`, `.skip`, `.before.each`,
// `.after.each`, `.run`, and `exec`) is wrapped here, and each test's outcome is written, at the
// process's exit, to MIDDLE_UVU_JSON ({pid}: this process's id) in jest's JSON shape (jest.py reads
// it). uvu's own internals are not touched: the wrapped functions call uvu's, which runs as always.
'use strict';
const fs = require('fs');
const { fileURLToPath } = require('url');

const records = []; // one per test registered: {file, suite, title, status, message, scheduled}
const wrapped = new WeakMap(); // uvu's module -> its wrapper (the same one for every import)
const HERE = __dirname;

// The test file registering a test: the first stack frame outside middle's files, uvu and node
function caller() {
  for (const line of String(new Error().stack).split('\n').slice(1)) {
    const found = line.match(/\(?((?:file:\/\/)?\/[^()]*?):\d+:\d+\)?\s*$/);
    if (!found) continue;
    const file = found[1].startsWith('file://') ? fileURLToPath(found[1]) : found[1];
    if (file.startsWith(HERE) || /[\\/]node_modules[\\/](?:uvu|esm)[\\/]/.test(file)) continue;
    return file;
  }
  return '';
}

function wrapSuite(real, name) {
  const batch = []; // registered since this suite's last run()
  let lastRun = null; // the record whose handler ran last (an after.each failing names it)
  const register = (fn, only) => function (title, handler) {
    const rec = { file: caller(), suite: name, title: String(title), status: 'pending', message: '', only };
    records.push(rec);
    batch.push(rec);
    return fn.call(this, title, async (ctx) => {
      lastRun = rec;
      try {
        await handler(ctx);
      } catch (err) {
        rec.status = 'failed';
        rec.message = String((err && err.message) || err).split('\n')[0];
        throw err;
      }
      if (rec.status === 'pending') rec.status = 'passed';
    });
  };
  // a before.each or after.each hook that throws fails the test uvu is running (ctx.__test__)
  const hook = (fn) => (handler) => fn((ctx) => Promise.resolve().then(() => handler(ctx)).catch((err) => {
    if (lastRun && ctx && lastRun.title === ctx.__test__) {
      lastRun.status = 'failed';
      lastRun.message = lastRun.message || String((err && err.message) || err).split('\n')[0];
    }
    throw err;
  }));
  const test = register(real, false);
  test.only = register(real.only, true);
  test.skip = function (title, ...rest) {
    records.push({ file: caller(), suite: name, title: String(title), status: 'skipped', message: '', only: false,
                   scheduled: true });
    return real.skip.call(this, title, ...rest);
  };
  test.before = (...a) => real.before(...a);
  test.before.each = hook(real.before.each);
  test.after = (...a) => real.after(...a);
  test.after.each = hook(real.after.each);
  test.run = (...a) => {
    // uvu runs only the `.only` tests of a run that has any: the others are skipped
    const only = batch.some((r) => r.only);
    for (const rec of batch.splice(0)) {
      rec.scheduled = true;
      if (only && !rec.only) rec.status = 'skipped';
    }
    return real.run(...a);
  };
  return test;
}

function wrap(real) {
  if (wrapped.has(real)) return wrapped.get(real);
  // every export kept (a uvu version's own, 0.3's `QUEUE`), the test API wrapped
  const api = {
    ...real,
    suite: (...args) => wrapSuite(real.suite(...args), args[0] ? String(args[0]) : ''),
    test: wrapSuite(real.test, ''),
    exec: (...args) => real.exec(...args),
  };
  wrapped.set(real, api);
  return api;
}

function write() {
  const out = process.env.MIDDLE_UVU_JSON;
  if (!out || !records.length) return;
  const files = new Map();
  for (const rec of records) {
    // a test registered in no run uvu never runs; one scheduled that never finished failed
    // (its before.each threw, or the run stopped)
    const status = !rec.scheduled && rec.status === 'pending' ? 'skipped'
      : rec.status === 'pending' ? 'failed' : rec.status;
    if (!files.has(rec.file)) files.set(rec.file, []);
    files.get(rec.file).push({ ancestorTitles: rec.suite ? [rec.suite] : [], title: rec.title, status,
      failureMessages: status === 'failed' ? [rec.message || 'it did not run to its end'] : [] });
  }
  const testResults = [...files].map(([name, tests]) => ({ name, assertionResults: tests,
    status: tests.some((t) => t.status === 'failed') ? 'failed' : 'passed' }));
  try {
    fs.writeFileSync(out.split('{pid}').join(String(process.pid)), JSON.stringify({ testResults }));
  } catch (e) { /* middle then finds no report, and reads the run by its exit code */ }
}
process.on('exit', write);

module.exports = { wrap };
