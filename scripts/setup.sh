#!/usr/bin/env bash
# Installs what building and testing pisa-switch needs on a fresh Debian bookworm machine (root).
# Idempotent and quick when everything is there already.
set -euo pipefail

need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
command -v cc >/dev/null 2>&1 || need+=(build-essential)
command -v ethtool >/dev/null 2>&1 || need+=(ethtool)
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
# AF_XDP (xsk-rs builds libxdp and libbpf from source); clang also compiles fabric/bpf/*.bpf.c
# (our DCTCP), against the libbpf headers libbpf-sys vendors.
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v m4 >/dev/null 2>&1 || need+=(m4)
[ -e /usr/include/libelf.h ] || need+=(libelf-dev)
[ -e /usr/include/zlib.h ] || need+=(zlib1g-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo (Rust >= 1.88) is required" >&2; exit 1; }
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt >/dev/null 2>&1 || true

# The P4Runtime protos come from their published package (pip), never from the tree.
command -v python3 >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq python3 >/dev/null; }
python3 -m pip --version >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq python3-pip >/dev/null; }
bash "$(dirname "$0")/fetch-protos.sh"
bash "$(dirname "$0")/py-clients.sh"
