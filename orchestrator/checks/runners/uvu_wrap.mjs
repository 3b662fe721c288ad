// uvu as `import 'uvu'` gets it in uvu's process (uvu_hooks.mjs): uvu's own module, from the URL it
// resolved to, wrapped (uvu_core.cjs)
import { createRequire } from 'node:module';

const { wrap } = createRequire(import.meta.url)('./uvu_core.cjs');
const api = wrap(await import(new URL(import.meta.url).searchParams.get('real')));
export const suite = api.suite;
export const test = api.test;
export const exec = api.exec;
