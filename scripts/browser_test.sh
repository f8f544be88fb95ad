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
[ $# -gt 0 ] || set -- "$root/runs/demo"
exec node "$root/tests/browser/catapult_import.mjs" "$@"
