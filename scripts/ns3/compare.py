#!/usr/bin/env python3
"""pisa-sim's TCP hosts beside ns-3 3.37 on the same dumbbell and incast scenarios.

Runs each scenario in `pisa-sim` (the `ecmp` program on every switch, which marks CE as the
DCTCP step marker) and in `target/ns3/pisa-ns3` (scripts/ns3/README.md), with the same links,
buffers, congestion control, marking threshold and flows, and prints a Markdown table of the
FCTs side by side, then the speed of both on the same runs.

    scripts/ns3/setup.sh && cargo build --release --bin pisa-sim --bin pisa-fabric
    scripts/ns3/compare.py [--only NAME,...] [--out DIR]
    scripts/ns3/compare.py --fat-tree K [--load 0.6] [--seconds 1] [--seed 1] [--out DIR]

--fat-tree K runs one web-search point on the k-ary fat-tree at 10 Gb/s in both: the flows of
`pisa-fabric experiment --where sim --fat-tree K --schemes spray-random` (stride pattern, load of
every host's link, seed from the point as the runner derives it), then the same flows in ns-3,
whose global routing takes equal-cost paths per packet at random, as `spray-random` does (ns-3
has no per-flow hashing, so ECMP cannot be compared). It prints the FCTs of both per class and
the wall time of both.
"""

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PISA_SIM = ROOT / "target/release/pisa-sim"
PISA_NS3 = ROOT / "target/ns3/pisa-ns3"
PISA_FABRIC = ROOT / "target/release/pisa-fabric"

KB = 1000
MB = 1000 * 1000


class Scenario:
    """One topology, one congestion control, and its flows (src, dst, start s, bytes)."""

    def __init__(self, name, topo, n, host_rate, cc, flows, bottleneck=None, delay_us=10,
                 buffer=256, ecn_k=0):
        self.name, self.topo, self.n = name, topo, n
        self.host_rate, self.bottleneck = host_rate, bottleneck or host_rate
        self.cc, self.flows = cc, flows
        self.delay_us, self.buffer, self.ecn_k = delay_us, buffer, ecn_k

    def pisa_topology(self):
        """The scenario in pisa-fabric's topology format."""
        lines = [
            f"defaults rate={self.host_rate} delay={self.delay_us}us buffer={self.buffer}",
            f"switch s1 program=ecmp ecn_k={self.ecn_k}",
        ]
        if self.topo == "dumbbell":
            lines.append(f"switch s2 program=ecmp ecn_k={self.ecn_k}")
        receivers = self.n if self.topo == "dumbbell" else 1
        for i in range(1, self.n + 1):
            lines.append(f"host h{i} ipv4=10.0.1.{i} ipv6=fd00::1:{i}")
        for i in range(1, receivers + 1):
            lines.append(f"host r{i} ipv4=10.0.2.{i} ipv6=fd00::2:{i}")
        for i in range(1, self.n + 1):
            lines.append(f"link s1:{i} h{i}")
        if self.topo == "dumbbell":
            for i in range(1, receivers + 1):
                lines.append(f"link s2:{i} r{i}")
            lines.append(f"link s1:{self.n + 1} s2:{self.n + 1} rate={self.bottleneck}")
        else:
            lines.append(f"link s1:{self.n + 1} r1")
        return "\n".join(lines) + "\n"


def ns3_rate(rate):
    """pisa's `10G` as ns-3's `10Gbps`."""
    return rate + "bps"


