#!/usr/bin/env python3
"""PINT's E11 in pisa-sim (issue 15; docs/pint.md, "E11"): HPCC(INT) against HPCC(PINT, 8 bits)
at p = 1, 1/16 and 1/256 on a scaled k = 4 fat-tree of `pint` switches with PFC on (HPCC assumes
a lossless fabric), web search and Hadoop flow sizes, Poisson arrivals to random other hosts at
a given load of the host links. Every scheme runs the same seeded flows. Prints, per workload and
load, the p95 slowdown per flow-size bucket, the mean goodput of the largest flows, and what did
not complete; writes the numbers as JSON with --json.

    scripts/e11-sim.py [--loads 0.5] [--workloads websearch,hadoop] [--window-ms 300]
                       [--bin target/release] [--json out.json] [--seed 1]

The scale [X]: 16 hosts on 1 Gb/s links, 4 Gb/s between switches (the paper's 1:4 of 100 and
400 Gb/s), 50 us per link, so the base RTT over the longest path (6 links) is 745 us and the BDP
93 KB, about 93 packets of 1000 bytes (the paper: 12 us, 150 packets); buffers of 1000 packets
per port, PFC at 500. Deterministic: the same command prints the same tables.
"""

import argparse
import bisect
import json
import math
import os
import random
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K = 4
HOST_BPS = 1e9
# "PINT p=1, INT-sized shim" pads PINT's shim to INT's length: PINT's signal at INT's overhead.
SCHEMES = [("INT", "hpcc-int", 1), ("PINT p=1", "hpcc-pint", 1),
           ("PINT p=1/16", "hpcc-pint", 16), ("PINT p=1/256", "hpcc-pint", 256),
           ("PINT p=1, INT-sized shim", "hpcc-pint-pad", 1)]
BUCKETS = [(0, 10e3, "<10K"), (10e3, 100e3, "10K-100K"), (100e3, 1e6, "100K-1M"),
           (1e6, 10e6, "1M-10M"), (10e6, math.inf, ">=10M")]
LARGE = 10e6


def topology(sample):
    """The k = 4 fat-tree of topo::fat_tree, as text."""
    half = K // 2
    params = f"program=pint pint_pfc_xoff=500 pint_hpcc_sample={sample}"
    lines = ["defaults rate=4G delay=50us buffer=1000"]
    links = []
    sid = 0

    def sw(name):
        nonlocal sid
        sid += 1
        lines.append(f"switch {name} {params} switch_id={sid}")

    for c in range(half * half):
        sw(f"core{c + 1}")
    hosts = []
    for pod in range(K):
        for a in range(half):
            agg = f"p{pod + 1}a{a + 1}"
            sw(agg)
            for c in range(half):
                links.append(f"link {agg}:{half + c + 1} core{a * half + c + 1}:{pod + 1}")
        for e in range(half):
            edge = f"p{pod + 1}e{e + 1}"
            sw(edge)
            for h in range(half):
                n = pod * half * half + e * half + h + 1
                g = pod * half + e + 1
                hosts.append(f"h{n}")
                lines.append(f"host h{n} ipv4=10.0.{g}.{h + 1} ipv6=fd00::{g}:{h + 1}")
                links.append(f"link {edge}:{h + 1} h{n} rate=1G")
            for a in range(half):
                links.append(f"link {edge}:{half + a + 1} p{pod + 1}a{a + 1}:{e + 1}")
    return "\n".join(lines + links) + "\n", hosts


def cdf(name):
    pts = []
    with open(os.path.join(ROOT, "pipeline", "sim", "workloads", f"{name}.txt")) as f:
        for line in f:
            line = line.split("#")[0].split()
            if len(line) == 2:
                pts.append((float(line[0]), float(line[1])))
    if pts[-1][1] > 1.5:
        pts = [(x, p / 100) for x, p in pts]
    return pts


def sample(pts, u):
    ps = [p for _, p in pts]
    i = bisect.bisect_left(ps, u)
    if i == 0:
        return pts[0][0]
    (x0, p0), (x1, p1) = pts[i - 1], pts[min(i, len(pts) - 1)]
    return x0 if p1 == p0 else x0 + (x1 - x0) * (u - p0) / (p1 - p0)


