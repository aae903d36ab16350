#!/usr/bin/env python3
"""P4QCN's figures from `pisa-fabric e10` output (issue 14).

  plot-qcn.py trace TRACE.csv OUT.png [--title T] [--until-ms MS]
      Fig. 12: a reaction point's Rc and Rt over time (CSV t_us,rc_bps,rt_bps,state, as
      `pisa-host rp-send --trace` and `pisa-fabric e10` write it), the states shaded.
  plot-qcn.py fbps PCAP [--limit N] [--write OUT.pcap]
      Lists the ECN = 11 UDP datagrams in a capture (`pisa-fabric e10 --capture`, a switch's
      port<N>-tx.pcap): the feedback packets, with their addresses, ports, length and TOS.

The pcap reader is a few lines of the classic format (Ethernet link type), no extra package.
"""

import argparse
import csv
import struct
import sys


def trace(args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = []
    with open(args.csv) as f:
        for r in csv.DictReader(f):
            t = int(r["t_us"]) / 1000.0
            if args.until_ms is not None and t > args.until_ms:
                break
            rows.append((t, int(r["rc_bps"]) / 1e6, int(r["rt_bps"]) / 1e6, r["state"]))
    if not rows:
        sys.exit(f"{args.csv}: no rows")
    t = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.step(t, [r[1] for r in rows], where="post", label="Rc (current rate)")
    ax.step(t, [r[2] for r in rows], where="post", label="Rt (target rate)", linestyle="--")
    colours = {"reduction": "#f4cccc", "fast_recovery": "#fff2cc", "active_increase": "#d9ead3"}
    for (a, _, _, st), (b, _, _, _) in zip(rows, rows[1:]):
        ax.axvspan(a, b, color=colours.get(st, "#eeeeee"), linewidth=0)
    for st, c in colours.items():
        ax.plot([], [], color=c, linewidth=8, label=st.replace("_", " "))
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("Mb/s")
    ax.set_title(args.title or args.csv)
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out} ({len(rows)} rate changes)")


def packets(path):
    """(file header, record header, frame) for each frame of a classic pcap."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            return
        magic = struct.unpack("<I", head[:4])[0]
        order = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            _, _, incl, _ = struct.unpack(order + "IIII", rec)
            yield head, rec, f.read(incl)


def fbps(args):
    n = 0
    total = 0
    out = open(args.write, "wb") if args.write else None
    for head, rec, p in packets(args.pcap):
        if out is not None and total == 0:
            out.write(head)
        total += 1
        if len(p) < 34 or p[12:14] != b"\x08\x00":
            continue
        ip = p[14:]
        ihl = (ip[0] & 0x0F) * 4
        tos, proto = ip[1], ip[9]
        if proto != 17 or tos & 3 != 3 or len(ip) < ihl + 8:
            continue
        src = ".".join(str(b) for b in ip[12:16])
        dst = ".".join(str(b) for b in ip[16:20])
        sport, dport, ulen = struct.unpack(">HHH", ip[ihl : ihl + 6])
        if out is not None and n < args.limit:
            out.write(rec + p)
        if n < args.limit:
            print(
                f"{src}:{sport} -> {dst}:{dport} tos=0x{tos:02x} (ECN={tos & 3:02b}) "
                f"ip_len={struct.unpack('>H', ip[2:4])[0]} udp_len={ulen}"
            )
        n += 1
    print(f"{n} ECN=11 UDP datagrams among {total} frames in {args.pcap}")
    if out is not None:
        out.close()
        print(f"wrote the first {min(n, args.limit)} of them to {args.write}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace")
    t.add_argument("csv")
    t.add_argument("out")
    t.add_argument("--title")
    t.add_argument("--until-ms", type=float)
    t.set_defaults(run=trace)
    b = sub.add_parser("fbps")
    b.add_argument("pcap")
    b.add_argument("--limit", type=int, default=10)
    b.add_argument("--write", help="also write the first --limit of them to this pcap")
    b.set_defaults(run=fbps)
    a = ap.parse_args()
    a.run(a)


if __name__ == "__main__":
    main()
