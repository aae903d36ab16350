#!/usr/bin/env python3
"""Plots of a `pisa-fabric experiment` run.

Usage: plot-experiment.py DIR   (the `plot` venv of scripts/py-clients.sh)

Reads DIR/summary.csv, DIR/flows.csv and DIR/uplinks.csv and writes:
  DIR/fct_vs_load.png     average and p99 FCT of short and large flows against load, per scheme
                          (points: the mean over reps; bars: the reps' range)
  DIR/fct_cdf.png         CDF of the FCT of finished flows, one panel per load, per scheme
  DIR/uplink_balance.png  std-dev of per-uplink packets within a leaf (mean over leaves and reps)
                          against load, per scheme
"""
import csv
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def fct_vs_load(summary, out):
    panels = [
        ("short_avg_fct_us", "short flows, average"),
        ("short_p99_fct_us", "short flows, p99"),
        ("large_avg_fct_us", "large flows, average"),
        ("large_p99_fct_us", "large flows, p99"),
    ]
    schemes = sorted({r["scheme"] for r in summary})
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, (col, title) in zip(axes.flat, panels):
        for s in schemes:
            by_load = defaultdict(list)
            for r in summary:
                n = r[col.split("_")[0] + "_n"]
                if r["scheme"] == s and num(n) and num(r[col]) is not None:
                    by_load[float(r["load"])].append(float(r[col]) / 1000.0)
            loads = sorted(by_load)
            if not loads:
                continue
            means = [sum(by_load[x]) / len(by_load[x]) for x in loads]
            lo = [m - min(by_load[x]) for m, x in zip(means, loads)]
            hi = [max(by_load[x]) - m for m, x in zip(means, loads)]
            ax.errorbar(loads, means, yerr=[lo, hi], marker="o", capsize=3, label=s)
        ax.set_title(title)
        ax.set_xlabel("load")
        ax.set_ylabel("FCT (ms)")
        ax.grid(alpha=0.3)
    axes.flat[0].legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def fct_cdf(flows, out):
    loads = sorted({float(r["load"]) for r in flows})
    schemes = sorted({r["scheme"] for r in flows})
    fig, axes = plt.subplots(1, max(len(loads), 1), figsize=(5 * max(len(loads), 1), 4), squeeze=False)
    for ax, load in zip(axes[0], loads):
        for s in schemes:
            v = sorted(
                float(r["fct_us"]) / 1000.0
                for r in flows
                if r["scheme"] == s and float(r["load"]) == load and r["finished"] == "true" and r["fct_us"]
            )
            if v:
                ax.plot(v, [(i + 1) / len(v) for i in range(len(v))], label=s)
        ax.set_xscale("log")
        ax.set_title(f"load {load}")
        ax.set_xlabel("FCT (ms)")
        ax.set_ylabel("CDF")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def uplink_balance(uplinks, out):
    # std-dev of packets over the uplinks of each leaf, per (scheme, load, rep); then mean.
    groups = defaultdict(list)
    for r in uplinks:
        groups[(r["scheme"], float(r["load"]), r["rep"], r["leaf"])].append(float(r["packets"]))
    per = defaultdict(list)
    for (s, load, _rep, _leaf), v in groups.items():
        m = sum(v) / len(v)
        per[(s, load)].append((sum((x - m) ** 2 for x in v) / len(v)) ** 0.5)
    schemes = sorted({k[0] for k in per})
    loads = sorted({k[1] for k in per})
    width = 0.8 / max(len(schemes), 1)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, s in enumerate(schemes):
        ys = [sum(per[(s, x)]) / len(per[(s, x)]) if per[(s, x)] else 0 for x in loads]
        ax.bar([j + i * width for j in range(len(loads))], ys, width, label=s)
    ax.set_xticks([j + width * (len(schemes) - 1) / 2 for j in range(len(loads))])
    ax.set_xticklabels([f"load {x}" for x in loads])
    ax.set_ylabel("std-dev of packets per uplink of a leaf")
    ax.set_title("Uplink balance (lower is better)")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main():
    d = sys.argv[1]
    summary = rows(os.path.join(d, "summary.csv"))
    if not summary:
        sys.exit(f"{d}/summary.csv has no finished points")
    fct_vs_load(summary, os.path.join(d, "fct_vs_load.png"))
    fct_cdf(rows(os.path.join(d, "flows.csv")), os.path.join(d, "fct_cdf.png"))
    uplink_balance(rows(os.path.join(d, "uplinks.csv")), os.path.join(d, "uplink_balance.png"))


if __name__ == "__main__":
    main()
