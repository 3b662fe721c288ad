// Loaded by middle through NODE_OPTIONS' --require behind a wrapper (wrapper.py: `node test.js`,
// `npm test` whose script runs `node test/a.js; node test/b.js`, `make test`): in a node process that
// runs a script of the project itself (its main file inside the check's folder, not in any
// node_modules: npm, a runner's bin, its workers are not), it writes at the process's exit the
// script's path, relative to that folder, and its exit code, one file per process (`{pid}` in
// MIDDLE_NODE_SCRIPT_JSON). A test file run by plain node with `assert` stops at its first failing
// assertion, so the file is the finest thing that can be told: node_script.py reads each as one
// test, passed or failed by its exit code. A process killed by a signal never gets to 'exit' and
// writes nothing: on the ticket it is a test of the base that did not run. `node --test`'s own
// processes (its children carry NODE_TEST_CONTEXT) are read by its reporter, not here.
'use strict';
(function middleNodeScript() {
  const out = process.env.MIDDLE_NODE_SCRIPT_JSON;
  const root = process.env.MIDDLE_NODE_SCRIPT_ROOT;
  const main = process.argv[1];
  if (!out || !root || !main || process.env.NODE_TEST_CONTEXT) return;
  if (process.execArgv.some((a) => /^--test(?:$|=|-only)/.test(a))) return;
  const fs = require('fs');
  const path = require('path');
  let real;
  try {
    real = fs.realpathSync(main);
  } catch (e) {
    return;
  }
  const rel = path.relative(root, real);
  if (!rel || rel.startsWith('..') || path.isAbsolute(rel)) return; // outside the project
  if (rel.split(path.sep).includes('node_modules')) return; // a package's bin or worker
  // console.assert prints "Assertion failed" and goes on, the exit code untouched (flatted's tests are
  // 55 of them): each call is recorded, its message as its name, so each is a test of its own
  const asserts = [];
  const assert = console.assert;
  console.assert = function middleAssert(value, ...data) {
    let name = '';
    try {
      name = data.length ? require('util').format(...data).split('\n')[0].slice(0, 200) : '';
    } catch (e) {
      name = '';
    }
    asserts.push([name, Boolean(value)]);
    return assert.apply(this, [value, ...data]);
  };
  process.on('exit', (code) => {
    try {
      const file = out.split('{pid}').join(String(process.pid));
      fs.writeFileSync(file, JSON.stringify({ file: rel.split(path.sep).join('/'), code, asserts }));
    } catch (e) {
      // nothing written: on the ticket, a test of the base that did not run
    }
  });
})();
