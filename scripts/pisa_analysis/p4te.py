"""P4TE's reproduction tables (issue 12): p4te-table and p4te-e5.

  p4te-table [--merge OUTDIR] [--json OUT.json] [--host-rate BPS --uplink-rate BPS] DIR [DIR ...]
      Each DIR is a `pisa-fabric experiment --out DIR` directory (summary.csv; flows.csv and
      uplinks.csv where present); points of several directories are pooled by (workload,
      scheme, load), so a sweep may be split over invocations (baselines in one, the P4TE
      schemes with a measured delta in another). For every (workload, scheme, load) it prints
      the median over repetitions of:
      - finished flows (summed over reps, from summary.csv);
      - average and p99 FCT of short and large flows (ms), and the 95% bootstrap CI of the
        median of the averages (last column);
      - retransmitted segments per short and per large flow (flows.csv: TCP_INFO);
      - the std-dev of per-uplink packets within a leaf (mean over the leaves, summary.csv) and
        the same as a coefficient of variation (std / mean: comparable across link rates,
        uplinks.csv), TM drops, the sampled queues' p90 (packets);
      - the uplinks' packet rate during the point's traffic (first start to last finish, from
        flows.csv): mean over the uplinks, and the busiest uplink.
      Then the paper's comparisons (P4TE §7.1, App. A) computed from those medians, as "X needs
      N% more time than P4TE" (positive: P4TE is faster), next to the paper's ranges.
      A column whose input file a DIR lacks prints "-". --merge OUTDIR writes the pooled
      experiment files for `experiment-plots OUTDIR`; --json the medians and comparisons.

  p4te-e5 [--plot PNG] GAP_US=DIR [GAP_US=DIR ...]
      P4TE's flowlet-gap sweep (E5, the paper's App. A.1): each DIR is a `pisa-fabric
      experiment --out DIR` run with `--set flowlet_gap_us=GAP_US`. Reads DIR/flows.csv and
      DIR/counters.csv and prints, per gap and class (short, large), the flows finished, the
      mean, median and p99 (nearest rank) FCT over the finished flows (ms), the retransmitted
      segments per flow, and the FACKs the switches sent (when the run recorded
      `egress.facks`, else "-"). --plot draws the FCT CDFs of both classes, one line per gap,
      as the paper's Fig. 13 does.
"""

from __future__ import annotations

import argparse
import os
from collections import defaultdict
from typing import Any, Optional

from . import data, stats, style
from .data import Point
from .style import cell

FRAME_BITS = 1500 * 8


def point_stats(p: Point) -> dict[str, Any]:
    """One rep's values; None where the directory lacks the file it needs."""
    s, flows = p.summary, p.flows
    span: Optional[float] = None
    retx: dict[str, Optional[float]] = {"short": None, "large": None}
    if flows is not None:
        starts = [int(f["start_ns"]) / 1e9 for f in flows]
        ends = [int(f["start_ns"]) / 1e9 + float(f["fct_us"]) / 1e6 for f in flows
                if data.finished(f)]
        span = (max(ends) - min(starts)) if ends and starts else float(s["seconds"])
        for c in retx:
            retx[c] = stats.mean([data.count(f["retransmits"]) for f in flows if f["class"] == c])
    ups = p.packets_by_switch()
    pps = None if ups is None or span is None or span <= 0 else \
        [n / span for leaf in ups.values() for n in leaf]
    return {
        "flows": int(s["flows"]),
        "finished": int(s["finished"]),
        "short_avg": data.summary_fct_ms(s, "short", "avg"),
        "short_p99": data.summary_fct_ms(s, "short", "p99"),
        "large_avg": data.summary_fct_ms(s, "large", "avg"),
        "large_p99": data.summary_fct_ms(s, "large", "p99"),
        "retx_short": retx["short"],
        "retx_large": retx["large"],
        "uplink_std": data.num(s["uplink_pkts_std_mean"]),
        "uplink_cv": None if ups is None else stats.mean_cv(ups.values()),
        "tm_drops": int(s["tm_drops"]),
        "queue_p90": data.num(s.get("queue_p90_pkts")),
        "uplink_pps_mean": None if pps is None else stats.mean(pps),
        "uplink_pps_max": max(pps) if pps else None,
        "span_s": span,
    }


