"""The packet-splitting experiments E14 and E15 (issue 13, docs/spray.md): splitting-table and
e14-fig2.

  splitting-table [--plot PNG] [--json OUT.json] LABEL=DIR [LABEL=DIR ...]
      Each DIR is a `pisa-fabric experiment --out DIR` directory (summary.csv, flows.csv,
      uplinks.csv). For every (label, scheme, load) it prints one Markdown row with the median
      over the repetitions of:
      - finished flows (sum over reps) and the mean per-flow goodput (size / FCT, Mb/s) over
        the finished flows, with the 95% bootstrap CI of its median (last column);
      - the average FCT of the short and the large flows (ms; "-" for a class with no flows);
      - per flow: retransmitted segments, reordering events the sender detected
        (tcpi_reord_seen), out-of-order packets at the receiver (tcpi_rcv_ooopack) and DSACKed
        (spurious) retransmits;
      - the imbalance of the upward links per tier: for every switch, the coefficient of
        variation (std / mean) of the packets its upward ports sent, averaged over the switches
        of the tier (ToR/leaf -> aggregation/spine, aggregation -> core) that sent any; 0 is
        perfectly even, "-" a tier the topology lacks;
      - the egress queues sampled once a second: mean and max (packets).
      --json writes the medians, --plot bars of goodput, retransmissions and CVs.

  e14-fig2 DIR [PNG]
      E14's Fig. 2 arrangement (a `pisa-fabric experiment --pattern flows:docs/spray/fig2.flows`
      output): reads DIR/uplinks.csv and DIR/flows.csv and prints the shares of pod 1's four
      core links, T1's split between its uplinks and each flow's goodput (medians over the
      reps, each column on its own, and the 95% bootstrap CI of the goodputs' medians) and how
      many reps kept fidelity (summary.csv's `fidelity`); the per-rep packet counts go to stderr. PNG: the shares against the paper's counter skew.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from typing import Any

from . import data, stats, style
from .data import Point
from .style import cell


def tier_of(sw: str) -> str:
    # Generated names: p1e1 (edge), p1a1 (aggregation), leaf1, ...
    if "a" in sw.lstrip("p0123456789")[:1]:
        return "agg->core"
    return "tor->up"


def rep_stats(p: Point) -> dict[str, Any]:
    s, fl = p.summary, p.flows
    good = None
    per = dict.fromkeys(("retransmits", "reord_seen", "rcv_ooopack", "dsack_dups"))
    if fl is not None:
        good = stats.mean([int(f["size_bytes"]) * 8 / float(f["fct_us"]) for f in fl
                           if data.finished(f)])
        per = {col: stats.mean([data.count(f[col]) for f in fl]) for col in per}
    tiers = defaultdict(list)
    for sw, pk in (p.packets_by_switch() or {}).items():
        tiers[tier_of(sw)].append(pk)
    return {
        "flows": int(s["flows"]),
        "finished": int(s["finished"]),
        "goodput_mbps": good,
        "short_avg_ms": data.summary_fct_ms(s, "short", "avg"),
        "large_avg_ms": data.summary_fct_ms(s, "large", "avg"),
        "retx": per["retransmits"],
        "reord_seen": per["reord_seen"],
        "ooo_pkts": per["rcv_ooopack"],
        "dsack": per["dsack_dups"],
        "cv_tor": stats.mean_cv(tiers["tor->up"]),
        "cv_agg": stats.mean_cv(tiers["agg->core"]),
        "queue_mean": float(s["queue_mean_pkts"]),
        "queue_max": float(s["queue_max_pkts"]),
        "tm_drops": int(s["tm_drops"]),
    }


def table(a: argparse.Namespace) -> None:
    reps: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for arg in a.dirs:
        label, d = data.labelled(arg)
        for p in data.experiment_points(d):
            reps.setdefault((label, p.scheme, p.summary["load"]), []).append(rep_stats(p))
    med = {}
    for key, rs in reps.items():
        m: dict[str, Any] = {k: stats.median(stats.known(r[k] for r in rs)) for k in rs[0]}
        m["goodput_mbps_ci95"] = stats.over_reps(r["goodput_mbps"] for r in rs).ci
        m["finished"] = sum(r["finished"] for r in rs)
        m["flows"] = sum(r["flows"] for r in rs)
        m["reps"] = len(rs)
        med[key] = m
    print(
        "| run | scheme | load | reps | finished | goodput/flow Mb/s | short avg ms | large avg ms "
        "| retx/flow | reord seen/flow | OOO pkts/flow | DSACK/flow | CV tor->up | CV agg->core "
        "| queue mean / max | TM drops | goodput/flow 95% CI |"
    )
    print("|" + "---|" * 17)
    for (label, scheme, load), m in med.items():
        print(
            f"| {label} | {scheme} | {load} | {m['reps']} | {m['finished']}/{m['flows']} "
            f"| {cell(m['goodput_mbps'], '.2f')} | {cell(m['short_avg_ms'], '.0f')} "
            f"| {cell(m['large_avg_ms'], '.0f')} | {cell(m['retx'], '.1f')} "
            f"| {cell(m['reord_seen'], '.2f')} | {cell(m['ooo_pkts'], '.0f')} "
            f"| {cell(m['dsack'], '.1f')} | {cell(m['cv_tor'], '.3f')} | {cell(m['cv_agg'], '.3f')} "
            f"| {m['queue_mean']:.2f} / {m['queue_max']:.0f} | {m['tm_drops']:.0f} "
            f"| {style.ci_cell(m['goodput_mbps_ci95'], '.2f')} |"
        )
    if a.json:
        data.write_json(a.json, [{"run": k[0], "scheme": k[1], "load": k[2], **v}
                                 for k, v in med.items()])
    if a.plot:
        plot(reps, a.plot)


def plot(reps: dict[tuple[str, str, str], list[dict[str, Any]]], dst: str) -> None:
    plt = style.pyplot()
    runs = list(dict.fromkeys((k[0], k[2]) for k in reps))
    schemes = list(dict.fromkeys(k[1] for k in reps))
    panels = [
        ("goodput_mbps", "mean goodput per flow (Mb/s)"),
        ("retx", "retransmitted segments per flow"),
        ("cv_tor", "CV of ToR/leaf uplink packets"),
    ]
    if any(r["cv_agg"] for rs in reps.values() for r in rs):
        panels.append(("cv_agg", "CV of agg->core link packets"))
    fig, axes = plt.subplots(1, len(panels), figsize=(style.PANEL[0] * len(panels),
                                                      style.PANEL[1]))
    width = 0.8 / max(len(schemes), 1)
    counts = []
    for ax, (key, ylabel) in zip(axes, panels):
        for i, s in enumerate(schemes):
            bars = []
            for r, ld in runs:
                summ = stats.over_reps(x[key] for x in reps.get((r, s, ld), []))
                counts.append(summ.n)
                bars.append((summ.median if summ.n else 0.0, summ.ci))
            ax.bar([j + i * width for j in range(len(runs))], [m for m, _ in bars], width,
                   yerr=style.yerr(bars), capsize=2, color=style.colour(s), label=s)
        ax.set_xticks([j + width * (len(schemes) - 1) / 2 for j in range(len(runs))])
        ax.set_xticklabels([f"{r}\nload {ld}" for r, ld in runs], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.grid(axis="x", visible=False)
    axes[0].legend()
    style.titled(fig, "Packet splitting", style.subtitle("median", counts, what="bars",
                                                         bars="whiskers"))
    style.save(fig, dst)


LINKS = ["p1a1-core1", "p1a1-core2", "p1a2-core3", "p1a2-core4"]
FLOWS = {("h1", "h5"): "A", ("h2", "h3"): "B", ("h4", "h6"): "C"}


def fidelity_cell(verdicts: list[str]) -> str:
    """`k/n`: of a scheme's n reps, the k the emulator kept up with; "-" for runs without
    verdicts (before the runner had them, or pisa-sim's)."""
    judged = [v for v in verdicts if v not in ("", "-")]
    return f"{sum(v == 'ok' for v in judged)}/{len(verdicts)}" if judged else "-"


def fig2(a: argparse.Namespace) -> None:
    d = a.dir
    ups: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for r in data.read_csv(f"{d}/uplinks.csv"):
        if r["leaf"] in ("p1a1", "p1a2"):
            ups[(r["scheme"], r["rep"])][f'{r["leaf"]}-{r["spine"]}'] = int(r["packets"])
        if r["leaf"] == "p1e1":
            ups[(r["scheme"], r["rep"])][f'T1-{r["spine"]}'] = int(r["packets"])
    good: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for r in data.read_csv(f"{d}/flows.csv"):
        if data.finished(r):
            good[(r["scheme"], r["rep"])][FLOWS[(r["src"], r["dst"])]] = \
                int(r["size_bytes"]) * 8 / float(r["fct_us"])
    verdicts: dict[str, list[str]] = defaultdict(list)
    for r in data.read_csv(f"{d}/summary.csv"):
        v = r.get("fidelity") or "-"
        verdicts[r["scheme"]].append(v.split(":")[0].split(" ")[0])
    shares: dict[str, dict[str, stats.RepSummary]] = {}
    print("| scheme | A1-C1 | A1-C2 | A2-C3 | A2-C4 | T1-A1 : T1-A2 | A Mb/s | B Mb/s | C Mb/s "
          "| A / B / C Mb/s, 95% CI | fidelity ok |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in dict.fromkeys(k[0] for k in ups):
        reps = [k for k in ups if k[0] == s]
        shares[s] = {ln: stats.over_reps(ups[k][ln] / sum(ups[k][x] for x in LINKS) for k in reps)
                     for ln in LINKS}
        t1 = stats.median([ups[k]["T1-p1a1"] / (ups[k]["T1-p1a1"] + ups[k]["T1-p1a2"])
                           for k in reps])
        g = {f: stats.over_reps(good[k].get(f) for k in reps) for f in "ABC"}
        print(f"| {s} | " + " | ".join(f"{shares[s][ln].median:.3f}" for ln in LINKS)
              + f" | {t1:.2f} : {1 - t1:.2f} | "
              + " | ".join(cell(g[f].median, ".1f") for f in "ABC") + " | "
              + " / ".join(style.ci_cell(g[f].ci, ".1f") for f in "ABC") + " | "
              + fidelity_cell(verdicts[s]) + " |")
        for k in reps:
            print("   ", k[1], [ups[k][ln] for ln in LINKS], ups[k]["T1-p1a1"], ups[k]["T1-p1a2"],
                  file=sys.stderr)
    if a.png:
        plt = style.pyplot()
        fig, ax = plt.subplots(figsize=(style.ONE[0], 0.9 * style.ONE[1]))
        width = 0.8 / (len(shares) + 1)
        paper = [0.375, 0.375, 0.125, 0.125]
        ax.bar(range(4), paper, width, label="counter, paper's Fig. 2", color="lightgray",
               hatch="//")
        for i, (s, sh) in enumerate(shares.items()):
            bars = [(sh[ln].median, sh[ln].ci) for ln in LINKS]
            ax.bar([j + (i + 1) * width for j in range(4)], [m for m, _ in bars], width,
                   yerr=style.yerr(bars), capsize=2, color=style.colour(s), label=s)
        ax.axhline(0.25, color="k", lw=0.8, ls="--")
        ax.set_xticks([j + width * len(shares) / 2 for j in range(4)])
        ax.set_xticklabels(["A1-C1", "A1-C2", "A2-C3", "A2-C4"])
        ax.set_ylabel("share of pod 1's core-link packets")
        ax.legend()
        ax.grid(axis="x", visible=False)
        counts = [r.n for sh in shares.values() for r in sh.values()]
        style.titled(fig, "E14, Fig. 2 arrangement in namespaces",
                     style.subtitle("median", counts, what="bars", bars="whiskers",
                                    extra=["hatched: the paper's counter"]))
        style.save(fig, a.png)


def register(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("splitting-table", help="E14/E15 tables (medians over reps)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--plot", metavar="PNG")
    t.add_argument("--json", metavar="OUT.json")
    t.add_argument("dirs", nargs="+", metavar="LABEL=DIR")
    t.set_defaults(run=table)
    f = sub.add_parser("e14-fig2", help="E14's Fig. 2 arrangement: core-link shares, goodputs",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    f.add_argument("dir", metavar="DIR")
    f.add_argument("png", metavar="PNG", nargs="?")
    f.set_defaults(run=fig2)
