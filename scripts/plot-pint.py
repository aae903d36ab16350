#!/usr/bin/env python3
"""PINT's figures from `pisa-pint e13|e12 --json FILE` and `scripts/e11-sim.py --json FILE`
(issue 15, docs/pint.md).

  plot-pint.py e13 E13.json OUT.png
      Median packets to decode a k-hop path (8 bits and 2 x 4 bits, fat-tree and chain paths,
      the 10th-90th percentile band where the JSON has it) against the paper's k log log* k and
      the same times E[R]/instances (hashed switch IDs); a second panel: median decode time.
  plot-pint.py e12 E12.json OUT.png
      Per-hop p50 and p99 relative error against packets received, b = 4 and 8, with the KLL
      sketch and with all samples; dotted lines at each codec's bound epsilon (if given with
      --eps4/--eps8).
  plot-pint.py e11 E11.json OUT.png
      From `scripts/e11-sim.py --json`: the p95 slowdown per flow-size bucket at one load (the
      middle one the JSON has), per scheme; and the goodput of flows >= 10 MB against load, as
      the gain over HPCC(INT) (the paper's Fig. 7a).
"""

import argparse
import json


def plt_setup():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def e13(args):
    plt = plt_setup()
    rows = json.load(open(args.json))
    fig, (ax, at) = plt.subplots(1, 2, figsize=(10, 3.8))
    for budget, colour in (("1x8", "tab:blue"), ("2x4", "tab:orange")):
        rs = sorted((r for r in rows if r["budget"] == budget), key=lambda r: r["k"])
        for kind, marker in (("fat-tree k=8", "s"), ("chain", "o")):
            sel = [r for r in rs if r["kind"] == kind]
            if not sel:
                continue
            k = [r["k"] for r in sel]
            label = f"{budget.replace('1x8', '8 bits').replace('2x4', '2 x 4 bits')}, {kind}"
            ax.plot(k, [r["median"] for r in sel], marker=marker, color=colour, label=label,
                    linestyle="-" if kind == "chain" else "none")
            ax.vlines(k, [r["median"] for r in sel], [r["p90"] for r in sel], color=colour,
                      alpha=0.4)
            at.plot(k, [r["decode_us"] for r in sel], marker=marker, color=colour, label=label,
                    linestyle="-" if kind == "chain" else "none")
        chain = [r for r in rs if r["kind"] == "chain"]
        ax.plot([r["k"] for r in chain], [r["paper_hashed"] for r in chain], color=colour,
                linestyle=":", label=f"k log log* k x E[R]/inst ({budget})")
    chain = sorted((r for r in rows if r["kind"] == "chain" and r["budget"] == "1x8"),
                   key=lambda r: r["k"])
    ax.plot([r["k"] for r in chain], [r["paper"] for r in chain], color="black", linestyle="--",
            label="k log log* k (paper, logs base 2)")
    ax.set_xlabel("path length k (hops)")
    ax.set_ylabel("packets to decode (median; bar to p90)")
    ax.set_title("E13: path tracing")
    ax.legend(fontsize=6)
    at.set_xlabel("path length k (hops)")
    at.set_ylabel("decode time per flow, us (median)")
    at.set_title("E13: decode time")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out} ({len(rows)} rows)")


def e12(args):
    plt = plt_setup()
    rows = json.load(open(args.json))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    eps = {4: args.eps4, 8: args.eps8}
    for ax, q in zip(axes, ("p50", "p99")):
        for bits, colour in ((4, "tab:red"), (8, "tab:blue")):
            for sketch, style in ((False, "-"), (True, "--")):
                sel = sorted((r for r in rows if r["bits"] == bits and r["sketch"] == sketch),
                             key=lambda r: r["packets"])
                name = f"b = {bits}, " + ("KLL (<= 100 items)" if sketch else "all samples")
                ax.plot([r["packets"] for r in sel], [r[f"{q}_err"] for r in sel], style,
                        marker="o", markersize=3, color=colour, label=name)
            if eps[bits] is not None:
                ax.axhline(eps[bits], color=colour, linestyle=":", linewidth=1,
                           label=f"b = {bits}: codec bound eps = {eps[bits]:.3f}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("packets received")
        ax.set_title(f"E12: per-hop {q} latency")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("relative error (median over trials)")
    axes[1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out} ({len(rows)} rows)")


def e11(args):
    plt = plt_setup()
    rows = json.load(open(args.json))
    loads = sorted({r["load"] for r in rows})
    schemes = list(dict.fromkeys(r["scheme"] for r in rows))
    mid = loads[len(loads) // 2]
    fig, (ax, ag) = plt.subplots(1, 2, figsize=(11, 3.8))
    at_mid = [r for r in rows if r["load"] == mid]
    buckets = list(at_mid[0]["buckets"].keys())
    width = 0.8 / len(schemes)
    for i, name in enumerate(schemes):
        r = next(x for x in at_mid if x["scheme"] == name)
        ys = [r["buckets"][b]["p95_slowdown"] or 0 for b in buckets]
        ax.bar([j + i * width for j in range(len(buckets))], ys, width, label=name,
               color=f"C{i}")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(buckets))])
    ax.set_xticklabels(buckets)
    ax.set_xlabel("flow size (bytes)")
    ax.set_ylabel("p95 slowdown")
    ax.set_title(f"{at_mid[0]['workload']}, load {mid:.0%}")
    ax.legend(fontsize=7, loc="upper right")
    for i, name in enumerate(schemes):
        if name == "INT":
            continue
        xs, ys = [], []
        for load in loads:
            base = next(x for x in rows if x["load"] == load and x["scheme"] == "INT")
            r = next(x for x in rows if x["load"] == load and x["scheme"] == name)
            if base["large_goodput_mbps"] and r["large_goodput_mbps"]:
                xs.append(load * 100)
                ys.append(100 * (r["large_goodput_mbps"] / base["large_goodput_mbps"] - 1))
        ag.plot(xs, ys, marker="o", label=name, color=f"C{i}")
    ag.axhline(0, color="grey", linewidth=0.5)
    ag.set_xlabel("load (%)")
    ag.set_ylabel("goodput gain over INT, flows >= 10 MB (%)")
    ag.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out} ({len(rows)} rows)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("e13")
    a.add_argument("json")
    a.add_argument("out")
    a.set_defaults(func=e13)
    b = sub.add_parser("e12")
    b.add_argument("json")
    b.add_argument("out")
    b.add_argument("--eps4", type=float)
    b.add_argument("--eps8", type=float)
    b.set_defaults(func=e12)
    c = sub.add_parser("e11")
    c.add_argument("json")
    c.add_argument("out")
    c.set_defaults(func=e11)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
