"""compare REF OTHER [--median-tol 0.15] [--p99-tol 0.30]: one sweep's FCTs against another's
run on the same schedule (e.g. `pisa-fabric experiment --where sim` against the namespace run of
the same command), per (scheme, load, class); standard library only.

Both directories are `pisa-fabric experiment --out` directories. Flows are pooled over the reps
(the same seeds give the same flows in both). For each (scheme, load, class):
  median, p99     of the finished flows' FCTs, ms, in REF and in OTHER, and OTHER / REF
  ok              whether the median is within --median-tol and the p99 within --p99-tol
  per flow        the geometric mean of OTHER / REF over the flows finished in both (flows
                  pair by (rep, id))
  unfinished      flows not finished in REF / OTHER
Then, per (load, class), the schemes in order of their median in each, and whether the orders
agree.

Then, per (load, class), every pair of schemes whose order the reference's intervals settle
(the paired per-seed ratio of their average FCTs, summary.csv's, has a 95% bootstrap interval
clear of 1) and whether OTHER orders them the same way: "same" when its own paired ratio's
interval is clear of 1 on the same side, "level" when it spans 1, "reversed" otherwise (the
issue's "same ordering of schemes wherever the namespace intervals separate them").

--by-size adds a table of the short flows by size (under 10 KB, 10-30 KB, 30-60 KB, 60-200 KB,
200 KB and more): the median FCT of the flows finished in both, in each run. A pooled median of
a size mixture sits where FCT climbs steeply with size, so a small shift of a few sizes moves
it far; this shows where a gap lies.

--by-recovery adds a table that splits the flows finished in both by whether each run's sender
retransmitted (TCP_INFO's retransmissions in namespaces, the model's in the simulator): for each
(scheme, load, class) and each of the four groups, how many flows and the geometric mean of
OTHER / REF over them. It shows whether a gap lies in the flows that only one run recovered.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Optional

from . import data, stats, style

Key = tuple[str, str, str]  # scheme, load, class


#: A flow of one run: its FCT in ms (None when unfinished), retransmissions and size in bytes.
Flow = tuple[Optional[float], int, int]


def _flows(d: str) -> dict[Key, dict[tuple[str, str], Optional[float]]]:
    return {k: {f: v[0] for f, v in fs.items()} for k, fs in _flows_full(d).items()}


def _flows_full(d: str) -> dict[Key, dict[tuple[str, str], Flow]]:
    """flows.csv by (scheme, load, class), then by (rep, id)."""
    by: dict[Key, dict[tuple[str, str], Flow]] = {}
    for r in data.read_csv(os.path.join(d, "flows.csv")):
        k = (r["scheme"], r["load"], r["class"])
        by.setdefault(k, {})[(r["rep"], r["id"])] = (
            data.fct_ms(r) if data.finished(r) else None, data.count(r.get("retransmits")),
            int(r.get("size_bytes") or 0))
    return by


#: --by-size's buckets of flow size, bytes: [low, high).
SIZES = [(0, 10_000), (10_000, 30_000), (30_000, 60_000), (60_000, 200_000), (200_000, None)]


def by_size(ref: str, other: str) -> str:
    """Per (scheme, load) of the short flows and per size bucket: the flows finished in both,
    and their median FCT in each run (ms) with other / ref."""
    a, b = _flows_full(ref), _flows_full(other)
    label = lambda lo, hi: f"{lo // 1000}-{hi // 1000} KB" if hi else f">= {lo // 1000} KB"
    head = " | ".join(label(lo, hi) for lo, hi in SIZES)
    out = ["Short flows finished in both runs, by size: flows, median FCT ms in ref / other "
           "(other / ref)", "", f"| scheme | load | {head} |", "|---|---|" + "---|" * len(SIZES)]
    for k in [k for k in a if k in b and k[2] == "short"]:
        cells = []
        for lo, hi in SIZES:
            pairs = [(fa, b[k][f][0]) for f, (fa, _, size) in a[k].items()
                     if fa and f in b[k] and b[k][f][0] and size >= lo and (hi is None or size < hi)]
            ma = stats.median([x for x, _ in pairs])
            mb = stats.median([y for _, y in pairs])
            cells.append(f"{len(pairs)}: {style.cell(ma, '.1f')} / {style.cell(mb, '.1f')} "
                         f"({style.cell(mb / ma if ma and mb else None, '.2f')})")
        out.append(f"| {k[0]} | {k[1]} | {' | '.join(cells)} |")
    return "\n".join(out)


def _geomean(xs: list[float]) -> Optional[float]:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


#: The four groups of --by-recovery, by (REF retransmitted, OTHER retransmitted).
GROUPS = [(False, False), (True, False), (False, True), (True, True)]


def by_recovery(ref: str, other: str) -> str:
    """Per (scheme, load, class): the flows finished in both, split by which run's sender
    retransmitted, with the count and the geometric mean of OTHER / REF of each group."""
    a, b = _flows_full(ref), _flows_full(other)
    names = {(False, False): "neither", (True, False): "ref only",
             (False, True): "other only", (True, True): "both"}
    head = " | ".join(f"{names[g]}: flows, other/ref" for g in GROUPS)
    out = [
        "Flows finished in both runs, grouped by whose sender retransmitted; each group's flow "
        "count and the geometric mean of other / ref over it",
        "",
        f"| scheme | load | class | {head} |",
        "|---|---|---|" + "---|" * len(GROUPS),
    ]
    for k in [k for k in a if k in b]:
        groups: dict[tuple[bool, bool], list[float]] = {g: [] for g in GROUPS}
        for f, (fa, ra, _) in a[k].items():
            fb, rb, _ = b[k].get(f, (None, 0, 0))
            if fa and fb:
                groups[(ra > 0, rb > 0)].append(fb / fa)
        cells = " | ".join(f"{len(groups[g])}, {style.cell(_geomean(groups[g]), '.2f')}"
                           for g in GROUPS)
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {cells} |")
    return "\n".join(out)


def _avg_fct(d: str) -> dict[tuple[str, str, str], dict[str, Optional[float]]]:
    """(scheme, load, class) -> rep -> the point's average FCT in ms (summary.csv)."""
    by: dict[tuple[str, str, str], dict[str, Optional[float]]] = {}
    for r in data.read_csv(os.path.join(d, "summary.csv")):
        for cls in ("short", "large"):
            by.setdefault((r["scheme"], r["load"], cls), {})[r["rep"]] = (
                data.summary_fct_ms(r, cls, "avg"))
    return by


