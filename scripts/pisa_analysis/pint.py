"""pint-plot e13|e12|e11 JSON PNG: PINT's figures (issue 15, docs/pint.md).

  pint-plot e13 E13.json PNG
      From `pisa-pint e13 --json`: median packets to decode a k-hop path over the trials
      (8 bits and 2 x 4 bits, fat-tree and chain paths; a line up to the p90) against the
      paper's k log log* k and the same times E[R]/instances (hashed switch IDs); a second
      panel: median decode time.
  pint-plot e12 E12.json PNG [--eps4 E] [--eps8 E] [--trials N]
      From `pisa-pint e12 --json`: per-hop p50 and p99 relative error (averaged over the hops,
      median over the trials) against packets received, b = 4 and 8, with the KLL sketch and
      with all samples; dotted lines at each codec's bound epsilon (if given). The JSON does
      not record the trials: --trials (the run's) puts their number in the subtitle.
  pint-plot e11 E11.json PNG
      From `pisa-fabric e11 --where sim --json` (one deterministic run per load and scheme):
      the p95 slowdown per decile of flow size (the paper's Fig. 7) at the middle load, per scheme; and the mean
      goodput of flows >= 10 MB against load, as the gain over HPCC(INT) (the paper's Fig. 7a).
Each prints the file it wrote.
"""

from __future__ import annotations

import argparse

from . import data, style


def e13(a: argparse.Namespace) -> None:
    plt = style.pyplot()
    rows = data.read_json(a.json)
    fig, (ax, at) = plt.subplots(1, 2, figsize=(2 * style.PANEL[0], style.PANEL[1]))
    for n, budget in enumerate(("1x8", "2x4")):
        colour = style.series_colour(n)
        rs = sorted((r for r in rows if r["budget"] == budget), key=lambda r: r["k"])
        for kind, mark in (("fat-tree k=8", "s"), ("chain", "o")):
            sel = [r for r in rs if r["kind"] == kind]
            if not sel:
                continue
            k = [r["k"] for r in sel]
            label = f"{budget.replace('1x8', '8 bits').replace('2x4', '2 x 4 bits')}, {kind}"
            ax.plot(k, [r["median"] for r in sel], marker=mark, color=colour, label=label,
                    linestyle="-" if kind == "chain" else "none")
            ax.vlines(k, [r["median"] for r in sel], [r["p90"] for r in sel], color=colour,
                      alpha=0.4)
            at.plot(k, [r["decode_us"] for r in sel], marker=mark, color=colour, label=label,
                    linestyle="-" if kind == "chain" else "none")
        chain = [r for r in rs if r["kind"] == "chain"]
        ax.plot([r["k"] for r in chain], [r["paper_hashed"] for r in chain], color=colour,
                linestyle=":", label=f"k log log* k x E[R]/inst ({budget})")
    chain = sorted((r for r in rows if r["kind"] == "chain" and r["budget"] == "1x8"),
                   key=lambda r: r["k"])
    ax.plot([r["k"] for r in chain], [r["paper"] for r in chain], color="black", linestyle="--",
            label="k log log* k (paper, logs base 2)")
    ax.set_xlabel("path length k (hops)")
    ax.set_ylabel("packets to decode")
    ax.set_title("E13: path tracing")
    ax.legend(fontsize=6)
    at.set_xlabel("path length k (hops)")
    at.set_ylabel("decode time per flow, us")
    at.set_title("E13: decode time")
    trials = style.reps_phrase(r["trials"] for r in rows).replace("rep", "trial")
    style.titled(fig, "PINT E13", f"points: median over {trials} per row; lines up to the p90 "
                 "(left only); no CI")
    style.save(fig, a.png)
    print(f"wrote {a.png} ({len(rows)} rows)")


