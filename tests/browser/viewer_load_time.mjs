// How long a trace takes to show in `stepscope serve`'s viewer page (catapult's viewer), in
// headless Chromium: from navigation to the first frame painted after the import.
//
//   node viewer_load_time.mjs STEPSCOPE_BINARY TRACE_FILE [--mode window|full]
//
// The file is served from its directory; prints the file's size, its event count and the
// seconds to the imported model and to the first paint. (Issue 15's performance check: a
// 100 MB, million-event timeline.) A trace over ~15 MB is shown through server-side windows
// (trace_window.h): then the time is to the first window, the whole trace down-sampled;
// --mode full times the whole file instead, --mode window windows even a small one.
import { launchChromium, startServe } from './serve_lib.mjs';
import { statSync } from 'node:fs';
import { basename, dirname } from 'node:path';

const args = process.argv.slice(2);
const modeAt = args.indexOf('--mode');
const mode = modeAt >= 0 ? args.splice(modeAt, 2)[1] : '';
const [binary, trace] = args;
if (!trace) {
  console.error('usage: node viewer_load_time.mjs STEPSCOPE_BINARY TRACE_FILE');
  process.exit(2);
}
const { server, url } = await startServe(binary, dirname(trace));
const browser = await launchChromium();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const t0 = Date.now();
  await page.goto(`${url}viewer/${encodeURIComponent(basename(trace))}${mode ? '?mode=' + mode : ''}`);
  await page.waitForFunction(() => window.stepscopeModel !== undefined, null, { timeout: 600000, polling: 100 });
  const imported = (Date.now() - t0) / 1000;
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  const painted = (Date.now() - t0) / 1000;
  const events = await page.evaluate(() => {
    let n = 0;
    for (const t of window.stepscopeModel.getAllThreads()) n += t.sliceGroup.slices.length;
    return n;
  });
  const shown = await page.evaluate(() => window.stepscopeWindow);
  const how = shown ? `windowed (${shown.events} of ${shown.overlapping} events${shown.sampled ? ', down-sampled' : ''})`
                    : 'whole';
  console.log(`${trace}: ${(statSync(trace).size / 1e6).toFixed(1)} MB, ${how}, ${events} slices: ` +
              `imported in ${imported.toFixed(1)} s, first paint at ${painted.toFixed(1)} s`);
} finally {
  await browser.close();
  server.kill('SIGTERM');
}
