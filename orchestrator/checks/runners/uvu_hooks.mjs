// Module hooks (registered by uvu_preload.cjs in uvu's process only): the bare specifier `uvu`,
// imported by a test file or by uvu's own runner, resolves to middle's wrapper of it, a module whose
// source is written here: every export of uvu's own module (from where `uvu` would have resolved),
// with `suite`, `test` and `exec` wrapped (uvu_core.cjs). `export *` keeps whatever else a uvu
// version exports (0.3's `QUEUE`).
const WRAP = new URL('./uvu_wrap.mjs', import.meta.url).href; // not a file: its source is load's
const CORE = new URL('./uvu_core.cjs', import.meta.url);

export async function resolve(specifier, context, next) {
  if (specifier === 'uvu' && !(context.parentURL || '').startsWith(WRAP)) {
    const real = await next(specifier, context);
    return { url: `${WRAP}?real=${encodeURIComponent(real.url)}`, format: 'module', shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (!url.startsWith(WRAP + '?')) return next(url, context);
  const real = JSON.stringify(new URL(url).searchParams.get('real'));
  const source = [
    `import { createRequire } from 'node:module';`,
    `import * as real from ${real};`,
    `export * from ${real};`,
    `const api = createRequire(${JSON.stringify(CORE.href)})(${JSON.stringify(decodeURIComponent(CORE.pathname))})`
      + `.wrap(real);`,
    `export const suite = api.suite;`,
    `export const test = api.test;`,
    `export const exec = api.exec;`,
  ].join('\n');
  return { format: 'module', source, shortCircuit: true };
}
