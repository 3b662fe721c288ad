// A mocha reporter that prints what mocha's default `spec` reporter prints and writes a JUnit report
// middle reads (orchestrator/checks/runners/mocha.py) to $MIDDLE_MOCHA_REPORT: one <testcase> per test
// with its file (relative to where the run started) and its titles ("suite > test"); a failing
// hook is a failure of its own. Mocha takes one reporter only, hence both in one.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

// The mocha running this reporter (a global or a project's own install), found from its command
const Mocha = require(require.resolve('mocha', { paths: [path.dirname(fs.realpathSync(process.argv[1])), process.cwd()] }));

const esc = (s) => String(s).replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c])
  .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, '?');

class MiddleMochaReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const cases = [];
    const add = (test, outcome, err) => {
      const file = test.file ? path.relative(process.cwd(), test.file) : '';
      const titles = typeof test.titlePath === 'function' ? test.titlePath() : [test.fullTitle()];
      const message = err && err.message ? String(err.message).split('\n')[0] : '';
      cases.push({ file, name: titles.join(' > '), outcome, message });
    };
    runner.on('pass', (test) => add(test, 'passed'));
    runner.on('pending', (test) => add(test, 'skipped'));
    runner.on('fail', (test, err) => add(test, 'failed', err));
    runner.once('end', () => {
      let xml = '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n';
      for (const c of cases) {
        const head = `  <testcase classname="" file="${esc(c.file)}" name="${esc(c.name)}"`;
        if (c.outcome === 'passed') xml += `${head}/>\n`;
        else if (c.outcome === 'skipped') xml += `${head}><skipped/></testcase>\n`;
        else xml += `${head}><failure message="${esc(c.message)}"/></testcase>\n`;
      }
      fs.writeFileSync(process.env.MIDDLE_MOCHA_REPORT, `${xml}</testsuites>\n`);
    });
  }
}

module.exports = MiddleMochaReporter;
