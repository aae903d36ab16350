#!/bin/sh
# Where the CPU goes in a loaded pisa-switch fabric (issue 11, "fabric capacity"): the 4x4
# leaf-spine of scripts/fabric-capacity.py with links far above what the machine carries, 8 iperf3
# flows across the spines, and meanwhile:
#   - per thread of every pisa-switch: CPU time, voluntary and involuntary context switches
#     (/proc/<pid>/task/<tid>/{stat,status}), and the packets the switch sent (port_tx over
#     P4Runtime), over the same 8 s;
#   - perf record -a -g over 8 s (system wide: other sessions' processes show up too; the report
#     is filtered by command name);
#   - strace -c -f on one switch for 3 s (slows that switch down while it runs; counts only).
# Usage: [LINKS=shm] scripts/fabric-profile.sh [PROGRAM] [OUTDIR]   (root; release binaries built)
set -eu
PROGRAM=${1:-ecmp}
OUT=${2:-/tmp/fabric-profile-$PROGRAM}
NAME=prof
BIN=$(cd "$(dirname "$0")/.." && pwd)/target/release
mkdir -p "$OUT"
"$BIN/pisa-fabric" gen leaf-spine --leaves 4 --spines 4 --hosts-per-leaf 4 --oversub 1 \
    --host-rate 40G > "$OUT/ls.topo"
"$BIN/pisa-fabric" down $NAME > /dev/null
trap '"$BIN/pisa-fabric" down $NAME > /dev/null' EXIT INT TERM
"$BIN/pisa-fabric" up "$OUT/ls.topo" --name $NAME --program "$PROGRAM" --links "${LINKS:-veth}" > "$OUT/up.log"
# The demo's pairs: host i of leaves 1-2 to host 8 + (5i+1) mod 8 of leaves 3-4.
i=0
while [ $i -lt 8 ]; do
    d=$((9 + (i * 5 + 1) % 8)); s=$((i + 1))
    addr=$(awk -v h="h$d" '$1 == "host" && $2 == h { sub("ipv4=", "", $3); print $3 }' "$OUT/ls.topo")
    ip netns exec pf$NAME-h$d iperf3 -s -1 -B "$addr" > /dev/null 2>&1 &
    sleep 0.1
    ip netns exec pf$NAME-h$s iperf3 -c "$addr" -t 22 -f m > "$OUT/iperf-h$s.txt" 2>&1 &
    i=$((i + 1))
done
sleep 3
switch_pids() {
    for ns in $(ip netns list | awk '{print $1}' | grep "^pf$NAME-\(leaf\|spine\)"); do
        ip netns pids "$ns"
    done
}
threads() {
    for p in $(switch_pids); do
        for t in /proc/$p/task/*; do
            st=$(cat "$t/stat" 2>/dev/null) || continue
            comm=$(cat "$t/comm")
            ticks=$(echo "$st" | sed 's/.*) //' | awk '{print $12 + $13}')
            vol=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null) || continue
            inv=$(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null) || continue
            echo "$p $(basename "$t") $comm $ticks $vol $inv"
        done
    done
}
counters() {
    ip netns exec pf$NAME--mgmt "$BIN/pisa-fabric" counters /tmp/pisa-fabric-$NAME/topology.txt 2>/dev/null || true
}
threads > "$OUT/threads-0.txt"
counters > "$OUT/counters-0.txt"
head -1 /proc/stat > "$OUT/stat-0.txt"
perf record -a -g -F 499 -o "$OUT/perf.data" -- sleep 8 > "$OUT/perf-record.log" 2>&1
head -1 /proc/stat > "$OUT/stat-1.txt"
threads > "$OUT/threads-1.txt"
counters > "$OUT/counters-1.txt"
one=$(switch_pids | head -1)
if [ -n "$one" ]; then
    timeout -s INT 3 strace -c -f -p "$one" -o "$OUT/strace-one-switch.txt" > /dev/null 2>&1 || true
fi
wait
perf report -i "$OUT/perf.data" --no-children --sort comm,dso --stdio > "$OUT/report-comm-dso.txt" 2>/dev/null
perf report -i "$OUT/perf.data" --no-children --comm pisa-switch,pisa-worker-0 --sort sym --stdio -g none \
    > "$OUT/report-switch-sym.txt" 2>/dev/null || true
echo "outputs in $OUT"
