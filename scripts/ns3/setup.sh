#!/usr/bin/env bash
# Builds target/ns3/pisa-ns3, the ns-3 counterpart of pisa-sim's TCP scenarios (README.md here),
# installing Debian bookworm's ns-3 3.37 and a compiler first when they are missing (root).
# Idempotent: quick when everything is installed and the binary is newer than its sources.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/pisa-ns3.cc"
out="$root/target/ns3/pisa-ns3"

# The ns-3 modules the program uses. Linked by name rather than through Debian's .pc files:
# libns3-dev 3.37-2 ships them, but their Cflags carry a stray "-I/usr;" and ns3-core's Libs name
# /usr/lib/x86_64-linux-gnu/libgsl.so and libgslcblas.so, which only libgsl-dev provides (the
# runtime libgsl27 that libns3.37 depends on is enough for these libraries to load).
libs=(-lns3-core -lns3-network -lns3-internet -lns3-point-to-point -lns3-traffic-control -lns3-bridge)

need=()
# The headers and the development symlinks both come with libns3-dev.
{ [ -e /usr/include/ns3/core-module.h ] && [ -e /usr/lib/x86_64-linux-gnu/libns3-internet.so ]; } ||
  need+=(libns3-dev)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if [ ${#need[@]} -gt 0 ]; then
  echo "ns3 setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

ver="$(pkg-config --modversion ns3-core 2>/dev/null || true)"
if [ -n "$ver" ] && [ "$ver" != "3.37" ]; then
  echo "ns3 setup: warning: found ns-3 $ver; pisa-ns3.cc was written against 3.37" >&2
fi

if [ -x "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt "${BASH_SOURCE[0]}" ]; then
  echo "ns3 setup: $out is up to date"
  exit 0
fi

mkdir -p "$(dirname "$out")"
echo "ns3 setup: compiling $out"
g++ -std=c++17 -O2 -o "$out.tmp" "$src" "${libs[@]}"
mv -f "$out.tmp" "$out"
echo "ns3 setup: built $out"
