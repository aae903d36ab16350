"""uplinks-plot CSV PNG: bar chart of the per-uplink load of a `pisa-fabric demo` run (the demo
calls it, in the `plot` venv of scripts/py-clients.sh).

Reads CSV (columns leaf,port,spine,mbps, one row per leaf-to-spine link: the bytes the leaf's
port sent during the flows over the flows' wall time) and writes PNG, one bar per uplink,
grouped by leaf. One run, no repetitions: each bar is that run's rate, no statistic.
"""

from __future__ import annotations

import argparse
import re

from . import data, style


def _numbered(name: str) -> int:
    return int("".join(re.findall(r"\d", name)) or 0)


def run(a: argparse.Namespace) -> None:
    plt = style.pyplot()
    rows = data.read_csv(a.csv)
    leaves = sorted({r["leaf"] for r in rows}, key=_numbered)
    spines = sorted({r["spine"] for r in rows}, key=_numbered)
    load = {(r["leaf"], r["spine"]): float(r["mbps"]) for r in rows}
    width = 0.8 / max(len(spines), 1)
    fig, ax = plt.subplots(figsize=style.ONE)
    for i, spine in enumerate(spines):
        xs = [j + i * width for j in range(len(leaves))]
        ax.bar(xs, [load.get((leaf, spine), 0.0) for leaf in leaves], width, label=f"to {spine}",
               color=style.series_colour(i))
    ax.set_xticks([j + width * (len(spines) - 1) / 2 for j in range(len(leaves))])
    ax.set_xticklabels(leaves)
    ax.set_ylabel("uplink load (Mb/s)")
    ax.legend()
    ax.grid(axis="x", visible=False)
    style.titled(fig, "pisa-switch leaf-spine: load per leaf-to-spine uplink (ECMP)",
                 "one run, no reps: each bar is one uplink's mean rate over the flows' wall time")
    style.save(fig, a.png)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("uplinks-plot", help="per-uplink load of a `pisa-fabric demo` run",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv", metavar="CSV")
    p.add_argument("png", metavar="PNG")
    p.set_defaults(run=run)
