// End to end in headless Chromium: `stepscope serve DIR` on a directory of real training runs,
// clicked through as a user would: the runs → a run (step-time chart, scalars, traced steps) → a
// traced step in catapult's viewer that stepscope serves itself (no internet) → tfprof's views as
// tables (options as controls, sorting, filtering) → the advisor and critical path → a step's
// memory → a data-parallel job's ranks merged; and, with the run page open, a new trace written
// into the run appears without a reload.
// What each page shows is checked against the server's JSON API (rows, chart points), and each
// page is saved as a screenshot.
//
//   node serve_viewer.mjs STEPSCOPE_BINARY RUNS_DIR ARTIFACT_DIR
// RUNS_DIR is changed: the live check writes a copy of a trace into one of its runs.
import { launchChromium, startServe } from './serve_lib.mjs';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const [binary, runsDir, artifacts] = process.argv.slice(2);
if (!artifacts) {
  console.error('usage: node serve_viewer.mjs STEPSCOPE_BINARY RUNS_DIR ARTIFACT_DIR');
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

function fail(message) {
  console.error(`serve_viewer: FAIL ${message}`);
  process.exitCode = 1;
}
function check(condition, message) {
  if (!condition) fail(message);
  return condition;
}

// The server on any free port; its first line says where.
const { server, url } = await startServe(binary, runsDir);
const base = url.replace(/\/$/, '');
const getJson = async (path) => (await fetch(base + path)).json();
const apiPath = (p) => p.split('/').map(encodeURIComponent).join('/');

const browser = await launchChromium();
let liveCopy = null;
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const requests = [], pageErrors = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const shot = (name) => page.screenshot({ path: join(artifacts, `serve_${name}.png`), fullPage: true });

  // 1. The runs.
  await page.goto(url);
  const runs = (await getJson('/api/runs')).runs;
  await page.waitForSelector('a.run-link');
  const runLinks = await page.locator('a.run-link').count();
  check(runLinks === runs.length, `runs page: ${runLinks} runs shown, the API lists ${runs.length}`);
  await shot('runs');
  console.log(`runs: ${runLinks}`);

  // 2. A run with traces and a profile.
  const run = runs.find((r) => r.traces > 0 && r.has_profile);
  if (!check(run, 'no run with traces and a profile under ' + runsDir)) throw new Error('nothing to click');
  await page.locator('a.run-link', { hasText: run.path }).first().click();
  await page.waitForSelector('table.traces tbody tr');
  const summary = await getJson(`/api/run/${apiPath(run.path)}`);
  const stepPoints = Number(await page.locator('svg.chart[data-title="Step time (ms)"]').getAttribute('data-points'));
  const expectedStepPoints = summary.traced_step_ms.length + (summary.scalars['global_step/sec']?.data.length || 0) +
                             (summary.scalars['step_time/wall_ms']?.data.length || 0);
  check(stepPoints === expectedStepPoints, `step-time chart: ${stepPoints} points, expected ${expectedStepPoints}`);
  const traceRows = await page.locator('table.traces tbody tr').count();
  check(traceRows === summary.traces.length, `traces table: ${traceRows} rows, the run has ${summary.traces.length}`);
  const scalarCharts = await page.locator('.charts.scalars svg.chart').count();
  const tags = Object.keys(summary.scalars).filter((t) => t !== 'global_step/sec' && !t.startsWith('step_time/'));
  check(scalarCharts === tags.length, `scalars: ${scalarCharts} charts for ${tags.length} tags`);
  await shot('run');
  console.log(`run ${run.path}: ${stepPoints} step-time points, ${traceRows} traces, ${scalarCharts} scalar charts`);

  // 3. Live: a new trace written into the run shows up without a reload.
  await page.evaluate(() => { window.notReloaded = true; });
  const newest = summary.traces[summary.traces.length - 1];
  liveCopy = join(runsDir, run.path, 'timeline-999999.json');
  copyFileSync(join(runsDir, newest.path), liveCopy);
  try {
    await page.waitForFunction(() => [...document.querySelectorAll('table.traces tbody tr')]
      .some((tr) => tr.textContent.includes('timeline-999999.json')), null, { timeout: 15000 });
    check(await page.evaluate(() => window.notReloaded === true), 'live: the page reloaded');
    check(await page.locator('table.traces tbody tr.new').count() === 1, 'live: the new trace is not highlighted');
    await shot('run_live');
    console.log('live: the new trace appeared without a reload');
  } catch (e) {
    fail(`live: the new trace did not appear within 15 s (${e.message})`);
  }
  rmSync(liveCopy);
  liveCopy = null;
  await page.waitForFunction(() => ![...document.querySelectorAll('table.traces tbody tr')]
    .some((tr) => tr.textContent.includes('timeline-999999.json')), null, { timeout: 15000 });

  // 4. A traced step in catapult's viewer.
  const viewHref = await page.locator('table.traces a.view').first().getAttribute('href');
  await page.locator('table.traces a.view').first().click();
  await page.waitForFunction(() => window.stepscopeModel !== undefined, null, { timeout: 60000 });
  const shown = await page.evaluate(() => {
    const model = window.stepscopeModel;
    let slices = 0;
    for (const thread of model.getAllThreads()) slices += thread.sliceGroup.slices.length;
    return { slices, flows: model.flowEvents.length, warnings: model.importWarnings.length,
             processes: model.getAllProcesses().length, viewer: !!document.querySelector('tr-ui-timeline-view') };
  });
  await page.waitForTimeout(500);  // let the tracks paint
  await page.screenshot({ path: join(artifacts, 'serve_viewer.png') });
  console.log(`${viewHref}: ${JSON.stringify(shown)}`);
  check(shown.viewer, 'no tr-ui-timeline-view on the viewer page');
  check(shown.slices > 0, `${viewHref}: no slices in the viewer`);
  check(shown.processes > 0, `${viewHref}: no processes in the viewer`);
  check(!shown.warnings, `${viewHref}: ${shown.warnings} import warnings`);
  await page.goBack();
  await page.waitForSelector('table.traces tbody tr');

  // 5. tfprof's views: each as a table, its rows those of the API's tree.
  const countRows = (view, node) => {
    let n = 0;
    const visit = (x) => { n += 1; for (const c of x.children || []) visit(c); };
    for (const c of node.children || []) visit(c);
    return n;
  };
  for (const view of ['scope', 'graph', 'op', 'code']) {
    await page.locator(`a.tfprof-${view}`).click();
    await page.waitForSelector('table.tfprof tbody tr, .tfprof-result .error', { timeout: 30000 });
    const data = await getJson(await page.locator('.tfprof-result').getAttribute('data-api'));
    const rows = await page.locator('table.tfprof tbody tr').count();
    check(rows === Math.min(5000, countRows(view, data.root)), `tfprof ${view}: ${rows} rows, the view has ${countRows(view, data.root)}`);
    await shot(`tfprof_${view}`);
    console.log(`tfprof ${view}: ${rows} rows`);
    if (view === 'op') {
      // Sort by a column, then filter, then change an option through the controls.
      await page.locator('table.tfprof th', { hasText: 'self time' }).click();
      let node = data.root, slowest = null;
      while (node.children && node.children.length) {
        node = node.children[0];
        if (!slowest || node.exec_micros > slowest.exec_micros) slowest = node;
      }
      const first = await page.locator('table.tfprof tbody tr td:first-child').first().textContent();
      check(first === slowest.name, `tfprof op sorted by self time: ${first} first, not ${slowest.name}`);
      await page.fill('input.filter', 'MatMul');
      const filtered = await page.locator('table.tfprof tbody tr').count();
      check(filtered >= 1 && filtered < rows, `tfprof op: filtering on MatMul left ${filtered} of ${rows} rows`);
      await page.selectOption('select[name=order_by]', 'name');
      await page.waitForFunction(() => location.hash.includes('order_by=name'));
      await page.waitForSelector('table.tfprof tbody tr');
      const names = await page.locator('table.tfprof tbody tr td:first-child').allTextContents();
      check(names.join('\n') === [...names].sort().join('\n'), `tfprof op ordered by name: ${names.join(', ')}`);
      await shot('tfprof_op_by_name');
    }
    await page.goBack({ waitUntil: 'commit' });
    await page.goto(`${url}#/run?path=${encodeURIComponent(run.path)}`);
    await page.waitForSelector(`a.tfprof-${view}`);
  }

  // 6. The advisor and the critical path of the newest step.
  await page.locator('.profile-links a.advice').click();
  await page.waitForSelector('table.critical-path tbody tr', { timeout: 30000 });
  const advice = await getJson(`/api/advise/${apiPath(run.path)}`);
  const pathRows = await page.locator('table.critical-path tbody tr').count();
  check(pathRows === advice.critical_path.path.length, `critical path: ${pathRows} rows, the API has ${advice.critical_path.path.length}`);
  const reports = await page.locator('pre.report').count();
  check(reports === Object.keys(advice.advice.checkers).length, `advisor: ${reports} reports`);
  await shot('advice');
  console.log(`advice: ${pathRows} ops on the critical path, ${reports} checkers`);
  // What if the op type with the most time on the path ran 4x faster: the replayed path is shown.
  const byType = {};
  for (const op of advice.critical_path.path) byType[op.op_type] = (byType[op.op_type] || 0) + op.duration_ns;
  const opType = Object.entries(byType).sort((a, b) => b[1] - a[1])[0][0];
  await page.fill('form.what-if input[name=what_if]', opType);
  await page.fill('form.what-if input[name=speedup]', '4');
  await page.click('form.what-if button');
  await page.waitForSelector('p.what-if-result', { timeout: 30000 });
  const replay = await getJson(`/api/advise/${apiPath(run.path)}?step=${advice.step}&what_if=${encodeURIComponent(opType)}&speedup=4`);
  const replayRows = await page.locator('table.what-if-path tbody tr').count();
  check(replayRows === replay.what_if.after.path.length, `what-if: ${replayRows} rows, the replayed path has ${replay.what_if.after.path.length}`);
  check((await page.locator('p.what-if-result').textContent()).startsWith(`What if ${opType} (`), 'what-if: no result line');
  await shot('what_if');
  console.log(`what-if ${opType} 4x: ${replay.what_if.wall_ns} -> ${replay.what_if.new_wall_ns} ns`);
  // The critical path selected in the step's timeline.
  if (check(advice.trace, `advice: step ${advice.step} has no timeline to show its path in`)) {
    await page.locator('a.view-critical').click();
    await page.waitForFunction(() => window.stepscopeHighlighted !== undefined && window.stepscopeModel, null, { timeout: 60000 });
    await page.waitForFunction(() => window.stepscopeHighlighted > 0, null, { timeout: 10000 }).catch(() => {});
    const highlighted = await page.evaluate(() => window.stepscopeHighlighted);
    check(highlighted === advice.critical_path.path.length,
          `timeline: ${highlighted} slices selected, the critical path has ${advice.critical_path.path.length} ops`);
    await page.waitForTimeout(500);
    await page.screenshot({ path: join(artifacts, 'serve_viewer_critical_path.png') });
    console.log(`timeline: the critical path's ${highlighted} ops selected`);
  }

  // 7. Memory: the first trace (of any run) that has memory tracks.
  let memoryShown = false;
  for (const r of runs.filter((x) => x.traces > 0)) {
    const s = await getJson(`/api/run/${apiPath(r.path)}`);
    const trace = s.traces[s.traces.length - 1].path;
    const events = (await getJson('/' + apiPath(trace))).traceEvents;
    const counters = events.filter((e) => e.ph === 'C').length;
    const tensors = new Set(events.filter((e) => e.ph === 'N').map((e) => `${e.pid}:${e.id}`)).size;
    await page.goto(`${url}#/memory?trace=${encodeURIComponent(trace)}&run=${encodeURIComponent(r.path)}`);
    await page.waitForSelector('h1');
    if (!counters) {
      check(await page.locator('text=no memory tracks').count() === 1, `memory of ${trace}: no note that it has no memory`);
      continue;
    }
    await page.waitForSelector('table.tensors tbody tr');
    const points = Number(await page.locator('.charts.memory svg.chart').getAttribute('data-points'));
    check(points === counters, `memory of ${trace}: ${points} chart points, the trace has ${counters} counter values`);
    const tensorRows = await page.locator('table.tensors tbody tr').count();
    check(tensorRows === Math.min(200, tensors), `memory of ${trace}: ${tensorRows} tensors listed, the trace has ${tensors}`);
    // The peak by kind, when the run's profile has the step: its five parts sum to the peak.
    const step = (trace.match(/timeline-(\d+)\.json/) || [])[1];
    const kinds = r.has_profile ? (await getJson(`/api/memory/${apiPath(r.path)}?step=${step}`)).memory_by_kind : null;
    if (kinds) {
      const parts = await page.locator('.kinds-bar .kind').evaluateAll((spans) => spans.map((x) => Number(x.dataset.bytes)));
      check(parts.length === 5 && parts.reduce((a, b) => a + b, 0) === kinds.peak_bytes,
            `memory by kind: bar parts ${parts} do not sum to the peak ${kinds.peak_bytes}`);
      console.log(`memory by kind of ${trace}: ${JSON.stringify(kinds)}`);
    }
    await shot('memory');
    console.log(`memory of ${trace}: ${points} counter points, ${tensorRows} tensors`);
    memoryShown = true;
    break;
  }
  check(memoryShown, 'no run has a timeline with memory tracks to show');

  // 8. A data-parallel job (a directory of rank<N> runs): its steps, one merged in the viewer
  // with every rank's processes, and who waited for whom at the step's collectives.
  const jobs = (await getJson('/api/runs')).jobs;
  if (process.env.SERVE_EXPECT_JOB === '1') check(jobs.length > 0, 'no data-parallel job under ' + runsDir);
  if (jobs.length) {
    const job = jobs[0];
    await page.goto(url);
    await page.locator('a.job-link', { hasText: job.path }).first().click();
    await page.waitForSelector('table.job-steps tbody tr');
    const jobApi = await getJson(`/api/job/${apiPath(job.path)}`);
    const stepRows = await page.locator('table.job-steps tbody tr').count();
    check(stepRows === jobApi.steps.length, `job ${job.path}: ${stepRows} steps shown, the API lists ${jobApi.steps.length}`);
    const stragglers = (await getJson(`/api/stragglers/${apiPath(job.path)}`)).stragglers;
    const bars = await page.locator('.rank-wait').count();
    check(bars === Object.keys(stragglers.total_wait_us).length,
          `job ${job.path}: ${bars} rank wait bars, the API has ${Object.keys(stragglers.total_wait_us).length}`);
    check(stragglers.collectives.length > 0, `job ${job.path}: no collective in its latest step's stragglers`);
    const collectiveRows = await page.locator('table.stragglers tbody tr').count();
    check(collectiveRows === stragglers.collectives.length,
          `job ${job.path}: ${collectiveRows} collectives listed, the API has ${stragglers.collectives.length}`);
    await shot('job');
    await page.locator('a.merged-view-step').click();
    await page.waitForFunction(() => window.stepscopeModel !== undefined, null, { timeout: 60000 });
    const merged = await page.evaluate(() => {
      const model = window.stepscopeModel;
      const names = model.getAllProcesses().map((p) => p.name || '');
      let slices = 0;
      for (const thread of model.getAllThreads()) slices += thread.sliceGroup.slices.length;
      return { names, slices, warnings: model.importWarnings.length };
    });
    await page.waitForTimeout(500);
    await page.screenshot({ path: join(artifacts, 'serve_job_merged.png') });
    console.log(`job ${job.path}: ${stepRows} steps, merged step ${JSON.stringify(merged)}`);
    for (let r = 0; r < job.ranks; ++r)
      check(merged.names.some((n) => n.startsWith(`rank ${r}: `)), `merged view of ${job.path}: no process of rank ${r} in ${merged.names}`);
    check(merged.slices > 0, `merged view of ${job.path}: no slices`);
    check(!merged.warnings, `merged view of ${job.path}: ${merged.warnings} import warnings`);
  }

  check(!pageErrors.length, `script errors on the pages: ${pageErrors.join('; ')}`);
  const foreign = requests.filter((r) => !r.startsWith(base) && !r.startsWith('data:'));
  check(!foreign.length, `the pages fetched from elsewhere: ${foreign.join(', ')}`);
} finally {
  if (liveCopy) rmSync(liveCopy, { force: true });
  await browser.close();
  server.kill('SIGTERM');
}
if (!process.exitCode) console.log('serve: every page works offline');
