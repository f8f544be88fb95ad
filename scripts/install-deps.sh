#!/usr/bin/env bash
# Installs the Debian packages stepscope builds and tests with, if any is missing.
set -euo pipefail
# clang-16 and its runtime: the sanitizer build, which is also the libFuzzer build (scripts/fuzz.sh).
# libdw-dev: symbolising the call stacks of the tfprof code view; libunwind8: capturing them fast
# (loaded at run time if present, see src/stepscope/graph/call_stack.cc).
# python3: the layer check (scripts/check_layers.py, the test architecture.layer_includes).
# libopenmpi-dev, openmpi-bin: the dist layer's collectives and mpirun for its multi-process tests.
# protobuf-compiler: `protoc --decode_raw`, the independent decoder the GraphDef/MetaGraphDef tests use.
# golang-go: `go tool pprof`, which reads the pprof files tfprof writes (output=pprof) in their test.
packages=(cmake g++ make pkg-config ccache libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
          zlib1g-dev libdnnl-dev nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libre2-dev libdw-dev libunwind8
          dataset-fashion-mnist
          clang-16 libclang-rt-16-dev python3 protobuf-compiler libopenmpi-dev openmpi-bin
          chromium golang-1.19-src golang-go)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# node and npm for the browser tests (tests/browser: playwright-core drives chromium; the trace
# viewer is catapult's, from golang-1.19-src). A node from elsewhere (NodeSource) will do.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then missing+=(nodejs npm); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
