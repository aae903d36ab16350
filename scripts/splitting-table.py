#!/usr/bin/env python3
"""Tables (and a plot) of the packet-splitting experiments E14 and E15 (issue 13).

Usage:
    splitting-table.py [--plot OUT.png] [--json OUT.json] LABEL=DIR [LABEL=DIR ...]

Each DIR is a `pisa-fabric experiment --out DIR` directory (flows.csv, summary.csv,
uplinks.csv). For every (label, scheme, load) it prints one Markdown row with the median over
the repetitions of:
- finished flows (sum over reps) and the mean per-flow goodput (size / FCT, Mb/s);
- the average FCT of the short and the large flows (ms);
- per flow: retransmitted segments, reordering events the sender detected (tcpi_reord_seen),
  out-of-order packets at the receiver (tcpi_rcv_ooopack) and DSACKed (spurious) retransmits;
- the imbalance of the upward links per tier: for every switch, the coefficient of variation
  (std / mean) of the packets its upward ports sent, averaged over the switches of the tier
  (ToR/leaf -> aggregation/spine, aggregation -> core); 0 is perfectly even;
- the egress queues sampled once a second: mean and max (packets).
"""
import argparse
import csv
import json
import statistics
import sys
from collections import defaultdict


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def cv(xs):
    m = statistics.mean(xs)
    return statistics.pstdev(xs) / m if m > 0 else 0.0


def tier_of(sw):
    # Generated names: p1e1 (edge), p1a1 (aggregation), leaf1, ...
    if "a" in sw.lstrip("p0123456789")[:1]:
        return "agg->core"
    return "tor->up"


def load_dir(label, d):
    out = {}
    flows = defaultdict(list)
    for r in rows(f"{d}/flows.csv"):
        flows[(r["scheme"], r["load"], r["rep"])].append(r)
    ups = defaultdict(lambda: defaultdict(list))
    for r in rows(f"{d}/uplinks.csv"):
        ups[(r["scheme"], r["load"], r["rep"])][r["leaf"]].append(int(r["packets"]))
    for s in rows(f"{d}/summary.csv"):
        key = (s["scheme"], s["load"], s["rep"])
        fl = flows.get(key, [])
        done = [f for f in fl if f["finished"] == "true" and f["fct_us"]]
        good = [int(f["size_bytes"]) * 8 / float(f["fct_us"]) for f in done]
        n = max(len(fl), 1)
        per = lambda col: sum(int(f[col] or 0) for f in fl) / n  # noqa: E731
        tiers = defaultdict(list)
        for sw, pk in ups.get(key, {}).items():
            if len(pk) > 1:
                tiers[tier_of(sw)].append(cv(pk))
        rec = {
            "flows": len(fl),
            "finished": len(done),
            "goodput_mbps": statistics.mean(good) if good else 0.0,
            "short_avg_ms": float(s["short_avg_fct_us"]) / 1e3,
            "large_avg_ms": float(s["large_avg_fct_us"]) / 1e3,
            "retx": per("retransmits"),
            "reord_seen": per("reord_seen"),
            "ooo_pkts": per("rcv_ooopack"),
            "dsack": per("dsack_dups"),
            "cv_tor": statistics.mean(tiers["tor->up"]) if tiers["tor->up"] else 0.0,
            "cv_agg": statistics.mean(tiers["agg->core"]) if tiers["agg->core"] else 0.0,
            "queue_mean": float(s["queue_mean_pkts"]),
            "queue_max": float(s["queue_max_pkts"]),
            "tm_drops": int(s["tm_drops"]),
        }
        out.setdefault((label, s["scheme"], s["load"]), []).append(rec)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot")
    ap.add_argument("--json")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    points = {}
    for arg in a.dirs:
        label, _, d = arg.partition("=")
        points.update(load_dir(label, d))
    med = {}
    for key, reps in points.items():
        m = {k: statistics.median(r[k] for r in reps) for k in reps[0]}
        m["finished"] = sum(r["finished"] for r in reps)
        m["flows"] = sum(r["flows"] for r in reps)
        m["reps"] = len(reps)
        med[key] = m
    print(
        "| run | scheme | load | reps | finished | goodput/flow Mb/s | short avg ms | large avg ms "
        "| retx/flow | reord seen/flow | OOO pkts/flow | DSACK/flow | CV tor->up | CV agg->core "
        "| queue mean / max | TM drops |"
    )
    print("|" + "---|" * 16)
    for (label, scheme, load), m in med.items():
        print(
            f"| {label} | {scheme} | {load} | {m['reps']} | {m['finished']}/{m['flows']} "
            f"| {m['goodput_mbps']:.2f} | {m['short_avg_ms']:.0f} | {m['large_avg_ms']:.0f} "
            f"| {m['retx']:.1f} | {m['reord_seen']:.2f} | {m['ooo_pkts']:.0f} | {m['dsack']:.1f} "
            f"| {m['cv_tor']:.3f} | {m['cv_agg']:.3f} "
            f"| {m['queue_mean']:.2f} / {m['queue_max']:.0f} | {m['tm_drops']:.0f} |"
        )
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"run": k[0], "scheme": k[1], "load": k[2], **v} for k, v in med.items()], f, indent=1)
    if a.plot:
        plot(med, a.plot)


def plot(med, dst):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = list(dict.fromkeys((k[0], k[2]) for k in med))
    schemes = list(dict.fromkeys(k[1] for k in med))
    panels = [
        ("goodput_mbps", "mean goodput per flow (Mb/s)"),
        ("retx", "retransmitted segments per flow"),
        ("cv_tor", "CV of ToR/leaf uplink packets"),
    ]
    if any(m["cv_agg"] > 0 for m in med.values()):
        panels.append(("cv_agg", "CV of agg->core link packets"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.7 * len(panels), 4.2))
    width = 0.8 / max(len(schemes), 1)
    for ax, (key, ylabel) in zip(axes, panels):
        for i, s in enumerate(schemes):
            xs = [j + i * width for j in range(len(runs))]
            ys = [med.get((r, s, ld), {}).get(key, 0.0) for r, ld in runs]
            ax.bar(xs, ys, width, label=s)
        ax.set_xticks([j + width * (len(schemes) - 1) / 2 for j in range(len(runs))])
        ax.set_xticklabels([f"{r}\nload {ld}" for r, ld in runs], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
