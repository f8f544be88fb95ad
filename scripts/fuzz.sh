#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/*_fuzzer.cc) for a fixed time each, over the seed corpora in
# fuzz/corpus/<target>/ (real files stepscope wrote). Built with clang, ASan and UBSan.
#
#   scripts/fuzz.sh                      # 30 s per target (what scripts/test.sh runs)
#   scripts/fuzz.sh --seconds 3600       # a deeper run: an hour per target
#   scripts/fuzz.sh --seconds 600 csv_fuzzer idx_fuzzer
#
# New inputs that reach new code are kept in <build>/fuzz-corpus/<target>/ (the committed seeds are
# never modified); a crash, leak, sanitizer report, timeout (>10 s for one input) or an input that
# makes a parser ask for more than 2 GiB stops that target, is saved under
# <build>/fuzz-crashes/<target>/ and makes this script exit 1 with the command that reproduces it.
# FUZZ_BUILD_DIR (default build-asan) is the build used; it is configured if it does not exist.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=30
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/*_fuzzer.cc; do targets+=("$(basename "$f" .cc)"); done
fi

build=${FUZZ_BUILD_DIR:-build-asan}
jobs=${JOBS:-2}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-16 \
        -DSTEPSCOPE_SANITIZE=ON -DSTEPSCOPE_FUZZ=ON -DSTEPSCOPE_BENCHMARKS=OFF >/dev/null
fi
cmake --build "$build" -j"$jobs" --target "${targets[@]}"

# The targets' scratch files (a profile to load, a served directory) go to a directory of this
# run's, removed when it ends: libFuzzer ends a target at its time limit without its cleanup.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/stepscope-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

run_one() {  # target -> exit status; its log in $build/fuzz-logs/<target>.log
  local target=$1 corpus="$build/fuzz-corpus/$1" crashes="$build/fuzz-crashes/$1"
  mkdir -p "$corpus" "$crashes" "$build/fuzz-logs"
  cp -n fuzz/corpus/"$target"/* "$corpus"/ 2>/dev/null || true
  TMPDIR="$scratch" ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
      -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" >"$build/fuzz-logs/$target.log" 2>&1
}

# Two targets at a time (two cores); each prints one line when it ends.
failed=0
pids=()
names=()
report() {  # pid name
  local status=0
  wait "$1" || status=$?
  local runs
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz-logs/$2.log" | grep -o '[0-9]*$' || echo "?")
  if [ "$status" = 0 ]; then
    echo "fuzz $2: ok, $runs inputs in ${seconds}s"
  else
    failed=1
    echo "fuzz $2: FAILED (exit $status) — log: $build/fuzz-logs/$2.log"
    grep -m3 -E 'ERROR|SUMMARY|Test unit written' "$build/fuzz-logs/$2.log" | sed 's/^/    /' || true
    for crash in "$build/fuzz-crashes/$2"/*; do
      [ -e "$crash" ] && echo "    reproduce: $build/$2 $crash"
    done
  fi
}
for target in "${targets[@]}"; do
  if [ ! -x "$build/$target" ]; then echo "fuzz.sh: no fuzz target '$target' in $build" >&2; exit 2; fi
  run_one "$target" & pids+=($!); names+=("$target")
  if [ ${#pids[@]} -ge "$jobs" ]; then
    report "${pids[0]}" "${names[0]}"; pids=("${pids[@]:1}"); names=("${names[@]:1}")
  fi
done
while [ ${#pids[@]} -gt 0 ]; do
  report "${pids[0]}" "${names[0]}"; pids=("${pids[@]:1}"); names=("${names[@]:1}")
done
exit "$failed"
