// stepscope serve's pages: the runs under the served directory, a run's step time and scalars,
// its traces (catapult's viewer, served by stepscope), tfprof's four views as tables, the
// advisor with the critical path, and a step's memory. Everything comes from this server's
// JSON API (src/stepscope/tools/web_api.h) and files; nothing is fetched from anywhere else.
// Pages poll while they are open, so a run still training shows its new steps and traces.
'use strict';

const POLL_MS = 2000;
const COLORS = ['#2b6cb0', '#dd6b20', '#2f855a', '#9f3a38', '#6b46c1', '#0f766e', '#a16207', '#be185d'];
const app = document.getElementById('app');
let poller = null;  // the current page's refresh, cleared when the route changes
let routeId = 0;

// ----- Small helpers --------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = tag === 'svg' || attrs.svg ? document.createElementNS('http://www.w3.org/2000/svg', tag)
                                          : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'svg' || v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k === 'text') node.textContent = v;
    else node.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined && c !== false) node.append(c instanceof Node ? c : String(c));
  }
  return node;
}
const svgEl = (tag, attrs = {}) => el(tag, { ...attrs, svg: true });

async function api(path) {
  const response = await fetch(path, { cache: 'no-store' });
  let body = null;
  try { body = await response.json(); } catch (e) { /* not JSON */ }
  if (!response.ok) throw new Error((body && body.error) || `${path}: HTTP ${response.status}`);
  return body;
}

// Paths in URLs: each segment encoded, the slashes kept.
const urlPath = (p) => p.split('/').map(encodeURIComponent).join('/');
const runUrl = (prefix, run) => `/api/${prefix}/${urlPath(run)}`;
const hashFor = (page, params) => `#/${page}?${new URLSearchParams(params)}`;

function fmtMicros(us) {
  if (us === null || us === undefined || !isFinite(us)) return '';
  if (us >= 1e6) return (us / 1e6).toFixed(2) + 's';
  if (us >= 1e3) return (us / 1e3).toFixed(2) + 'ms';
  return us.toFixed(us < 10 ? 1 : 0) + 'us';
}
function fmtBytes(b) {
  if (b === null || b === undefined) return '';
  if (b >= 1 << 30) return (b / (1 << 30)).toFixed(2) + 'GB';
  if (b >= 1 << 20) return (b / (1 << 20)).toFixed(2) + 'MB';
  if (b >= 1 << 10) return (b / (1 << 10)).toFixed(1) + 'KB';
  return b + 'B';
}
function fmtCount(n) {
  if (n === null || n === undefined) return '';
  if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(2) + 'b';
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + 'm';
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  return String(n);
}
function fmtNumber(v) {
  if (v === null || v === undefined) return '';
  if (v !== 0 && (Math.abs(v) >= 1e5 || Math.abs(v) < 1e-3)) return v.toExponential(3);
  return String(+v.toPrecision(5));
}
function fmtAge(unixSecs) {
  const s = Math.max(0, Date.now() / 1000 - unixSecs);
  if (s < 90) return `${Math.round(s)} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)} h ago`;
  return new Date(unixSecs * 1000).toLocaleString();
}

function setCrumbs(...items) {
  const nav = document.getElementById('crumbs');
  nav.replaceChildren(...items.flatMap((item, i) => [i ? ' / ' : '', item]));
}
function setLive(text) { document.getElementById('live').textContent = text; }
function showError(where, error) {
  where.replaceChildren(el('p', { class: 'error', text: String(error.message || error) }));
}

// Re-runs `refresh` every POLL_MS until the page changes; `refresh` gets whether it is the first
// call. Errors while polling are shown in the live line, not over the page.
function poll(refresh) {
  const id = routeId;
  let busy = false;
  const tick = async (first) => {
    if (busy || id !== routeId) return;
    busy = true;
    try {
      await refresh(first);
      setLive(`live · updated ${new Date().toLocaleTimeString()}`);
    } catch (e) {
      if (first) showError(app, e); else setLive(`live · ${e.message}`);
    } finally {
      busy = false;
    }
  };
  tick(true);
  poller = setInterval(() => tick(false), POLL_MS);
}

// ----- Sortable, filterable tables -------------------------------------------------------------

// columns: [{key, label, num, fmt(value, row), title}]; rows: objects. Clicking a header sorts
// by it (again: the other way); options.filter adds a box that keeps the rows whose name matches.
function dataTable(columns, rows, options = {}) {
  const wrap = el('div', { class: 'table-wrap' });
  let sortKey = options.sortKey || null, sortDir = options.sortDir || -1, filterText = '';
  const limit = options.limit || 5000;
  const count = el('span', { class: 'muted row-count' });
  const table = el('table', { class: options.className || 'data' });
  const head = el('tr', {}, columns.map((c) => {
    const th = el('th', { class: `sortable${c.num ? ' num' : ''}`, 'data-key': c.key, title: c.title || 'sort' }, c.label);
    th.addEventListener('click', () => {
      sortDir = sortKey === c.key ? -sortDir : (c.num ? -1 : 1);
      sortKey = c.key;
      draw();
    });
    return th;
  }));
  const body = el('tbody');
  table.append(el('thead', {}, head), body);
  function draw() {
    let shown = rows;
    if (filterText) {
      let re;
      try { re = new RegExp(filterText, 'i'); } catch (e) { re = null; }
      shown = rows.filter((r) => (re ? re.test(r.name || '') : (r.name || '').includes(filterText)));
    }
    if (sortKey) {
      const c = columns.find((x) => x.key === sortKey);
      const value = c.sortValue || ((r) => r[sortKey]);
      shown = [...shown].sort((a, b) => {
        const x = value(a), y = value(b);
        return (x < y ? -1 : x > y ? 1 : 0) * sortDir;
      });
    }
    for (const th of head.children) {
      th.classList.toggle('sorted-asc', th.dataset.key === sortKey && sortDir > 0);
      th.classList.toggle('sorted-desc', th.dataset.key === sortKey && sortDir < 0);
    }
    body.replaceChildren(...shown.slice(0, limit).map((r) => {
      const tr = el('tr', { class: r._class });
      for (const c of columns) {
        const v = r[c.key];
        const content = c.fmt ? c.fmt(v, r) : v;
        tr.append(el('td', { class: c.num ? 'num' : undefined }, content === undefined ? '' : content));
      }
      return tr;
    }));
    count.textContent = shown.length === rows.length ? `${rows.length} rows`
                                                     : `${shown.length} of ${rows.length} rows`;
    if (shown.length > limit) count.textContent += ` (first ${limit} shown: narrow the filter)`;
  }
  if (options.filter) {
    const box = el('input', { type: 'search', placeholder: 'filter names (regex)', class: 'filter' });
    box.addEventListener('input', () => { filterText = box.value; draw(); });
    wrap.append(el('p', {}, box, ' ', count));
  } else {
    wrap.append(el('p', {}, count));
  }
  wrap.append(table);
  draw();
  return wrap;
}