def pooled(dirs: list[str]) -> tuple[dict[tuple[str, str, float], dict[str, Any]], list]:
    """The medians over reps per (workload, scheme, load) of the directories' points, and the
    directories' files (for --merge)."""
    reps = defaultdict(list)
    tables = []
    for d in dirs:
        t = data.read_experiment(d)
        tables.append(t)
        for p in data.points(t):
            reps[(p.workload, p.scheme, p.load)].append(point_stats(p))
    med = {}
    for key, rs in reps.items():
        m: dict[str, Any] = {k: stats.median(stats.known(r[k] for r in rs)) for k in rs[0]}
        for k in ("short_avg", "large_avg"):
            m[f"{k}_ci95"] = stats.over_reps(r[k] for r in rs).ci
        m["flows"] = sum(r["flows"] for r in rs)
        m["finished"] = sum(r["finished"] for r in rs)
        m["reps"] = len(rs)
        med[key] = m
    return med, tables


def pct_more(other: Optional[float], p4te: Optional[float]) -> Optional[float]:
    if other is None or p4te is None or p4te == 0:
        return None
    return (other / p4te - 1.0) * 100.0


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_pct(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:+.0f}%"


# The paper's headline ranges (Robin and Khan, "P4TE: PISA Switch Based Traffic Engineering in
# Fat-Tree Data Center Networks", §7.1-§7.2 and App. A; docs/p4te.md lists them): how much more
# time (%) the baseline needs than P4TE, as (low, high, loads it covers or None for every load).
PAPER_MORE: dict[tuple[str, str, str], list[tuple[int, int, Optional[tuple[float, float]]]]] = {
    ("websearch", "ecmp", "short"): [(40, 55, None)],
    ("websearch", "ecmp", "large"): [(4, 35, None)],
    ("websearch", "hula", "short"): [(2, 60, None), (23, 40, (0.6, 0.8))],
    ("websearch", "hula", "large"): [(2, 40, None), (29, 47, (0.6, 0.8))],
    ("datamining", "ecmp", "short"): [(27, 56, (0.4, 0.8))],
    ("datamining", "ecmp", "large"): [(6, 24, (0.4, 0.8))],
    ("datamining", "hula", "short"): [(11, 33, (0.4, 0.8))],
    ("datamining", "hula", "large"): [(3, 22, (0.4, 0.8))],
}


def paper_text(key: tuple[str, str, str]) -> Optional[str]:
    """A PAPER_MORE entry as the table prints it, e.g. "+2 to +60% (+23 to +40% at 60-80%)"."""
    parts = [f"+{lo} to +{hi}%" + (f" at {span[0]:.0%}-{span[1]:.0%}".replace("%-", "-")
                                   if span else "")
             for lo, hi, span in PAPER_MORE.get(key, [])]
    if not parts:
        return None
    return parts[0] + "".join(f" ({p})" for p in parts[1:])