def run_pisa(s, work):
    topo = work / f"{s.name}.topo"
    topo.write_text(s.pisa_topology())
    # Store and forward: ns-3's links deliver a frame once all of it has crossed.
    args = [str(PISA_SIM), str(topo), "--seed", "1", "--store-and-forward",
            "--out", str(work / f"{s.name}.json")]
    last = max(start for _, _, start, _ in s.flows)
    args += ["--duration-ms", str(int(last * 1000) + 1)]
    for src, dst, start, size in s.flows:
        args += ["--flow", f"{src}>{dst} cc={s.cc} bytes={size} start_ms={start * 1000:g}"]
    t = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True)
    wall = time.monotonic() - t
    if p.returncode != 0:
        sys.exit(f"pisa-sim failed on {s.name}: {p.stderr.strip()}")
    report = json.loads((work / f"{s.name}.json").read_text())
    fcts = [f["tcp"]["fct_ns"] / 1e6 if f["tcp"]["completed"] else None for f in report["flows"]]
    retx = sum(f["tcp"]["retransmits"] for f in report["flows"])
    done = [s.flows[i][2] * 1e3 + x for i, x in enumerate(fcts) if x is not None]
    m = re.search(r"(\d+) packet-hops in ([\d.]+) s", p.stderr)
    return {
        "fct_ms": fcts,
        "retransmits": retx,
        "sim_s": max(done, default=0) / 1e3,
        "wall_s": float(m.group(2)) if m else wall,
        "hops": int(m.group(1)) if m else 0,
    }


def run_ns3(s, work):
    flows = work / f"{s.name}.ns3flows"
    flows.write_text("".join(f"{a} {b} {t:.9f} {n}\n" for a, b, t, n in s.flows))
    out = work / f"{s.name}.ns3.csv"
    args = [
        str(PISA_NS3), f"--topo={s.topo}", f"--n={s.n}", f"--hostRate={ns3_rate(s.host_rate)}",
        f"--bottleneckRate={ns3_rate(s.bottleneck)}", f"--delayUs={s.delay_us}",
        f"--buffer={s.buffer}", f"--cc={s.cc}", f"--ecnK={s.ecn_k}", f"--flows={flows}",
        f"--out={out}",
    ]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"pisa-ns3 failed on {s.name}: {p.stderr.strip()}")
    rows = list(csv.DictReader(out.open()))
    fcts = [int(r["fct_ns"]) / 1e6 if r["fct_ns"] else None for r in rows]
    kv = dict(re.findall(r"(\w+)=([\d.e+-]+)", p.stderr))
    return {
        "fct_ms": fcts,
        "retransmits": sum(int(r.get("retransmits") or 0) for r in rows),
        "sim_s": float(kv.get("sim_s", 0)),
        "wall_s": float(kv.get("wall_s", 0)),
        "hops": int(float(kv.get("packet_hops", 0))),
    }


def scenarios():
    out = []
    # Lone flows one after another on a 10G/1G dumbbell: slow start, the handshake, delayed
    # ACKs, and (30 MB) loss recovery at a 256-packet buffer.
    lone = [("h1", "r1", 0.0, 10 * KB), ("h1", "r1", 0.1, 1 * MB), ("h1", "r1", 0.2, 30 * MB)]
    for cc, k in [("reno", 0), ("cubic", 0), ("dctcp", 20)]:
        out.append(Scenario(f"lone-{cc}", "dumbbell", 1, "10G", cc, lone, bottleneck="1G",
                            ecn_k=k))
    # Four 10 MB flows a millisecond apart sharing the 1G bottleneck.
    share = [(f"h{i}", f"r{i}", (i - 1) / 1000, 10 * MB) for i in range(1, 5)]
    for cc, k in [("reno", 0), ("cubic", 0), ("dctcp", 20)]:
        out.append(Scenario(f"share4-{cc}", "dumbbell", 4, "10G", cc, share, bottleneck="1G",
                            ecn_k=k))
    # Incast: 8 senders of 256 KiB at once into one 1G link, deep and shallow buffers.
    incast = [(f"h{i}", "r1", 0.0, 262144) for i in range(1, 9)]
    for buf in [256, 32]:
        for cc, k in [("reno", 0), ("cubic", 0), ("dctcp", 20)]:
            out.append(Scenario(f"incast8-b{buf}-{cc}", "incast", 8, "1G", cc, incast,
                                buffer=buf, ecn_k=k))
    # Speed: eight 100 MB flows on a 10G dumbbell (about 0.7 simulated seconds).
    big = [(f"h{i}", f"r{i}", 0.0, 100 * MB) for i in range(1, 9)]
    out.append(Scenario("speed-10G-cubic", "dumbbell", 8, "10G", "cubic", big, ecn_k=0))
    out.append(Scenario("speed-10G-dctcp", "dumbbell", 8, "10G", "dctcp", big, ecn_k=65))
    return out


