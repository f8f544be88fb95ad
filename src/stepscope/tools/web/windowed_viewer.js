// serve's viewer page for a big trace (trace_window.h): an overview strip of the whole trace's
// density, and the events of the range picked on it, fetched from the server as windows and
// imported into catapult's viewer. Needs TRACE, URL_PATH, say(), importTrace(data) and
// showModel(model) from the viewer page's own script (render_viewer in trace_server.cc), which
// calls startWindowed().
'use strict';
let summary = null, shown = null, loading = 0;
const api = (route) => '/api/' + route + URL_PATH;
const resolution = () => Math.max(200, Math.min(8000, Math.round(window.innerWidth || 1400)));
// The server indexes the trace while catapult's viewer loads (seconds, both): the summary and
// the first window (the whole trace) are asked for at once.
const prefetched = {
  summary: fetch(api('trace_summary')),
  first: fetch(api('trace_window') + '?resolution=' + resolution())
};
async function errorOf(response) {
  const text = await response.text();
  try {
    return JSON.parse(text).error;
  } catch (e) {
    return TRACE + ': HTTP ' + response.status + ': ' + text;
  }
}
const ms = (us) => (us / 1000).toFixed(3) + ' ms';
function overviewX(t, canvas) {
  return (t - summary.start) / Math.max(1e-9, summary.end - summary.start) * canvas.width;
}
function overviewT(x, canvas) {
  return summary.start + x / canvas.width * (summary.end - summary.start);
}
function drawOverview(selection) {
  const canvas = document.getElementById('overview');
  canvas.width = canvas.clientWidth || window.innerWidth;
  const g = canvas.getContext('2d'), h = canvas.height, d = summary.density;
  g.fillStyle = '#f4f4f4';
  g.fillRect(0, 0, canvas.width, h);
  const top = Math.max(1, ...d), w = canvas.width / d.length;
  g.fillStyle = '#3367d6';
  d.forEach((n, i) => {
    if (n) {
      const bar = Math.max(1, Math.sqrt(n / top) * (h - 2));
      g.fillRect(i * w, h - bar, Math.max(1, w), bar);
    }
  });
  const mark = (a, b, colour) => {
    g.fillStyle = colour;
    const x0 = overviewX(a, canvas), x1 = overviewX(b, canvas);
    g.fillRect(x0, 0, Math.max(2, x1 - x0), h);
  };
  if (shown) mark(shown.start, shown.end, 'rgba(255,165,0,0.3)');
  if (selection) mark(Math.min(...selection), Math.max(...selection), 'rgba(0,0,0,0.2)');
}
async function showWindow(start, end, fetched) {
  // Inside the trace, keeping the width (prev at the start, next at the end).
  const width = Math.min(Math.max(0, end - start), summary.end - summary.start);
  start = Math.max(Math.min(start, summary.end - width), summary.start);
  end = Math.min(start + width, summary.end);
  const ticket = ++loading;
  document.getElementById('window-info').textContent =
      'loading ' + ms(start - summary.start) + ' to ' + ms(end - summary.start) + ' ...';
  const response =
      await (fetched || fetch(api('trace_window') + '?start=' + start + '&end=' + end + '&resolution=' + resolution()));
  if (ticket !== loading) return;
  if (!response.ok) return say(await errorOf(response));
  const text = await response.text();
  const events = Number(response.headers.get('X-Stepscope-Window-Events'));
  const overlapping = Number(response.headers.get('X-Stepscope-Window-Overlapping'));
  const sampled = response.headers.get('X-Stepscope-Window-Sampled') === '1';
  let model;
  try {
    model = await importTrace(text);
  } catch (e) {
    return say(TRACE + ': ' + e);
  }
  if (ticket !== loading) return;
  shown = {start, end, sampled, events, overlapping, total: summary.events};
  window.stepscopeWindow = shown;
  showModel(model);
  document.getElementById('window-start').value = ((start - summary.start) / 1000).toFixed(3);
  document.getElementById('window-end').value = ((end - summary.start) / 1000).toFixed(3);
  document.getElementById('window-info').textContent = ms(start - summary.start) + ' to ' + ms(end - summary.start) +
      ' of ' + ms(summary.end - summary.start) + ' (the viewer counts from the window\'s start): ' +
      (sampled ? events + ' of ' + overlapping + ' events (down-sampled, no flows or tensors): zoom in for all' :
                 'every event of the range (' + events +
               ' with the metadata; flows and tensors that cross its edges left out)');
  document.getElementById('window-info').className = sampled ? 'sampled' : 'complete';
  drawOverview();
}
async function startWindowed() {
  document.body.classList.add('windowed');
  const bar = document.createElement('div');
  bar.id = 'window-bar';
  bar.innerHTML = '<canvas id="overview" height="48" title="drag to choose a time range"></canvas><div>' +
      '<button id="window-all">all</button> <button id="window-prev">&#9664;</button> ' +
      '<button id="window-next">&#9654;</button> <button id="window-in">zoom in</button> ' +
      '<button id="window-out">zoom out</button> from <input id="window-start" size="10"> to ' +
      '<input id="window-end" size="10"> ms <button id="window-go">show</button> ' +
      '<span id="window-info"></span></div>';
  document.body.insertBefore(bar, document.body.firstChild);
  say('indexing ' + TRACE + ' on the server ...');
  const response = await prefetched.summary;
  if (!response.ok) return say(await errorOf(response));
  summary = await response.json();
  say(TRACE + ': ' + summary.events + ' events: the viewer shows a window of it at a time');
  const canvas = document.getElementById('overview');
  let drag = null;
  canvas.addEventListener('mousedown', (e) => {
    drag = [e.offsetX, e.offsetX];
    drawOverview(drag);
  });
  canvas.addEventListener('mousemove', (e) => {
    if (drag) {
      drag[1] = e.offsetX;
      drawOverview(drag);
    }
  });
  window.addEventListener('mouseup', () => {
    if (!drag) return;
    const [a, b] = [Math.min(...drag), Math.max(...drag)];
    drag = null;
    if (b - a < 3) {  // a click: the same width, centred there
      const half = (shown.end - shown.start) / 2, t = overviewT(a, canvas);
      return showWindow(t - half, t + half);
    }
    showWindow(overviewT(a, canvas), overviewT(b, canvas));
  });
  const width = () => shown.end - shown.start;
  document.getElementById('window-all').onclick = () => showWindow(summary.start, summary.end);
  document.getElementById('window-prev').onclick = () => showWindow(shown.start - width(), shown.start);
  document.getElementById('window-next').onclick = () => showWindow(shown.end, shown.end + width());
  document.getElementById('window-in').onclick = () => showWindow(shown.start + width() / 4, shown.end - width() / 4);
  document.getElementById('window-out').onclick = () => showWindow(shown.start - width() / 2, shown.end + width() / 2);
  document.getElementById('window-go').onclick = () => {
    const a = Number(document.getElementById('window-start').value),
          b = Number(document.getElementById('window-end').value);
    if (!Number.isFinite(a) || !Number.isFinite(b) || a > b) return say('the range must be two numbers, from <= to');
    showWindow(summary.start + a * 1000, summary.start + b * 1000);
  };
  window.stepscopeShowWindow = showWindow;
  window.addEventListener('resize', () => drawOverview());
  await showWindow(summary.start, summary.end, prefetched.first);
}