def table(a: argparse.Namespace) -> None:
    med, tables = pooled(a.dirs)
    if a.merge:
        data.write_merged(tables, a.merge)
    print(
        f"Links: hosts {a.host_rate / 1e6:.0f} Mb/s ({a.host_rate / FRAME_BITS:,.0f} packets/s of "
        f"1,500 B), uplinks {a.uplink_rate / 1e6:.0f} Mb/s ({a.uplink_rate / FRAME_BITS:,.0f} "
        "packets/s); the paper's: 40 and 20 packets/s.\n"
    )
    print(
        "| workload | scheme | load | reps | finished | short avg / p99 ms | large avg / p99 ms "
        "| retx per short / large flow | uplink std (CV) | TM drops | queue p90 "
        "| uplink pkt/s mean / max | short / large avg ms, 95% CI |"
    )
    print("|" + "---|" * 13)
    for (wl, scheme, ld), m in sorted(med.items()):
        print(
            f"| {wl} | {scheme} | {ld:.1f} | {m['reps']} | {m['finished']}/{m['flows']} "
            f"| {cell(m['short_avg'], ',.0f')} / {cell(m['short_p99'], ',.0f')} "
            f"| {cell(m['large_avg'], ',.0f')} / {cell(m['large_p99'], ',.0f')} "
            f"| {cell(m['retx_short'], '.2f')} / {cell(m['retx_large'], '.2f')} "
            f"| {cell(m['uplink_std'], ',.0f')} ({cell(m['uplink_cv'], '.3f')}) "
            f"| {m['tm_drops']:,.0f} | {cell(m['queue_p90'], '.0f')} "
            f"| {cell(m['uplink_pps_mean'], ',.0f')} / {cell(m['uplink_pps_max'], ',.0f')} "
            f"| {style.ci_cell(m['short_avg_ci95'], ',.0f')} / "
            f"{style.ci_cell(m['large_avg_ci95'], ',.0f')} |"
        )
    print()
    comparisons = []
    workloads = sorted({k[0] for k in med})
    print("| workload | comparison | class | ours, one value per load, ascending | paper |")
    print("|---|---|---|---|---|")
    for wl in workloads:
        loads = sorted({k[2] for k in med if k[0] == wl})
        for other, base in (("ecmp", "p4te"), ("hula", "p4te"), ("p4te-nra", "p4te")):
            for cls in ("short", "large"):
                vals = []
                for ld in loads:
                    o, p = med.get((wl, other, ld)), med.get((wl, base, ld))
                    vals.append(pct_more(o and o[f"{cls}_avg"], p and p[f"{cls}_avg"]))
                if all(v is None for v in vals):
                    continue
                paper = paper_text((wl, other, cls)) or \
                    "P4TE 5-12% faster at high load, little change at 0-20%"
                comparisons.append({"workload": wl, "other": other, "class": cls, "loads": loads,
                                    "pct": vals})
                print(
                    f"| {wl} | {other} avg FCT over p4te's | {cls} | "
                    + " / ".join(fmt_pct(v) for v in vals)
                    + f" | {paper} |"
                )
        for other in ("ecmp", "hula"):
            for cls in ("short", "large"):
                vals = []
                for ld in loads:
                    o, p = med.get((wl, other, ld)), med.get((wl, "p4te", ld))
                    vals.append(ratio(p and p[f"retx_{cls}"], o and o[f"retx_{cls}"]))
                if all(v is None for v in vals):
                    continue
                print(
                    f"| {wl} | p4te retransmissions per flow / {other}'s | {cls} | "
                    + " / ".join("-" if v is None else f"{v:,.1f}x" for v in vals)
                    + " | "
                    + ("P4TE more: short 1.06-1.16x ECMP's, 1.27-1.54x HULA's; large 1.08-1.26x ECMP's"
                       if wl == "websearch" else "- (the paper compares schemes for web search only)")
                    + " |"
                )
        top = max(loads) if loads else None
        stds = {s: med[(wl, s, top)] for s in ("ecmp", "hula", "p4te") if (wl, s, top) in med}
        if stds:
            print(
                f"| {wl} | uplink std (CV) at {top:.1f}, packets | all | "
                + ", ".join(f"{s} {cell(m['uplink_std'], ',.0f')} ({cell(m['uplink_cv'], '.3f')})"
                            for s, m in stds.items())
                + " | "
                + ("ECMP 196-661, P4TE 28-221 (P4TE/ECMP 0.14-0.33), HULA the most even"
                   if wl == "websearch" else "- (the paper's Fig. 11 is web search)")
                + " |"
            )
    # The paper's one data-mining retransmission figure compares the workloads, not the schemes.
    if "websearch" in workloads and "datamining" in workloads:
        loads = sorted({k[2] for k in med if k[0] == "datamining"})
        for cls in ("short", "large"):
            vals = []
            for ld in loads:
                d, w = med.get(("datamining", "p4te", ld)), med.get(("websearch", "p4te", ld))
                vals.append(ratio(d and d[f"retx_{cls}"], w and w[f"retx_{cls}"]))
            print(
                f"| datamining | p4te retransmissions per flow / web search's | {cls} | "
                + " / ".join("-" if v is None else f"{v:,.2f}x" for v in vals)
                + " | about half the web-search count at the same load |"
            )
    if a.json:
        data.write_json(a.json, {
            "points": [{"workload": k[0], "scheme": k[1], "load": k[2], **v}
                       for k, v in sorted(med.items())],
            "comparisons": comparisons,
        })


