#!/usr/bin/env python3
"""Fabric capacity (issue 11, "fabric capacity"): aggregate TCP goodput and CPU of a leaf-spine
with links far faster than the machine can carry, per program (`kernel`: Linux routers).

For each program and run: `pisa-fabric up --program P` of a generated leaf-spine, N iperf3 flows
from hosts of the first half of the leaves to hosts of the second half (the demo's pairs), CPU
sampled from /proc over the flows' window after a warm-up, `pisa-fabric down`. Prints one line
per run and the medians per program. Root; the workspace's release binaries.

    scripts/fabric-capacity.py --programs kernel,ecmp --runs 3 --seconds 10

CPU: machine-wide busy time from /proc/stat (both cores: 200% is everything), softirq time (the
kernel's forwarding and veth delivery are mostly there), and per-process time of the
pisa-switch processes and the iperf3 processes of this fabric, ksoftirqd, and every other process
(other sessions' builds and fabrics on a shared machine), from /proc/<pid>/stat. The kernel's
forwarding runs in softirq context, accounted as softirq time, not to a process.
"""

import argparse
import json
import os
import subprocess
import sys
import time

from pisa_analysis.stats import median  # scripts/ is this script's directory, on sys.path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def cpu_stat():
    """(busy ticks, softirq ticks, total ticks) of the whole machine."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    total = sum(v[:8])
    return total - idle - iowait, softirq, total


def proc_ticks():
    """pid -> (comm, utime + stime ticks) of every process."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        comm = s[s.index("(") + 1 : s.rindex(")")]
        rest = s[s.rindex(")") + 2 :].split()
        out[pid] = (comm, int(rest[11]) + int(rest[12]))
    return out


def fabric_pids(name):
    """The pids in fabric `name`'s namespaces (not other fabrics' switches on a shared machine)."""
    pids = set()
    for line in sh("ip", "netns", "list").splitlines():
        ns = line.split()[0] if line.split() else ""
        if ns.startswith(f"pf{name}-"):
            pids.update(sh("ip", "netns", "pids", ns).split())
    return pids


def classify(pid, comm, mine):
    if pid in mine and comm.startswith("pisa-switch"):
        return "switch"
    if pid in mine and comm == "iperf3":
        return "iperf3"
    if comm.startswith("ksoftirqd"):
        return "ksoftirqd"
    return "other"


def fabric_namespaces(name):
    return [l.split()[0] for l in sh("ip", "netns", "list").splitlines()
            if l.split() and l.split()[0].startswith(f"pf{name}-")]


def one_run(bin_dir, program, topo, name, flows, seconds, warmup, workdir, ns_setup=None,
            links="veth", io="af-xdp"):
    pf = os.path.join(bin_dir, "pisa-fabric")
    subprocess.run([pf, "down", name], capture_output=True)
    up = [pf, "up", topo, "--name", name, "--program", program]
    if program != "kernel":
        up += ["--links", links, "--io", io]
    sh(*up)
    try:
        if ns_setup:
            for ns in fabric_namespaces(name):
                sh("ip", "netns", "exec", ns, "sh", "-c", ns_setup)
        hosts = [l.split()[1] for l in open(topo) if l.startswith("host ")]
        addr = {l.split()[1]: l.split()[2].split("=")[1] for l in open(topo) if l.startswith("host ")}
        n = len(hosts)
        half = n // 2
        pairs = [(i, half + (i * 5 + 1) % (n - half)) for i in range(min(flows, half))]
        servers = []
        for _, d in pairs:
            h = hosts[d]
            servers.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", f"pf{name}-{h}", "iperf3", "-s", "-1", "-B", addr[h]],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        time.sleep(0.5)
        clients = []
        for s, d in pairs:
            clients.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", f"pf{name}-{hosts[s]}", "iperf3", "-c", addr[hosts[d]],
                     "-t", str(seconds + warmup), "-O", str(warmup), "-J"],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        time.sleep(warmup + 0.5)
        c0, p0, t0 = cpu_stat(), proc_ticks(), time.time()
        time.sleep(seconds - 1.0)
        c1, p1, t1 = cpu_stat(), proc_ticks(), time.time()
        mine = fabric_pids(name)
        mbps = 0.0
        for c in clients:
            out, err = c.communicate(timeout=seconds + warmup + 60)
            j = json.loads(out)
            if "error" in j:
                raise RuntimeError(f"iperf3: {j['error']}")
            mbps += j["end"]["sum_received"]["bits_per_second"] / 1e6
        for s in servers:
            s.wait(timeout=10)
    finally:
        subprocess.run([pf, "down", name], capture_output=True)
    wall = t1 - t0
    share = lambda ticks: 100.0 * ticks / TICK / wall
    by = {"switch": 0, "iperf3": 0, "ksoftirqd": 0, "other": 0}
    others = {}
    for pid, (comm, t) in p1.items():
        d = t - p0.get(pid, (comm, 0))[1]
        if d > 0:
            k = classify(pid, comm, mine)
            by[k] += d
            if k == "other":
                others[comm] = others.get(comm, 0) + d
    busy = 100.0 * (c1[0] - c0[0]) / (c1[2] - c0[2]) * os.cpu_count()
    soft = 100.0 * (c1[1] - c0[1]) / (c1[2] - c0[2]) * os.cpu_count()
    top = sorted(others.items(), key=lambda x: -x[1])[:3]
    return {
        "program": label(program, links, io),
        "mbps": mbps,
        "busy": busy,
        "softirq": soft,
        "switch": share(by["switch"]),
        "iperf3": share(by["iperf3"]),
        "ksoftirqd": share(by["ksoftirqd"]),
        "other": share(by["other"]),
        "top_other": ", ".join(f"{c} {share(t):.0f}%" for c, t in top),
        "load": open("/proc/loadavg").read().split()[0],
    }


