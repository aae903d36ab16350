"""dbb-plot CSV PNG: goodput and reordering of `pisa-fabric dbb` (DBB's E8 / E9) per scenario
and scheme.

Reads CSV (`pisa-fabric dbb`'s OUT/e8.csv or e9.csv: one row per scheme, scenario and rep) and
writes PNG. Upper panel: the all-active window's goodput as a fraction of the stage capacity;
lower panel: the receivers' out-of-order segments in % of their data segments. Bars are the
median over the reps, whiskers its 95% bootstrap CI, dots the reps; the red dashes mark each
scenario's offered load (median over its rows, at most 1).
"""

from __future__ import annotations

import argparse
import sys

from . import data, stats, style


def run(a: argparse.Namespace) -> None:
    plt = style.pyplot()
    rows = data.read_csv(a.csv)
    if not rows:
        sys.exit(f"{a.csv}: no points")
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    schemes = list(dict.fromkeys(r["scheme"] for r in rows))
    width = 0.8 / len(schemes)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=style.STACKED, sharex=True)
    counts = []
    for i, scheme in enumerate(schemes):
        for ax, key, scale in ((top, "goodput_mbps", True), (bottom, "ooo_pct", False)):
            bars = []
            for j, sc in enumerate(scenarios):
                pts = [r for r in rows if r["scheme"] == scheme and r["scenario"] == sc]
                vals = [float(r[key]) / (float(r["capacity_mbps"]) if scale else 1.0) for r in pts]
                s = stats.over_reps(vals)
                counts.append(s.n)
                bars.append((s.median if s.n else 0.0, s.ci))
                ax.plot([j + i * width] * len(vals), vals, "k.", markersize=3)
            ax.bar([j + i * width for j in range(len(scenarios))], [m for m, _ in bars], width,
                   yerr=style.yerr(bars), capsize=2, color=style.colour(scheme),
                   label=scheme if ax is top else None)
    for j, sc in enumerate(scenarios):
        offered = [float(r["offered_mbps"]) / float(r["capacity_mbps"]) for r in rows
                   if r["scenario"] == sc]
        y = min(stats.median(offered), 1.0)
        top.plot([j - width / 2, j + width * (len(schemes) - 0.5)], [y, y], "r--", linewidth=1)
    top.set_ylabel("goodput / stage capacity")
    top.legend()
    top.grid(axis="x", visible=False)
    bottom.set_ylabel("out-of-order segments (%)")
    bottom.set_xticks([j + width * (len(schemes) - 1) / 2 for j in range(len(scenarios))])
    bottom.set_xticklabels(scenarios)
    bottom.grid(axis="x", visible=False)
    style.titled(fig, "DBB in namespaces: all-active window",
                 style.subtitle("median", counts, what="bars", bars="whiskers",
                                extra=["dots: reps", "red: offered"]))
    style.save(fig, a.png)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dbb-plot", help="goodput and reordering of `pisa-fabric dbb`",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv", metavar="CSV")
    p.add_argument("png", metavar="PNG")
    p.set_defaults(run=run)
