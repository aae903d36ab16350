#!/usr/bin/env bash
# Builds BMv2's simple_switch (p4lang/behavioral-model) from a checkout, for
# performance benchmarks: optimised (-O3, with debug symbols for profiling),
# logging macros and the event logger compiled out, and no nanomsg. Thrift is
# kept, because simple_switch cannot be built without it.
#
# Installs the Debian packages it needs (run as root), configures with CMake
# out of tree and builds only the simple_switch target, under `nice`.
# This is a standalone helper: none of the README's commands run it.
#
# Usage: scripts/bmv2-build.sh CHECKOUT [BUILD_DIR]   (default /tmp/bmv2-build)
# Env:   JOBS (default 2)
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 CHECKOUT [BUILD_DIR]" >&2
    exit 2
fi
src=$(realpath "$1")
build=${2:-/tmp/bmv2-build}
jobs=${JOBS:-2}
[[ -f $src/CMakeLists.txt ]] || { echo "$src: no CMakeLists.txt" >&2; exit 1; }

packages=(
    g++ make cmake python3
    libboost-dev libboost-program-options-dev libboost-thread-dev
    libgmp-dev libpcap-dev libjsoncpp-dev libxxhash-dev
    libthrift-dev thrift-compiler
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
        missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# -g -O3 without logging macros and event logger: the flags docs/performance.md
# recommends (there for ./configure), spelled as CMake options.
nice -n 19 cmake -S "$src" -B "$build" \
    -DCMAKE_BUILD_TYPE= \
    -DCMAKE_C_FLAGS='-g -O3' -DCMAKE_CXX_FLAGS='-g -O3' \
    -DENABLE_LOGGING_MACROS=OFF -DENABLE_ELOGGER=OFF \
    -DWITH_NANOMSG=OFF -DWITH_THRIFT=ON \
    -DWITH_PI=OFF -DENABLE_DEBUGGER=OFF -DBUILD_TESTING=OFF
nice -n 19 cmake --build "$build" --target simple_switch -j "$jobs"

bin=$build/targets/simple_switch/simple_switch
[[ -x $bin ]] || { echo "build finished but $bin is missing" >&2; exit 1; }
echo "simple_switch: $bin"
echo "commit: $(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)"
