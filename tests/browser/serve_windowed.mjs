// End to end in headless Chromium: a big trace in `stepscope serve`'s viewer page, shown through
// server-side windows (trace_window.h) instead of whole. Generates the trace
// (make_big_trace.py; 100,000 slices: ~260,000 events, ~29 MB), opens it, and checks: the page
// is in windowed mode with the overview strip, the first window (the whole trace, down-sampled)
// imports with slices and no import warnings; a narrow range typed into the range inputs is
// shown complete (not down-sampled, flows present) with every event in that range; a drag on the
// overview strip shows another window; nothing is fetched from elsewhere. Saves screenshots and
// two windows (down-sampled and complete) as files, for catapult_import.mjs.
//
//   node serve_windowed.mjs STEPSCOPE_BINARY ARTIFACT_DIR [--slices N]
import { launchChromium, startServe } from './serve_lib.mjs';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const slicesAt = args.indexOf('--slices');
const slices = slicesAt >= 0 ? Number(args.splice(slicesAt, 2)[1]) : 100000;
const [binary, artifacts] = args;
if (!artifacts) {
  console.error('usage: node serve_windowed.mjs STEPSCOPE_BINARY ARTIFACT_DIR [--slices N]');
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });
const here = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'stepscope-windowed-'));
const made = spawnSync('python3', [join(here, 'make_big_trace.py'), join(dir, 'big.json'), '--slices', String(slices)],
                       { stdio: 'inherit' });
if (made.status !== 0) throw new Error('make_big_trace.py failed');
writeFileSync(join(dir, 'broken.json'), '{"traceEvents":[{"ph":"X",');

function fail(message) {
  console.error(`serve_windowed: ${message}`);
  process.exitCode = 1;
}

const { server, url } = await startServe(binary, dir);

// What the page shows: the window, and the imported model's slices, flows, warnings and time span.
const shown = () => {
  const model = window.stepscopeModel;
  let slices = 0;
  for (const thread of model.getAllThreads()) slices += thread.sliceGroup.slices.length;
  return {
    window: window.stepscopeWindow,
    slices,
    flows: model.flowEvents.length,
    counters: model.getAllCounters().length,
    warnings: model.importWarnings.map((w) => w.message),
    spanMs: model.bounds.range,
    windowed: document.body.classList.contains('windowed') && !!document.getElementById('overview'),
    info: document.getElementById('window-info').textContent,
  };
};

