#!/usr/bin/env python3
"""finsy 0.30.0 against pisa-switch running `basic`.

Run with the `finsy` venv (scripts/py-clients.sh), as root, inside the switch's namespace:

    python finsy_test.py --grpc-addr 127.0.0.1:9559 --device-id 1 \
        --p4info pipeline/programs/p4info/basic.txt --bin /tmp/dummy.bin --ports 1=p1,2=p2,3=p3,4=p4

finsy connects (Capabilities, arbitration, cookie check and SetForwardingPipelineConfig, gNMI which
may be absent), then the checks batch-write entries, read them back, write and read a register
(basic has `ingress.flow_last_seen`, 4096 x bit<48>), and read counters moved by traffic.
Each check prints PASS or FAIL; exit status 1 if any failed.
"""

import argparse
import asyncio
import faulthandler
import logging
import sys
import time
import traceback
from pathlib import Path

import finsy as fy
from finsy import GRPCStatusCode, P4ClientError
from finsy.p4entity import P4Replica

import netio
from netio import Fail, ROUTER, expect, host_ip, host_mac  # noqa: E402

RESULTS = []
ARGS = None
PORTS = None


async def collect(sw, entity):
    return [e async for e in sw.read(entity)]


async def check_connected(sw):
    """Items 1, 2, 9, 10, 26, 27: the handshake, version and pipeline push all went through."""
    expect(sw.is_up, "channel not up")
    expect(sw.is_primary, "not primary")
    v = sw.p4runtime_version
    expect(v >= (1, 0, 0), "p4runtime version %r" % (v,))
    expect(sw.p4info.name == "basic", "P4Info name %r" % sw.p4info.name)
    print("    p4runtime %s, gNMI %s" % (".".join(map(str, v[:3])),
                                         "absent" if sw.gnmi_client is None else "present"))


