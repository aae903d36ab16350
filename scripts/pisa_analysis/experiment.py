"""experiment-plots DIR: the plots of a `pisa-fabric experiment --out DIR` run (the runner calls
it at the end, in the `plot` venv of scripts/py-clients.sh).

Reads DIR/summary.csv, DIR/flows.csv and DIR/uplinks.csv and writes:
  DIR/fct_vs_load.png     average and p99 FCT of short and large flows against load, per scheme
                          (points: the median over reps of each rep's value; bars: the 95%
                          bootstrap CI of that median; hollow: a rep's fidelity was degraded)
  DIR/fct_cdf.png         CDF of the FCT of finished flows, pooled over the reps, one panel per
                          load, per scheme
  DIR/uplink_balance.png  std-dev of per-uplink packets within a leaf, mean over the leaves of
                          a rep, against load per scheme (bars: median over reps; whiskers: its
                          95% bootstrap CI)
A plot whose input file is missing is skipped (and said so on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

from . import data, stats, style
from .data import Point


def fct_vs_load(pts: list[Point], out: str) -> None:
    plt = style.pyplot()
    panels = [
        ("short", "avg", "short flows, average"),
        ("short", "p99", "short flows, p99"),
        ("large", "avg", "large flows, average"),
        ("large", "p99", "large flows, p99"),
    ]
    schemes = sorted({p.scheme for p in pts})
    fig, axes = plt.subplots(2, 2, figsize=style.GRID)
    counts = []
    any_degraded = False
    for ax, (cls, which, title) in zip(axes.flat, panels):
        for s in schemes:
            by_load = defaultdict(list)
            degraded = set()
            for p in pts:
                if p.scheme == s:
                    by_load[p.load].append(data.summary_fct_ms(p.summary, cls, which))
                    if data.degraded(p.summary):
                        degraded.add(p.load)
            summ = {x: stats.over_reps(v) for x, v in by_load.items()}
            loads = sorted(x for x, r in summ.items() if r.n)
            if not loads:
                continue
            counts += [summ[x].n for x in loads]
            meds = [summ[x].median for x in loads]
            ax.errorbar(loads, meds, yerr=style.yerr([(summ[x].median, summ[x].ci) for x in loads]),
                        marker=style.marker(s), color=style.colour(s), capsize=3, label=s)
            # Points with a rep whose emulator fell behind: hollow.
            bad = [x for x in loads if x in degraded]
            if bad:
                any_degraded = True
                ax.scatter(bad, [summ[x].median for x in bad], marker=style.marker(s),
                           facecolors="white", edgecolors=style.colour(s), zorder=3)
        ax.set_title(title)
        ax.set_xlabel("load")
        ax.set_ylabel("FCT (ms)")
    axes.flat[0].legend()
    extra = ["hollow: a rep's fidelity degraded"] if any_degraded else []
    style.titled(fig, "FCT against load", style.subtitle("median", counts, extra=extra))
    style.save(fig, out)


def fct_cdf(pts: list[Point], out: str) -> None:
    plt = style.pyplot()
    loads = sorted({p.load for p in pts})
    schemes = sorted({p.scheme for p in pts})
    reps = defaultdict(int)
    for p in pts:
        reps[(p.scheme, p.load)] += 1
    fig, axes = plt.subplots(1, max(len(loads), 1), figsize=(style.PANEL[0] * max(len(loads), 1),
                                                              style.PANEL[1]), squeeze=False)
    for ax, load in zip(axes[0], loads):
        for s in schemes:
            v = sorted(data.fct_ms(f) for p in pts if p.scheme == s and p.load == load
                       for f in p.flows or [] if data.finished(f))
            if v:
                ax.plot(v, [(i + 1) / len(v) for i in range(len(v))], color=style.colour(s),
                        label=s)
        ax.set_xscale("log")
        ax.set_title(f"load {load}")
        ax.set_xlabel("FCT (ms)")
        ax.set_ylabel("CDF")
        ax.legend()
    style.titled(fig, "FCT CDF of finished flows",
                 f"each line: every finished flow of {style.reps_phrase(reps.values())} pooled")
    style.save(fig, out)


def uplink_balance(pts: list[Point], out: str) -> None:
    plt = style.pyplot()
    per = defaultdict(list)
    for p in pts:
        leaves = p.packets_by_switch() or {}
        per[(p.scheme, p.load)].append(stats.mean([stats.pstd(v) for v in leaves.values()]))
    summ = {k: stats.over_reps(v) for k, v in per.items()}
    schemes = sorted({k[0] for k in summ})
    loads = sorted({k[1] for k in summ})
    width = 0.8 / max(len(schemes), 1)
    fig, ax = plt.subplots(figsize=style.ONE)
    for i, s in enumerate(schemes):
        vals = [(summ[(s, x)].median, summ[(s, x)].ci) if (s, x) in summ and summ[(s, x)].n
                else (0.0, None) for x in loads]
        ax.bar([j + i * width for j in range(len(loads))], [v for v, _ in vals], width,
               yerr=style.yerr(vals), capsize=2, color=style.colour(s), label=s)
    ax.set_xticks([j + width * (len(schemes) - 1) / 2 for j in range(len(loads))])
    ax.set_xticklabels([f"load {x}" for x in loads])
    ax.set_ylabel("std-dev of packets per uplink of a leaf\n(mean over the leaves)")
    ax.legend()
    ax.grid(axis="x", visible=False)
    style.titled(fig, "Uplink balance (lower is better)",
                 style.subtitle("median", [r.n for r in summ.values()], what="bars",
                                bars="whiskers"))
    style.save(fig, out)


def run(a: argparse.Namespace) -> None:
    d = a.dir
    tables = data.read_experiment(d)
    if not tables["summary.csv"]:
        sys.exit(f"{d}/summary.csv has no finished points")
    pts = data.points(tables)
    fct_vs_load(pts, os.path.join(d, "fct_vs_load.png"))
    for name, needs, plot in (("fct_cdf.png", "flows.csv", fct_cdf),
                              ("uplink_balance.png", "uplinks.csv", uplink_balance)):
        if tables[needs] is None:
            print(f"skipped {name}: no {d}/{needs}", file=sys.stderr)
        else:
            plot(pts, os.path.join(d, name))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment-plots", help="the plots of a `pisa-fabric experiment` run",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR")
    p.set_defaults(run=run)
