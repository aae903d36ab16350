"""fct-table DIR [--baseline SCHEME]: the FCT table of a `pisa-fabric experiment --out DIR` run
(the runner prints it at the end; standard library only).

One row per (scheme, load), in the order of DIR/summary.csv:
  reps        the repetitions (seeds) measured
  fidelity    how many of them the emulator kept up with (`ok`), when summary.csv says
              (`-` where no rep has a verdict: pisa-sim's virtual time has none to judge)
  short/large avg and p99 FCT, ms: mean (median) [95% bootstrap CI of the mean] over the reps
  vs BASELINE the paired ratio of the average FCT to the baseline scheme's on the same seeds
              (every scheme of a sweep runs the same flows per (load, rep)): the geometric mean
              of the per-seed ratios and its 95% bootstrap CI; "no difference" when the
              interval spans 1.0
  retransmits, TM drops, uplink std (the std-dev of a leaf's uplink packets, mean over the
              leaves): medians over the reps
"""

from __future__ import annotations

import argparse
import os
from collections import defaultdict
from typing import Optional

from . import data, stats, style
from .data import Row


def _fct(s: stats.Summary) -> str:
    if s.mean is None:
        return "-"
    text = f"{s.mean:.1f} ({s.median:.1f})"
    if s.n > 1 and s.ci is not None:
        text += f" [{s.ci[0]:.1f}, {s.ci[1]:.1f}]"
    return text


def _ratio(p: stats.Paired) -> str:
    if p.ratio is None:
        return "-"
    if p.ci is None:
        return f"{p.ratio:.2f} (one seed)"
    text = f"{p.ratio:.2f} [{p.ci[0]:.2f}, {p.ci[1]:.2f}]"
    return f"no difference: {text}" if p.verdict == "no difference" else text


def table(rows: list[Row], baseline: Optional[str] = None) -> str:
    """The table as Markdown, from summary.csv's rows."""
    order: list[tuple[str, str]] = []
    by: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        k = (r["scheme"], r["load"])
        if k not in by:
            order.append(k)
        by[k].append(r)
    if not order:
        return "(no finished points)\n"
    base = baseline or order[0][0]
    has_fidelity = any("fidelity" in r for r in rows)

    def fct(rs: list[Row], cls: str, which: str) -> list[Optional[float]]:
        return [data.summary_fct_ms(r, cls, which) for r in rs]

    out = [
        f"FCTs in ms: mean (median) [95% bootstrap CI of the mean] over the reps; vs {base}: "
        "geometric mean of the per-seed ratios of the average FCT [95% bootstrap CI]",
        "",
        "| scheme | load | reps | fidelity ok | finished | short avg | short p99 | large avg | "
        f"large p99 | short avg vs {base} | large avg vs {base} | retransmits | TM drops | uplink std |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in order:
        rs = by[k]
        b = {r["rep"]: r for r in by.get((base, k[1]), [])}

        def paired(cls: str) -> stats.Paired:
            return stats.paired_ratio(
                (data.summary_fct_ms(r, cls, "avg"),
                 data.summary_fct_ms(b[r["rep"]], cls, "avg") if r["rep"] in b else None)
                for r in rs)

        judged = [r for r in rs if r.get("fidelity") not in (None, "", "-")]
        fid = (f"{sum(1 for r in judged if r.get('fidelity') == 'ok')}/{len(rs)}"
               if has_fidelity and judged else "-")
        fin = stats.median(stats.known(data.num(r.get("finished")) for r in rs))
        flows = stats.median(stats.known(data.num(r.get("flows")) for r in rs))
        cells = [
            k[0], k[1], str(len(rs)), fid,
            f"{style.cell(fin, '.0f')}/{style.cell(flows, '.0f')}",
            _fct(stats.summarise(fct(rs, "short", "avg"))),
            _fct(stats.summarise(fct(rs, "short", "p99"))),
            _fct(stats.summarise(fct(rs, "large", "avg"))),
            _fct(stats.summarise(fct(rs, "large", "p99"))),
            "1" if k[0] == base else _ratio(paired("short")),
            "1" if k[0] == base else _ratio(paired("large")),
            style.cell(stats.median(stats.known(data.num(r.get("retransmits")) for r in rs)),
                       ".0f"),
            style.cell(stats.median(stats.known(data.num(r.get("tm_drops")) for r in rs)),
                       ".0f"),
            style.cell(stats.median(stats.known(data.num(r.get("uplink_pkts_std_mean"))
                                                for r in rs)), ".1f"),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def run(a: argparse.Namespace) -> None:
    print(table(data.read_csv(os.path.join(a.dir, "summary.csv")), a.baseline), end="")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fct-table", help="the FCT table of a `pisa-fabric experiment` run, with "
                       "intervals and paired ratios", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="the experiment's --out directory")
    p.add_argument("--baseline", help="the scheme ratios refer to (default: the first)")
    p.set_defaults(run=run)