async def check_write_read_entries(sw):
    """Items 12, 13, 15, 20, 21, 23: one batch of every kind of entity, read back."""
    await sw.delete_all()
    await sw.write([
        +fy.P4TableEntry("l2_exact", match=fy.Match({"hdr.ethernet.dst_addr": host_mac(2)}),
                         action=fy.Action("l2_forward", port=2)),
        +fy.P4TableEntry("smac", match=fy.Match({"hdr.ethernet.src_addr": host_mac(1)}),
                         action=fy.Action("NoAction")),
        +fy.P4TableEntry("acl", match=fy.Match({"hdr.ethernet.ether_type": 0x0806}),
                         action=fy.Action("punt_to_cpu"), priority=100),
        +fy.P4ActionProfileMember("ecmp_selector", member_id=1,
                                  action=fy.Action("set_nhop", dmac=host_mac(3), smac=ROUTER,
                                                   port=3)),
        +fy.P4ActionProfileMember("ecmp_selector", member_id=2,
                                  action=fy.Action("set_nhop", dmac=host_mac(4), smac=ROUTER,
                                                   port=4)),
        +fy.P4ActionProfileGroup("ecmp_selector", group_id=1,
                                 members=[fy.P4Member(1, weight=1), fy.P4Member(2, weight=1)]),
        +fy.P4TableEntry("ipv4_lpm", match=fy.Match({"hdr.ipv4.dst_addr": "10.0.0.0/16"}),
                         action=fy.P4IndirectAction(group_id=1)),
        +fy.P4MulticastGroupEntry(7, replicas=[2, 3, (4, 1)]),
        +fy.P4CloneSessionEntry(5, replicas=[4]),
    ])
    l2 = await collect(sw, fy.P4TableEntry("l2_exact"))
    l2 = [e for e in l2 if not e.is_default_action]
    expect(len(l2) == 1, "l2_exact: %d entries" % len(l2))
    expect(l2[0].match["dst_addr"] in (host_mac(2), int("020000000201", 16)),
           "l2_exact key reads back as %r" % l2[0].match["dst_addr"])
    expect(l2[0].action.name.endswith("l2_forward") and l2[0].action.args["port"] == 2,
           "l2_exact action reads back as %r" % l2[0].action)
    acl = await collect(sw, fy.P4TableEntry("acl"))
    acl = [e for e in acl if not e.is_default_action]
    expect(len(acl) == 1 and acl[0].priority == 100, "acl: %r" % acl)
    lpm = await collect(sw, fy.P4TableEntry("ipv4_lpm"))
    lpm = [e for e in lpm if not e.is_default_action]
    expect(len(lpm) == 1 and isinstance(lpm[0].action, fy.P4IndirectAction)
           and lpm[0].action.group_id == 1, "ipv4_lpm: %r" % lpm)
    groups = await collect(sw, fy.P4ActionProfileGroup("ecmp_selector"))
    expect(len(groups) == 1 and sorted(m.member_id for m in groups[0].members) == [1, 2],
           "groups: %r" % groups)
    members = await collect(sw, fy.P4ActionProfileMember("ecmp_selector"))
    expect(sorted(m.member_id for m in members) == [1, 2], "members: %r" % members)
    mc = await collect(sw, fy.P4MulticastGroupEntry())
    expect(len(mc) == 1, "multicast groups: %r" % mc)
    reps = sorted((r.port, r.instance) if isinstance(r, P4Replica) else (r, 0)
                  for r in mc[0].replicas)
    expect(reps == [(2, 0), (3, 0), (4, 1)], "replicas read back as %r" % (mc[0].replicas,))
    cs = await collect(sw, fy.P4CloneSessionEntry())
    expect(len(cs) == 1 and cs[0].session_id == 5, "clone sessions: %r" % cs)
    # Everything at once: table_id 0.
    every = [e for e in await collect(sw, fy.P4TableEntry()) if not e.is_default_action]
    expect(len(every) == 4, "wildcard read of all tables: %d entries (want 4)" % len(every))
    # Modify and delete in one batch.
    await sw.write([
        ~fy.P4TableEntry("l2_exact", match=fy.Match({"hdr.ethernet.dst_addr": host_mac(2)}),
                         action=fy.Action("l2_forward", port=3)),
        -fy.P4TableEntry("smac", match=fy.Match({"hdr.ethernet.src_addr": host_mac(1)})),
    ])
    l2 = [e for e in await collect(sw, fy.P4TableEntry("l2_exact")) if not e.is_default_action]
    expect(l2[0].action.args["port"] == 3, "after modify: %r" % l2[0].action)
    smac = [e for e in await collect(sw, fy.P4TableEntry("smac")) if not e.is_default_action]
    expect(smac == [], "smac after delete: %r" % smac)


async def check_batch_error(sw):
    """Item 12: a batch with one bad update: per-update details that finsy decodes."""
    e = fy.P4TableEntry("l2_exact", match=fy.Match({"hdr.ethernet.dst_addr": host_mac(9)}),
                        action=fy.Action("l2_forward", port=1))
    await sw.insert([e])
    try:
        await sw.insert([
            fy.P4TableEntry("l2_exact", match=fy.Match({"hdr.ethernet.dst_addr": host_mac(10)}),
                            action=fy.Action("l2_forward", port=1)),
            e,
        ])
    except P4ClientError as ex:
        expect(ex.code == GRPCStatusCode.UNKNOWN, "batch error code %s" % ex.code)
        codes = {i: d.canonical_code for i, d in ex.details.items()}
        expect(codes == {1: GRPCStatusCode.ALREADY_EXISTS},
               "finsy decoded the failures as %r (want {1: ALREADY_EXISTS})" % codes)
    else:
        raise Fail("duplicate insert succeeded")
    # strict=False: finsy ignores NOT_FOUND-only failures (is_not_found_only).
    await sw.delete([e, e], strict=False)


