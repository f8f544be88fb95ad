// Saves windows of every trace under TRACE_DIR as `stepscope serve` hands them to its windowed
// viewer page (/api/trace_window): per trace the whole range, three partial ranges and two
// down-sampled ones (max_events forces down-sampling on small traces), as files under OUT_DIR,
// for catapult_import.mjs to check that every one imports cleanly (flows and tensor objects cut
// by a window's edges must not be).
//
//   node save_windows.mjs STEPSCOPE_BINARY TRACE_DIR OUT_DIR
import { startServe } from './serve_lib.mjs';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [binary, traceDir, out] = process.argv.slice(2);
if (!out) {
  console.error('usage: node save_windows.mjs STEPSCOPE_BINARY TRACE_DIR OUT_DIR');
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const { server, url } = await startServe(binary, traceDir);
try {
  const traces = await (await fetch(`${url}api/traces`)).json();
  let saved = 0, sampled = 0;
  for (const [n, trace] of traces.entries()) {
    const path = trace.path.split('/').map(encodeURIComponent).join('/');
    const reply = await fetch(`${url}api/trace_summary/${path}`);
    if (!reply.ok) throw new Error(`${trace.path}: summary: HTTP ${reply.status}: ${await reply.text()}`);
    const s = await reply.json();
    if (s.events === 0) continue;
    const r = s.end - s.start;
    const windows = {
      all: [s.start, s.end, 500, 150000], head: [s.start, s.start + 0.1 * r, 500, 150000],
      mid: [s.start + 0.3 * r, s.start + 0.6 * r, 500, 150000], tail: [s.start + 0.8 * r, s.end, 50, 150000],
      sampled: [s.start, s.end, 20, 5], 'sampled-mid': [s.start + 0.2 * r, s.start + 0.7 * r, 7, 3],
    };
    for (const [tag, [start, end, resolution, maxEvents]] of Object.entries(windows)) {
      const w = await fetch(`${url}api/trace_window/${path}?start=${start}&end=${end}` +
                            `&resolution=${resolution}&max_events=${maxEvents}`);
      if (!w.ok) throw new Error(`${trace.path} ${tag}: HTTP ${w.status}: ${await w.text()}`);
      sampled += w.headers.get('X-Stepscope-Window-Sampled') === '1';
      writeFileSync(join(out, `${n}-${tag}.json`), await w.text());
      ++saved;
    }
  }
  console.log(`save_windows: ${saved} windows (${sampled} down-sampled) of ${traces.length} traces in ${out}`);
} finally {
  server.kill('SIGTERM');
}
