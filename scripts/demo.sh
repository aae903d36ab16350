#!/usr/bin/env bash
# The main job, until the switch binary exists: runs the `basic` program on in-memory ports and
# prints what it did (per-port counts, drop reasons, ECMP split); pcap files go to target/demo-pcap.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo run --release -q -p dataplane --bin pisa-demo -- --pcap target/demo-pcap "$@"
