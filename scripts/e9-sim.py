#!/usr/bin/env python3
"""DBB's E9 in pisa-sim (issue 13): the paper's Fig. 5 topology (unequal link bandwidths, SIRs 1:4,
1:1:3:5, 2:3 as rates: a max-flow of 250 Mb/s from s1 to s6), two UDP flows s1 -> s6 at a
fraction of the max-flow, every scheme on the same seeded traffic. Prints, per scheme and load:
goodput (delivered / offered), loss, reordered packets, and each link's share of the packets
against DBB's N_ij / N (Table IV: N = 10).

    scripts/e9-sim.py [--loads 0.5,0.8,0.96] [--ms 200] [--bin target/release]

Deterministic: the same command prints the same table.
"""

import argparse
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMES = ["dbb-shared", "dbb-independent", "spray-random", "spray-counter", "spray-rr", "ecmp"]
# Fig. 5's forward links (switch:port of the sending end) and Table IV's packets per cycle of 10.
LINKS = [("s1:2", "S1-S2", 2), ("s1:3", "S1-S3", 8), ("s2:2", "S2-S4", 1), ("s2:3", "S2-S5", 1),
         ("s3:2", "S3-S4", 3), ("s3:3", "S3-S5", 5), ("s4:3", "S4-S6", 4), ("s5:3", "S5-S6", 6)]
MAX_FLOW_BPS = 250e6


def topology(program):
    sw = "".join(f"switch s{i} program={program}\n" for i in range(1, 7))
    return ("defaults delay=10us buffer=64\n" + sw +
            "host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\nhost h2 ipv4=10.0.1.2 ipv6=fd00::1:2\n"
            "host h6 ipv4=10.0.6.1 ipv6=fd00::6:1\nhost h7 ipv4=10.0.6.2 ipv6=fd00::6:2\n"
            "link s1:1 h1 rate=1G\nlink s1:4 h2 rate=1G\n"
            "link s1:2 s2:1 rate=50M\nlink s1:3 s3:1 rate=200M\n"
            "link s2:2 s4:1 rate=25M\nlink s2:3 s5:1 rate=25M\n"
            "link s3:2 s4:2 rate=75M\nlink s3:3 s5:2 rate=125M\n"
            "link s4:3 s6:1 rate=100M\nlink s5:3 s6:2 rate=150M\n"
            "link s6:3 h6 rate=1G\nlink s6:4 h7 rate=1G\n")


def run(bin_dir, program, load, ms, tmp):
    topo = os.path.join(tmp, f"{program}.topo")
    with open(topo, "w") as f:
        f.write(topology(program))
    rate = int(MAX_FLOW_BPS * load / 2)
    out = os.path.join(tmp, f"{program}-{load}.json")
    subprocess.run([os.path.join(bin_dir, "pisa-sim"), "--duration-ms", str(ms), "--seed", "1",
                    "--flow", f"h1>h6 rate={rate} size=1000",
                    "--flow", f"h2>h7 rate={rate} size=1000", "--out", out, topo],
                   check=True, capture_output=True)
    with open(out) as f:
        return json.load(f)


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--loads", default="0.5,0.8,0.96")
    a.add_argument("--ms", type=int, default=200)
    a.add_argument("--bin", default=os.path.join(ROOT, "target", "release"))
    o = a.parse_args()
    head = ["scheme", "load", "goodput", "lost", "reordered"] + [n for _, n, _ in LINKS]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    print("| DBB's N_ij / N (Table IV) | | | | | " +
          " | ".join(f"{k / 10:.2f}" for _, _, k in LINKS) + " |")
    with tempfile.TemporaryDirectory() as tmp:
        for load in [float(x) for x in o.loads.split(",")]:
            for s in SCHEMES:
                r = run(o.bin, s, load, o.ms, tmp)
                sent = sum(f["sent"] for f in r["flows"])
                got = sum(f["received"] for f in r["flows"])
                reordered = sum(f["reordered"] for f in r["flows"])
                tx = {}
                for key, _, _ in LINKS:
                    sw, port = key.split(":")
                    tx[key] = r["switches"][sw]["ports"][port]["tx_packets"]
                # Shares of what s1 sent into the fabric (stage 1), per stage.
                stages = [["s1:2", "s1:3"], ["s2:2", "s2:3", "s3:2", "s3:3"], ["s4:3", "s5:3"]]
                share = {}
                for st in stages:
                    total = sum(tx[k] for k in st) or 1
                    for k in st:
                        share[k] = tx[k] / total
                row = [s, f"{load:.2f}", f"{got / sent:.3f}", str(sent - got), str(reordered)]
                row += [f"{share[k]:.2f}" for k, _, _ in LINKS]
                print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
