#!/usr/bin/env bash
# Remakes the seed corpora in fuzz/corpus/ from real files: a short demo run (checkpoints, the
# checkpoint index, RunMetadata, the tfprof profile, the event file), rows of the shipped digits
# data, small IDX files and HTTP request targets. Needs the Release build (scripts/demo.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/demo" --logdir "$work/run" --steps 400 >/dev/null

seed() {  # target, files...
  local target=$1; shift
  mkdir -p "fuzz/corpus/$target"
  for f in "$@"; do cp "$f" "fuzz/corpus/$target/"; done
}
rm -rf fuzz/corpus/*/
seed safetensors_fuzzer "$work"/run/model.ckpt-400.safetensors
seed checkpoint_state_fuzzer "$work/run/checkpoint"
seed run_metadata_fuzzer "$work"/run/run_metadata-*.pb
seed tfprof_profile_fuzzer "$work/run/profile"
seed tfevents_fuzzer "$work"/run/events.out.tfevents.*

# CSV: the digits data's first rows, plain and gzip (the fuzz target's first byte picks options).
mkdir -p fuzz/corpus/csv_fuzzer
set +o pipefail  # head closes the pipe early
{ printf '\x00'; zcat data/digits.csv.gz | head -n 20; } > fuzz/corpus/csv_fuzzer/digits-20-rows.csv
{ printf '\x00'; zcat data/digits.csv.gz | head -n 5 | gzip -9n; } > fuzz/corpus/csv_fuzzer/digits-5-rows.csv.gz
{ printf '\x20'; printf 'a,b,c\n1,2,3\n4.5,-6e3,7\n'; } > fuzz/corpus/csv_fuzzer/header-no-label.csv
set -o pipefail

# IDX: an images file (u8, [3,4,4]) and a labels file (u8, [3]), plain and gzip; a float one.
mkdir -p fuzz/corpus/idx_fuzzer
python3 - fuzz/corpus/idx_fuzzer <<'PY'
import gzip, struct, sys
out = sys.argv[1]
def idx(code, dims, payload):
    return bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload
images = idx(0x08, [3, 4, 4], bytes(range(48)))
labels = idx(0x08, [3], bytes([7, 2, 1]))
floats = idx(0x0D, [2, 2], struct.pack(">4f", 0.5, -1.0, 3.25, 1e6))
ints = idx(0x0C, [3], struct.pack(">3i", -1, 0, 70000))
for name, data in [("images-u8.idx3", images), ("labels-u8.idx1", labels), ("f32.idx2", floats), ("i32.idx1", ints)]:
    open(f"{out}/{name}", "wb").write(data)
open(f"{out}/images-u8.idx3.gz", "wb").write(gzip.compress(images, mtime=0))
PY

# HTTP: request targets as a browser or a hostile client sends them (one per file, "METHOD target").
mkdir -p fuzz/corpus/http_fuzzer
i=0
for request in 'GET /' 'GET /api/traces' 'GET /timeline-200.json' 'GET /run1/timeline-5.json?x=1' \
               'GET /run1/../timeline-200.json' 'GET /%2e%2e/%2e%2e/etc/passwd' 'HEAD /run_metadata-200.pb' \
               'POST /' 'GET //etc/passwd' 'GET /escape/secret.txt' 'GET /secret-link.json' 'GET /run1%2Ftimeline-5.json'; do
  printf '%s' "$request" > "fuzz/corpus/http_fuzzer/request-$i"; i=$((i + 1))
done
du -sh fuzz/corpus/*
