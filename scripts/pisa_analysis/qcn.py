"""P4QCN's figure and capture listing from `pisa-fabric e10` output (issue 14).

  qcn-plot TRACE.csv PNG [--title T] [--until-ms MS]
      Fig. 12: a reaction point's Rc and Rt over time (CSV t_us,rc_bps,rt_bps,state, as
      `pisa-host rp-send --trace` and `pisa-fabric e10` write it), the states shaded. One
      trace of one run: every rate change, no statistic. Prints the file it wrote.
  qcn-fbps PCAP [--limit N] [--write OUT.pcap]
      Lists the ECN = 11 UDP datagrams in a capture (`pisa-fabric e10 --capture`, a switch's
      port<N>-out.pcap): the feedback packets, with their addresses, ports, length and TOS;
      --write also writes the first N of them to a pcap.

The pcap reader is a few lines of the classic format (Ethernet link type), no extra package.
"""

from __future__ import annotations

import argparse
import itertools
import struct
import sys
from typing import Iterator

from . import data, style

STATE_COLOURS = {"reduction": "#f4cccc", "fast_recovery": "#fff2cc", "active_increase": "#d9ead3"}


def trace(a: argparse.Namespace) -> None:
    plt = style.pyplot()
    changes = ((int(r["t_us"]) / 1000.0, int(r["rc_bps"]) / 1e6, int(r["rt_bps"]) / 1e6,
                r["state"]) for r in data.read_csv(a.csv))
    rows = list(itertools.takewhile(lambda r: a.until_ms is None or r[0] <= a.until_ms, changes))
    if not rows:
        sys.exit(f"{a.csv}: no rows")
    t = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(style.ONE[0], 0.8 * style.ONE[1]))
    ax.step(t, [r[1] for r in rows], where="post", label="Rc (current rate)")
    ax.step(t, [r[2] for r in rows], where="post", label="Rt (target rate)", linestyle="--")
    for (x0, _, _, st), (x1, _, _, _) in zip(rows, rows[1:]):
        ax.axvspan(x0, x1, color=STATE_COLOURS.get(st, "#eeeeee"), linewidth=0)
    for st, c in STATE_COLOURS.items():
        ax.plot([], [], color=c, linewidth=8, label=st.replace("_", " "))
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("Mb/s")
    ax.legend(loc="lower right", fontsize=7)
    style.titled(fig, a.title or a.csv, "one reaction point's trace: every rate change, no statistic")
    style.save(fig, a.png)
    print(f"wrote {a.png} ({len(rows)} rate changes)")


def packets(path: str) -> Iterator[tuple[bytes, bytes, bytes]]:
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


def fbps(a: argparse.Namespace) -> None:
    n = 0
    total = 0
    out = open(a.write, "wb") if a.write else None
    for head, rec, p in packets(a.pcap):
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
        if out is not None and n < a.limit:
            out.write(rec + p)
        if n < a.limit:
            print(
                f"{src}:{sport} -> {dst}:{dport} tos=0x{tos:02x} (ECN={tos & 3:02b}) "
                f"ip_len={struct.unpack('>H', ip[2:4])[0]} udp_len={ulen}"
            )
        n += 1
    print(f"{n} ECN=11 UDP datagrams among {total} frames in {a.pcap}")
    if out is not None:
        out.close()
        print(f"wrote the first {min(n, a.limit)} of them to {a.write}")


def register(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("qcn-plot", help="P4QCN's Fig. 12: a reaction point's rates over time",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("csv", metavar="TRACE.csv")
    t.add_argument("png", metavar="PNG")
    t.add_argument("--title")
    t.add_argument("--until-ms", type=float)
    t.set_defaults(run=trace)
    b = sub.add_parser("qcn-fbps", help="the ECN = 11 UDP datagrams (P4QCN's FBPs) of a pcap",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("pcap", metavar="PCAP")
    b.add_argument("--limit", type=int, default=10)
    b.add_argument("--write", help="also write the first --limit of them to this pcap")
    b.set_defaults(run=fbps)