// ----- Line charts (SVG) -----------------------------------------------------------------------

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) { hi = lo + 1; }
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(+t.toPrecision(12));
  return ticks;
}

// series: [{name, points: [[x, y]...], dots}]; options: {xLabel, yFmt, height, stepLine}.
// The svg carries data-points (the number of points drawn) for tests.
function lineChart(title, series, options = {}) {
  const box = el('div', { class: 'chart-box' }, el('h3', { text: title }));
  const W = options.width || 600, H = options.height || 220, L = 58, R = 12, T = 10, B = 30;
  const all = series.flatMap((s) => s.points.filter((p) => p[1] !== null && isFinite(p[1])));
  const svg = svgEl('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`,
                             'data-points': all.length, 'data-title': title });
  box.append(svg);
  if (!all.length) {
    box.append(el('p', { class: 'muted', text: 'no points yet' }));
    return box;
  }
  let x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0]));
  let y0 = Math.min(0, ...all.map((p) => p[1])), y1 = Math.max(...all.map((p) => p[1]));
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  if (y1 === y0) { y1 = y0 + (Math.abs(y0) || 1); }
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  const yFmt = options.yFmt || fmtNumber;
  for (const t of niceTicks(y0, y1, 4)) {
    svg.append(svgEl('line', { class: 'grid', x1: L, x2: W - R, y1: Y(t), y2: Y(t) }));
    const label = svgEl('text', { x: L - 4, y: Y(t) + 3, 'text-anchor': 'end' });
    label.textContent = yFmt(t);
    svg.append(label);
  }
  for (const t of niceTicks(x0, x1, 6)) {
    const label = svgEl('text', { x: X(t), y: H - B + 14, 'text-anchor': 'middle' });
    label.textContent = fmtCount(t);
    svg.append(label);
  }
  const xl = svgEl('text', { x: W - R, y: H - 4, 'text-anchor': 'end' });
  xl.textContent = options.xLabel || 'step';
  svg.append(xl, svgEl('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }),
             svgEl('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }));
  series.forEach((s, i) => {
    const color = s.color || COLORS[i % COLORS.length];
    const pts = s.points.filter((p) => p[1] !== null && isFinite(p[1]));
    let d = '';
    pts.forEach((p, k) => {
      if (options.stepLine && k) d += ` L${X(p[0]).toFixed(1)},${Y(pts[k - 1][1]).toFixed(1)}`;
      d += `${k ? ' L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`;
    });
    if (pts.length > 1 && !s.dotsOnly)
      svg.append(svgEl('path', { d, fill: 'none', stroke: color, 'stroke-width': 1.5, 'vector-effect': 'non-scaling-stroke', class: 'series' }));
    if (s.dots || pts.length === 1 || s.dotsOnly)
      for (const p of pts) svg.append(svgEl('circle', { cx: X(p[0]), cy: Y(p[1]), r: 3, fill: color, class: 'point' }));
  });
  if (series.length > 1)
    box.append(el('div', { class: 'legend' }, series.map((s, i) => el('span', { style: `--c:${s.color || COLORS[i % COLORS.length]}`, text: s.name + '  ' }))));
  // Hover: the nearest point of each series at the cursor's x.
  const cursor = svgEl('line', { class: 'cursor', y1: T, y2: H - B, visibility: 'hidden' });
  const tip = el('div', { class: 'tooltip' });
  svg.append(cursor);
  box.append(tip);
  svg.addEventListener('mousemove', (event) => {
    const rect = svg.getBoundingClientRect();
    const x = x0 + ((event.clientX - rect.left) / rect.width * W - L) / (W - L - R) * (x1 - x0);
    const lines = [];
    let at = null;
    series.forEach((s) => {
      let best = null;
      for (const p of s.points) if (p[1] !== null && (!best || Math.abs(p[0] - x) < Math.abs(best[0] - x))) best = p;
      if (best) { lines.push(`${s.name}: ${yFmt(best[1])} at ${options.xLabel || 'step'} ${fmtNumber(best[0])}`); at = best[0]; }
    });
    if (at === null) return;
    cursor.setAttribute('x1', X(at));
    cursor.setAttribute('x2', X(at));
    cursor.setAttribute('visibility', 'visible');
    tip.textContent = lines.join(' · ');
    tip.style.display = 'block';
    tip.style.left = `${Math.min(event.clientX - box.getBoundingClientRect().left + 12, box.clientWidth - 260)}px`;
    tip.style.top = '2em';
  });
  svg.addEventListener('mouseleave', () => { cursor.setAttribute('visibility', 'hidden'); tip.style.display = 'none'; });
  return box;
}

// ----- Perfetto (optional: needs the internet; the viewer link does not) ------------------------

const PERFETTO = 'https://ui.perfetto.dev';
async function openInPerfetto(path) {
  setLive(`fetching ${path} ...`);
  const response = await fetch('/' + urlPath(path));
  if (!response.ok) { setLive(`${path}: HTTP ${response.status}`); return; }
  const buffer = await response.arrayBuffer();
  const perfetto = window.open(PERFETTO + '/#!/');
  if (!perfetto) { setLive('the browser blocked the Perfetto window: allow pop-ups for this page'); return; }
  // Perfetto's documented postMessage protocol: PING until it answers PONG, then the trace.
  const ping = setInterval(() => perfetto.postMessage('PING', PERFETTO), 50);
  window.addEventListener('message', function onMessage(event) {
    if (event.source !== perfetto || event.data !== 'PONG') return;
    clearInterval(ping);
    window.removeEventListener('message', onMessage);
    perfetto.postMessage({ perfetto: { buffer, title: path, fileName: path.split('/').pop() } }, PERFETTO);
    setLive(`opened ${path} in Perfetto`);
  });
}

// ----- Pages -----------------------------------------------------------------------------------

async function runsPage() {
  setCrumbs(el('span', { text: 'runs' }));
  poll(async () => {
    const data = await api('/api/runs');
    document.title = `stepscope: ${data.title}`;
    const heading = el('h1', { text: `Runs in ${data.title}` });
    if (!data.runs.length) {
      app.replaceChildren(heading, el('p', { class: 'muted', text: 'No runs yet: a run appears here when a directory gets event files, timelines or a profile (this page updates by itself).' }));
      return;
    }
    const rows = data.runs.map((r) => ({ ...r, name: r.path }));
    // Data-parallel jobs: a directory of rank<N> runs (one ProfilerHook output directory a rank).
    const jobs = data.jobs.length ?
        [
          el('h2', {text: 'Data-parallel jobs (their ranks\' timelines merged)'}),
          dataTable(
              [
                {
                  key: 'path',
                  label: 'job',
                  fmt: (v) => el('a', {class: 'job-link', href: hashFor('job', {path: v}), text: v})
                },
                {key: 'ranks', label: 'ranks', num: true},
              ],
              data.jobs, {sortKey: 'path', sortDir: 1, className: 'jobs'}),
          el('h2', {text: 'Runs'})
        ] :
        [];
    app.replaceChildren(
        heading, ...jobs,
        dataTable(
            [
              {
                key: 'name',
                label: 'run',
                fmt: (v) => el('a', {class: 'run-link', href: hashFor('run', {path: v}), text: v})
              },
              {key: 'event_files', label: 'event files', num: true},
              {key: 'traces', label: 'traced steps', num: true},
              {key: 'has_profile', label: 'profile', fmt: (v) => (v ? 'yes' : '')},
              {key: 'modified', label: 'last written', num: true, fmt: fmtAge},
            ],
            rows, {filter: true, sortKey: 'name', sortDir: 1}));
  });
}

// Step time: every step's step_time/wall_ms (StepTimingHook's scalars, else the profile's step
// timings, ProfilerHook's), StepCounterHook's global_step/sec (every few steps) and the traced
// steps' wall time (the profile).
function stepTimeChart(run) {
  const series = [];
  const wall = run.scalars['step_time/wall_ms'];
  const source = run.step_timing_source === 'profile' ? 'profile' : 'StepTimingHook';
  if (wall) series.push({name: `every step (${source})`, points: wall.data.map((p) => [p[0], p[1]])});
  const rate = run.scalars['global_step/sec'];
  if (rate) series.push({ name: 'ms/step (from global_step/sec)', points: rate.data.map((p) => [p[0], p[1] > 0 ? 1000 / p[1] : null]) });
  if (run.traced_step_ms.length) series.push({ name: 'traced step wall time (profile)', points: run.traced_step_ms, dots: true });
  return lineChart('Step time (ms)', series, { yFmt: (v) => fmtMicros(v * 1000), width: 1200, height: 260 });
}

async function runPage(params) {
  const path = params.get('path') || '.';
  setCrumbs(el('a', { href: '#/', text: 'runs' }), el('span', { text: path }));
  let lastJson = null, knownTraces = null;
  poll(async () => {
    const response = await fetch(runUrl('run', path), { cache: 'no-store' });
    const text = await response.text();
    if (!response.ok) throw new Error(JSON.parse(text).error || `HTTP ${response.status}`);
    if (text === lastJson) return;
    lastJson = text;
    const run = JSON.parse(text);
    const fresh = new Set(knownTraces ? run.traces.map((t) => t.path).filter((p) => !knownTraces.has(p)) : []);
    knownTraces = new Set(run.traces.map((t) => t.path));
    const scroll = window.scrollY;
    const parts = [el('h1', { text: `Run ${path}` })];
    if (run.problems.length)
      parts.push(el('div', { class: 'error problems' }, run.problems.map((p) => el('p', { text: p }))));
    parts.push(el('h2', { text: 'Step time' }), el('div', { class: 'charts wide' }, stepTimeChart(run)));
    // Where it went (StepTimingHook): input-bound or compute-bound at a glance.
    const parts_of_step = ['input_ms', 'ops_ms', 'idle_ms', 'hooks_ms'].filter((k) => run.scalars[`step_time/${k}`]);
    if (parts_of_step.length)
      parts.push(
          el('div', {class: 'charts wide'},
             lineChart(
                 'Where the step time went (ms)',
                 parts_of_step.map((k) => ({
                                     name: {
                                       input_ms: 'waiting on input',
                                       ops_ms: 'running ops (summed over threads)',
                                       idle_ms: 'executor idle',
                                       hooks_ms: 'hooks'
                                     }[k],
                                     points: run.scalars[`step_time/${k}`].data.map((p) => [p[0], p[1]])
                                   })),
                 {yFmt: (v) => fmtMicros(v * 1000), width: 1200, height: 260})));
    const tags = Object.keys(run.scalars).filter((t) => t !== 'global_step/sec' && !t.startsWith('step_time/'));
    parts.push(el('h2', { text: `Scalars (${tags.length})` }));
    if (tags.length) {
      parts.push(el('div', { class: 'charts scalars' }, tags.map((tag) => {
        const s = run.scalars[tag];
        const title = s.points > s.data.length ? `${tag} (${s.data.length} of ${s.points} points)` : tag;
        return lineChart(title, [{ name: tag, points: s.data.map((p) => [p[0], p[1]]) }]);
      })));
    } else {
      parts.push(el('p', { class: 'muted', text: 'No scalar summaries in this run\'s event files.' }));
    }
    parts.push(el('h2', { text: `Traced steps (${run.traces.length})` }));
    if (run.traces.length) {
      const rows = run.traces.map((t) => ({ ...t, name: t.path, _class: fresh.has(t.path) ? 'new' : undefined }));
      parts.push(dataTable([
        { key: 'step', label: 'step', num: true },
        { key: 'name', label: 'file' },
        { key: 'bytes', label: 'size', num: true, fmt: fmtBytes },
        { key: 'path', label: '', fmt: (p, t) => el('span', { class: 'links' },
            el('a', { class: 'view', href: '/viewer/' + urlPath(p), text: 'timeline' }),
            el('a', { class: 'memory', href: hashFor('memory', { trace: p, run: path }), text: 'memory' }),
            run.profile ? el('a', { class: 'advice', href: hashFor('advice', { run: path, step: t.step }), text: 'critical path' }) : null,
            el('button', { onclick: () => openInPerfetto(p), text: 'open in Perfetto' }),
            el('a', { href: '/' + urlPath(p), download: true, text: 'download' })) },
      ], rows, { sortKey: 'step', sortDir: -1, className: 'traces' }));
    } else {
      parts.push(el('p', { class: 'muted', text: 'No timelines yet: ProfilerHook writes timeline-<step>.json every save_steps (they appear here as they are written).' }));
    }
    parts.push(el('h2', { text: 'Profile' }));
    if (run.profile) {
      parts.push(el('p', { class: 'links profile-links' },
        ['scope', 'graph', 'op', 'code'].map((v) => el('a', { class: `tfprof-${v}`, href: hashFor('tfprof', { run: path, view: v }), text: `${v} view` })),
        el('a', { class: 'advice', href: hashFor('advice', { run: path }), text: 'advisor & critical path' }),
        el('span', { class: 'muted', text: ` · ${run.traced_step_ms.length} traced steps kept` })));
    } else {
      parts.push(el('p', { class: 'muted', text: 'No saved profile (ProfilerHook saves one beside its timelines).' }));
    }
    app.replaceChildren(...parts);
    window.scrollTo(0, scroll);
  });
}

// tfprof: the view's options as controls (kept in the URL), the result as a table.
const SELECT = ['micros', 'bytes', 'params', 'float_ops', 'occurrence', 'device', 'input_shapes',
                'accelerator_micros', 'cpu_micros', 'peak_bytes', 'residual_bytes', 'output_bytes'];
const ORDER_BY = ['name', 'bytes', 'peak_bytes', 'residual_bytes', 'output_bytes', 'micros',
                  'accelerator_micros', 'cpu_micros', 'params', 'float_ops', 'occurrence'];
const NUMBER_OPTIONS = ['max_depth', 'min_micros', 'min_bytes', 'min_params', 'min_float_ops', 'min_occurrence'];
const REGEX_OPTIONS = ['account_type_regexes', 'start_name_regexes', 'trim_name_regexes', 'show_name_regexes', 'hide_name_regexes'];
const DEFAULTS = { view: 'scope', step: '-1', order_by: 'micros', max_depth: '10', min_micros: '0', min_bytes: '0',
                   min_params: '0', min_float_ops: '0', min_occurrence: '0', account_type_regexes: '.*',
                   start_name_regexes: '.*', trim_name_regexes: '', show_name_regexes: '.*', hide_name_regexes: '',
                   account_displayed_op_only: 'false', select: 'micros,bytes,params,float_ops,occurrence' };

// The view's tree as rows: depth-first, with each row's depth (the op view's rows are a chain).
function flattenView(view, root) {
  const rows = [];
  const visit = (node, depth) => {
    rows.push({ node, depth });
    for (const child of node.children || []) visit(child, view === 'op' ? depth : depth + 1);
  };
  for (const child of root.children || []) visit(child, 0);
  return rows;
}

function tfprofColumns(view, select) {
  const multi = view === 'op' || view === 'code';
  const cols = [{ key: 'name', label: multi ? (view === 'op' ? 'op type' : 'code') : 'node',
                  fmt: (v, r) => el('span', { class: 'tree-name', style: `padding-left:${r.depth * 1.1}em`, text: v }) }];
  const stat = (key, label, fmt, title) => cols.push({ key, label, num: true, fmt, title });
  if (select.has('micros')) {
    stat('total_exec_micros', 'total time', fmtMicros, 'the node and what it accounts below it');
    stat('exec_micros', 'self time', fmtMicros);
  }
  if (select.has('accelerator_micros')) stat('total_accelerator_exec_micros', 'accelerator', fmtMicros);
  if (select.has('cpu_micros')) stat('total_cpu_exec_micros', 'cpu', fmtMicros);
  if (select.has('bytes')) stat('total_requested_bytes', 'requested bytes', fmtBytes);
  if (select.has('peak_bytes')) stat('total_peak_bytes', 'peak bytes', fmtBytes);
  if (select.has('residual_bytes')) stat('total_residual_bytes', 'residual bytes', fmtBytes);
  if (select.has('output_bytes')) stat('total_output_bytes', 'output bytes', fmtBytes);
  if (select.has('params')) stat('total_parameters', 'params', fmtCount);
  if (select.has('float_ops')) stat('total_float_ops', 'float ops', fmtCount);
  if (select.has('occurrence')) stat('occurrence', multi ? 'nodes' : 'runs', String);
  if (select.has('device') && !multi) cols.push({ key: 'device', label: 'device' });
  if (select.has('input_shapes') && !multi) cols.push({ key: 'input_shapes', label: 'input shapes' });
  return cols;
}

async function tfprofPage(params) {
  const run = params.get('run') || '.';
  const options = { ...DEFAULTS };
  for (const [k, v] of params) if (k in DEFAULTS) options[k] = v;
  setCrumbs(el('a', { href: '#/', text: 'runs' }), el('a', { href: hashFor('run', { path: run }), text: run }),
            el('span', { text: `tfprof ${options.view} view` }));
  const go = (changes) => { location.hash = hashFor('tfprof', { run, ...options, ...changes }); };

  const form = el('form', { class: 'controls' });
  form.addEventListener('submit', (e) => { e.preventDefault(); apply(); });
  const field = (name, input) => el('label', {}, name.replace(/_/g, ' '), input);
  const viewSelect = el('select', { name: 'view' }, ['scope', 'graph', 'op', 'code'].map((v) => el('option', { value: v, selected: v === options.view, text: v })));
  const stepSelect = el('select', { name: 'step' }, el('option', { value: '-1', text: 'average of all steps' }));
  const orderSelect = el('select', { name: 'order_by' }, ORDER_BY.map((v) => el('option', { value: v, selected: v === options.order_by, text: v })));
  form.append(field('view', viewSelect), field('step', stepSelect), field('order_by', orderSelect));
  for (const name of NUMBER_OPTIONS) form.append(field(name, el('input', { type: 'number', name, min: 0, value: options[name] })));
  for (const name of REGEX_OPTIONS) form.append(field(name, el('input', { type: 'text', name, value: options[name] })));
  form.append(field('account displayed op only', el('input', { type: 'checkbox', name: 'account_displayed_op_only', checked: options.account_displayed_op_only === 'true' })));
  const chosen = new Set(options.select.split(',').filter(Boolean));
  form.append(el('fieldset', {}, el('legend', { text: 'select' }), SELECT.map((s) => el('label', {}, el('input', { type: 'checkbox', name: 'select', value: s, checked: chosen.has(s) }), s))));
  form.append(el('button', { type: 'submit', text: 'apply' }));
  function apply() {
    const changes = {};
    for (const input of form.elements) {
      if (!input.name || input.name === 'select') continue;
      changes[input.name] = input.type === 'checkbox' ? String(input.checked) : input.value;
    }
    changes.select = [...form.querySelectorAll('input[name=select]:checked')].map((i) => i.value).join(',');
    go(changes);
  }
  for (const select of [viewSelect, stepSelect, orderSelect]) select.addEventListener('change', apply);

  const result = el('div', { class: 'tfprof-result' }, el('p', { class: 'muted', text: 'computing the view ...' }));
  app.replaceChildren(el('h1', { text: `tfprof ${options.view} view of ${run}` }), form, result);
  const query = new URLSearchParams(options);
  try {
    const request = `${runUrl('tfprof', run)}?${query}`;
    result.dataset.api = request;  // what the table shows (for tests and curious users)
    const data = await api(request);
    for (const s of data.steps) stepSelect.append(el('option', { value: s, selected: String(s) === options.step, text: `step ${s}` }));
    const rows = flattenView(options.view, data.root).map(({ node, depth }) => {
      const row = { ...node, depth, name: node.name };
      row.occurrence = node.graph_nodes ? node.graph_nodes.length : node.run_count;
      row.device = (node.devices || []).join(' ');
      row.input_shapes = Object.entries(node.input_shapes || {}).map(([i, s]) => `${i}:[${s.join(',')}]`).join(' ');
      return row;
    });
    const root = data.root;
    result.replaceChildren(
      el('p', { class: 'summary' }, `total: ${fmtMicros(root.total_exec_micros)} time, ${fmtBytes(root.total_requested_bytes)} requested, `,
         `${fmtCount(root.total_parameters)} params, ${fmtCount(root.total_float_ops)} float ops`),
      dataTable(tfprofColumns(options.view, chosen), rows, { filter: true, className: 'tfprof' }));
  } catch (e) {
    showError(result, e);
  }
}

async function advicePage(params) {
  const run = params.get('run') || '.';
  const step = params.get('step');
  const whatIf = params.get('what_if') || '', speedup = params.get('speedup') || '2';
  setCrumbs(el('a', { href: '#/', text: 'runs' }), el('a', { href: hashFor('run', { path: run }), text: run }),
            el('span', { text: 'advisor' }));
  try {
    const query = new URLSearchParams();
    if (step) query.set('step', step);
    if (whatIf) {
      query.set('what_if', whatIf);
      query.set('speedup', speedup);
    }
    const data = await api(`${runUrl('advise', run)}?${query}`);
    const path = data.critical_path;
    const stepSelect = el('select', { name: 'step' }, data.steps.map((s) => el('option', { value: s, selected: s === data.step, text: `step ${s}` })));
    stepSelect.addEventListener('change', () => { location.hash = hashFor('advice', { run, step: stepSelect.value }); });
    const parts = [el('h1', { text: `Advisor and critical path: ${run}` }),
                   el('p', {}, 'critical path of ', stepSelect, data.trace ? ' · ' : '',
                      data.trace ? el('a', { class: 'view-critical', href: `/viewer/${urlPath(data.trace)}#critical`, text: 'show it in the timeline' }) : '')];
    const wall = path.wall_ns || 1;
    parts.push(el('p', { class: 'summary' },
      `wall ${fmtMicros(path.wall_ns / 1e3)} · ${path.num_ops} ops · parallelism ${path.parallelism.toFixed(2)} · ` +
      `on the path: ${path.path.length} ops, ${fmtMicros(path.path_busy_ns / 1e3)} running, ${fmtMicros(path.path_wait_ns / 1e3)} waiting`));
    // What if: the step replayed with one op, or every op of a type, faster.
    const types = [...new Set(path.path.map((op) => op.op_type))];
    const target = el('input', {
      type: 'text',
      name: 'what_if',
      list: 'what-if-ops',
      value: whatIf || types[0] || '',
      placeholder: 'op type or node name'
    });
    const factor = el('input', {type: 'number', name: 'speedup', min: '0.01', step: 'any', value: speedup});
    const whatIfForm =
        el('form', {class: 'controls what-if'},
           el('datalist', {id: 'what-if-ops'},
              [...types, ...path.path.map((op) => op.name)].map((v) => el('option', {value: v}))),
           el('label', {}, 'what if', target), el('label', {}, 'ran this many times faster', factor),
           el('button', {type: 'submit', text: 'replay the step'}));
    whatIfForm.addEventListener('submit', (e) => {
      e.preventDefault();
      location.hash = hashFor('advice', {run, step: data.step, what_if: target.value, speedup: factor.value});
    });
    parts.push(whatIfForm);
    if (data.what_if) {
      const w = data.what_if;
      const change = w.wall_ns ? (100 * (w.new_wall_ns - w.wall_ns) / w.wall_ns).toFixed(1) : '0';
      parts.push(el(
          'p', {class: 'what-if-result'},
          `What if ${w.target} (${w.matched_ops} op${w.matched_ops === 1 ? '' : 's'}) ran ${w.speedup}x faster: wall ` +
              `${fmtMicros(w.wall_ns / 1e3)} → ${fmtMicros(w.new_wall_ns / 1e3)} (${change > 0 ? '+' : ''}${
                  change}%). ` +
              (w.path_moved ? 'The critical path moves to other ops (below, the replayed step\'s).' :
                              'The critical path stays on the same ops.')));
      parts.push(dataTable(
          [
            {key: 'order', label: '#', num: true},
            {key: 'start_ns', label: 'start', num: true, fmt: (v) => fmtMicros(v / 1e3)},
            {key: 'duration_ns', label: 'duration', num: true, fmt: (v) => fmtMicros(v / 1e3)},
            {key: 'op_type', label: 'op'},
            {key: 'name', label: 'node'},
          ],
          w.after.path.map((op, i) => ({...op, order: i + 1})),
          {sortKey: 'order', sortDir: 1, className: 'what-if-path'}));
      parts.push(el('h2', {text: 'The recorded critical path'}));
    }
    const rows = path.path.map((op, i) => ({ ...op, order: i + 1 }));
    parts.push(dataTable([
      { key: 'order', label: '#', num: true },
      { key: 'start_ns', label: 'start', num: true, fmt: (v) => fmtMicros(v / 1e3) },
      { key: 'wait_ns', label: 'wait', num: true, fmt: (v) => fmtMicros(v / 1e3) },
      { key: 'duration_ns', label: 'duration', num: true, fmt: (v) => fmtMicros(v / 1e3) },
      { key: 'share', label: 'share of the step', num: true, fmt: (v, r) => el('span', {},
          el('span', { class: 'bar', style: `width:${Math.round(v * 200)}px` }),
          el('span', { class: 'bar wait', style: `width:${Math.round(r.wait_share * 200)}px` }), `${(v * 100).toFixed(1)}%`) },
      { key: 'op_type', label: 'op' },
      { key: 'name', label: 'node' },
      { key: 'via', label: 'after' },
    ], rows, { filter: true, sortKey: 'order', sortDir: 1, className: 'critical-path' }));
    parts.push(el('h2', { text: 'Threads' }), dataTable([
      { key: 'device', label: 'device' }, { key: 'thread_id', label: 'thread', num: true },
      { key: 'ops', label: 'ops', num: true }, { key: 'busy_ns', label: 'busy', num: true, fmt: (v) => fmtMicros(v / 1e3) },
      { key: 'utilisation', label: 'utilisation', num: true, fmt: (v) => `${(v * 100).toFixed(1)}%` },
    ], path.threads.map((t) => ({ ...t, name: t.device })), { className: 'threads' }));
    parts.push(el('h2', { text: 'Advice (all kept steps)' }));
    for (const [name, checker] of Object.entries(data.advice.checkers)) {
      parts.push(el('h3', { text: name }), el('pre', { class: 'report', text: checker.reports.join('\n') || '(nothing to report)' }));
    }
    app.replaceChildren(...parts);
  } catch (e) {
    showError(app, e);
  }
}

// A step's memory, from its timeline: the allocators' counters over the step and the tensors
// (their snapshots' allocation descriptions), largest first.
async function readTrace(path) {
  const response = await fetch('/' + urlPath(path));
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  if (!path.endsWith('.gz')) return response.json();
  const text = await new Response(response.body.pipeThrough(new DecompressionStream('gzip'))).text();
  return JSON.parse(text);
}

function memoryOf(trace) {
  const events = Array.isArray(trace) ? trace : trace.traceEvents || [];
  const counters = new Map();  // "name: series" -> [[ts, value]]
  const tensors = new Map();   // pid:id -> {name, created, destroyed, bytes, ...}
  let t0 = Infinity;
  for (const e of events) if (e.ph !== 'M' && typeof e.ts === 'number') t0 = Math.min(t0, e.ts);
  for (const e of events) {
    if (e.ph === 'C' && e.args) {
      for (const [k, v] of Object.entries(e.args)) {
        const key = `${e.name}: ${k}`;
        if (!counters.has(key)) counters.set(key, []);
        counters.get(key).push([e.ts - t0, v]);
      }
    } else if ((e.ph === 'N' || e.ph === 'O' || e.ph === 'D') && e.id !== undefined) {
      const key = `${e.pid}:${e.id}`;
      const t = tensors.get(key) || { name: e.name, created: null, destroyed: null, bytes: 0, allocated: 0, shape: '', allocator: '' };
      if (e.ph === 'N') t.created = e.ts - t0;
      if (e.ph === 'D') t.destroyed = e.ts - t0;
      const desc = e.args && e.args.snapshot && e.args.snapshot.tensor_description;
      if (typeof desc === 'string') {
        const num = (re) => { const m = desc.match(re); return m ? Number(m[1]) : 0; };
        t.bytes = num(/requested_bytes: (\d+)/);
        t.allocated = num(/allocated_bytes: (\d+)/);
        const m = desc.match(/allocator_name: "?([^"\n]+)"?/);
        t.allocator = m ? m[1] : '';
        t.shape = [...desc.matchAll(/size: (\d+)/g)].map((x) => x[1]).join('×');
      }
      tensors.set(key, t);
    }
  }
  return { counters, tensors: [...tensors.values()] };
}

// The peak split by kind, as one stacked bar and its legend.
const KINDS = [
  ['parameters', 'parameters'], ['optimizer_slots', 'optimizer slots'], ['gradients', 'gradients'],
  ['activations', 'activations'], ['other', 'other']
];
function memoryKindsBar(m) {
  const total = m.peak_bytes || 1;
  const bar =
      el('div', {class: 'kinds-bar'},
         KINDS.map(([key], i) => el('span', {
                     class: `kind kind-${key}`,
                     style: `width:${(100 * m[key] / total).toFixed(2)}%;background:${COLORS[i]}`,
                     title: `${key}: ${fmtBytes(m[key])}`,
                     'data-bytes': m[key]
                   })));
  const legend =
      el('div', {class: 'legend'},
         KINDS.map(([key, label], i) => el('span', {
                     style: `--c:${COLORS[i]}`,
                     text: `${label} ${fmtBytes(m[key])} (${(100 * m[key] / total).toFixed(1)}%)  `
                   })));
  return el(
      'div', {class: 'memory-kinds'}, el('h2', {
        text: `Peak memory by kind: ${fmtBytes(m.peak_bytes)} (${fmtBytes(m.persistent_bytes)} of variables, ${
            fmtBytes(m.transient_peak_bytes)} allocated in the step)`
      }),
      bar, legend);
}

async function memoryPage(params) {
  const trace = params.get('trace');
  const run = params.get('run') || '.';
  setCrumbs(el('a', { href: '#/', text: 'runs' }), el('a', { href: hashFor('run', { path: run }), text: run }),
            el('span', { text: `memory of ${trace}` }));
  app.replaceChildren(el('p', { class: 'muted', text: `reading ${trace} ...` }));
  try {
    const { counters, tensors } = memoryOf(await readTrace(trace));
    const parts = [el('h1', { text: `Memory over ${trace}` }),
                   el('p', {}, el('a', { href: '/viewer/' + urlPath(trace), text: 'open the step in the timeline viewer' }))];
    // The step's peak by kind, from the run's profile (it knew the graph when the step was added).
    const step = (trace.match(/timeline-(\d+)\.json/) || [])[1];
    if (step !== undefined) {
      try {
        const m = (await api(`${runUrl('memory', run)}?step=${step}`)).memory_by_kind;
        if (m) parts.push(memoryKindsBar(m));
      } catch (e) { /* no profile, or not this step: the rest of the page still says a lot */
      }
    }
    if (!counters.size && !tensors.length) {
      parts.push(el('p', { class: 'muted', text: 'This timeline has no memory tracks: ProfilerHook writes them with show_memory=true (or convert the step\'s run_metadata-<step>.pb with `stepscope timeline --show_memory`).' }));
    } else {
      const series = [...counters.entries()].map(([name, points]) => ({ name, points }));
      parts.push(el('div', { class: 'charts wide memory' }, lineChart('Allocator memory over the step (bytes in use)', series,
        { xLabel: 'µs into the step', yFmt: fmtBytes, stepLine: true, width: 1200, height: 300 })));
      const peak = Math.max(0, ...series.flatMap((s) => s.points.map((p) => p[1])));
      parts.push(el('p', { class: 'summary', text: `peak ${fmtBytes(peak)} · ${tensors.length} tensors` }));
      parts.push(el('h2', { text: 'Largest tensors' }), dataTable([
        { key: 'name', label: 'tensor' },
        { key: 'bytes', label: 'requested', num: true, fmt: fmtBytes },
        { key: 'allocated', label: 'allocated', num: true, fmt: fmtBytes },
        { key: 'shape', label: 'shape' },
        { key: 'allocator', label: 'allocator' },
        { key: 'created', label: 'from', num: true, fmt: (v) => fmtMicros(v) },
        { key: 'lifetime', label: 'lives', num: true, fmt: (v) => fmtMicros(v) },
      ], tensors.map((t) => ({ ...t, lifetime: t.destroyed !== null && t.created !== null ? t.destroyed - t.created : null })),
      { filter: true, sortKey: 'bytes', sortDir: -1, className: 'tensors', limit: 200 }));
    }
    app.replaceChildren(...parts);
  } catch (e) {
    showError(app, e);
  }
}

// A data-parallel job: its ranks and traced steps (each step's ranks merged into one timeline on
// rank 0's clock, opened in the viewer), and for the chosen step who waited for whom at each
// collective: each rank's total wait as a bar, then the collectives, the longest waits first.
async function jobPage(params) {
  const path = params.get('path') || '.';
  const chosen = params.get('step');
  setCrumbs(el('a', {href: '#/', text: 'runs'}), el('span', {text: `job ${path}`}));
  let lastJob = null, stragglers = null;
  poll(async () => {
    const jobText = JSON.stringify(await api(runUrl('job', path)));
    if (jobText === lastJob && stragglers) return;
    lastJob = jobText;
    const job = JSON.parse(jobText);
    const step = chosen !== null ? chosen : String(job.steps[job.steps.length - 1].step);
    stragglers = await api(`${runUrl('stragglers', path)}?step=${encodeURIComponent(step)}`);
    const viewer = (s) =>
        `/viewer/${urlPath(path === '.' ? `timeline-${s}.json` : `${path}/timeline-${s}.json`)}?merged=1`;
    const parts = [el('h1', {text: `Job ${path}: ${job.ranks.length} ranks`})];
    parts.push(
        el('h2', {text: 'Ranks'}),
        dataTable(
            [
              {key: 'rank', label: 'rank', num: true},
              {key: 'run', label: 'run', fmt: (v) => el('a', {href: hashFor('run', {path: v}), text: v})},
              {key: 'traced', label: 'traced steps', num: true},
            ],
            job.ranks.map((r) => ({...r, traced: r.steps.length})), {sortKey: 'rank', sortDir: 1, className: 'ranks'}));
    parts.push(
        el('h2', {text: `Traced steps (${job.steps.length})`}),
        dataTable(
            [
              {key: 'step', label: 'step', num: true},
              {key: 'ranks', label: 'ranks traced', fmt: (v) => `${v.length} of ${job.ranks.length} (${v.join(', ')})`},
              {
                key: 'links',
                label: '',
                fmt: (v, r) => el(
                    'span', {class: 'links'},
                    el('a', {class: 'merged-view', href: viewer(r.step), text: 'merged timeline'}),
                    el('a', {class: 'stragglers-link', href: hashFor('job', {path, step: r.step}), text: 'stragglers'}))
              },
            ],
            job.steps, {sortKey: 'step', sortDir: -1, className: 'job-steps'}));

    const {collectives, total_wait_us: totals} = stragglers.stragglers;
    parts.push(el('h2', {text: `Step ${stragglers.step}: who waited for whom at its collectives`}));
    if (!collectives.length) {
      parts.push(el('p', {
        class: 'muted',
        text:
            'No collective of this step ran on two ranks or more (a step traced by one rank only, or a program without collectives).'
      }));
    } else {
      const most = Math.max(1e-9, ...Object.values(totals));
      parts.push(
          el('div', {class: 'rank-waits'},
             Object.entries(totals).map(
                 ([rank, us]) =>
                     el('div', {class: 'rank-wait', 'data-rank': rank, 'data-us': us},
                        el('span', {class: 'rank-label', text: `rank ${rank} `}),
                        el('span', {class: 'bar wait', style: `width:${Math.round(400 * us / most)}px`}),
                        el('span', {text: `waited ${fmtMicros(us)} in all`})))));
      const ranks = Object.keys(totals);
      parts.push(dataTable(
          [
            {key: 'collective', label: 'collective'},
            {key: 'last_rank', label: 'last to arrive', num: true, fmt: (v) => `rank ${v}`},
            {key: 'max_wait_us', label: 'longest wait', num: true, fmt: fmtMicros},
            ...ranks.map((r) => ({
                           key: `wait_${r}`,
                           label: `rank ${r} waited`,
                           num: true,
                           fmt: (v) => (v === undefined ? '' : fmtMicros(v))
                         })),
          ],
          collectives.map(
              (c) => ({...c, ...Object.fromEntries(Object.entries(c.wait_us).map(([r, us]) => [`wait_${r}`, us]))})),
          {sortKey: 'max_wait_us', sortDir: -1, className: 'stragglers'}));
    }
    parts.push(el('p', {}, el('a', {
                    class: 'merged-view-step',
                    href: viewer(stragglers.step),
                    text: `open step ${stragglers.step} merged in the timeline viewer`
                  })));
    app.replaceChildren(...parts);
  });
}

// ----- Routing ---------------------------------------------------------------------------------

const PAGES = {
  '': runsPage,
  run: runPage,
  job: jobPage,
  tfprof: tfprofPage,
  advice: advicePage,
  memory: memoryPage
};

function route() {
  routeId += 1;
  if (poller) clearInterval(poller);
  poller = null;
  setLive('');
  const hash = location.hash.replace(/^#\/?/, '');
  const q = hash.indexOf('?');
  const page = q < 0 ? hash : hash.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : hash.slice(q + 1));
  (PAGES[page] || runsPage)(params);
}

window.addEventListener('hashchange', route);
route();
