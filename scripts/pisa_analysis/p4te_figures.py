"""P4TE's evaluation figures (issue 32 item 8): p4te-figures.

  p4te-figures --out OUTDIR [--websearch DIR] [--datamining DIR] [--incast DIR] [--where TEXT]
      Each DIR is a `pisa-fabric experiment --out DIR` directory (summary.csv, flows.csv,
      uplinks.csv) with the schemes ecmp, hula and p4te; the incast one from `--pattern incast`.
      Draws the paper's figures from our data (Robin and Khan, "P4TE: PISA Switch Based Traffic
      Engineering in Fat-Tree Data Center Networks", Computer Networks, 2022), each with the
      values the paper states in its text (it publishes no data behind its plots):
        fig09-websearch.png   Fig. 9: average FCT of short and large flows against load, and
                              retransmitted segments per short and per large flow; a third row
                              gives each baseline's average FCT over P4TE's on the same seeds
                              (geometric mean of the per-seed ratios, 95% bootstrap CI) with the
                              ranges the paper states (§7.1.2) shaded over the loads they cover
        fig10-datamining.png  Fig. 10: the same for data mining
        fig11-uplinks.png     Fig. 11: per leaf, the std-dev of the packets its upward ports sent,
                              web search at the highest load (median over reps, 95% CI); the
                              paper's ranges in the subtitle
        fig12-incast.png      Fig. 12: the incast's average FCT and retransmissions per flow, by
                              class
        fig14-datamining-cdf.png, fig15-websearch-cdf.png
                              Figs. 14 and 15: CDFs of FCT per load (columns) for short, large
                              and all flows (rows), every finished flow of every rep pooled
      Points: medians over the reps of each rep's value; bars: the 95% bootstrap CI of that
      median. A figure whose directory is not given is skipped. --where names the world and
      rates in each title (e.g. "pisa-sim, 100/50 Mb/s").
"""

from __future__ import annotations

import argparse
import os
from collections import defaultdict
from typing import Any, Optional

from . import data, stats, style
from .data import Point
from .p4te import PAPER_MORE, point_stats

SCHEMES = ("ecmp", "hula", "p4te")
CLASSES = ("short", "large")


def _points(d: str) -> list[Point]:
    return [p for p in data.experiment_points(d) if p.scheme in SCHEMES]


def _by(pts: list[Point], key: Any) -> dict[Any, list[Point]]:
    out: dict[Any, list[Point]] = defaultdict(list)
    for p in pts:
        out[key(p)].append(p)
    return out


def _curve(ax: Any, scheme: str, xs: list[float], reps: list[list[Optional[float]]]) -> list[int]:
    """Median over reps with CI bars at each x; returns the rep counts drawn."""
    summ = [stats.over_reps(r) for r in reps]
    keep = [(x, s) for x, s in zip(xs, summ) if s.n]
    if not keep:
        return []
    ax.errorbar([x for x, _ in keep], [s.median for _, s in keep],
                yerr=style.yerr([(s.median, s.ci) for _, s in keep]), marker=style.marker(scheme),
                color=style.colour(scheme), capsize=3, label=scheme)
    return [s.n for _, s in keep]


def _paired(pts: list[Point], other: str, field: str) -> dict[float, stats.Paired]:
    """Per load: `other`'s value of `field` over p4te's, paired by rep (the same seed)."""
    vals = {(p.scheme, p.load, p.summary["rep"]): point_stats(p)[field] for p in pts}
    out = {}
    for load in sorted({p.load for p in pts}):
        reps = sorted({r for (s, ld, r) in vals if ld == load and s == "p4te"})
        out[load] = stats.paired_ratio((vals.get((other, load, r)), vals.get(("p4te", load, r)))
                                       for r in reps)
    return out


