#!/usr/bin/env bash
# The test install.outside_project: installs the build into a temporary prefix, checks that every
# installed header includes only installed headers, then builds and runs tests/install_consumer
# against the installed tree both ways a user would: CMake's find_package and pkg-config.
#
#   install_test.sh <build dir> <source dir> <c++ compiler> <version> [compiler launcher]
set -euo pipefail
build=$1 src=$2 cxx=$3 version=$4 launcher=${5:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

missing=0
while IFS= read -r header; do
  while IFS= read -r included; do
    if [ ! -f "$prefix/include/$included" ]; then
      echo "installed ${header#"$prefix/include/"} includes $included, which is not installed"
      missing=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include "\(stepscope\/[^"]*\)".*/\1/p' "$header")
done < <(find "$prefix/include" -name '*.h')
[ "$missing" = 0 ]

want="stepscope $version: 2 + 3 = 5"
check() {
  local got
  got=$("$1")
  if [ "$got" != "$want" ]; then
    echo "$2: printed '$got', expected '$want'"
    exit 1
  fi
  echo "$2: $got"
}

# find_package(stepscope)
cmake -S "$src/tests/install_consumer" -B "$tmp/consumer" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
check "$tmp/consumer/consumer" "find_package"

# pkg-config, and a plain compiler command
pc_dir=$(dirname "$(find "$prefix" -name stepscope.pc)")
flags=$(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs --static stepscope)
# shellcheck disable=SC2086  # the flags are words
$launcher "$cxx" -O2 "$src/tests/install_consumer/main.cc" -o "$tmp/consumer_pc" $flags
check "$tmp/consumer_pc" "pkg-config"
