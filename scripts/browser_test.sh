#!/usr/bin/env bash
# Loads Chrome traces into catapult's trace importer (the code behind chrome://tracing, the viewer
# of the seeds) in headless Chromium and fails when any is mis-drawn: import warnings, flows not
# bound at both ends, slices nested outside their parents, counters or tensor objects missing
# (tests/browser/catapult_import.mjs). With no argument, the demo's timelines (runs/demo).
#
#   scripts/browser_test.sh [FILE|DIR...]
#
# scripts/test.sh runs it on every trace the test suite found clean (STEPSCOPE_TRACE_CORPUS).
# Needs chromium, golang-1.19-src (catapult's viewer) and npm (scripts/install-deps.sh); the npm
# packages are installed from tests/browser/package-lock.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -d "$root/tests/browser/node_modules/playwright-core" ]; then
  npm ci --prefix "$root/tests/browser" --no-audit --no-fund --loglevel=error
fi
[ $# -gt 0 ] || set -- "$root/runs/demo"
exec node "$root/tests/browser/catapult_import.mjs" "$@"
