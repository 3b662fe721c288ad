// A module resolve hook (registered by uvu_preload.cjs in uvu's process only): the bare specifier
// `uvu`, imported by a test file or by uvu's own runner, resolves to middle's wrapper of it
// (uvu_wrap.mjs), which imports the real one from where it would have resolved.
const WRAP = new URL('./uvu_wrap.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier === 'uvu' && !(context.parentURL || '').startsWith(WRAP)) {
    const real = await next(specifier, context);
    return { url: `${WRAP}?real=${encodeURIComponent(real.url)}`, format: 'module', shortCircuit: true };
  }
  return next(specifier, context);
}