def quantile(xs, q):
    """The q-quantile of xs by the nearest rank (None when empty)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(q * len(xs) + 0.5) - 1))] if xs else None


def fat_tree(k, load, seconds, seed, work):
    """One web-search point on the k-ary fat-tree at 10 Gb/s in pisa-sim (through the
    experiment runner) and in ns-3 on the same flows; prints both side by side."""
    drain = 2
    out = work / f"ft{k}-sim"
    args = [str(PISA_FABRIC), "experiment", "--where", "sim", "--fat-tree", str(k),
            "--host-rate", "10G", "--sim-store-and-forward", "--schemes", "spray-random",
            "--workload", "websearch", "--pattern", "stride", "--loads", str(load),
            "--seconds", str(seconds), "--drain", str(drain), "--reps", "1", "--jobs", "1",
            "--seed", str(seed), "--out", str(out)]
    t = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True)
    sim_wall = time.monotonic() - t
    if p.returncode != 0:
        sys.exit(f"pisa-fabric failed: {p.stderr.strip()[-2000:]}")
    rows = list(csv.DictReader((out / "flows.csv").open()))
    # The runner's line for the point: "(pisa-sim: R M packet-hops/s, S s simulated, W s of
    # wall time per simulated second)", the simulation alone, without the runner's set-up and
    # report writing.
    m = re.search(r"pisa-sim: ([\d.]+) M packet-hops/s, ([\d.]+) s simulated, ([\d.]+) s of "
                  r"wall time per simulated second", p.stdout + p.stderr)
    if not m:
        sys.exit("pisa-fabric printed no pisa-sim speed line")
    sim_s = float(m.group(2))
    sim_run_wall = float(m.group(3)) * sim_s
    sim_hops = round(float(m.group(1)) * 1e6 * sim_run_wall)

    flows = work / f"ft{k}.ns3flows"
    flows.write_text("".join(f"{r['src']} {r['dst']} {int(r['start_ns']) / 1e9:.9f} "
                             f"{r['size_bytes']}\n" for r in rows))
    ns3_out = work / f"ft{k}.ns3.csv"
    ecn_k = 65  # pipeline/programs/src/ecmp.rs: dctcp_k(10 Gb/s), the plan's threshold
    nargs = [str(PISA_NS3), "--topo=fattree", f"--k={k}", "--hostRate=10Gbps",
             "--bottleneckRate=10Gbps", "--buffer=256", "--cc=cubic", "--ecn=1",
             f"--ecnK={ecn_k}", f"--flows={flows}", f"--out={ns3_out}",
             f"--stopS={seconds + drain}", f"--seed={seed}"]
    p = subprocess.run(nargs, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"pisa-ns3 failed: {p.stderr.strip()}")
    kv = dict(re.findall(r"(\w+)=([\d.e+-]+)", p.stderr))
    nrows = list(csv.DictReader(ns3_out.open()))

    print(f"k = {k} fat-tree, 10 Gb/s links, web search at {load} for {seconds} s, seed {seed}: "
          f"{len(rows)} flows; FCTs in ms of the flows finished in each")
    print()
    print("| class | flows | finished sim, ns-3 | median sim | median ns-3 | ratio | p99 sim | "
          "p99 ns-3 | ratio | mean sim | mean ns-3 | retransmits sim, ns-3 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cls in sorted({r["class"] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r["class"] == cls]
        a = [float(rows[i]["fct_us"]) / 1e3 for i in idx
             if rows[i]["finished"] == "true" and rows[i]["fct_us"]]
        b = [int(nrows[i]["fct_ns"]) / 1e6 for i in idx if nrows[i]["fct_ns"]]
        ra = sum(int(rows[i]["retransmits"] or 0) for i in idx)
        rb = sum(int(nrows[i]["retransmits"] or 0) for i in idx)
        ma, mb = quantile(a, 0.5), quantile(b, 0.5)
        pa, pb = quantile(a, 0.99), quantile(b, 0.99)
        mean_a = sum(a) / len(a) if a else None
        mean_b = sum(b) / len(b) if b else None
        ratio = lambda x, y: f"{x / y:.2f}" if x and y else "-"
        print(f"| {cls} | {len(idx)} | {len(a)}, {len(b)} | {fmt(ma)} | {fmt(mb)} | "
              f"{ratio(ma, mb)} | {fmt(pa)} | {fmt(pb)} | {ratio(pa, pb)} | {fmt(mean_a)} | "
              f"{fmt(mean_b)} | {ra}, {rb} |")
    ns3_wall, ns3_s = float(kv.get("wall_s", 0)), float(kv.get("sim_s", 0))
    ns3_hops = int(float(kv.get("packet_hops", 0)))
    print()
    print("| simulator | simulated s | packet-hops | wall s | packet-hops/s |")
    print("|---|---|---|---|---|")
    print(f"| pisa-sim (the runner's whole point: {sim_wall:.1f} s) | {sim_s:.3f} | {sim_hops:,} | "
          f"{sim_run_wall:.1f} | {sim_hops / max(sim_run_wall, 1e-9) / 1e6:.2f} M |")
    print(f"| ns-3 3.37 | {ns3_s:.3f} | {ns3_hops:,} | {ns3_wall:.1f} | "
          f"{ns3_hops / max(ns3_wall, 1e-9) / 1e6:.2f} M |")


def fmt(x):
    return "-" if x is None else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated scenario names (or prefixes)")
    ap.add_argument("--out", default=str(ROOT / "target/ns3/compare"), help="work directory")
    ap.add_argument("--fat-tree", type=int, metavar="K",
                    help="instead of the scenarios: one web-search point on a k-ary fat-tree")
    ap.add_argument("--load", type=float, default=0.6, help="--fat-tree: load of every host link")
    ap.add_argument("--seconds", type=float, default=1, help="--fat-tree: seconds of arrivals")
    ap.add_argument("--seed", type=int, default=1, help="--fat-tree: the runner's --seed")
    a = ap.parse_args()
    for b in (PISA_SIM, PISA_NS3, PISA_FABRIC):
        if not b.exists():
            sys.exit(f"{b} is missing: scripts/ns3/setup.sh and "
                     "cargo build --release --bin pisa-sim --bin pisa-fabric")
    work = Path(a.out)
    work.mkdir(parents=True, exist_ok=True)
    if a.fat_tree:
        fat_tree(a.fat_tree, a.load, a.seconds, a.seed, work)
        return
    chosen = [s for s in scenarios()
              if not a.only or any(s.name.startswith(o) for o in a.only.split(","))]
    print("| scenario | flow | bytes | pisa-sim FCT ms | ns-3 FCT ms | ratio sim/ns-3 |")
    print("|---|---|---|---|---|---|")
    speed = []
    for s in chosen:
        p, n = run_pisa(s, work), run_ns3(s, work)
        for i, (src, dst, start, size) in enumerate(s.flows):
            a_, b_ = p["fct_ms"][i], n["fct_ms"][i]
            r = f"{a_ / b_:.2f}" if a_ and b_ else "-"
            print(f"| {s.name} | {src}>{dst} @{start * 1000:g} ms | {size} | {fmt(a_)} | {fmt(b_)} | {r} |")
        print(f"| {s.name} | retransmits | | {p['retransmits']} | {n['retransmits']} | |")
        speed.append((s.name, p, n))
        sys.stdout.flush()
    print()
    print("| scenario | simulated s (sim, ns-3) | packet-hops (sim, ns-3) | wall s per simulated s: "
          "pisa-sim | ns-3 | ns-3/pisa-sim | packet-hops/s: pisa-sim | ns-3 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, p, n in speed:
        wp = p["wall_s"] / p["sim_s"] if p["sim_s"] else 0
        wn = n["wall_s"] / n["sim_s"] if n["sim_s"] else 0
        ratio = f"{wn / wp:.1f}" if wp else "-"
        print(f"| {name} | {p['sim_s']:.3f}, {n['sim_s']:.3f} | {p['hops']}, {n['hops']} | "
              f"{wp:.2f} | {wn:.2f} | {ratio} | {p['hops'] / max(p['wall_s'], 1e-9) / 1e6:.2f} M | "
              f"{n['hops'] / max(n['wall_s'], 1e-9) / 1e6:.2f} M |")


if __name__ == "__main__":
    main()
