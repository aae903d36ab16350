#!/usr/bin/env python3
"""pisa-sim's TCP hosts beside ns-3 3.37 on the same dumbbell and incast scenarios.

Runs each scenario in `pisa-sim` (the `ecmp` program on every switch, which marks CE as the
DCTCP step marker) and in `target/ns3/pisa-ns3` (scripts/ns3/README.md), with the same links,
buffers, congestion control, marking threshold and flows, and prints a Markdown table of the
FCTs side by side, then the speed of both on the same runs.

    scripts/ns3/setup.sh && cargo build --release --bin pisa-sim
    scripts/ns3/compare.py [--only NAME,...] [--out DIR]
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


def fmt(x):
    return "-" if x is None else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated scenario names (or prefixes)")
    ap.add_argument("--out", default=str(ROOT / "target/ns3/compare"), help="work directory")
    a = ap.parse_args()
    for b in (PISA_SIM, PISA_NS3):
        if not b.exists():
            sys.exit(f"{b} is missing: scripts/ns3/setup.sh and cargo build --release --bin pisa-sim")
    work = Path(a.out)
    work.mkdir(parents=True, exist_ok=True)
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
