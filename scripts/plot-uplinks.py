#!/usr/bin/env python3
"""Bar chart of the per-uplink load of a leaf-spine demo run.

Usage: plot-uplinks.py uplinks.csv uplinks.png   (the `plot` venv of scripts/py-clients.sh)
The CSV has the columns leaf,port,spine,mbps, one row per leaf-to-spine link.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    leaves = sorted({r["leaf"] for r in rows}, key=lambda s: int("".join(c for c in s if c.isdigit()) or 0))
    spines = sorted({r["spine"] for r in rows}, key=lambda s: int("".join(c for c in s if c.isdigit()) or 0))
    load = {(r["leaf"], r["spine"]): float(r["mbps"]) for r in rows}
    width = 0.8 / max(len(spines), 1)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, spine in enumerate(spines):
        xs = [j + i * width for j in range(len(leaves))]
        ax.bar(xs, [load.get((leaf, spine), 0.0) for leaf in leaves], width, label=f"to {spine}")
    ax.set_xticks([j + width * (len(spines) - 1) / 2 for j in range(len(leaves))])
    ax.set_xticklabels(leaves)
    ax.set_ylabel("uplink load (Mb/s)")
    ax.set_title("pisa-switch leaf-spine: load per leaf-to-spine uplink (ECMP)")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    main()
