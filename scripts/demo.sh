#!/usr/bin/env bash
# Installs what is missing, builds (Release) and runs the demo on the shipped digits data.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"${JOBS:-2}" --target demo stepscope_cli
./build/demo "$@"