def fct_and_retransmissions(pts: list[Point], workload: str, fig_no: int, where: str,
                            out: str) -> None:
    plt = style.pyplot()
    fig, axes = plt.subplots(3, 2, figsize=(10.0, 11.0))
    loads = sorted({p.load for p in pts})
    counts: list[int] = []
    per_scheme = _by(pts, lambda p: p.scheme)
    for col, cls in enumerate(CLASSES):
        fct_ax, retx_ax, ratio_ax = axes[0][col], axes[1][col], axes[2][col]
        for s in SCHEMES:
            by_load = _by(per_scheme.get(s, []), lambda p: p.load)
            rs = {ld: [point_stats(p) for p in by_load.get(ld, [])] for ld in loads}
            counts += _curve(fct_ax, s, loads, [[r[f"{cls}_avg"] for r in rs[ld]] for ld in loads])
            _curve(retx_ax, s, loads, [[r[f"retx_{cls}"] for r in rs[ld]] for ld in loads])
        fct_ax.set_title(f"({'ab'[col]}) {cls} flows: average FCT")
        fct_ax.set_ylabel("FCT (ms)")
        retx_ax.set_title(f"({'cd'[col]}) {cls} flows: retransmitted segments per flow")
        retx_ax.set_ylabel("segments per flow")
        for i, other in enumerate(("ecmp", "hula")):
            paired = _paired(pts, other, f"{cls}_avg")
            xs = [ld for ld in loads if paired[ld].ratio is not None]
            if xs:
                ax_x = [x + (i - 0.5) * 0.012 for x in xs]
                ratio_ax.errorbar(ax_x, [paired[x].ratio for x in xs],
                                  yerr=style.yerr([(paired[x].ratio, paired[x].ci) for x in xs]),
                                  marker=style.marker(other), color=style.colour(other), capsize=3,
                                  label=f"{other} / p4te (ours)")
            for lo, hi, span in PAPER_MORE.get((workload, other, cls), []):
                x0, x1 = span or (min(loads, default=0.2), max(loads, default=0.8))
                ratio_ax.fill_between([x0 - 0.02, x1 + 0.02], 1 + lo / 100, 1 + hi / 100,
                                      color=style.colour(other), alpha=0.15,
                                      label=f"{other}: paper, +{lo}-{hi}%"
                                      + (f" at {x0:.0%}-{x1:.0%}" if span else ""))
        ratio_ax.axhline(1.0, color="black", linewidth=0.8)
        ratio_ax.set_title(f"({'ef'[col]}) {cls} flows: baseline's average FCT over P4TE's")
        ratio_ax.set_ylabel("ratio (>1: P4TE faster)")
        ratio_ax.legend(fontsize=7)
    for ax in axes.flat:
        ax.set_xlabel("load")
    axes[0][0].legend()
    style.titled(fig, f"Fig. {fig_no}, {workload} ({where})",
                 style.subtitle("median", counts) + "\nratios: geometric mean of the per-seed "
                 "ratios, 95% bootstrap CI; shaded: the range the paper states")
    style.save(fig, out)


# The paper's Fig. 11 (§7.1.2): web search at 80% load, std-dev of packets over a leaf's upward
# ports: ECMP 196.06-661.35, P4TE 27.86-220.72, HULA the lowest.
PAPER_FIG11 = "paper (web search, 80%): std ECMP 196-661, P4TE 28-221 packets, HULA lowest"


def uplinks(pts: list[Point], where: str, out: str) -> None:
    plt = style.pyplot()
    top = max(p.load for p in pts)
    at_top = [p for p in pts if p.load == top]
    leaves = sorted({r["leaf"] for p in at_top for r in p.uplinks or []})
    fig, axes = plt.subplots(1, 2, figsize=(12.0, 4.5))
    width = 0.8 / len(SCHEMES)
    counts = []
    for i, s in enumerate(SCHEMES):
        std_reps: dict[str, list[float]] = defaultdict(list)
        cv_reps: dict[str, list[float]] = defaultdict(list)
        for p in at_top:
            if p.scheme != s:
                continue
            for leaf, pk in (p.packets_by_switch() or {}).items():
                std_reps[leaf].append(stats.pstd(pk) or 0.0)
                cv_reps[leaf].append(stats.cv(pk) or 0.0)
        for ax, reps in ((axes[0], std_reps), (axes[1], cv_reps)):
            summ = [stats.over_reps(reps.get(leaf, [])) for leaf in leaves]
            xs = [j + (i - 1) * width for j in range(len(leaves))]
            ax.bar(xs, [x.median or 0.0 for x in summ], width,
                   yerr=style.yerr([(x.median or 0.0, x.ci) for x in summ]),
                   color=style.colour(s), capsize=2, label=s)
        counts += [len(v) for v in std_reps.values()]
    for ax, what in ((axes[0], "std-dev of packets over the upward ports"),
                     (axes[1], "the same over their mean (CV)")):
        ax.set_xticks(range(len(leaves)), [f"L-{j}" for j in range(len(leaves))])
        ax.set_xlabel("leaf switch")
        ax.set_title(what)
        ax.legend()
    axes[0].set_ylabel("packets")
    style.titled(fig, f"Fig. 11, web search at {top:.0%} load ({where})",
                 style.subtitle("median", counts, what="bars", bars="whiskers") + "\n"
                 + PAPER_FIG11)
    style.save(fig, out)


