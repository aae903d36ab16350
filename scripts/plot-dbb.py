#!/usr/bin/env python3
"""Goodput and reordering of `pisa-fabric dbb` (DBB's E8 / E9) per scenario and scheme.

Usage: plot-dbb.py OUT/e8.csv e8.png   (the `plot` venv of scripts/py-clients.sh)
Bars are the median over the reps of the all-active window's goodput as a fraction of the stage
capacity, with each rep as a dot; the offered load is marked per scenario. The lower panel is the
receivers' out-of-order segments in % of their data segments.
"""
import csv
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{src}: no points")
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    schemes = list(dict.fromkeys(r["scheme"] for r in rows))
    width = 0.8 / len(schemes)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for i, scheme in enumerate(schemes):
        for ax, key, scale in ((top, "goodput_mbps", True), (bottom, "ooo_pct", False)):
            meds = []
            for j, sc in enumerate(scenarios):
                pts = [r for r in rows if r["scheme"] == scheme and r["scenario"] == sc]
                vals = [float(r[key]) / (float(r["capacity_mbps"]) if scale else 1.0) for r in pts]
                meds.append(statistics.median(vals) if vals else 0.0)
                ax.plot([j + i * width] * len(vals), vals, "k.", markersize=3)
            ax.bar([j + i * width for j in range(len(scenarios))], meds, width,
                   label=scheme if ax is top else None)
    for j, sc in enumerate(scenarios):
        offered = [float(r["offered_mbps"]) / float(r["capacity_mbps"]) for r in rows if r["scenario"] == sc]
        y = min(statistics.median(offered), 1.0)
        top.plot([j - width / 2, j + width * (len(schemes) - 0.5)], [y, y], "r--", linewidth=1)
    top.set_ylabel("goodput / stage capacity")
    top.set_title("DBB in namespaces: all-active window (median, dots = reps; red = offered)")
    top.legend(fontsize=8)
    top.grid(axis="y", alpha=0.3)
    bottom.set_ylabel("out-of-order segments (%)")
    bottom.set_xticks([j + width * (len(schemes) - 1) / 2 for j in range(len(scenarios))])
    bottom.set_xticklabels(scenarios)
    bottom.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    main()