def settled_pairs(ref: str, other: str) -> tuple[list[str], int, int]:
    """The rows of the pairs the reference settles, how many, and how many OTHER orders alike."""
    a, b = _avg_fct(ref), _avg_fct(other)
    rows, settled, same = [], 0, 0
    groups = sorted({(k[1], k[2]) for k in a})
    for load, cls in groups:
        schemes = [k[0] for k in a if k[1:] == (load, cls) and (k[0], load, cls) in b]
        for i, x in enumerate(schemes):
            for y in schemes[i + 1:]:
                ax, ay = a[(x, load, cls)], a[(y, load, cls)]
                pr = stats.paired_ratio((ax.get(r), ay.get(r)) for r in ax)
                if pr.verdict not in ("lower", "higher"):
                    continue
                bx, by_ = b[(x, load, cls)], b[(y, load, cls)]
                po = stats.paired_ratio((bx.get(r), by_.get(r)) for r in bx)
                # "same": the other's interval is clear of 1 on the reference's side; "level": it
                # spans 1; "reversed": clear of 1 on the other side.
                verdict = ("same" if po.verdict == pr.verdict
                           else "level" if po.verdict in ("no difference", "one pair", None)
                           else "reversed")
                settled += 1
                same += verdict == "same"
                assert pr.ci is not None
                oci = (f" [{po.ci[0]:.2f}, {po.ci[1]:.2f}]" if po.ci else "")
                rows.append(
                    f"| {load} | {cls} | {x} / {y} | {pr.ratio:.2f} [{pr.ci[0]:.2f}, "
                    f"{pr.ci[1]:.2f}] | {style.cell(po.ratio, '.2f')}{oci} | "
                    f"{verdict} |")
    return rows, settled, same