def label(program, links, io):
    """`ecmp`, `ecmp/shm`, `ecmp/shm/af-packet`: the program with what differs from the defaults."""
    if program == "kernel":
        return program
    return "/".join([program] + ([links] if links != "veth" or io != "af-xdp" else [])
                    + ([io] if io != "af-xdp" else []))


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--programs", default="kernel,ecmp")
    a.add_argument("--runs", type=int, default=3)
    a.add_argument("--seconds", type=int, default=10)
    a.add_argument("--warmup", type=int, default=2)
    a.add_argument("--flows", type=int, default=8)
    a.add_argument("--leaves", type=int, default=4)
    a.add_argument("--spines", type=int, default=4)
    a.add_argument("--hosts-per-leaf", type=int, default=4)
    a.add_argument("--host-rate", default="40G", help="far above what the machine carries")
    a.add_argument("--oversub", default="1", help="uplinks at hosts*rate/(spines*oversub)")
    a.add_argument("--name", default="cap")
    a.add_argument("--bin-dir", default=os.path.join(ROOT, "target", "release"))
    a.add_argument("--json", help="append every run as a JSON line to this file")
    a.add_argument("--links", default="veth",
                   help="comma-separated: veth (every link a veth pair), shm (switch-to-switch "
                        "links in shared memory); each pisa-switch program runs with each")
    a.add_argument("--io", default="af-xdp",
                   help="comma-separated: the switches' port I/O (af-xdp, af-packet); with shm "
                        "links only the host-facing ports use it")
    a.add_argument("--ns-setup", help="a shell command run in every namespace of the fabric after "
                   "it is up (e.g. to tune the veths); switch ports are p1, p2, ..., a host's eth0")
    o = a.parse_args()
    workdir = f"/tmp/fabric-capacity-{o.name}"
    os.makedirs(workdir, exist_ok=True)
    topo = os.path.join(workdir, "ls.topo")
    with open(topo, "w") as f:
        f.write(sh(os.path.join(o.bin_dir, "pisa-fabric"), "gen", "leaf-spine",
                   "--leaves", str(o.leaves), "--spines", str(o.spines),
                   "--hosts-per-leaf", str(o.hosts_per_leaf), "--oversub", o.oversub,
                   "--host-rate", o.host_rate))
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {o.leaves}x{o.spines} leaf-spine, "
          f"{o.hosts_per_leaf} hosts per leaf, host links {o.host_rate}, {o.flows} iperf3 flows, "
          f"{o.seconds} s measured after {o.warmup} s, {os.cpu_count()} cores (CPU in % of one core)")
    cols = ["program", "mbps", "busy", "softirq", "switch", "iperf3", "ksoftirqd", "other", "load"]
    print(" ".join(f"{c:>9}" for c in cols) + "  top other")
    results = []
    combos = [(p, l, i) for p in o.programs.split(",")
              for l in (["veth"] if p == "kernel" else o.links.split(","))
              for i in (["af-xdp"] if p == "kernel" else o.io.split(","))]
    # Interleaved: program A, B, A, B, ... so that slow phases of the machine hit both.
    for run in range(o.runs):
        for p, links, io in combos:
            r = one_run(o.bin_dir, p, topo, o.name, o.flows, o.seconds, o.warmup, workdir,
                        o.ns_setup, links, io)
            r["run"] = run + 1
            results.append(r)
            print(" ".join(f"{r[c]:>9.1f}" if isinstance(r[c], float) else f"{r[c]:>9}"
                           for c in cols) + f"  {r['top_other']}", flush=True)
            if o.json:
                with open(o.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
    print("# medians")
    for p in dict.fromkeys(r["program"] for r in results):
        rs = [r for r in results if r["program"] == p]
        med = {c: median([r[c] for r in rs]) for c in cols[1:-1]}
        print(f"{p:>9} " + " ".join(f"{med[c]:>9.1f}" for c in cols[1:-1]))


if __name__ == "__main__":
    sys.exit(main())
