// A `node --test` reporter that writes a JUnit report middle reads (orchestrator/checks/runners/node.py):
// one <testcase> per test with its file (relative to where the run started) and its name under its
// suites ("outer > inner > test"), so two files' same-named tests are two tests, and an identity
// does not change when an unrelated edit moves a line. Node's own junit reporter gives no file.
import { relative, isAbsolute } from 'node:path';

const esc = (s) => String(s).replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c])
  // XML 1.0 cannot carry most control characters, which a test name may hold
  .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, '?');
const rel = (p) => (p && isAbsolute(p) ? relative(process.cwd(), p) || p : p || '');

export default async function* middleJunit(source) {
  const stacks = new Map(); // file -> the names of the suites a test at each nesting is in
  const cases = [];
  for await (const event of source) {
    const data = event.data || {};
    const file = data.file || '';
    if (event.type === 'test:start') {
      const stack = stacks.get(file) || [];
      stack.length = data.nesting;
      stack.push(data.name);
      stacks.set(file, stack);
      continue;
    }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const details = data.details || {};
    const error = details.error || {};
    const failureType = error.failureType || '';
    // A suite is a test of its own only when it failed by itself (a hook, its body): its
    // failing tests are already each a failure.
    if (details.type === 'suite' && (event.type === 'test:pass' || failureType === 'subtestsFailed')) continue;
    const path = (stacks.get(file) || []).slice(0, data.nesting).concat([data.name]).map(rel);
    // A file that could not even load is reported as a test named by its path.
    const collection = file && data.nesting === 0 && data.name === file;
    let outcome = event.type === 'test:pass' ? 'passed' : 'failed';
    // skipped, or a todo (whose failure does not fail the run either)
    if (data.skip !== undefined || data.todo !== undefined) outcome = 'skipped';
    const cause = error.cause || error;
    const message = (cause && cause.message ? String(cause.message) : String(failureType)).split('\n')[0];
    cases.push({ file: rel(file), name: path.join(' > '), outcome, message: collection ? `Test suite failed to run: ${message}` : message });
  }
  let xml = '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n';
  for (const c of cases) {
    const head = `  <testcase classname="" file="${esc(c.file)}" name="${esc(c.name)}"`;
    if (c.outcome === 'passed') xml += `${head}/>\n`;
    else if (c.outcome === 'skipped') xml += `${head}><skipped/></testcase>\n`;
    else xml += `${head}><failure message="${esc(c.message)}"/></testcase>\n`;
  }
  yield `${xml}</testsuites>\n`;
}
