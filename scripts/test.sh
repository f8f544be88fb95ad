#!/usr/bin/env bash
# Installs what is missing, builds (Release) and runs every test; then builds and runs them
# again under AddressSanitizer + UndefinedBehaviorSanitizer (clang), and runs every fuzz target for
# FUZZ_SECONDS (default 30) each over its seed corpus (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=${JOBS:-2}

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")

if [ "${SKIP_SANITIZERS:-0}" != 1 ]; then
  # The same build holds the fuzz targets, so it is made with clang; a build-asan an older
  # version configured with g++ is started afresh.
  if [ -f build-asan/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang++-16' build-asan/CMakeCache.txt; then
    rm -rf build-asan
  fi
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-16 \
        -DSTEPSCOPE_SANITIZE=ON -DSTEPSCOPE_FUZZ=ON -DSTEPSCOPE_BENCHMARKS=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j"$jobs")
  FUZZ_BUILD_DIR=build-asan scripts/fuzz.sh --seconds "${FUZZ_SECONDS:-30}"
fi
