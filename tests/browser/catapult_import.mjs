// Loads Chrome traces into catapult's trace importer (the code behind chrome://tracing, as Debian's
// golang-1.19-src ships it for `go tool trace`) in headless Chromium, and checks what a user would
// see: no import warnings, every flow bound at both ends, no slice nested under a slice that does
// not contain it, every X (and B/E pair) a slice, the memory counters and the tensor objects present.
//
//   node catapult_import.mjs [--verbose] [--viewer trace_viewer_full.html] [--chromium /usr/bin/chromium] FILE|DIR...
//
// A directory stands for the *.json and *.json.gz files under it. Prints each trace with a
// problem (every trace with --verbose) and a summary; exits 1 when any trace has a problem, 2 on
// bad usage.
import { chromium } from 'playwright-core';
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';

const args = process.argv.slice(2);
let viewer = '/usr/share/go-1.19/src/cmd/trace/static/trace_viewer_full.html';
let executable = process.env.CHROMIUM || '/usr/bin/chromium';
const inputs = [];
let verbose = false;
for (let i = 0; i < args.length; ++i) {
  if (args[i] === '--viewer') viewer = args[++i];
  else if (args[i] === '--chromium') executable = args[++i];
  else if (args[i] === '--verbose' || args[i] === '-v') verbose = true;
  else if (args[i] === '--help' || args[i] === '-h') {
    console.log('usage: node catapult_import.mjs [--verbose] [--viewer HTML] [--chromium BINARY] FILE|DIR...');
    process.exit(0);
  } else inputs.push(args[i]);
}
if (inputs.length === 0) {
  console.error('catapult_import: give trace files or directories (see --help)');
  process.exit(2);
}
for (const [what, path] of [['viewer', viewer], ['chromium', executable]]) {
  if (!existsSync(path)) {
    console.error(`catapult_import: no ${what} at ${path} (scripts/install-deps.sh installs chromium and golang-1.19-src)`);
    process.exit(2);
  }
}

function collect(path, out) {
  if (statSync(path).isDirectory()) {
    for (const name of readdirSync(path).sort()) collect(join(path, name), out);
  } else if (path.endsWith('.json') || path.endsWith('.json.gz')) {
    out.push(path);
  }
}
const files = [];
for (const input of inputs) collect(input, files);

// What the trace says it holds, counted from the JSON itself.
function expected(trace) {
  const events = Array.isArray(trace) ? trace : trace.traceEvents || [];
  const flows = new Set(), counters = new Set(), objects = new Set();
  let slices = 0;
  for (const e of events) {
    if (e.ph === 'X' || e.ph === 'B') ++slices;  // a B opens one slice (its E closes it)
    if (e.ph === 'X' && e.flow_out) flows.add(`v2/${e.bind_id}`);  // flow events v2
    if (e.ph === 's') flows.add(`${e.cat}/${e.name}/${e.id}`);
    else if (e.ph === 'C') counters.add(`${e.pid}/${e.name}`);
    else if (e.ph === 'N') objects.add(`${e.pid}/${e.id}`);
  }
  return { slices, flows: flows.size, counters: counters.size, objects: objects.size };
}

const browser = await chromium.launch({ executablePath: executable, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
let failed = 0;
try {
  const page = await browser.newPage();
  // The viewer is a Polymer 1 HTML import: served as `go tool trace` serves it, with the
  // webcomponents polyfill beside it, from a host that never reaches the network.
  const staticDir = dirname(viewer);
  await page.route('http://catapult.invalid/**', (route) => {
    const path = new URL(route.request().url()).pathname;
    if (path === '/') {
      return route.fulfill({
        contentType: 'text/html',
        body: '<html><head><script src="/static/webcomponents.min.js"></script>' +
              `<link rel="import" href="/static/${basename(viewer)}"></head><body></body></html>`,
      });
    }
    const file = join(staticDir, basename(path));
    if (!path.startsWith('/static/') || !existsSync(file)) return route.fulfill({ status: 404, body: '' });
    return route.fulfill({ contentType: file.endsWith('.js') ? 'text/javascript' : 'text/html', body: readFileSync(file) });
  });
  await page.goto('http://catapult.invalid/');
  await page.waitForFunction(() => typeof tr !== 'undefined' && tr.importer && tr.Model, null, { timeout: 60000 });
  for (const file of files) {
    let bytes = readFileSync(file);
    if (file.endsWith('.gz')) bytes = gunzipSync(bytes);
    const text = bytes.toString('utf8');
    const want = expected(JSON.parse(text));
    const got = await page.evaluate((text) => {
      const model = new tr.Model();
      const options = new tr.importer.ImportOptions();
      options.showImportWarnings = false;
      new tr.importer.Import(model, options).importTraces([text]);
      const eps = 1e-6;  // ms: 1 ns
      let slices = 0;
      const misnested = [];
      for (const thread of model.getAllThreads()) {
        for (const s of thread.sliceGroup.slices) {
          ++slices;
          const p = s.parentSlice;
          if (p && (s.start < p.start - eps || s.end > p.end + eps))
            misnested.push(`${s.title} [${s.start}, ${s.end}] under ${p.title} [${p.start}, ${p.end}]`);
        }
      }
      const unbound = model.flowEvents.filter((f) => !f.startSlice || !f.endSlice).length;
      return {
        warnings: model.importWarnings.map((w) => `${w.type}: ${w.message}`),
        slices,
        flows: model.flowEvents.length,
        unbound,
        misnested,
        counters: model.getAllCounters().length,
        objects: model.getAllProcesses().reduce((n, p) => n + p.objects.getAllObjectInstances().length, 0),
      };
    }, text);
    const problems = [...got.warnings.map((w) => `import warning ${w}`)];
    if (got.slices !== want.slices) problems.push(`${got.slices} slices drawn of ${want.slices} X and B events`);
    if (got.flows !== want.flows) problems.push(`${got.flows} flows of ${want.flows} in the file`);
    if (got.unbound) problems.push(`${got.unbound} flows not bound at both ends`);
    for (const m of got.misnested.slice(0, 5)) problems.push(`slice nested outside its parent: ${m}`);
    if (got.misnested.length > 5) problems.push(`... ${got.misnested.length - 5} more mis-nested slices`);
    if (got.counters !== want.counters) problems.push(`${got.counters} counters of ${want.counters} in the file`);
    if (got.objects !== want.objects) problems.push(`${got.objects} tensor objects of ${want.objects} in the file`);
    const summary = `${got.slices} slices, ${got.flows} flows, ${got.counters} counters, ${got.objects} objects`;
    if (problems.length) {
      ++failed;
      console.log(`FAIL ${file} (${summary})`);
      for (const p of problems) console.log(`  ${p}`);
    } else if (verbose) {
      console.log(`ok   ${file} (${summary})`);
    }
  }
} finally {
  await browser.close();
}
console.log(`${files.length - failed} of ${files.length} traces import cleanly into catapult`);
process.exit(failed ? 1 : 0);
