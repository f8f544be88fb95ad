#!/usr/bin/env bash
# Browser tests in headless Chromium (tests/browser; playwright-core from its package-lock.json):
#
#   scripts/browser_test.sh [FILE|DIR...]
#     loads Chrome traces into catapult's trace importer (the code behind chrome://tracing, the
#     viewer of the seeds) and fails when any is mis-drawn: import warnings, flows not bound at
#     both ends, slices nested outside their parents, counters or tensor objects missing
#     (catapult_import.mjs). With no argument, the demo's timelines (runs/demo).
#   scripts/browser_test.sh --serve RUNS_DIR [BUILD_DIR]
#     runs `stepscope serve RUNS_DIR` and clicks through its pages: runs → run (step time,
#     scalars, traces; a trace written meanwhile appears without a reload) → a step in the viewer
#     it serves → tfprof's four views → advisor and critical path → a step's memory; checks what
#     each shows against the server's API and saves screenshots under BUILD_DIR/browser-artifacts
#     (serve_viewer.mjs; BUILD_DIR defaults to build). RUNS_DIR needs a run with timelines and a
#     profile, and one with memory tracks; the live check writes (then removes) a file in it.
#   scripts/browser_test.sh --windowed [BUILD_DIR [TRACE_DIR]]
#     a big generated trace (~260,000 events) in `stepscope serve`'s viewer, shown through
#     server-side windows: the down-sampled overview, a narrow complete window, a drag on the
#     overview strip (serve_windowed.mjs); then two of its windows, saved as files, and six
#     windows (whole, partial, down-sampled) of every trace under TRACE_DIR (save_windows.mjs)
#     through catapult_import.mjs. Screenshots and the windows under BUILD_DIR/browser-artifacts.
#
# scripts/test.sh runs both: the first on every trace the test suite found clean
# (STEPSCOPE_TRACE_CORPUS), the second on the demo run the tests trained.
# Needs chromium, golang-1.19-src (catapult's viewer) and npm: scripts/install-deps.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -d "$root/tests/browser/node_modules/playwright-core" ]; then
  npm ci --prefix "$root/tests/browser" --no-audit --no-fund --loglevel=error
fi
if [ "${1:-}" = "--serve" ]; then
  run_dir="${2:?--serve needs the directory of runs}"
  build="${3:-$root/build}"
  exec node "$root/tests/browser/serve_viewer.mjs" "$build/stepscope" "$run_dir" "$build/browser-artifacts"
fi
if [ "${1:-}" = "--windowed" ]; then
  build="${2:-$root/build}"
  artifacts="$build/browser-artifacts"
  node "$root/tests/browser/serve_windowed.mjs" "$build/stepscope" "$artifacts"
  windows=("$artifacts/window_sampled.json" "$artifacts/window_complete.json")
  if [ -n "${3:-}" ]; then
    rm -rf "$artifacts/windows"
    node "$root/tests/browser/save_windows.mjs" "$build/stepscope" "$3" "$artifacts/windows"
    windows+=("$artifacts/windows")
  fi
  exec node "$root/tests/browser/catapult_import.mjs" "${windows[@]}"
fi
[ $# -gt 0 ] || set -- "$root/runs/demo"
exec node "$root/tests/browser/catapult_import.mjs" "$@"