const browser = await launchChromium();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  const t0 = Date.now();
  await page.goto(`${url}viewer/big.json`);
  await page.waitForFunction(() => window.stepscopeModel !== undefined && window.stepscopeWindow !== undefined, null,
                             { timeout: 120000, polling: 100 });
  const first = await page.evaluate(shown);
  console.log(`first window in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${JSON.stringify({ ...first, warnings: first.warnings.length })}`);
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(artifacts, 'serve_windowed_overview.png') });
  if (!first.windowed) fail('the page is not in windowed mode (no overview strip)');
  if (!first.window.sampled) fail('the whole trace was not down-sampled');
  if (first.slices === 0) fail('no slices in the first window');
  if (first.warnings.length) fail(`first window: import warnings: ${first.warnings.slice(0, 5).join('; ')}`);
  if (!/zoom in for all/.test(first.info)) fail(`the page does not say the window is down-sampled: ${first.info}`);

  // A narrow range, typed in (ms from the trace's start).
  const before = first.window;
  await page.fill('#window-start', '5.000');
  await page.fill('#window-end', '5.300');
  await page.click('#window-go');
  await page.waitForFunction((old) => window.stepscopeWindow.start !== old, before.start, { timeout: 60000 });
  const narrow = await page.evaluate(shown);
  console.log(`narrow window: ${JSON.stringify({ ...narrow, warnings: narrow.warnings.length })}`);
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(artifacts, 'serve_windowed_narrow.png') });
  const w = narrow.window;
  if (w.sampled) fail('the narrow window is down-sampled');
  if (Math.abs(w.end - w.start - 300) > 0.01) fail(`the narrow window is ${w.end - w.start} µs, not 300`);
  if (narrow.slices === 0) fail('no slices in the narrow window');
  if (narrow.flows === 0) fail('no flows in the narrow window');
  if (narrow.warnings.length) fail(`narrow window: import warnings: ${narrow.warnings.slice(0, 5).join('; ')}`);
  // The model spans the window (its slices may stick out by their own length: at most 3 µs here).
  if (narrow.spanMs * 1000 > 300 + 2 * 3.01) fail(`the narrow window's model spans ${narrow.spanMs} ms`);
  // Every event the server sent lies in the range.
  const check = await page.evaluate(async ({ start, end }) => {
    const r = await fetch(`/api/trace_window/big.json?start=${start}&end=${end}&resolution=1400`);
    const trace = await r.json();
    const outside = trace.traceEvents.filter((e) => e.ph === 'X' && (e.ts > end || e.ts + e.dur < start)).length;
    const counters = trace.traceEvents.filter((e) => e.ph === 'C' && (e.ts > end || e.ts < start)).length;
    return { outside, counters, events: trace.traceEvents.length, text: JSON.stringify(trace) };
  }, w);
  if (check.outside || check.counters) fail(`${check.outside} slices and ${check.counters} counters outside the window`);
  writeFileSync(join(artifacts, 'window_complete.json'), check.text);
  const sampledText = await page.evaluate(async () => (await fetch('/api/trace_window/big.json?resolution=1400')).text());
  writeFileSync(join(artifacts, 'window_sampled.json'), sampledText);

  // "next": the following 300 µs.
  await page.click('#window-next');
  await page.waitForFunction((old) => window.stepscopeWindow.start !== old, w.start, { timeout: 60000 });
  const next = await page.evaluate(shown);
  if (Math.abs(next.window.start - w.end) > 0.01 || Math.abs(next.window.end - next.window.start - 300) > 0.01)
    fail(`"next" after ${w.start}..${w.end} showed ${next.window.start}..${next.window.end}`);
  if (next.warnings.length) fail(`next window: import warnings: ${next.warnings.slice(0, 5).join('; ')}`);

  // A drag on the overview strip: another window.
  const box = await page.locator('#overview').boundingBox();
  await page.mouse.move(box.x + box.width * 0.6, box.y + 20);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.7, box.y + 20, { steps: 5 });
  await page.mouse.up();
  await page.waitForFunction((old) => window.stepscopeWindow.start !== old, next.window.start, { timeout: 60000 });
  const dragged = await page.evaluate(shown);
  console.log(`dragged window: ${JSON.stringify({ ...dragged, warnings: dragged.warnings.length })}`);
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(artifacts, 'serve_windowed_dragged.png') });
  if (dragged.warnings.length) fail(`dragged window: import warnings: ${dragged.warnings.slice(0, 5).join('; ')}`);
  if (dragged.slices === 0) fail('no slices in the dragged window');

  // A file that is not a trace: the page says why.
  await page.goto(`${url}viewer/broken.json?mode=window`);
  await page.waitForFunction(() => /not valid JSON/.test(document.getElementById('status').textContent), null,
                             { timeout: 60000 }).catch(() => {});
  const said = await page.evaluate(() => document.getElementById('status').textContent);
  console.log(`broken.json: ${said}`);
  if (!/^broken\.json: not valid JSON at byte \d+/.test(said)) fail(`broken.json: the page says "${said}"`);

  const foreign = requests.filter((r) => !r.startsWith(url.replace(/\/$/, '')) && !r.startsWith('data:'));
  if (foreign.length) fail(`the page fetched from elsewhere: ${foreign.join(', ')}`);
} finally {
  await browser.close();
  server.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}
if (!process.exitCode) console.log('serve: a big trace is shown through windows, without import warnings');
