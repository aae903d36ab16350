#!/usr/bin/env bash
# Stress loop for issue 16 (the main job must never hang): repeats the main job's fabric run,
# `pisa-fabric demo` (a 4x4 leaf-spine: bring-up, programming over P4Runtime, all pairs,
# iperf3 flows, counters, teardown), alternating host rates (400M, 10G by default). A run that
# overruns its time limit gets every switch's thread stacks (and the stuck pisa-fabric's) captured
# with gdb before it is stopped with SIGINT (a clean teardown), so a hang leaves evidence.
#
# usage (root): bash scripts/stress-fabric.sh [--runs N] [--seconds S] [--rates 400M,10G]
#                                             [--limit SECS] [--flows N] [--out DIR] [--name NAME]
# Needs the release binaries (cargo build --release -p p4runtime-server -p pisa-fabric --bins),
# found in $PISA_BIN_DIR or target/release. Writes DIR/summary.txt (one line per run) and, per
# run, DIR/run-N/{demo.log,stacks-*.txt}. Exits 1 if any run overran or failed.
#
# CPU-heavy: 16 switches and 8 flows per run on this machine's cores. Do not run it unattended
# on a shared machine for many runs.
set -u

root="$(cd "$(dirname "$0")/.." && pwd)"
runs=30
seconds=10
rates="400M,10G"
limit=""
flows=8
out="$root/target/stress-fabric"
name="stress"
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --rates) rates="$2"; shift 2 ;;
        --limit) limit="$2"; shift 2 ;;
        --flows) flows="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --name) name="$2"; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "stress-fabric: unknown argument $1" >&2; exit 2 ;;
    esac
done
# Bring-up (~3 s), all pairs (~15 s), flows, counters and teardown fit well inside this.
[ -n "$limit" ] || limit=$((seconds + 120))
bin="${PISA_BIN_DIR:-$root/target/release}"
fabric="$bin/pisa-fabric"
for b in pisa-fabric pisa-switch; do
    [ -x "$bin/$b" ] || { echo "stress-fabric: $bin/$b missing (build the release binaries)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "stress-fabric: needs root (namespaces)" >&2; exit 2; }
command -v gdb >/dev/null || echo "stress-fabric: no gdb: overruns will not get stacks" >&2

IFS=, read -r -a rate_list <<< "$rates"
mkdir -p "$out"
summary="$out/summary.txt"
echo "# run rate result seconds (limit ${limit} s, --seconds ${seconds}, --flows ${flows})" > "$summary"

demo_pid=""
cleanup() {
    if [ -n "$demo_pid" ] && kill -0 "$demo_pid" 2>/dev/null; then
        kill -INT "$demo_pid" 2>/dev/null
        wait "$demo_pid" 2>/dev/null
    fi
    "$fabric" down "$name" >/dev/null 2>&1
}
trap 'cleanup; exit 130' INT TERM

# Thread stacks of every process in the fabric's namespaces, and of pisa-fabric processes.
capture_stacks() {
    local dir="$1" ns pid seen=" "
    for ns in $(ip netns list | awk '{print $1}' | grep "^pf${name}-"); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do
            local comm
            comm="$(cat "/proc/$pid/comm" 2>/dev/null)"
            [ "$comm" = pisa-switch ] || [ "$comm" = pisa-fabric ] || continue
            seen="$seen$pid "
            {
                echo "# $ns pid $pid ($comm), state: $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)"
                timeout 60 gdb -p "$pid" -batch -ex 'thread apply all bt' 2>&1
            } > "$dir/stacks-$ns-$pid.txt"
        done
    done
    # The controller side: the demo itself and any pisa-fabric it is waiting on.
    for pid in $(pgrep -f "^$fabric " 2>/dev/null); do
        case "$seen" in *" $pid "*) continue ;; esac
        {
            echo "# pid $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"
            timeout 60 gdb -p "$pid" -batch -ex 'thread apply all bt' 2>&1
        } > "$dir/stacks-fabric-$pid.txt"
    done
}

failed=0
for i in $(seq 1 "$runs"); do
    rate="${rate_list[$(( (i - 1) % ${#rate_list[@]} ))]}"
    dir="$out/run-$i"
    mkdir -p "$dir"
    start=$(date +%s)
    "$fabric" demo --name "$name" --host-rate "$rate" --flows "$flows" --seconds "$seconds" \
        --out "$dir" > "$dir/demo.log" 2>&1 &
    demo_pid=$!
    result=""
    while kill -0 "$demo_pid" 2>/dev/null; do
        if [ $(( $(date +%s) - start )) -ge "$limit" ]; then
            result="OVERRUN"
            echo "run $i ($rate): over ${limit} s: capturing stacks in $dir" >&2
            # Hold the demo still so that its own teardown does not race the capture.
            kill -STOP "$demo_pid" 2>/dev/null
            capture_stacks "$dir"
            kill -CONT "$demo_pid" 2>/dev/null
            kill -INT "$demo_pid" 2>/dev/null
            for _ in $(seq 1 60); do kill -0 "$demo_pid" 2>/dev/null || break; sleep 1; done
            kill -KILL "$demo_pid" 2>/dev/null
            break
        fi
        sleep 1
    done
    wait "$demo_pid" 2>/dev/null
    rc=$?
    demo_pid=""
    took=$(( $(date +%s) - start ))
    if [ -z "$result" ]; then
        if [ "$rc" = 0 ]; then result="ok"; else result="FAILED(rc=$rc)"; fi
    fi
    [ "$result" = ok ] || failed=$((failed + 1))
    line="$i $rate $result $took"
    if [ "$result" != ok ]; then
        line="$line $(grep -m1 'pisa-fabric:' "$dir/demo.log" | cut -c1-300)"
    fi
    echo "$line" | tee -a "$summary"
    # Whatever a failed run left behind must not spoil the next one.
    "$fabric" down "$name" >/dev/null 2>&1
done
echo "stress-fabric: $runs runs, $failed failed or overran; summary in $summary"
[ "$failed" = 0 ]
