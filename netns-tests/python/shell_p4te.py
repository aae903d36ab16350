#!/usr/bin/env python3
"""p4runtime-shell 0.0.6 against pisa-switch running `p4te`: it writes an entry into every table
through the shell's own API and reads every table, register, counter and meter back.

Run with the `shell` venv (scripts/py-clients.sh), as root, inside the switch's namespace:

    python shell_p4te.py --grpc-addr 127.0.0.1:9559 --device-id 1 \
        --p4info pipeline/programs/p4info/p4te.txt --bin /tmp/dummy.bin

The shell has no register API; registers are read and written with its client's stub and the
P4Runtime protobufs, as a shell user would from the same session. Exit status 1 on any failure.
"""

import argparse
import faulthandler
import sys
import time

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as p4r

import p4runtime_sh.shell as sh

FAILED = []


def check(cond, what):
    print(("PASS " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc-addr", default="127.0.0.1:9559")
    ap.add_argument("--device-id", type=int, default=1)
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--ports", default="")
    args = ap.parse_args()
    faulthandler.dump_traceback_later(100, exit=True)
    info = p4info_pb2.P4Info()
    with open(args.p4info) as f:
        text_format.Merge(f.read(), info)
    sh.setup(
        device_id=args.device_id,
        grpc_addr=args.grpc_addr,
        election_id=(0, 1),
        config=sh.FwdPipeConfig(args.p4info, args.bin),
    )

    # One entry in every table, written through the shell's API.
    def route(table, field, value, port):
        te = sh.TableEntry(table)(action="ingress.set_port")
        te.match[field] = value
        te.action["port"] = str(port)
        te.insert()

    route("ingress.down_v4", "hdr.ipv4.dst_addr", "10.0.1.1/32", 1)
    route("ingress.down_v6", "hdr.ipv6.dst_addr", "fd00::1:1/128", 1)
    for port in (3, 4):
        m = sh.ActionProfileMember("ingress.up_selector")(
            member_id=port, action="ingress.set_port"
        )
        m.action["port"] = str(port)
        m.insert()
    groups = {"ingress.queue_depth_up": 1, "ingress.link_util_up": 11, "ingress.ecmp_up": 20}
    for table, gid in groups.items():
        g = sh.ActionProfileGroup("ingress.up_selector")(group_id=gid)
        g.add(3).add(4)
        g.insert()
        te = sh.TableEntry(table)
        te.group_id = gid
        te.priority = 9
        te.insert()
    for port in (1, 2, 3, 4):
        te = sh.TableEntry("egress.port_mac")(action="egress.set_macs")
        te.match["standard_metadata.egress_port"] = str(port)
        te.action["dmac"] = "02:ee:00:00:00:%02x" % port
        te.action["smac"] = "02:5e:00:00:00:00"
        te.insert()
        te = sh.TableEntry("egress.link_util_rate")(action="NoAction")
        te.match["standard_metadata.egress_port"] = str(port)
        te.insert()
        dm = sh.DirectMeterEntry("egress.link_util_meter")
        dm.table_entry.match["standard_metadata.egress_port"] = str(port)
        dm.config.cir = 11_250_000
        dm.config.cburst = 12_500
        dm.config.pir = 12_500_000
        dm.config.pburst = 12_500
        dm.modify()

    # Every table reads back what was written.
    expect = {
        "ingress.down_v4": 1,
        "ingress.down_v6": 1,
        "ingress.queue_depth_up": 1,
        "ingress.link_util_up": 1,
        "ingress.ecmp_up": 1,
        "egress.port_mac": 4,
        "egress.link_util_rate": 4,
    }
    for t in info.tables:
        name = t.preamble.name
        n = len(list(sh.TableEntry(name).read()))
        check(n == expect.get(name, -1), "table %s reads %d entries" % (name, n))
    members = list(sh.ActionProfileMember("ingress.up_selector").read())
    groups_read = list(sh.ActionProfileGroup("ingress.up_selector").read())
    check(len(members) == 2 and len(groups_read) == 3, "up_selector: 2 members, 3 groups")
    dms = list(sh.DirectMeterEntry("egress.link_util_meter").read())
    check(
        len(dms) == 4 and all(d.config.cir == 11_250_000 for d in dms),
        "direct meter configs of link_util_rate read back",
    )

    # Every register: a wildcard read returns every cell; a written cell reads back.
    stub, dev = sh.client.stub, args.device_id
    for r in info.registers:
        rid, size = r.preamble.id, r.size
        w = p4r.WriteRequest(device_id=dev, election_id=p4r.Uint128(high=0, low=1))
        u = w.updates.add()
        u.type = p4r.Update.MODIFY
        e = u.entity.register_entry
        e.register_id = rid
        e.index.index = size - 1
        e.data.bitstring = b"\x01"
        stub.Write(w)
        t0 = time.monotonic()
        req = p4r.ReadRequest(device_id=dev)
        req.entities.add().register_entry.register_id = rid
        cells = {}
        for resp in stub.Read(req):
            for ent in resp.entities:
                cells[ent.register_entry.index.index] = ent.register_entry.data.bitstring
        dt = time.monotonic() - t0
        last = cells.get(size - 1, b"")
        check(
            len(cells) == size and int.from_bytes(last, "big") == 1,
            "register %s: %d of %d cells in %.2f s, cell %d = %r"
            % (r.preamble.name, len(cells), size, dt, size - 1, last),
        )

    # Counters and meters.
    for c in info.counters:
        n = len(list(sh.CounterEntry(c.preamble.name).read()))
        check(n == c.size, "counter %s reads %d cells" % (c.preamble.name, n))
    for m in info.meters:
        n = len(list(sh.MeterEntry(m.preamble.name).read()))
        check(n == m.size, "meter %s reads %d cells" % (m.preamble.name, n))

    sh.teardown()
    print("%d failed" % len(FAILED), flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
