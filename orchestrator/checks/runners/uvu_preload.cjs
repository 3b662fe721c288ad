// Loaded by middle through NODE_OPTIONS' --require behind a wrapper (wrapper.py: `npm test`, `make
// test`, a line running `uvu`): in the node process that runs uvu's own command line (its bin.js)
// and no other, `uvu` is middle's wrapper of it (uvu_core.cjs), for an ES module's import (a resolve
// hook, uvu_hooks.mjs, through node:module's register, Node 20.6 and later) and for require.
'use strict';
(function middleUvuReport() {
  const main = process.argv[1];
  if (!process.env.MIDDLE_UVU_JSON || !main) return;
  const path = require('path');
  let real;
  try {
    real = require('fs').realpathSync(main);
  } catch (e) {
    return;
  }
  if (!/[\\/]uvu[\\/]bin\.js$/.test(real)) return;
  // uvu's own `--bail`/`-b` out of its argv before it reads it: on a base that already fails, a run
  // stopped at its first failure would never run a test a ticket breaks after it
  for (let i = process.argv.length - 1; i >= 2; i--) {
    if (/^(?:--bail(?:=.*)?|-b)$/.test(process.argv[i])) process.argv.splice(i, 1);
  }
  const Module = require('module');
  if (typeof Module.register !== 'function') return; // Node before 20.6: no report, read by its exit code
  // require('uvu') (uvu's own runner, a CommonJS test file, `-r esm`'s loader, which resolves by
  // itself but reads Node's module cache): uvu's CommonJS module is loaded now and its cached
  // exports replaced by the wrapper, so every later require of it gets the wrapper
  let cjs;
  try {
    cjs = require.resolve('uvu', { paths: [path.dirname(real)] });
  } catch (e) {
    return;
  }
  // uvu tells, as it loads, whether its CLI runs it (and so defers its run to the CLI's) by its bin's
  // path in process.argv, which it would see when its runner loads it later: `uvu` on PATH is a
  // symlink (/usr/bin/uvu), so argv gets the bin's real path first (sade reads only what follows it).
  // Were it still taken for a script of its own, it would run its tests twice, print two summaries
  // and the count of runs (wrapper.py) would read the run by its exit code: never a wrong report.
  process.argv[1] = real;
  try {
    require(cjs);
  } catch (e) {
    return; // uvu itself says what is wrong when its runner loads it; no report, read by its exit code
  }
  require.cache[cjs].exports = require('./uvu_core.cjs').wrap(require.cache[cjs].exports);
  // import 'uvu' (uvu's runner without `-r`, an ES module test file): a resolve hook
  Module.register(require('url').pathToFileURL(path.join(__dirname, 'uvu_hooks.mjs')));
})();
