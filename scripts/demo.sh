#!/usr/bin/env bash
# The main job (README): installs what it needs, builds, and compares ECMP against the mechanisms
# that exist on a 4x4 leaf-spine with 16 hosts in network namespaces (one pisa-switch process per
# switch, AF_XDP ports, 25 Mb/s host links (the highest of the rates tried at which every scheme
# kept fidelity on the project's 2-core machine: docs/results/2026-11-26-rate-calibration.md), 2:1
# oversubscription, link rates enforced by the
# switches' traffic managers): for each scheme and load it brings a fresh fabric up, programs it
# over P4Runtime by the scheme's fabric plan, runs the web-search workload (stride pattern, load
# relative to the fabric's uplink capacity, kernel TCP from pisa-traffic in every host), collects
# FCTs, retransmissions, drops and per-uplink packets, and tears the fabric down (also on Ctrl-C).
# Every scheme uses the flowlet gap the runner calibrates from the fabric's RTT and standing queues
# (about 6 ms at this rate: docs/results/2026-11-26-rate-calibration.md) and HULA probes every 5 ms. It prints the FCT table and draws the plots into target/main-job/. Points already in
# target/main-job are skipped (delete it to start afresh). Needs root; about 5 minutes.
#   bash scripts/demo.sh [pisa-fabric experiment flags, e.g. --loads 0.2,0.8 --seconds 60]
#   bash scripts/demo.sh --fabric-demo     the 4x4 fabric of `basic` with iperf3 flows and uplink load
#   bash scripts/demo.sh --single-switch   two hosts behind one switch: ACL, shaping, counters
#   bash scripts/demo.sh --in-memory       the pipeline on in-memory ports, no namespaces
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --single-switch) exec bash scripts/demo-single.sh ;;
  --in-memory)
    bash scripts/setup.sh
    exec cargo run --release -q -p dataplane --bin pisa-demo -- --pcap target/demo-pcap ;;
esac
bash scripts/setup.sh
echo "== building (release)"
cargo build --release -q --bins
if [ "${1:-}" = "--fabric-demo" ]; then
  shift
  exec target/release/pisa-fabric demo --out target/fabric-demo "$@"
fi
exec target/release/pisa-fabric experiment --leaves 4 --spines 4 --hosts-per-leaf 4 \
  --host-rate 25M --oversub 2 --schemes ecmp,hula,p4te,dbb-shared,spray-rr --workload websearch \
  --pattern stride --load-of fabric --loads 0.3,0.6 --seconds 20 --drain 10 --reps 1 \
  --set probe_us=5000 --name main --out target/main-job "$@"