# The paper's Fig. 12 (§7.2): P4TE a little faster than ECMP/HULA for short flows, more for
# large ones, with more retransmissions.
PAPER_FIG12 = "paper: P4TE's FCT a little lower for short flows, more for large; more retransmissions"


def incast(pts: list[Point], where: str, out: str) -> None:
    plt = style.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 4.5))
    width = 0.8 / len(SCHEMES)
    counts = []
    for i, s in enumerate(SCHEMES):
        rs = [point_stats(p) for p in pts if p.scheme == s]
        for ax, field in ((axes[0], "{}_avg"), (axes[1], "retx_{}")):
            summ = [stats.over_reps(r[field.format(c)] for r in rs) for c in CLASSES]
            xs = [j + (i - 1) * width for j in range(len(CLASSES))]
            ax.bar(xs, [x.median or 0.0 for x in summ], width,
                   yerr=style.yerr([(x.median or 0.0, x.ci) for x in summ]),
                   color=style.colour(s), capsize=3, label=s)
        counts.append(len(rs))
    for ax, title, unit in ((axes[0], "(a) average FCT", "FCT (ms)"),
                            (axes[1], "(b) retransmitted segments per flow", "segments")):
        ax.set_xticks(range(len(CLASSES)), [f"{c} flows" for c in CLASSES])
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.legend()
    style.titled(fig, f"Fig. 12, incast ({where})",
                 style.subtitle("median", counts, what="bars", bars="whiskers") + "\n"
                 + PAPER_FIG12)
    style.save(fig, out)


def cdfs(pts: list[Point], workload: str, fig_no: int, where: str, out: str) -> None:
    plt = style.pyplot()
    loads = sorted({p.load for p in pts})
    rows = (("short", "short flows"), ("large", "large flows"), (None, "all flows"))
    fig, axes = plt.subplots(len(rows), len(loads), figsize=(4.0 * len(loads), 9.5),
                             squeeze=False)
    reps = defaultdict(int)
    for r, (cls, name) in enumerate(rows):
        for c, load in enumerate(loads):
            ax = axes[r][c]
            for s in SCHEMES:
                here = [p for p in pts if p.scheme == s and p.load == load]
                if r == 0:
                    reps[(s, load)] = len(here)
                fct = sorted(data.fct_ms(f) for p in here for f in p.flows or []
                             if data.finished(f) and (cls is None or f["class"] == cls))
                if fct:
                    ax.plot(fct, [(j + 1) / len(fct) for j in range(len(fct))],
                            color=style.colour(s), label=s)
            ax.set_xscale("log")
            ax.set_title(f"({chr(ord('a') + r * len(loads) + c)}) {name}, load {load:.0%}")
            ax.set_xlabel("FCT (ms)")
            ax.set_ylabel("CDF")
    axes[0][0].legend()
    style.titled(fig, f"Fig. {fig_no}, CDF of FCT, {workload} ({where})",
                 f"each line: every finished flow of {style.reps_phrase(reps.values())}, pooled")
    style.save(fig, out)


def run(a: argparse.Namespace) -> None:
    os.makedirs(a.out, exist_ok=True)
    made = []

    def path(name: str) -> str:
        made.append(os.path.join(a.out, name))
        return made[-1]

    for workload, d, fig_no, cdf_no in (("websearch", a.websearch, 9, 15),
                                        ("datamining", a.datamining, 10, 14)):
        if not d:
            continue
        pts = [p for p in _points(d) if p.workload == workload]
        if not pts:
            raise SystemExit(f"{d}: no {workload} points of {', '.join(SCHEMES)}")
        fct_and_retransmissions(pts, workload, fig_no, a.where, path(f"fig{fig_no:02}-{workload}.png"))
        cdfs(pts, workload, cdf_no, a.where, path(f"fig{cdf_no}-{workload}-cdf.png"))
        if workload == "websearch":
            uplinks(pts, a.where, path("fig11-uplinks.png"))
    if a.incast:
        incast(_points(a.incast), a.where, path("fig12-incast.png"))
    for m in made:
        print(m)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("p4te-figures", help="P4TE's evaluation figures (Figs. 9-12, 14, 15)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="OUTDIR")
    p.add_argument("--websearch", metavar="DIR")
    p.add_argument("--datamining", metavar="DIR")
    p.add_argument("--incast", metavar="DIR")
    p.add_argument("--where", default="our run", metavar="TEXT")
    p.set_defaults(run=run)
