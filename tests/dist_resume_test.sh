#!/bin/sh
# dist.resume_from_checkpoint (CMakeLists.txt): a 2-rank job whose rank 1 raises at global step 13
# ends with an error within the shutdown timeout (not a hang); the chief's latest checkpoint (step
# 10: they are saved every 5 steps) stays valid; a second job resumes from it, not from step 0,
# and ends with the variables of an uninterrupted 2-rank job.
#
#   dist_resume_test.sh MPIEXEC PROGRAM
set -u
mpiexec=$1
program=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/stepscope_resume.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT INT TERM
fail() {
  echo "FAIL: $*"
  exit 1
}
run() { # run NAME ARGS...: mpirun -np 2, its output in $dir/NAME.log, its exit code in $code
  name=$1
  shift
  timeout 60 "$mpiexec" -n 2 --oversubscribe "$program" "$@" >"$dir/$name.log" 2>&1
  code=$?
  sed "s/^/[$name] /" "$dir/$name.log"
}

echo "== an uninterrupted job, global steps 0 to 20"
run full --checkpoint_dir "$dir/full" --last_step 20 --out "$dir/full.txt"
[ "$code" -eq 0 ] || fail "the uninterrupted job exited with $code"

echo "== rank 1 raises before global step 13"
start=$(date +%s)
run failing --checkpoint_dir "$dir/resumed" --last_step 20 --fail_at_step 13
elapsed=$(($(date +%s) - start))
[ "$code" -ne 124 ] || fail "the job with a failing rank hung (killed after 60 s)"
[ "$code" -ne 0 ] || fail "the job with a failing rank exited with 0"
grep -q "rank 1 failed: failing on purpose before global step 13" "$dir/failing.log" ||
  fail "rank 1's error is not in the job's output"
grep -q "rank 1 is shutting down, but not every rank reached dist::shutdown within 3 s" "$dir/failing.log" ||
  fail "the job did not say why it ended"
[ "$elapsed" -le 30 ] || fail "the job took ${elapsed} s to end after the failure (the shutdown timeout is 3 s)"
echo "the job ended with exit code $code after ${elapsed} s"

echo "== the chief's latest checkpoint loads"
"$program" --check_checkpoint "$dir/resumed" >"$dir/check.log" 2>&1 || {
  cat "$dir/check.log"
  fail "the latest checkpoint does not load"
}
cat "$dir/check.log"
grep -q "global step 10$" "$dir/check.log" || fail "the latest checkpoint is not global step 10's"

echo "== a second job resumes from it"
run resumed --checkpoint_dir "$dir/resumed" --last_step 20 --out "$dir/resumed.txt"
[ "$code" -eq 0 ] || fail "the resumed job exited with $code"
grep -q "started at global step 10$" "$dir/resumed.log" || fail "the resumed job did not start at global step 10"
grep -q "finished at global step 20$" "$dir/resumed.log" || fail "the resumed job did not finish"

echo "== its variables are the uninterrupted job's"
"$program" --compare "$dir/resumed.txt" "$dir/full.txt" || fail "the resumed job's variables differ"
echo "PASS"
