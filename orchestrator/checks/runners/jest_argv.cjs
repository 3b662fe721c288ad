// Loaded by middle through NODE_OPTIONS' --require behind a wrapper (wrapper.py: `make test`, a
// script, an `npm test` whose script runs jest among other things): in the node process that runs
// jest's own command line (its bin), it adds the options a line running jest gets (jest.py), so
// jest writes its JSON report, one file per jest process (`{pid}` in MIDDLE_JEST_JSON). Any other
// node process (npm, a build step, jest's own workers) is left as it is, as is a jest command line
// that names its own report or has a `--` (what follows it is not options).
'use strict';
(function middleJestReport() {
  const out = process.env.MIDDLE_JEST_JSON;
  const main = process.argv[1];
  if (!out || !main) return;
  let real;
  try {
    real = require('fs').realpathSync(main);
  } catch (e) {
    return;
  }
  if (!/[\\/]jest(?:-cli)?[\\/]bin[\\/]jest(?:\.js)?$/.test(real)) return;
  const own = process.argv.slice(2).some((a) => a === '--' || a === '--json' || a.startsWith('--outputFile'));
  if (own) return;
  // --bail=0 last: every test runs, whatever a `--bail` before it or a config file says (jest.py)
  const report = '--outputFile=' + out.split('{pid}').join(String(process.pid));
  process.argv.push('--json', '--testLocationInResults', report, '--bail=0');
})();