async def check_registers(sw):
    """Item 19: registers written and read (the shell has no API for them, finsy does)."""
    await sw.write([fy.P4RegisterEntry("flow_last_seen", index=5, data=0x123456789A)])
    got = await collect(sw, fy.P4RegisterEntry("flow_last_seen", index=5))
    expect(len(got) == 1 and got[0].data == 0x123456789A, "register[5] reads back %r" % got)
    whole = await collect(sw, fy.P4RegisterEntry("flow_last_seen"))
    expect(len(whole) == 4096, "whole register: %d cells" % len(whole))
    expect(any(c.index == 5 and c.data == 0x123456789A for c in whole), "cell 5 missing")
    every = await collect(sw, fy.P4RegisterEntry())
    expect(len(every) == 4096, "register_id 0 read: %d cells" % len(every))
    try:
        await sw.write([fy.P4RegisterEntry("flow_last_seen", index=4096, data=1)])
    except P4ClientError as ex:
        codes = {d.canonical_code for d in ex.details.values()} or {ex.code}
        expect(codes == {GRPCStatusCode.OUT_OF_RANGE}, "index 4096: %r" % codes)
    else:
        raise Fail("register index 4096 accepted")
    # Routed traffic writes the register: some cell becomes non-zero.
    await sw.write([fy.P4RegisterEntry("flow_last_seen", index=5, data=0)])


async def check_counters(sw):
    """Items 18, 19, 23: counters read, moved by traffic; direct counter of an ACL entry."""
    await sw.delete_all()
    await sw.write([
        +fy.P4TableEntry("l2_exact", match=fy.Match({"hdr.ethernet.dst_addr": host_mac(2)}),
                         action=fy.Action("l2_forward", port=2)),
        +fy.P4TableEntry("acl", match=fy.Match({"hdr.ipv4.dst_addr": host_ip(2)}),
                         action=fy.Action("NoAction"), priority=10),
    ])

    async def rx(port):
        got = await collect(sw, fy.P4CounterEntry("port_rx", index=port))
        expect(len(got) == 1, "port_rx[%d]: %r" % (port, got))
        return got[0].packet_count, got[0].byte_count

    before = await rx(1)
    tag = netio.new_tag("fy")
    frame = netio.udp4_frame(host_mac(2), host_mac(1), host_ip(1), host_ip(2), 5, 6,
                             tag + b"\x00" * 60)
    PORTS.drain()
    for _ in range(8):
        PORTS.send(1, frame)
    got = await asyncio.to_thread(PORTS.recv, tag, 1.5, 8)
    expect(netio.counts(got) == {2: 8}, "frames per port %s" % netio.counts(got))
    await asyncio.sleep(0.2)
    after = await rx(1)
    expect((after[0] - before[0], after[1] - before[1]) == (8, 8 * len(frame)),
           "port_rx[1] moved by %r (want (8, %d))"
           % ((after[0] - before[0], after[1] - before[1]), 8 * len(frame)))
    whole = await collect(sw, fy.P4CounterEntry("port_tx"))
    expect(len(whole) == 512, "port_tx without index: %d entries" % len(whole))
    tx2 = [c for c in whole if c.index == 2]
    expect(tx2 and tx2[0].packet_count >= 8, "port_tx[2]: %r" % tx2)
    dc = await collect(sw, fy.P4DirectCounterEntry("acl_counter"))
    expect(len(dc) == 1 and dc[0].data is not None and dc[0].data.packet_count == 8,
           "acl_counter: %r" % dc)
    # Reset a counter by writing it.
    await sw.write([fy.P4CounterEntry("port_rx", index=1, data=fy.P4CounterData())])
    expect(await rx(1) == (0, 0), "port_rx[1] not reset by MODIFY")


async def check_packet_in(sw):
    """Item 24: a frame punted by the ACL arrives as a packet-in finsy decodes."""
    await sw.delete_all()
    await sw.write([
        +fy.P4TableEntry("l2_exact", match=fy.Match({"hdr.ethernet.dst_addr": host_mac(2)}),
                         action=fy.Action("l2_forward", port=2)),
        +fy.P4TableEntry("acl", match=fy.Match({"meta.l4_dst_port": 7777}),
                         action=fy.Action("punt_to_cpu"), priority=10),
    ])
    tag = netio.new_tag("fypin")
    frame = netio.udp4_frame(host_mac(2), host_mac(1), host_ip(1), host_ip(2), 5, 7777, tag)

    async def first():
        async for p in sw.read_packets():
            if tag in p.payload:
                return p

    task = asyncio.create_task(first())
    await asyncio.sleep(0.1)
    PORTS.send(1, frame)
    try:
        pkt = await asyncio.wait_for(task, 3)
    except asyncio.TimeoutError:
        raise Fail("no packet-in for the punted frame") from None
    expect(pkt.payload == frame, "payload differs")
    expect(pkt.metadata.get("ingress_port") == 1, "metadata %r" % pkt.metadata)
    # And a packet-out through finsy.
    tag = netio.new_tag("fypout")
    out = netio.udp4_frame(host_mac(3), host_mac(1), host_ip(1), host_ip(3), 5, 6, tag)
    PORTS.drain()
    await sw.write([fy.P4PacketOut(out, egress_port=3, _pad=0)])
    got = await asyncio.to_thread(PORTS.recv, tag, 1.5, 1)
    expect(netio.counts(got) == {3: 1}, "packet-out arrived on %s" % netio.counts(got))