def mean(pts):
    return sum((x0 + x1) / 2 * (p1 - p0) for (x0, p0), (x1, p1) in zip(pts, pts[1:]))


def flows(workload, load, window_ms, hosts, seed):
    pts = cdf(workload)
    lam = load * HOST_BPS / 8 / mean(pts)  # flows/s per source
    out = []
    for s, src in enumerate(hosts):
        rng = random.Random(seed * 1000 + s)
        t = 0.0
        while True:
            t += rng.expovariate(lam)
            if t * 1e3 >= window_ms:
                break
            size = max(1, int(round(sample(pts, rng.random()))))
            dst = rng.choice([h for h in hosts if h != src])
            out.append((t, src, dst, size))
    out.sort()
    return out


def run(binary, topo, fl, window_ms, seed):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fat-tree.topo")
        with open(path, "w") as f:
            f.write(topo)
        args = [os.path.join(binary, "pisa-sim"), "--duration-ms", str(window_ms),
                "--seed", str(seed), path]
        for t, src, dst, size, cc in fl:
            args += ["--flow", f"{src}>{dst} bytes={size} size=1000 cc={cc} start_ms={t * 1e3:.6f}"]
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def p95(xs):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[max(0, math.ceil(0.95 * len(xs)) - 1)]


def summarise(report, fl):
    """A flow that has not completed when the run ends counts with the lower bound of its
    slowdown, (end - start) / ideal: it is among the slowest, never left out."""
    end_ns = report["now_us"] * 1000
    rows = [f["hpcc"] for f in report["flows"]]
    for r, (t, *_rest) in zip(rows, fl):
        if not r["completed"]:
            r["slowdown"] = (end_ns - t * 1e9) / r["ideal_fct_ns"]
    done = [r for r in rows if r["completed"]]
    out = {"flows": len(rows), "incomplete": len(rows) - len(done), "buckets": {}}
    for lo, hi, name in BUCKETS:
        s = [r["slowdown"] for r in rows if lo <= r["bytes"] < hi]
        out["buckets"][name] = {"n": len(s), "p95_slowdown": p95(s)}
    big = [r["goodput_bps"] for r in done if r["bytes"] >= LARGE]
    out["large_goodput_mbps"] = sum(big) / len(big) / 1e6 if big else None
    out["large_n"] = len(big)
    pauses = sum(p["pfc_pauses_sent"] for s in report["switches"].values()
                 for p in s["ports"].values())
    drops = sum(p["drops"] for s in report["switches"].values() for p in s["ports"].values())
    out["pfc_pauses"], out["drops"] = pauses, drops
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", default="0.5")
    ap.add_argument("--workloads", default="websearch,hadoop")
    ap.add_argument("--window-ms", type=float, default=300)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release"))
    ap.add_argument("--json")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    results = []
    for wl in a.workloads.split(","):
        for load in [float(x) for x in a.loads.split(",")]:
            topo0, hosts = topology(1)
            fl = flows(wl, load, a.window_ms, hosts, a.seed)
            print(f"\n### {wl}, load {load:.0%}: {len(fl)} flows in {a.window_ms:g} ms\n")
            head = "| scheme | " + " | ".join(n for _, _, n in BUCKETS) + \
                " | goodput >=10 MB (Mb/s) | incomplete | PFC pauses | drops |"
            print(head)
            print("|" + "---|" * (len(BUCKETS) + 5))
            for name, cc, p in SCHEMES:
                topo, _ = topology(p)
                rep = run(a.bin, topo, [(t, s, d, z, cc) for t, s, d, z in fl],
                          a.window_ms, a.seed)
                s = summarise(rep, fl)
                cells = []
                for _, _, b in BUCKETS:
                    x = s["buckets"][b]
                    cells.append("-" if x["p95_slowdown"] is None
                                 else f"{x['p95_slowdown']:.2f} ({x['n']})")
                g = s["large_goodput_mbps"]
                gs = "-" if g is None else f"{g:.0f} ({s['large_n']})"
                print(f"| {name} | " + " | ".join(cells) +
                      f" | {gs} | {s['incomplete']} | {s['pfc_pauses']} | {s['drops']} |")
                results.append({"workload": wl, "load": load, "scheme": name, **s})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
