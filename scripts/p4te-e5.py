#!/usr/bin/env python3
"""P4TE's flowlet-gap sweep (E5, the paper's App. A.1): one experiment directory per gap.

Usage:
    p4te-e5.py [--plot OUT.png] GAP_US=DIR [GAP_US=DIR ...]

Each DIR is a `pisa-fabric experiment --out DIR` run with `--set flowlet_gap_us=GAP_US`. Prints,
per gap and class (short, large), the flows finished, the average, median and p99 FCT (ms), the
retransmitted segments per flow, and the FACKs the switches sent (from DIR/counters.csv when the
run recorded `egress.facks`). --plot draws the FCT CDFs of both classes, one line per gap, as
the paper's Fig. 13 does.
"""
import argparse
import csv
import math
import os
import statistics


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def quantile(xs, q):
    if not xs:
        return float("nan")
    v = sorted(xs)
    return v[min(len(v), max(1, math.ceil(q * len(v)))) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    data = []
    for arg in a.runs:
        gap, _, d = arg.partition("=")
        flows = rows(os.path.join(d, "flows.csv"))
        facks = 0
        cpath = os.path.join(d, "counters.csv")
        if os.path.exists(cpath):
            facks = sum(int(r["packets"]) for r in rows(cpath) if r["counter"] == "egress.facks")
        data.append((int(gap), flows, facks))
    data.sort()
    print("| gap | class | finished | avg FCT ms | median ms | p99 ms | retransmits per flow | FACKs (all switches) |")
    print("|---|---|---|---|---|---|---|---|")
    for gap, flows, facks in data:
        for cls in ("short", "large"):
            fl = [f for f in flows if f["class"] == cls]
            fct = [float(f["fct_us"]) / 1e3 for f in fl if f["finished"] == "true" and f["fct_us"]]
            retx = sum(int(f["retransmits"] or 0) for f in fl) / max(len(fl), 1)
            print(
                f"| {gap / 1000:g} ms | {cls} | {len(fct)}/{len(fl)} | {statistics.mean(fct):,.0f} "
                f"| {statistics.median(fct):,.0f} | {quantile(fct, 0.99):,.0f} | {retx:.2f} | {facks:,} |"
            )
    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, cls in zip(axes, ("short", "large")):
            for gap, flows, _ in data:
                fct = sorted(
                    float(f["fct_us"]) / 1e3
                    for f in flows
                    if f["class"] == cls and f["finished"] == "true" and f["fct_us"]
                )
                ys = [(i + 1) / len(fct) for i in range(len(fct))]
                ax.plot(fct, ys, label=f"{gap / 1000:g} ms")
            ax.set_xscale("log")
            ax.set_xlabel("FCT (ms)")
            ax.set_ylabel("CDF")
            ax.set_title(f"p4te, {cls} flows")
            ax.legend(title="flowlet gap")
        fig.tight_layout()
        fig.savefig(a.plot, dpi=110)


if __name__ == "__main__":
    main()