async def check_delete_all(sw):
    """Item 23 (wildcards finsy uses): delete_all empties everything."""
    await sw.delete_all()
    left = [e for e in await collect(sw, fy.P4TableEntry()) if not e.is_default_action]
    expect(left == [], "entries left: %r" % left)
    expect(await collect(sw, fy.P4ActionProfileMember()) == [], "members left")
    expect(await collect(sw, fy.P4MulticastGroupEntry()) == [], "groups left")


CHECKS = [check_connected, check_write_read_entries, check_batch_error, check_registers,
          check_counters, check_packet_in, check_delete_all]


def check_p4info_loads():
    """finsy indexes every match field also by its last dotted component and refuses a table
    where two of them collide; basic names its match fields so that they do not."""
    try:
        fy.P4Schema(Path(ARGS.p4info))
        return True, ""
    except ValueError as e:
        return False, "finsy cannot load basic's P4Info: %s" % e


async def run():
    ok, why = check_p4info_loads()
    RESULTS.append(("p4info_loads", ok, why))
    print("%s %-28s%s" % ("PASS" if ok else "FAIL", "p4info_loads",
                          "" if ok else "\n    " + why), flush=True)
    if not ok:
        return
    opts = fy.SwitchOptions(p4info=Path(ARGS.p4info), p4blob=Path(ARGS.bin),
                            device_id=ARGS.device_id)
    sw = fy.Switch("pisa", ARGS.grpc_addr, opts)
    t0 = time.monotonic()
    try:
        async with sw:
            RESULTS.append(("connect", True, ""))
            print("PASS %-28s %.1fs" % ("connect", time.monotonic() - t0), flush=True)
            for f in CHECKS:
                name = f.__name__
                t0 = time.monotonic()
                try:
                    await asyncio.wait_for(f(sw), 30)
                    ok, why = True, ""
                except Fail as e:
                    ok, why = False, str(e)
                except P4ClientError as e:
                    ok, why = False, "P4ClientError %s" % e
                except Exception as e:  # noqa: BLE001
                    ok, why = False, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())
                RESULTS.append((name, ok, why))
                print("%s %-28s %.1fs%s" % ("PASS" if ok else "FAIL", name,
                                            time.monotonic() - t0, "" if ok else "\n    " + why),
                      flush=True)
    except Exception as e:  # noqa: BLE001
        RESULTS.append(("connect", False, "%s: %s" % (type(e).__name__, e)))
        print("FAIL connect: %s\n%s" % (e, traceback.format_exc()), flush=True)


def main():
    global ARGS, PORTS
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc-addr", default="127.0.0.1:9559")
    ap.add_argument("--device-id", type=int, default=1)
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--ports", default="1=p1,2=p2,3=p3,4=p4")
    ap.add_argument("--timeout", type=int, default=90)
    ARGS = ap.parse_args()
    faulthandler.dump_traceback_later(ARGS.timeout, exit=True)
    logging.basicConfig(level=logging.WARNING, format="    finsy %(levelname)s %(message)s")
    PORTS = netio.Ports(netio.parse_ports(ARGS.ports))
    asyncio.run(run())
    PORTS.close()
    passed = sum(1 for r in RESULTS if r[1])
    failed = len(RESULTS) - passed
    print("\nfinsy: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
