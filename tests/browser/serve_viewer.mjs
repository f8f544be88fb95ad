// End to end in headless Chromium: `stepscope serve DIR` on a real training run's directory, its
// index page, then a traced step opened through "view" in catapult's viewer that stepscope
// serves itself (no internet). Checks what is shown (trace rows, the imported model's slices and
// flows, the viewer's tracks) and saves a screenshot of each page.
//
//   node serve_viewer.mjs STEPSCOPE_BINARY RUN_DIR ARTIFACT_DIR
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const [binary, runDir, artifacts] = process.argv.slice(2);
if (!artifacts) {
  console.error('usage: node serve_viewer.mjs STEPSCOPE_BINARY RUN_DIR ARTIFACT_DIR');
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

function fail(message) {
  console.error(`serve_viewer: ${message}`);
  process.exitCode = 1;
}

// The server on any free port; its first line says where.
const server = spawn(binary, ['serve', runDir, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve, reject) => {
  let out = '';
  server.stdout.on('data', (chunk) => {
    out += chunk;
    const m = out.match(/ at (http:\/\/\S+\/)/);
    if (m) resolve(m[1]);
  });
  server.on('exit', (code) => reject(new Error(`stepscope serve exited with ${code}: ${out}`)));
  setTimeout(() => reject(new Error(`stepscope serve printed no URL: ${out}`)), 20000);
});

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(url);
  const rows = await page.locator('a.view').count();
  if (rows === 0) fail(`the index at ${url} lists no trace`);
  await page.screenshot({ path: join(artifacts, 'serve_index.png'), fullPage: true });
  console.log(`index: ${rows} traces`);

  // The first traced step, in catapult's viewer.
  const name = await page.locator('a.view').first().getAttribute('href');
  await page.locator('a.view').first().click();
  await page.waitForFunction(() => window.stepscopeModel !== undefined, null, { timeout: 60000 });
  const shown = await page.evaluate(() => {
    const model = window.stepscopeModel;
    let slices = 0;
    for (const thread of model.getAllThreads()) slices += thread.sliceGroup.slices.length;
    return {
      slices,
      flows: model.flowEvents.length,
      counters: model.getAllCounters().length,
      warnings: model.importWarnings.length,
      processes: model.getAllProcesses().length,
      viewer: !!document.querySelector('tr-ui-timeline-view'),
    };
  });
  await page.waitForTimeout(500);  // let the tracks paint
  await page.screenshot({ path: join(artifacts, 'serve_viewer.png') });
  console.log(`${name}: ${JSON.stringify(shown)}`);
  if (!shown.viewer) fail('no tr-ui-timeline-view on the viewer page');
  if (shown.slices === 0) fail(`${name}: no slices in the viewer`);
  if (shown.processes === 0) fail(`${name}: no processes in the viewer`);
  if (shown.warnings) fail(`${name}: ${shown.warnings} import warnings`);
  const foreign = requests.filter((r) => !r.startsWith(url.replace(/\/$/, '')) && !r.startsWith('data:'));
  if (foreign.length) fail(`the pages fetched from elsewhere: ${foreign.join(', ')}`);
} finally {
  await browser.close();
  server.kill('SIGTERM');
}
if (!process.exitCode) console.log('serve: the index and the viewer work offline');