def table(ref: str, other: str, median_tol: float, p99_tol: float) -> str:
    a, b = _flows(ref), _flows(other)
    keys = [k for k in a if k in b]
    out = [
        f"FCTs in ms of the finished flows pooled over the reps; ok: median within "
        f"±{median_tol:.0%} and p99 within ±{p99_tol:.0%} of {ref}",
        "",
        "| scheme | load | class | flows | median ref | median other | ratio | p99 ref | "
        "p99 other | ratio | ok | per flow | unfinished ref/other |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    order: dict[tuple[str, str], list[tuple[str, float, float]]] = {}
    met = 0
    for k in keys:
        fa = [v for v in a[k].values() if v is not None]
        fb = [v for v in b[k].values() if v is not None]
        ma, mb = stats.median(fa), stats.median(fb)
        pa, pb = stats.quantile(fa, 0.99), stats.quantile(fb, 0.99)
        rm = mb / ma if ma and mb else None
        rp = pb / pa if pa and pb else None
        ok = (rm is not None and rp is not None and abs(rm - 1) <= median_tol
              and abs(rp - 1) <= p99_tol)
        met += ok
        pairs = [b[k][f] / v for f, v in a[k].items()
                 if v and b[k].get(f)]
        per_flow = _geomean(pairs)
        out.append(
            f"| {k[0]} | {k[1]} | {k[2]} | {len(a[k])} | {style.cell(ma, '.1f')} | "
            f"{style.cell(mb, '.1f')} | {style.cell(rm, '.2f')} | {style.cell(pa, '.1f')} | "
            f"{style.cell(pb, '.1f')} | {style.cell(rp, '.2f')} | {'yes' if ok else 'no'} | "
            f"{style.cell(per_flow, '.2f')} | "
            f"{sum(v is None for v in a[k].values())}/{sum(v is None for v in b[k].values())} |")
        if ma is not None and mb is not None:
            order.setdefault((k[1], k[2]), []).append((k[0], ma, mb))
    out += ["", f"{met} of {len(keys)} rows within both tolerances.", "",
            "| load | class | order in ref | order in other | same |", "|---|---|---|---|---|"]
    for (load, cls), rows in order.items():
        ra = [s for s, _, _ in sorted(rows, key=lambda r: r[1])]
        rb = [s for s, _, _ in sorted(rows, key=lambda r: r[2])]
        out.append(f"| {load} | {cls} | {' < '.join(ra)} | {' < '.join(rb)} | "
                   f"{'yes' if ra == rb else 'no'} |")
    rows, settled, same = settled_pairs(ref, other)
    out += ["", "Pairs of schemes the reference's intervals order (paired per-seed ratio of the "
            "average FCT, 95% bootstrap interval clear of 1), and whether the other run orders "
            "them alike:", "",
            "| load | class | pair | ref ratio [95%] | other ratio [95%] | order in other |",
            "|---|---|---|---|---|---|", *rows, "",
            f"{same} of {settled} settled pairs in the same order in the other run, its "
            f"interval clear of 1."]
    return "\n".join(out)


def run(a: argparse.Namespace) -> None:
    print(table(a.ref, a.other, a.median_tol, a.p99_tol))
    if a.by_size:
        print()
        print(by_size(a.ref, a.other))
    if a.by_recovery:
        print()
        print(by_recovery(a.ref, a.other))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="one sweep's FCTs against another's on the same schedule "
                       "(pisa-sim against namespaces)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ref", help="the reference run's --out directory (e.g. the namespace run)")
    p.add_argument("other", help="the run compared with it (e.g. --where sim)")
    p.add_argument("--median-tol", type=float, default=0.15)
    p.add_argument("--p99-tol", type=float, default=0.30)
    p.add_argument("--by-size", action="store_true",
                   help="also the short flows' median FCTs by flow size")
    p.add_argument("--by-recovery", action="store_true",
                   help="also split the flows by whose sender retransmitted")
    p.set_defaults(run=run)
