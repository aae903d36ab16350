#!/usr/bin/env python3
"""E14's Fig. 2 arrangement (docs/spray.md): the shares of pod 1's four core links and each flow's goodput.

Usage: e14-fig2.py DIR [OUT.png]   (a `pisa-fabric experiment --pattern flows:docs/spray/fig2.flows` output; the
per-repetition packet counts go to stderr)
"""
import csv, statistics, sys
from collections import defaultdict
d = sys.argv[1]
ups = defaultdict(dict)
for r in csv.DictReader(open(f"{d}/uplinks.csv")):
    if r["leaf"] in ("p1a1", "p1a2"):
        ups[(r["scheme"], r["rep"])][f'{r["leaf"]}-{r["spine"]}'] = int(r["packets"])
    if r["leaf"] == "p1e1":
        ups[(r["scheme"], r["rep"])][f'T1-{r["spine"]}'] = int(r["packets"])
fl = defaultdict(dict)
for r in csv.DictReader(open(f"{d}/flows.csv")):
    name = {("h1","h5"):"A",("h2","h3"):"B",("h4","h6"):"C"}[(r["src"],r["dst"])]
    fl[(r["scheme"], r["rep"])][name] = int(r["size_bytes"])*8/float(r["fct_us"])
links = ["p1a1-core1","p1a1-core2","p1a2-core3","p1a2-core4"]
table = {}
print("| scheme | A1-C1 | A1-C2 | A2-C3 | A2-C4 | T1-A1 : T1-A2 | A Mb/s | B Mb/s | C Mb/s |")
print("|---|---|---|---|---|---|---|---|---|")
for s in dict.fromkeys(k[0] for k in ups):
    reps = [k for k in ups if k[0]==s]
    shares = {l: statistics.median(ups[k][l]/sum(ups[k][x] for x in links) for k in reps) for l in links}
    t1 = statistics.median(ups[k]["T1-p1a1"]/(ups[k]["T1-p1a1"]+ups[k]["T1-p1a2"]) for k in reps)
    g = {f: statistics.median(fl[k][f] for k in reps) for f in "ABC"}
    table[s] = shares
    print(f"| {s} | " + " | ".join(f"{shares[l]:.3f}" for l in links) + f" | {t1:.2f} : {1-t1:.2f} | {g['A']:.1f} | {g['B']:.1f} | {g['C']:.1f} |")
    for k in reps:
        print("   ", k[1], [ups[k][l] for l in links], ups[k]["T1-p1a1"], ups[k]["T1-p1a2"], file=sys.stderr)

if len(sys.argv) > 2:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    names = ["A1-C1", "A1-C2", "A2-C3", "A2-C4"]
    width = 0.8 / (len(table) + 1)
    paper = [0.375, 0.375, 0.125, 0.125]
    ax.bar([j for j in range(4)], paper, width, label="counter, paper's Fig. 2", color="lightgray", hatch="//")
    for i, (s, sh) in enumerate(table.items()):
        ax.bar([j + (i + 1) * width for j in range(4)], [sh[l] for l in links], width, label=s)
    ax.axhline(0.25, color="k", lw=0.8, ls="--")
    ax.set_xticks([j + width * len(table) / 2 for j in range(4)])
    ax.set_xticklabels(names)
    ax.set_ylabel("share of pod 1's core-link packets")
    ax.set_title("E14, Fig. 2 arrangement in namespaces (medians of 5 reps)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