def e12(a: argparse.Namespace) -> None:
    plt = style.pyplot()
    rows = data.read_json(a.json)
    fig, axes = plt.subplots(1, 2, figsize=(2 * style.PANEL[0], style.PANEL[1]), sharey=True)
    eps = {4: a.eps4, 8: a.eps8}
    for ax, q in zip(axes, ("p50", "p99")):
        for n, bits in enumerate((4, 8)):
            colour = style.series_colour(n)
            for sketch, line in ((False, "-"), (True, "--")):
                sel = sorted((r for r in rows if r["bits"] == bits and r["sketch"] == sketch),
                             key=lambda r: r["packets"])
                name = f"b = {bits}, " + ("KLL (<= 100 items)" if sketch else "all samples")
                ax.plot([r["packets"] for r in sel], [r[f"{q}_err"] for r in sel], line,
                        marker="o", markersize=3, color=colour, label=name)
            if eps[bits] is not None:
                ax.axhline(eps[bits], color=colour, linestyle=":", linewidth=1,
                           label=f"b = {bits}: codec bound eps = {eps[bits]:.3f}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("packets received")
        ax.set_title(f"E12: per-hop {q} latency")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("relative error")
    axes[1].legend(fontsize=6)
    trials = f"{a.trials} trials" if a.trials else "the trials (number not in the JSON)"
    style.titled(fig, "PINT E12", f"points: median over {trials} of the error averaged over "
                 "the hops; no CI")
    style.save(fig, a.png)
    print(f"wrote {a.png} ({len(rows)} rows)")


def e11(a: argparse.Namespace) -> None:
    plt = style.pyplot()
    rows = data.read_json(a.json)
    loads = sorted({r["load"] for r in rows})
    schemes = list(dict.fromkeys(r["scheme"] for r in rows))
    mid = loads[len(loads) // 2]
    fig, (ax, ag) = plt.subplots(1, 2, figsize=(2.2 * style.PANEL[0], style.PANEL[1]))
    at_mid = [r for r in rows if r["load"] == mid]
    # PINT's Fig. 7 cuts flows by decile of size; rows from before deciles have only buckets.
    key = "deciles" if at_mid[0].get("deciles") else "buckets"
    buckets = list(at_mid[0][key].keys())
    width = 0.8 / len(schemes)
    for i, name in enumerate(schemes):
        r = next(x for x in at_mid if x["scheme"] == name)
        ys = [r[key][b]["p95_slowdown"] or 0 for b in buckets]
        ax.bar([j + i * width for j in range(len(buckets))], ys, width, label=name,
               color=style.colour(name))
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(buckets))])
    ax.set_xticklabels(buckets, rotation=30 if key == "deciles" else 0, fontsize=7)
    ax.set_xlabel("flow size (bytes), " + ("deciles of the flows" if key == "deciles"
                                           else "decades"))
    ax.set_ylabel("p95 slowdown")
    ax.set_title(f"{at_mid[0]['workload']}, load {mid:.0%}")
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(axis="x", visible=False)
    for name in schemes:
        if name == "INT":
            continue
        xs, ys = [], []
        for load in loads:
            base = next(x for x in rows if x["load"] == load and x["scheme"] == "INT")
            r = next(x for x in rows if x["load"] == load and x["scheme"] == name)
            if base["large_goodput_mbps"] and r["large_goodput_mbps"]:
                xs.append(load * 100)
                ys.append(100 * (r["large_goodput_mbps"] / base["large_goodput_mbps"] - 1))
        ag.plot(xs, ys, marker=style.marker(name), label=name, color=style.colour(name))
    ag.axhline(0, color="grey", linewidth=0.5)
    ag.set_xlabel("load (%)")
    ag.set_ylabel("goodput gain over INT, flows >= 10 MB (%)")
    ag.legend(fontsize=7)
    style.titled(fig, "PINT E11 in pisa-sim", "one deterministic run per load and scheme, no "
                 "reps; left: p95 over the bucket's flows; right: mean over the flows >= 10 MB")
    style.save(fig, a.png)
    print(f"wrote {a.png} ({len(rows)} rows)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pint-plot", help="PINT's figures (E13, E12, E11)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = p.add_subparsers(dest="kind", required=True)
    for name, fn in (("e13", e13), ("e12", e12), ("e11", e11)):
        k = kinds.add_parser(name)
        k.add_argument("json", metavar="JSON")
        k.add_argument("png", metavar="PNG")
        if name == "e12":
            k.add_argument("--eps4", type=float)
            k.add_argument("--eps8", type=float)
            k.add_argument("--trials", type=int, help="the trials of the run (for the subtitle)")
        k.set_defaults(run=fn)