def e5(a: argparse.Namespace) -> None:
    runs = []
    for arg in a.runs:
        gap, d = data.labelled(arg)
        flows = data.read_csv(os.path.join(d, "flows.csv"))
        counters = data.read_csv_if_present(os.path.join(d, "counters.csv"))
        facks = [data.count(r["packets"]) for r in counters or [] if r["counter"] == "egress.facks"]
        runs.append((int(gap), flows, sum(facks) if facks else None))
    runs.sort(key=lambda r: r[0])
    print("| gap | class | finished | avg FCT ms | median ms | p99 ms | retransmits per flow "
          "| FACKs (all switches) |")
    print("|---|---|---|---|---|---|---|---|")
    for gap, flows, facks in runs:
        for cls in ("short", "large"):
            fl = [f for f in flows if f["class"] == cls]
            fct = [data.fct_ms(f) for f in fl if data.finished(f)]
            retx = stats.mean([data.count(f["retransmits"]) for f in fl])
            print(
                f"| {gap / 1000:g} ms | {cls} | {len(fct)}/{len(fl)} | {cell(stats.mean(fct), ',.0f')} "
                f"| {cell(stats.median(fct), ',.0f')} | {cell(stats.quantile(fct, 0.99), ',.0f')} "
                f"| {cell(retx, '.2f')} | {cell(facks, ',')} |"
            )
    if a.plot:
        plt = style.pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(2 * style.PANEL[0], style.PANEL[1]))
        for ax, cls in zip(axes, ("short", "large")):
            for i, (gap, flows, _) in enumerate(runs):
                fct = sorted(data.fct_ms(f) for f in flows if f["class"] == cls and data.finished(f))
                ax.plot(fct, [(j + 1) / len(fct) for j in range(len(fct))],
                        color=style.series_colour(i), label=f"{gap / 1000:g} ms")
            ax.set_xscale("log")
            ax.set_xlabel("FCT (ms)")
            ax.set_ylabel("CDF")
            ax.set_title(f"p4te, {cls} flows")
            ax.legend(title="flowlet gap")
        reps = [len({(f["scheme"], f["load"], f["rep"]) for f in flows}) for _, flows, _ in runs]
        style.titled(fig, "P4TE's flowlet gap (E5)",
                     f"each line: every finished flow of {style.reps_phrase(reps)} per gap, pooled")
        style.save(fig, a.plot)


def register(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("p4te-table", help="P4TE's reproduction tables (medians over reps)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--merge", metavar="OUTDIR")
    t.add_argument("--json", metavar="OUT.json")
    t.add_argument("--host-rate", type=float, default=100e6)
    t.add_argument("--uplink-rate", type=float, default=50e6)
    t.add_argument("dirs", nargs="+", metavar="DIR")
    t.set_defaults(run=table)
    e = sub.add_parser("p4te-e5", help="P4TE's flowlet-gap sweep (E5)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("--plot", metavar="PNG")
    e.add_argument("runs", nargs="+", metavar="GAP_US=DIR")
    e.set_defaults(run=e5)
