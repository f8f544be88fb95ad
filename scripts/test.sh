#!/usr/bin/env bash
# Installs what is missing, builds (Release) and runs every test, then loads every trace the tests
# found clean into chrome://tracing's importer in headless Chromium (scripts/browser_test.sh); then builds and runs them
# again under AddressSanitizer + UndefinedBehaviorSanitizer (clang) and runs every fuzz target for
# FUZZ_SECONDS (default 30) over its seed corpus (scripts/fuzz.sh); then the concurrency tests
# (thread pool, executor, coordinator, monitored sessions, hooks, the trace server) under
# ThreadSanitizer, which must report nothing. SKIP_SANITIZERS=1 / SKIP_TSAN=1 leave them out.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=${JOBS:-2}
# The three build trees, ccache and the browser checks' files take ~6 GB: say so at the start
# where the disk has less, rather than as a linker's "No space left on device" half an hour in.
need_gb=6
free_gb=$(df -Pk . | awk 'NR == 2 { print int($4 / 1048576) }')
if [ "${free_gb:-0}" -lt "$need_gb" ]; then
  echo "test.sh: warning: ${free_gb} GB free on $(df -P . | awk 'NR == 2 { print $6 }'); a cold run needs" \
       "~${need_gb} GB (build, build-asan, build-tsan). Free some, or SKIP_SANITIZERS=1 for build/ alone." >&2
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
# Every trace a test finds clean is also kept in the corpus (testing/trace_validator.h) ...
corpus="$PWD/build/trace-corpus"
rm -rf "$corpus"
(cd build && STEPSCOPE_TRACE_CORPUS="$corpus" ctest --output-on-failure -j"$jobs")
# ... and must import cleanly into catapult's importer (chrome://tracing) in headless Chromium;
# a trace that chrome://tracing mis-draws must fail there (or the check proves nothing).
mapfile -t example_timelines < <(find build -path build/trace-corpus -prune -o \
                                  \( -name 'timeline-*.json' -o -name 'timeline-*.json.gz' \) -type f -print)
scripts/browser_test.sh "$corpus" "${example_timelines[@]}"
# `stepscope serve` on runs the tests trained (the tutorial's timeline_track and model_dir, the Fashion-MNIST CNN's
# timelines with memory), every page clicked through offline (screenshots in build/browser-artifacts).
rm -rf build/serve-runs && mkdir -p build/serve-runs
cp -r build/timeline_track build/fashion_timelines build/model_dir build/serve-runs/
# ... and the data-parallel example's 2 ranks (example.distributed_digits_np2), a job shown merged.
expect_job=0
if grep -q '^STEPSCOPE_MPI:BOOL=ON' build/CMakeCache.txt; then
  cp -r build/distributed_runs/digits build/serve-runs/
  expect_job=1
fi
SERVE_EXPECT_JOB=$expect_job scripts/browser_test.sh --serve build/serve-runs build
# A big trace (~260,000 events) in the viewer through server-side windows (trace_window.h), and
# windows of every trace in the corpus, which must import as cleanly as the traces themselves.
scripts/browser_test.sh --windowed build "$corpus"
if scripts/browser_test.sh tests/browser/must_fail >/dev/null; then
  echo "tests/browser: catapult_import.mjs passed traces that chrome://tracing mis-draws" >&2
  exit 1
fi

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

if [ "${SKIP_SANITIZERS:-0}" != 1 ] && [ "${SKIP_TSAN:-0}" != 1 ]; then
  # Only the programs holding the concurrency tests are built, and only those tests run: the
  # whole suite under TSan would cost the CI run far more than it finds.
  # Profiler.ABig*: the tfprof work a big step or view does on a second thread.
  tsan_tests='^((ThreadPool|ThreadBeside|BulkArena|BigViews|MappingAhead|StepStats|Executor|Coordinator|MonitoredSession|MonitoredTrainingSession|SingularMonitoredSession|RunStepFn|ProfilerHookTest|ProfilerHook|TraceServerTest|WebApiTest|TraceWindowServerTest)\.|Profiler\.ABig)'
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTEPSCOPE_TSAN=ON -DSTEPSCOPE_BENCHMARKS=OFF >/dev/null
  cmake --build build-tsan -j"$jobs" --target base_test runtime_test hooks_test tools_test profiler_test
  # halt_on_error: the first report fails the test (exit code 66). OpenBLAS is not instrumented:
  # one thread of it, so none of its work races with what TSan sees.
  # scripts/tsan.supp: what an uninstrumented library (cpp-httplib) does is not judged.
  supp="$PWD/scripts/tsan.supp"
  (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$supp" \
     OPENBLAS_NUM_THREADS=1 \
     ctest --output-on-failure -j"$jobs" -R "$tsan_tests")
fi
