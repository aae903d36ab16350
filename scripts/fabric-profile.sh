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
# per-switch.txt sums it up per switch: CPU per forwarded packet, sleeps per packet, and the share
# of each worker's perf samples in each part of the path (AF_XDP transmit, hosts' TCP receive run
# inline in it, generic XDP receive, shared-memory ports, pipeline, yields, ppoll).
# Usage: [LINKS=shm] [IO=af-packet] scripts/fabric-profile.sh [PROGRAM] [OUTDIR]   (root; release binaries built)
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
"$BIN/pisa-fabric" up "$OUT/ls.topo" --name $NAME --program "$PROGRAM" --links "${LINKS:-veth}" \
    --io "${IO:-af-xdp}" > "$OUT/up.log"
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
switch_nss() {
    ip netns list | awk '{print $1}' | grep "^pf$NAME-\(leaf\|spine\)"
}
switch_pids() {
    for ns in $(switch_nss); do
        ip netns pids "$ns"
    done
}
threads() {
    for ns in $(switch_nss); do
      for p in $(ip netns pids "$ns"); do
        for t in /proc/$p/task/*; do
            st=$(cat "$t/stat" 2>/dev/null) || continue
            comm=$(cat "$t/comm")
            ticks=$(echo "$st" | sed 's/.*) //' | awk '{print $12 + $13}')
            vol=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null) || continue
            inv=$(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null) || continue
            echo "${ns#pf$NAME-} $p $(basename "$t") $comm $ticks $vol $inv"
        done
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
# per-switch.txt, per switch:
# - CPU per forwarded packet: its threads' CPU time over the window over the frames it sent
#   (every port's port_tx). A leaf's figure includes the hosts' TCP receive, which runs inline in
#   its transmits to them; a spine on shared-memory links pays only its own code.
# - the share of its worker's perf samples whose call stack contains each part of the path (a
#   sample can count under several: the hosts' TCP receive runs inside the transmit to them).
perf script -i "$OUT/perf.data" -F tid,ip,sym 2>/dev/null > "$OUT/script.txt" || true
python3 - "$OUT" "$(getconf CLK_TCK)" > "$OUT/per-switch.txt" <<'PY'
import collections, sys
out, hz = sys.argv[1], int(sys.argv[2])
def threads(f):
    return {(sw, tid): (comm, int(ticks), int(vol))
            for sw, _pid, tid, comm, ticks, vol, _inv in (line.split() for line in open(f))}
def tx(f):
    c = collections.Counter()
    for line in open(f):
        sw, _port, pkts, _bytes = line.split()
        c[sw] += int(pkts)
    return c
t0, t1 = threads(f"{out}/threads-0.txt"), threads(f"{out}/threads-1.txt")
c0, c1 = tx(f"{out}/counters-0.txt"), tx(f"{out}/counters-1.txt")
cpu, sleeps = collections.Counter(), collections.Counter()
for k, (_comm, ticks, vol) in t1.items():
    _, ticks0, vol0 = t0.get(k, ("", 0, 0))
    cpu[k[0]] += ticks - ticks0
    sleeps[k[0]] += vol - vol0
print("switch cpu_s tx_packets us_per_packet sleeps_per_packet")
for role, group in (("spine", "all-spines"), ("leaf", "all-leaves")):
    tot_cpu = tot_tx = 0
    for sw in sorted(s for s in cpu if s.startswith(role)):
        n = c1[sw] - c0[sw]
        secs = cpu[sw] / hz
        tot_cpu += secs
        tot_tx += n
        per = f"{secs / n * 1e6:.2f}" if n else "-"
        sl = f"{sleeps[sw] / n:.4f}" if n else "-"
        print(f"{sw} {secs:.2f} {n} {per} {sl}")
    if tot_tx:
        print(f"{group} {tot_cpu:.2f} {tot_tx} {tot_cpu / tot_tx * 1e6:.2f} -")
stacks = collections.defaultdict(list)
cur = None
for line in open(f"{out}/script.txt"):
    if not line.strip():
        cur = None
    elif not line[0].isspace():
        cur = []
        stacks[line.split()[0]].append(cur)
    elif cur is not None and len(line.split(None, 1)) > 1:
        cur.append(line.split(None, 1)[1].strip())
parts = [
    ("sendto", ["__x64_sys_sendto"]),                # AF_XDP copy-mode transmit, inline work included
    ("host_tcp", ["tcp_v4_rcv", "tcp_v6_rcv"]),      # a host's TCP receive, inline in a transmit
    ("xdp_rx", ["do_xdp_generic"]),                  # generic XDP receive into a switch's UMEM
    ("shm", ["ShmPort"]),                            # shared-memory links
    ("pipeline", ["Ctx::apply", "Basic", "Driver<", "TrafficManager"]),
    ("yield", ["sched_yield"]),
    ("ppoll", ["ppoll"]),
]
print()
print("worker samples " + " ".join(f"{name}%" for name, _ in parts))
workers = sorted((sw, tid) for (sw, tid), (comm, _, _) in t1.items() if comm.startswith("pisa-worker"))
for sw, tid in workers:
    ss = stacks.get(tid, [])
    shares = [100 * sum(any(p in f for f in st for p in pats) for st in ss) / max(len(ss), 1)
              for _, pats in parts]
    print(f"{sw} {len(ss)} " + " ".join(f"{v:.0f}" for v in shares))
PY
cat "$OUT/per-switch.txt"
echo "outputs in $OUT"
