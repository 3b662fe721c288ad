// Loaded by middle through NODE_OPTIONS' --require behind a wrapper (wrapper.py: `make test`, a
// script, an `npm test` whose script runs a runner among other things): in the node process that
// runs jest's, vitest's or mocha's own command line (its bin), it adds the options a line running
// that runner gets (jest.py, vitest.py, mocha.py), so the runner writes its report, one file per
// process (`{pid}` in MIDDLE_JEST_JSON, MIDDLE_VITEST_JSON, MIDDLE_MOCHA_JUNIT). A --require'd file
// runs before an ES-module main too (vitest's bin), which reads process.argv after it. Any other
// node process (npm, a build step, a runner's own workers) is left as it is, as is a command line
// that names its own report or reporter, or has a `--` (what follows it is not options): those are
// judged without a report. A vitest line's own `--bail` (`--bail=1`, `--bail 1`) is taken out of
// its argv before vitest reads it (vitest refuses `--bail=0` beside another `--bail`, and a run that
// stops at its first failures is not every test), as vitest.py takes it out of a line running vitest.
'use strict';
(function middleRunnerReport() {
  const main = process.argv[1];
  if (!main) return;
  let real;
  try {
    real = require('fs').realpathSync(main);
  } catch (e) {
    return;
  }
  const args = process.argv.slice(2);
  const has = (re) => args.some((a) => re.test(a));
  const at = (template) => template.split('{pid}').join(String(process.pid));
  const jest = process.env.MIDDLE_JEST_JSON;
  if (jest && /[\\/]jest(?:-cli)?[\\/]bin[\\/]jest(?:\.js)?$/.test(real)) {
    if (has(/^(?:--|--json|--outputFile.*)$/)) return;
    // --bail=0 last: every test runs, whatever a `--bail` before it or a config file says (jest.py)
    process.argv.push('--json', '--testLocationInResults', '--outputFile=' + at(jest), '--bail=0');
    return;
  }
  const vitest = process.env.MIDDLE_VITEST_JSON;
  if (vitest && /[\\/]vitest[\\/]vitest\.mjs$/.test(real)) {
    if (has(/^(?:--|--outputFile.*|--reporter.*)$/)) return;
    // the line's own --bail out (with its count, `--bail 1`), so the --bail=0 below is the only one
    const kept = [];
    for (let i = 0; i < args.length; i++) {
      if (/^--bail(?:=.*)?$/.test(args[i])) {
        if (args[i] === '--bail' && /^\d+$/.test(args[i + 1] || '')) i++;
        continue;
      }
      kept.push(args[i]);
    }
    process.argv.splice(2, args.length, ...kept);
    process.argv.push('--reporter=default', '--reporter=json', '--outputFile.json=' + at(vitest), '--bail=0');
    return;
  }
  const mocha = process.env.MIDDLE_MOCHA_JUNIT;
  const reporter = process.env.MIDDLE_MOCHA_REPORTER;
  if (mocha && reporter && /[\\/]mocha[\\/](?:bin[\\/]_?mocha(?:\.js)?|lib[\\/]cli[\\/]cli\.js)$/.test(real)) {
    // mocha's bin may run its cli in a child node: that one sees the reporter already given, and
    // writes where this process said (MIDDLE_MOCHA_REPORT, which the child inherits)
    if (has(/^(?:--|--reporter.*|-R)$/)) return;
    process.env.MIDDLE_MOCHA_REPORT = at(mocha);
    // --no-bail last: every test runs, past a `--bail` before it or .mocharc's (mocha.py)
    process.argv.push('--reporter=' + reporter, '--no-bail');
  }
})();
