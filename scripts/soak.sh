#!/usr/bin/env bash
# The long soak test: 100k training steps of the demo's MLP with every hook on (a trace every
# 100 steps: 1,000 traces), RSS sampled every 1,000 steps; after a 10k-step warm-up it must stay
# flat within 1%, else examples/soak.cc prints the samples and this exits non-zero. Builds the
# Release `soak` program first. ctest runs a short version (example.soak: 3,000 steps, a trace
# every step, 15%).
#
#   scripts/soak.sh [extra soak flags, e.g. --save-steps 1]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"${JOBS:-2}" --target soak
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
build/soak --data data/digits.csv.gz --logdir "$dir/run" --steps 100000 --save-steps 100 \
  --sample-every 1000 --warmup 10000 --tolerance 0.01 "$@"
