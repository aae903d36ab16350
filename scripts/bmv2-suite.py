#!/usr/bin/env python3
"""The behaviour behavioral-model's simple_switch_grpc tests expect, checked against pisa-switch.

behavioral-model's own tests (targets/simple_switch_grpc/tests/test_*.cpp) are C++ linked against
simple_switch_grpc; they cannot drive another switch. This re-states the checks of those whose
programs run here, against their programs and P4Infos (testdata/*.json, *.proto.txt) loaded over
P4Runtime, packets on veth ports instead of BMv2's dataplane gRPC service. Each check prints PASS or
FAIL with its name (`<test file>/<TEST_F name>`); the last line counts them.

Run by scripts/bmv2-suite.sh, inside the namespace where pisa-switch (--no-p4, ports 0-4 on
sw0..sw4, `-- --cpu-port 64`) has its ports' peers p0..p4 (port 0 used by the union checks only), with the `shell` venv's python. Two
checks re-state tests/test_parser.cpp's union-stack round trips on behavioral-model's core test
data (--core-testdata), loaded without a P4Info; thirteen re-state simple_switch's
targets/simple_switch/tests (test_packet_redirect, test_parser_error, test_truncate, test_recirc,
test_queueing;
--simple-switch-testdata), programmed with simple_switch_CLI (--cli) over the switch's
--thrift-port.
"""

import argparse
import os
import queue
import threading
import sys
import time
import traceback

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as p4r
from p4.v1 import p4runtime_pb2_grpc

from suitelib import CHECKS, Ports, check, expect

ELECTION = p4r.Uint128(high=1, low=0)


class Switch:
    def __init__(self, addr, device_id, testdata):
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(grpc.insecure_channel(addr))
        self.device_id = device_id
        self.testdata = testdata
        self.stream_out = []
        self.responses = None
        self.p4info = None

    def connect(self):
        import queue
        import threading

        self.q = queue.Queue()

        def requests():
            while True:
                item = self.q.get()
                if item is None:
                    return
                yield item

        self.responses = self.stub.StreamChannel(requests())
        self.q.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=self.device_id, election_id=ELECTION)))
        first = next(self.responses)
        assert first.HasField("arbitration"), first
        # Everything else the stream brings (packet-ins, digests), for the checks to take.
        self.inbox = queue.Queue()

        def reader():
            try:
                for msg in self.responses:
                    self.inbox.put(msg)
            except grpc.RpcError:
                pass

        threading.Thread(target=reader, daemon=True).start()

    def next_message(self, kind, timeout):
        """The next stream message with field `kind` set (others are dropped), or None."""
        import queue

        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                msg = self.inbox.get(timeout=left)
            except queue.Empty:
                return None
            if msg.HasField(kind):
                return msg

    def load(self, name):
        self.p4info = p4info_pb2.P4Info()
        text_format.Parse(open(os.path.join(self.testdata, name + ".proto.txt")).read(), self.p4info)
        config = p4r.ForwardingPipelineConfig(
            p4info=self.p4info,
            p4_device_config=open(os.path.join(self.testdata, name + ".json"), "rb").read())
        self.stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=ELECTION,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, config=config))

    def load_json(self, path):
        """Loads a JSON program that comes without a P4Info (behavioral-model's core test data),
        with a P4Info that names nothing, as the switch takes for such a program."""
        self.p4info = p4info_pb2.P4Info()
        self.p4info.pkg_info.arch = "v1model"
        config = p4r.ForwardingPipelineConfig(
            p4info=self.p4info, p4_device_config=open(path, "rb").read())
        self.stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=ELECTION,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, config=config))

    def id(self, kind, name):
        for obj in getattr(self.p4info, kind):
            if obj.preamble.name == name or obj.preamble.alias == name:
                return obj.preamble.id
        raise KeyError(name)

    def mf_id(self, table, field):
        for t in self.p4info.tables:
            if t.preamble.name == table:
                for f in t.match_fields:
                    if f.name == field:
                        return f.id
        raise KeyError(field)

    def write(self, entity, kind=p4r.Update.INSERT):
        self.stub.Write(p4r.WriteRequest(
            device_id=self.device_id, election_id=ELECTION,
            updates=[p4r.Update(type=kind, entity=entity)]))

    def read(self, entity):
        out = []
        for rep in self.stub.Read(p4r.ReadRequest(device_id=self.device_id, entities=[entity])):
            out.extend(rep.entities)
        return out


def send_and_receive(ports, pkt, ig_port):
    """Sends `pkt` on `ig_port`; the port the switch sends it out of (None: dropped)."""
    ports.drain()
    # Veth takes no frame shorter than an Ethernet header: the test's bytes, then zeros.
    ports.send(ig_port, pkt.ljust(14, b"\0"))
    r = ports.recv_one()
    return None if r is None else r[0]


def ternary_entry(sw, table, field, value, mask, priority, action):
    return p4r.Entity(table_entry=p4r.TableEntry(
        table_id=sw.id("tables", table),
        match=[p4r.FieldMatch(field_id=sw.mf_id(table, field),
                              ternary=p4r.FieldMatch.Ternary(value=value, mask=mask))],
        priority=priority,
        action=p4r.TableAction(action=p4r.Action(action_id=sw.id("actions", action)))))


def optional_entry(sw, value, wildcard, priority, action):
    match = [] if wildcard else [p4r.FieldMatch(
        field_id=sw.mf_id("ingress.opt", "h.hdr.f1"),
        optional=p4r.FieldMatch.Optional(value=value))]
    return p4r.Entity(table_entry=p4r.TableEntry(
        table_id=sw.id("tables", "ingress.opt"), match=match, priority=priority,
        action=p4r.TableAction(action=p4r.Action(action_id=sw.id("actions", action)))))


@check("test_ternary/ReadEntry")
def ternary_read(sw, ports):
    sw.load("ternary")
    e = ternary_entry(sw, "ingress.ter", "h.hdr.f1", b"\xaa\xbb", b"\xff\xff", 128, "ingress.send_1")
    sw.write(e)
    got = sw.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=e.table_entry.table_id)))
    expect(len(got) == 1, f"{len(got)} entries read")
    expect(got[0] == e, f"read {got[0]} for {e}")


@check("test_ternary/PriorityOrder")
def ternary_priority(sw, ports):
    sw.load("ternary")
    sw.write(ternary_entry(sw, "ingress.ter", "h.hdr.f1", b"\xaa\xbb", b"\xff\xff", 128, "ingress.send_1"))
    port = send_and_receive(ports, b"\xaa\xbb", 3)
    expect(port == 1, f"out of {port}, want 1")
    sw.write(ternary_entry(sw, "ingress.ter", "h.hdr.f1", b"\xaa\x0b", b"\xff\x0f", 333, "ingress.send_2"))
    port = send_and_receive(ports, b"\xaa\xbb", 3)
    expect(port == 2, f"out of {port}, want 2")


@check("test_ternary/PriorityZero")
def ternary_zero(sw, ports):
    sw.load("ternary")
    try:
        sw.write(ternary_entry(sw, "ingress.ter", "h.hdr.f1", b"\xaa\xbb", b"\xff\xff", 0, "ingress.send_1"))
    except grpc.RpcError:
        return
    raise AssertionError("an entry of priority 0 was accepted")


@check("test_optional/ReadEntry")
def optional_read(sw, ports):
    sw.load("optional")
    e = optional_entry(sw, b"\xaa\xbb", False, 128, "ingress.send_1")
    sw.write(e)
    got = sw.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=e.table_entry.table_id)))
    expect(len(got) == 1, f"{len(got)} entries read")
    expect(got[0] == e, f"read {got[0]} for {e}")


@check("test_optional/BothEntries")
def optional_both(sw, ports):
    sw.load("optional")
    sw.write(optional_entry(sw, b"\xaa\xbb", True, 128, "ingress.send_1"))
    sw.write(optional_entry(sw, b"\xaa\xbb", False, 333, "ingress.send_2"))
    for pkt, want in ((b"\xaa\xbb", 2), (b"\xaa\xbc", 1)):
        port = send_and_receive(ports, pkt, 3)
        expect(port == want, f"{pkt.hex()}: out of {port}, want {want}")


@check("test_optional/PriorityZero")
def optional_zero(sw, ports):
    sw.load("optional")
    try:
        sw.write(optional_entry(sw, b"\xaa\xbb", False, 0, "ingress.send_1"))
    except grpc.RpcError:
        return
    raise AssertionError("an entry of priority 0 was accepted")


@check("test_packet_io/SendAndReceiveCPUPacket")
def packet_io(sw, ports):
    sw.load("packet_io")
    payload = b"\xab" * 10
    sw.q.put(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=payload)))
    msg = sw.next_message("packet", 3)
    expect(msg is not None, "no packet-in")
    expect(msg.packet.payload == payload, f"packet-in {msg.packet.payload.hex()}")


def param_id(sw, action, name):
    for a in sw.p4info.actions:
        if a.preamble.name == action or a.preamble.alias == action:
            for q in a.params:
                if q.name == name:
                    return q.id
    raise KeyError(name)


@check("test_basic/Entries")
def basic_entries(sw, ports):
    sw.load("simple_router")
    table = sw.id("tables", "ipv4_lpm")
    e = p4r.Entity(table_entry=p4r.TableEntry(
        table_id=table,
        match=[p4r.FieldMatch(field_id=sw.mf_id("ipv4_lpm", "ipv4.dstAddr"),
                              lpm=p4r.FieldMatch.LPM(value=b"\x0a\x00\x00\x00", prefix_len=16))],
        action=p4r.TableAction(action=p4r.Action(action_id=sw.id("actions", "set_nhop"), params=[
            p4r.Action.Param(param_id=param_id(sw, "set_nhop", "nhop_ipv4"), value=b"\x0a\x00\x00\x01"),
            p4r.Action.Param(param_id=param_id(sw, "set_nhop", "port"), value=b"\x09")]))))
    sw.write(e)
    got = sw.read(e)
    expect(len(got) == 1 and got[0] == e, f"read {list(got)} for {e}")
    got = sw.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=table)))
    expect(len(got) == 1 and got[0] == e, f"read the table: {list(got)}")
    sw.write(e, p4r.Update.DELETE)
    expect(not sw.read(e), "the entry is still there after DELETE")


@check("test_basic/DefaultEntry")
def basic_default(sw, ports):
    sw.load("simple_router")
    table = sw.id("tables", "ipv4_lpm")
    e = p4r.Entity(table_entry=p4r.TableEntry(table_id=table, is_default_action=True))
    got = sw.read(e)
    want = p4r.Entity()
    want.CopyFrom(e)
    want.table_entry.action.action.action_id = sw.id("actions", "NoAction")
    expect(len(got) == 1 and got[0] == want, f"default {list(got)}, want {want}")
    want.table_entry.action.action.action_id = sw.id("actions", "_drop")
    sw.write(want, p4r.Update.MODIFY)
    got = sw.read(e)
    expect(len(got) == 1 and got[0] == want, f"default after MODIFY {list(got)}")


def digest_config(sw, ack_timeout_ns):
    entry = p4r.DigestEntry(digest_id=sw.id("digests", "L2_digest"), config=p4r.DigestEntry.Config(
        max_list_size=1, max_timeout_ns=0, ack_timeout_ns=ack_timeout_ns))
    sw.write(p4r.Entity(digest_entry=entry))


def learn_frame(ports):
    """test_digest's frame: destination 01:01:01:01:01:01, source 11:22:33:44:55:66, type abab."""
    ports.drain()
    ports.send(1, b"\x01" * 6 + bytes.fromhex("112233445566") + b"\xab\xab")


@check("test_digest/OneSample")
def digest_one(sw, ports):
    sw.load("digest")
    digest_config(sw, 0)
    learn_frame(ports)
    msg = sw.next_message("digest", 1)
    expect(msg is not None, "no digest")
    expect(msg.digest.digest_id == sw.id("digests", "L2_digest"), f"digest {msg.digest.digest_id}")


@check("test_digest/Ack")
def digest_ack(sw, ports):
    sw.load("digest")
    digest_config(sw, 1_000_000_000)
    learn_frame(ports)
    msg = sw.next_message("digest", 1)
    expect(msg is not None, "no first digest")
    learn_frame(ports)
    again = sw.next_message("digest", 0.2)
    expect(again is None, "a second digest before the ack")
    sw.q.put(p4r.StreamMessageRequest(digest_ack=p4r.DigestListAck(
        digest_id=msg.digest.digest_id, list_id=msg.digest.list_id)))
    learn_frame(ports)
    expect(sw.next_message("digest", 1) is not None, "no digest after the ack")


@check("test_digest/DeleteDigest")
def digest_delete(sw, ports):
    sw.load("digest")
    digest_config(sw, 0)
    learn_frame(ports)
    expect(sw.next_message("digest", 1) is not None, "no digest before the DELETE")
    entry = p4r.DigestEntry(digest_id=sw.id("digests", "L2_digest"), config=p4r.DigestEntry.Config(
        max_list_size=1, max_timeout_ns=0, ack_timeout_ns=0))
    sw.write(p4r.Entity(digest_entry=entry), p4r.Update.DELETE)
    learn_frame(ports)
    expect(sw.next_message("digest", 0.2) is None, "a digest after the DELETE")


def counter_entry(sw, length):
    """test_counter's t_redirect entry for packets of `length` bytes (sm.packet_length, 32 bits)."""
    return p4r.TableEntry(
        table_id=sw.id("tables", "t_redirect"),
        match=[p4r.FieldMatch(field_id=sw.mf_id("t_redirect", "sm.packet_length"),
                              exact=p4r.FieldMatch.Exact(value=length.to_bytes(4, "big")))],
        action=p4r.TableAction(action=p4r.Action(action_id=sw.id("actions", "port_redirect"))))


@check("test_counter/CounterHit")
def counter_hit(sw, ports):
    # The C++ test's packets are 10 and 5 bytes; veth takes no frame under 14, so these are 24
    # and 19 (each the C++ length plus 14), keyed and counted by their own lengths.
    sw.load("counter")
    lengths = (24, 19)
    for n in lengths:
        sw.write(p4r.Entity(table_entry=counter_entry(sw, n)))
    for n in lengths:
        ports.drain()
        ports.send(1, b"\xab" * n)
        r = ports.recv_one()
        expect(r is not None and r[0] == 1 and r[1] == b"\xab" * n,
               f"{n}-byte packet came back as {r}")
    for n in lengths:
        got = sw.read(p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(
            table_entry=counter_entry(sw, n))))
        expect(len(got) == 1 and got[0].HasField("direct_counter_entry"), f"read {list(got)}")
        d = got[0].direct_counter_entry.data
        expect((d.packet_count, d.byte_count) == (1, n), f"counter for {n}: {d}")
        # The same counter read through the table entry.
        e = counter_entry(sw, n)
        e.counter_data.SetInParent()
        got = sw.read(p4r.Entity(table_entry=e))
        expect(len(got) == 1, f"table read {list(got)}")
        d = got[0].table_entry.counter_data
        expect((d.packet_count, d.byte_count) == (1, n), f"counter_data for {n}: {d}")


@check("test_meter/ReadDefault")
def meter_read_default(sw, ports):
    sw.load("meter")
    e = p4r.TableEntry(
        table_id=sw.id("tables", "ingress.t_redirect"),
        match=[p4r.FieldMatch(field_id=sw.mf_id("ingress.t_redirect", "sm.ingress_port"),
                              exact=p4r.FieldMatch.Exact(value=b"\x01\xff"))],
        action=p4r.TableAction(action=p4r.Action(
            action_id=sw.id("actions", "ingress.port_redirect"))))
    sw.write(p4r.Entity(table_entry=e))

    def read_back():
        q = p4r.TableEntry()
        q.CopyFrom(e)
        q.meter_config.SetInParent()  # ask for the meter config
        got = sw.read(p4r.Entity(table_entry=q))
        expect(len(got) == 1, f"read {list(got)}")
        return got[0].table_entry

    expect(not read_back().HasField("meter_config"), "a meter config before any was set")
    # A MODIFY with an empty config leaves the meter as it was.
    sw.write(p4r.Entity(direct_meter_entry=p4r.DirectMeterEntry(table_entry=e)),
             p4r.Update.MODIFY)
    expect(not read_back().HasField("meter_config"), "a meter config after an empty MODIFY")


def idle_setup(sw):
    """test_idle_timeout's SetUp: digest.json with ingress.smac's default NoAction (no digests)."""
    sw.load("digest")
    sw.write(p4r.Entity(table_entry=p4r.TableEntry(
        table_id=sw.id("tables", "ingress.smac"), is_default_action=True,
        action=p4r.TableAction(action=p4r.Action(action_id=sw.id("actions", "NoAction"))))),
        p4r.Update.MODIFY)
    while sw.next_message("idle_timeout_notification", 0) is not None:
        pass


def idle_entry(sw, timeout_ns):
    return p4r.TableEntry(
        table_id=sw.id("tables", "ingress.smac"),
        match=[p4r.FieldMatch(field_id=sw.mf_id("ingress.smac", "h.ethernet.smac"),
                              exact=p4r.FieldMatch.Exact(value=bytes.fromhex("112233445566")))],
        action=p4r.TableAction(action=p4r.Action(action_id=sw.id("actions", "NoAction"))),
        idle_timeout_ns=timeout_ns)


@check("test_idle_timeout/EntryExpire")
def idle_expire(sw, ports):
    idle_setup(sw)
    e = idle_entry(sw, 2_000_000_000)
    sw.write(p4r.Entity(table_entry=e))
    msg = sw.next_message("idle_timeout_notification", 3.5)
    expect(msg is not None, "no notification within 3.5 s")
    n = msg.idle_timeout_notification
    want = p4r.TableEntry()
    want.CopyFrom(e)
    want.ClearField("action")
    expect(len(n.table_entry) == 1 and n.table_entry[0] == want, f"notified {n}")


@check("test_idle_timeout/NotifyAgain")
def idle_again(sw, ports):
    idle_setup(sw)
    sw.write(p4r.Entity(table_entry=idle_entry(sw, 2_000_000_000)))
    for i in range(2):
        expect(sw.next_message("idle_timeout_notification", 3.5) is not None,
               f"no notification {i + 1} within 3.5 s")


@check("test_idle_timeout/ReadEntry")
def idle_read(sw, ports):
    idle_setup(sw)
    e = idle_entry(sw, 2_000_000_000)
    sw.write(p4r.Entity(table_entry=e))
    got = sw.read(p4r.Entity(table_entry=e))
    expect(len(got) == 1 and got[0].table_entry == e, f"read {list(got)}")
    time.sleep(1.0)
    q = p4r.TableEntry()
    q.CopyFrom(e)
    q.time_since_last_hit.SetInParent()
    got = sw.read(p4r.Entity(table_entry=q))
    expect(len(got) == 1, f"read {list(got)}")
    ns = got[0].table_entry.time_since_last_hit.elapsed_ns
    expect(0 < ns < 2_000_000_000, f"elapsed_ns {ns}")


@check("test_idle_timeout/ModifyTTL")
def idle_modify(sw, ports):
    idle_setup(sw)
    e = idle_entry(sw, 30_000_000_000)
    sw.write(p4r.Entity(table_entry=e))
    expect(sw.next_message("idle_timeout_notification", 2) is None, "notified within 2 s of 30")
    e.idle_timeout_ns = 4_000_000_000
    sw.write(p4r.Entity(table_entry=e), p4r.Update.MODIFY)
    expect(sw.next_message("idle_timeout_notification", 5.5) is not None,
           "no notification within 5.5 s of the new 4 s")


def pre_entity(kind, key, ident, replicas):
    reps = [p4r.Replica(egress_port=port, instance=rid) for port, rid in replicas]
    if kind == "multicast":
        e = p4r.PacketReplicationEngineEntry(multicast_group_entry=p4r.MulticastGroupEntry(
            multicast_group_id=ident, replicas=reps))
    else:
        e = p4r.PacketReplicationEngineEntry(clone_session_entry=p4r.CloneSessionEntry(
            session_id=ident, replicas=reps))
    return p4r.Entity(packet_replication_engine_entry=e)


def replicas_seen(ports, ident, ig_port):
    """Sends a frame carrying `ident` on `ig_port`; the (port, rid) of what comes out, the rid
    being the first two bytes, where the programs' egress writes it."""
    ports.drain()
    ports.send(ig_port, ident.to_bytes(2, "big").ljust(14, b"\0"))
    return {(port, int.from_bytes(f[:2], "big")) for port, f in ports.recv_all(1.0)}


def act_prof_member(sw, member_id, port):
    """ActProfWS's member `member_id`: send(port) (test_action_profile's add_member)."""
    action = sw.id("actions", "send")
    param = [a for a in sw.p4info.actions if a.preamble.id == action][0].params[0].id
    return p4r.Entity(action_profile_member=p4r.ActionProfileMember(
        action_profile_id=sw.id("action_profiles", "ActProfWS"), member_id=member_id,
        action=p4r.Action(action_id=action, params=[
            p4r.Action.Param(param_id=param, value=port.to_bytes(2, "big"))])))


def act_prof_group(sw, group_id, members):
    return p4r.Entity(action_profile_group=p4r.ActionProfileGroup(
        action_profile_id=sw.id("action_profiles", "ActProfWS"), group_id=group_id,
        members=[p4r.ActionProfileGroup.Member(member_id=m, weight=1) for m in members]))


@check("test_action_profile/DeleteGroupWithMembers")
def act_prof_delete_group_with_members(sw, ports):
    """behavioral-model issue 893: a group deleted while it has members, its members deleted,
    then a group of the same id with fewer members: lookups pick only the new group's members.
    (The C++ test checks that 32 packets are answered; here each must leave on port 1, the only
    member's port.)"""
    sw.load("action_profile")
    for m, port in ((1, 1), (2, 2)):
        sw.write(act_prof_member(sw, m, port))
    sw.write(act_prof_group(sw, 1, [1, 2]))
    sw.write(act_prof_group(sw, 1, []), p4r.Update.DELETE)
    for m in (1, 2):
        sw.write(act_prof_member(sw, m, m), p4r.Update.DELETE)
    sw.write(act_prof_member(sw, 1, 1))
    sw.write(act_prof_group(sw, 1, [1]))
    table = sw.id("tables", "IndirectWS")
    sw.write(p4r.Entity(table_entry=p4r.TableEntry(
        table_id=table,
        match=[p4r.FieldMatch(field_id=sw.mf_id("IndirectWS", "h.hdr.in_"),
                              exact=p4r.FieldMatch.Exact(value=b"\xab"))],
        action=p4r.TableAction(action_profile_group_id=1))))
    for i in range(32):
        port = send_and_receive(ports, b"\xab\x01\x02\x03" + bytes([i]), 3)
        expect(port == 1, f"entropy {i}: out of {port}, want 1")


@check("test_pre/Multicast.2Rids3Ports")
def multicast(sw, ports):
    sw.load("multicast")
    group = 10
    reps = [(1, 1), (2, 2)]
    sw.write(pre_entity("multicast", None, group, reps))
    got = replicas_seen(ports, group, 4)
    expect(got == set(reps), f"{sorted(got)}, want {sorted(reps)}")
    reps.append((3, 1))
    sw.write(pre_entity("multicast", None, group, reps), p4r.Update.MODIFY)
    got = replicas_seen(ports, group, 4)
    expect(got == set(reps), f"{sorted(got)}, want {sorted(reps)}")
    reps.pop()
    sw.write(pre_entity("multicast", None, group, reps), p4r.Update.MODIFY)
    got = replicas_seen(ports, group, 4)
    expect(got == set(reps), f"{sorted(got)}, want {sorted(reps)}")
    sw.write(pre_entity("multicast", None, group, reps), p4r.Update.DELETE)
    got = replicas_seen(ports, group, 4)
    expect(not got, f"{sorted(got)} after the group was deleted")


@check("test_pre/Clone.SingletonAndMulticast")
def clone(sw, ports):
    sw.load("clone")
    session, ig = 10, 1
    reps = [(2, 1)]
    sw.write(pre_entity("clone", None, session, reps))
    got = replicas_seen(ports, session, ig)
    want = set(reps) | {(ig, 0)}
    expect(got == want, f"{sorted(got)}, want {sorted(want)}")
    reps.append((3, 2))
    sw.write(pre_entity("clone", None, session, reps), p4r.Update.MODIFY)
    got = replicas_seen(ports, session, ig)
    want = set(reps) | {(ig, 0)}
    expect(got == want, f"{sorted(got)}, want {sorted(want)}")
    sw.write(pre_entity("clone", None, session, reps), p4r.Update.DELETE)
    got = replicas_seen(ports, session, ig)
    expect(got == {(ig, 0)}, f"{sorted(got)} after the session was deleted")


def union_round_trip(sw, ports, name, data):
    """behavioral-model's tests/test_parser.cpp HeaderUnionStackE2ETest: the packet parses
    without an error and deparses to its own bytes. The programs have no tables, so a packet
    leaves on port 0 (egress_spec 0), as is; a parser error would drop it."""
    sw.load_json(os.path.join(sw.core_testdata, name))
    pkt = data.ljust(14, b"\0")
    # Port 0 only here: the other checks' programs send what misses to it, and their checks
    # were written without it.
    ports = Ports({0: "p0", 1: "p1"})
    ports.drain()
    ports.send(1, pkt)
    got = ports.recv_one()
    expect(got is not None, "dropped (a parser error?)")
    port, frame = got
    expect(port == 0, f"out of {port}, want 0")
    expect(frame == pkt, f"{frame.hex()}, want {pkt.hex()}")


@check("test_parser/HeaderUnionStackE2ETest.OptionsE2eCount")
def unions_count(sw, ports):
    # The last byte is payload, as in the C++ test.
    union_round_trip(sw, ports, "unions_e2e_options_count.json", b"\x02\x0a\x0b\x66\xab")


@check("test_parser/HeaderUnionStackE2ETest.OptionsE2eBos")
def unions_bos(sw, ports):
    union_round_trip(sw, ports, "unions_e2e_options_bos.json", b"\x0b\x00\x77\x0a\x01")


# targets/simple_switch/tests/test_packet_redirect.cpp, on its packet_redirect.json (P4_14, no
# P4Info), programmed as a BMv2 user would, with simple_switch_CLI over --thrift-port. Its
# packets are 4 or 6 bytes: here they are padded to 20 with zeros (the program removes up to
# 4 bytes, and veth carries no frame under 14), so every length the program writes into the
# packet (hdrA.f2 = standard_metadata.packet_length) is the C++ test's plus the padding. The
# fixture's default actions are set as its SetUp sets them.


def cli(sw, *lines):
    """Runs simple_switch_CLI lines against the switch's Thrift port; fails on an error."""
    import subprocess

    r = subprocess.run([sw.cli, "--thrift-port", str(sw.thrift_port)], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    bad = [l for l in out.splitlines() if "Error" in l or "error" in l or "Invalid" in l]
    expect(r.returncode == 0 and not bad, f"simple_switch_CLI: {out.strip()}")


def redirect_load(sw):
    sw.load_json(os.path.join(sw.simple_switch_testdata, "packet_redirect.json"))
    cli(sw, "table_set_default t_ingress_1 _nop", "table_set_default t_ingress_2 _nop",
        "table_set_default t_egress _nop", "table_set_default t_exit set_hdr")


def redirect_send(ports, pkt, n):
    """Sends `pkt` (padded) on port 1; (port, hdrA.f2 - padding) of each of the `n` frames out."""
    frame = pkt.ljust(20, b"\0")
    pad = len(frame) - len(pkt)
    ports.drain()
    ports.send(1, frame)
    got = ports.recv_all(timeout=2.0)
    expect(len(got) == n, f"{len(got)} frames out ({[(p, f.hex()) for p, f in got]}), want {n}")
    return sorted((port, f[1] - pad) for port, f in got)


# (test, CLI lines, packet, [(port, hdrA.f2 - padding)] of the frames out), as the C++ tests
# program and expect them.
REDIRECT = [
    # packet_length after ingress removed hdrA2
    ("SimpleSwitch_PacketRedirectP4.Baseline", ["table_add t_ingress_1 _set_port 1 0 => 2"],
     b"\x01\x00\x00\x00", [(2, 2)]),
    ("SimpleSwitch_PacketRedirectP4.Multicast",
     ["table_add t_ingress_1 _multicast 2 0 => 1", "mc_mgrp_create 1", "mc_node_create 0 1",
      "mc_node_create 0 2", "mc_node_associate 1 0", "mc_node_associate 1 1"],
     b"\x02\x00\x00\x00", [(1, 2), (2, 2)]),
    # the original after ingress removed hdrA2; the clone as received
    ("SimpleSwitch_PacketRedirectP4_CloneI2E.CloneI2E",
     ["table_add t_ingress_1 _set_port 3 0 => 2",
      "table_add t_ingress_2 _clone_i2e 3 0&&&0 => 1 1", "mirroring_add 1 3"],
     b"\x03\x00\x00\x00", [(2, 2), (3, 4)]),
    ("SimpleSwitch_PacketRedirectP4_CloneE2E.CloneE2E",
     ["table_add t_ingress_1 _set_port 4 0 => 2",
      "table_add t_egress _clone_e2e 4 0&&&0xffffffff 0&&&0xff => 1 1", "mirroring_add 1 3"],
     b"\x04\x00\x00\x00", [(2, 2), (3, 2)]),
    # resubmitted with metaA (f1 = 1 after _set_port), the packet takes the second entry
    ("SimpleSwitch_PacketRedirectP4.Resubmit",
     ["table_add t_ingress_1 _set_port 5 0 => 2", "table_add t_ingress_1 _set_port 5 1 => 3",
      "table_add t_ingress_2 _resubmit 5 0&&&0xffffffff => 1"],
     b"\x05\x00\x00\x00", [(3, 2)]),
    # 6 bytes: hdrA2 is removed on each of the two passes
    ("SimpleSwitch_PacketRedirectP4.Recirculate",
     ["table_add t_ingress_1 _set_port 6 0 => 2", "table_add t_ingress_1 _set_port 6 1 => 3",
      "table_add t_egress _recirculate 6 0&&&0xffffffff 0&&&0xff => 1"],
     b"\x06\x00\x00\x00\x00\x00", [(3, 2)]),
]


def redirect_check(lines, pkt, want):
    def run(sw, ports):
        redirect_load(sw)
        cli(sw, *lines)
        got = redirect_send(ports, pkt, len(want))
        expect(got == want, f"{got}, want {want}")
    return run


for _name, _lines, _pkt, _want in REDIRECT:
    check(f"test_packet_redirect/{_name}")(redirect_check(_lines, _pkt, _want))


@check("test_packet_redirect/SimpleSwitch_PacketRedirectP4.ExitIngress")
def redirect_exit(sw, ports):
    redirect_load(sw)
    cli(sw, "table_add t_ingress_1 _exit 7 0 =>")
    # exit leaves egress_spec 0: port 0, which only this check listens on besides the unions
    ports0 = Ports({0: "p0", 1: "p1", 2: "p2", 3: "p3"})
    frame = b"\x07\x00\x00\x00".ljust(14, b"\0")
    ports0.drain()
    ports0.send(1, frame)
    got = ports0.recv_all(timeout=2.0)
    expect([p for p, _ in got] == [0], f"out of {[p for p, _ in got]}, want [0]")


# The other tests of targets/simple_switch/tests on their own programs (no P4Info either),
# padded to 14 bytes where shorter.


def ss_load(sw, name):
    sw.load_json(os.path.join(sw.simple_switch_testdata, name + ".json"))


def ss_exchange(pkt, ig_port, ports_listened):
    ports = Ports({p: f"p{p}" for p in ports_listened})
    frame = pkt.ljust(14, b"\0")
    ports.drain()
    ports.send(ig_port, frame)
    return frame, ports.recv_all(timeout=2.0)


def parser_error_check(pkt, f1):
    """parser_error.p4's ingress writes its verdict into f1's last byte: 0 for NoError, 2 for
    CustomError (verify(f1 < 10) failing), and sends the packet back where it came from."""
    def run(sw, ports):
        ss_load(sw, "parser_error")
        frame, got = ss_exchange(pkt, 1, [1, 2])
        expect([(p, len(f), f[3]) for p, f in got] == [(1, len(frame), f1)],
               f"{[(p, f.hex()) for p, f in got]}, want f1 = {f1} back on port 1")
    return run


check("test_parser_error/SimpleSwitch_ParserErrorP4.NoError")(
    parser_error_check(b"\x00\x00\x00\x00", 0))
check("test_parser_error/SimpleSwitch_ParserErrorP4.CustomError")(
    parser_error_check(b"\x00\x00\x00\xab", 2))


@check("test_truncate/SimpleSwitch_TruncateP4.Truncate")
def truncate(sw, ports):
    ss_load(sw, "truncate")
    cli(sw, "table_set_default t_ingress _nop", "table_add t_ingress _truncate 1 => 32 2")
    pkt = b"\x01" + b"\xab" * 127
    _, got = ss_exchange(pkt, 1, [1, 2, 3])
    expect([(p, f) for p, f in got] == [(2, pkt[:32])],
           f"{[(p, len(f), f[:8].hex()) for p, f in got]}, want its first 32 bytes on port 2")


@check("test_recirc/SimpleSwitch_RecircP4.Recirc")
def recirc(sw, ports):
    ss_load(sw, "recirc")
    # One byte, recirculated with a header added, parsed again past it: f1 of the second
    # header is 0xab, back on the port it came in on.
    frame, got = ss_exchange(b"\x00", 1, [1, 2])
    expect([(p, len(f), f[1]) for p, f in got] == [(1, len(frame) + 1, 0xAB)],
           f"{[(p, f.hex()) for p, f in got]}, want [01 ab ...] back on port 1")


@check("test_queueing/SimpleSwitch_QueueingP4.QueueingBasic")
def queueing_basic(sw, ports):
    ss_load(sw, "queueing")
    cli(sw, "table_set_default t_ingress set_port 2", "table_set_default t_egress copy_queueing_data")
    # 256 bytes out on port 2 with a queueing header after hdr1 (enq_timestamp 48 bits,
    # enq_qdepth 24, deq_timedelta 32, deq_qdepth 24, qid 8: 17 bytes, of which the C++ test
    # reads the first 16), both depths 0 on an idle queue.
    pkt = bytes(256)
    _, got = ss_exchange(pkt, 1, [1, 2, 3])
    expect([(p, len(f)) for p, f in got] == [(2, 256 + 17)],
           f"{[(p, len(f)) for p, f in got]}, want [(2, 273)]")
    q = got[0][1][2:18]
    enq_qdepth, deq_qdepth = int.from_bytes(q[6:9], "big"), int.from_bytes(q[13:16], "big")
    expect((enq_qdepth, deq_qdepth) == (0, 0), f"depths {enq_qdepth}, {deq_qdepth}")


@check("test_queueing/SimpleSwitch_QueueingP4.QueueingAdvanced")
def queueing_advanced(sw, ports):
    ss_load(sw, "queueing")
    cli(sw, "table_set_default t_ingress set_port 2", "table_set_default t_egress copy_queueing_data",
        "set_queue_rate 1")
    try:
        # 16 packets at once into a queue drained at 1 packet/s: as the C++ test, the queue's
        # depths and times seen by each (times in microseconds). The shaper passes one packet
        # at once (a one-packet burst); whether the first has left before the second arrives
        # depends on whether the worker was awake, so the bounds the C++ test puts on the
        # first packet are put on the first packet to wait for the shaper: one of the first
        # two (and the last's depth at enqueue is at least 14 where the C++ test has 15).
        p = Ports({1: "p1", 2: "p2"})
        p.drain()
        for _ in range(16):
            p.send(1, bytes(256))
        got = []
        deadline = time.monotonic() + 25
        while len(got) < 16 and time.monotonic() < deadline:
            r = p.recv_one(timeout=3.0)
            if r is not None:
                got.append(r)
        expect(len(got) == 16 and all(port == 2 for port, _ in got),
               f"{len(got)} frames, ports {sorted({port for port, _ in got})}")
        q = [f[2:19] for _, f in got]
        enq_ts = [int.from_bytes(x[0:6], "big") for x in q]
        enq_d = [int.from_bytes(x[6:9], "big") for x in q]
        deq_td = [int.from_bytes(x[9:13], "big") for x in q]
        deq_d = [int.from_bytes(x[13:16], "big") for x in q]
        sec = 1_000_000
        expect(enq_ts == sorted(enq_ts) and enq_ts[-1] - enq_ts[0] < sec, f"enq_timestamp {enq_ts}")
        expect(enq_d[0] == 0 and enq_d[-1] >= 14, f"enq_qdepth {enq_d}")
        expect(deq_td == sorted(deq_td) and deq_td[0] < 2 * sec and deq_td[-1] > 14 * sec,
               f"deq_timedelta {deq_td}")
        expect(max(deq_d[:2]) > 13 and deq_d[-1] == 0, f"deq_qdepth {deq_d}")
    finally:
        cli(sw, "set_queue_rate 0")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc-addr", required=True)
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--testdata", required=True)
    ap.add_argument("--core-testdata", help="behavioral-model's tests/testdata (the union checks)")
    ap.add_argument("--simple-switch-testdata",
                    help="behavioral-model's targets/simple_switch/tests/testdata (packet_redirect)")
    ap.add_argument("--thrift-port", type=int, default=9090)
    ap.add_argument("--cli", help="simple_switch_CLI (the packet_redirect checks)")
    ap.add_argument("--ports", default="1=p1,2=p2,3=p3,4=p4")
    ap.add_argument("--only", help="run the checks whose name contains this")
    args = ap.parse_args()
    mapping = {int(k): v for k, v in (x.split("=") for x in args.ports.split(","))}
    ports = Ports(mapping)
    sw = Switch(args.grpc_addr, args.device_id, args.testdata)
    sw.core_testdata = args.core_testdata
    sw.simple_switch_testdata = args.simple_switch_testdata
    sw.thrift_port = args.thrift_port
    sw.cli = args.cli
    sw.connect()
    passed = 0
    checks = [(n, f) for n, f in CHECKS if args.only is None or args.only in n]
    if args.core_testdata is None:
        checks = [(n, f) for n, f in checks if not n.startswith("test_parser/")]
    if args.simple_switch_testdata is None or args.cli is None:
        checks = [(n, f) for n, f in checks
                  if not n.startswith(("test_packet_redirect/", "test_parser_error/",
                                       "test_truncate/", "test_recirc/", "test_queueing/"))]
    for name, f in checks:
        try:
            f(sw, ports)
            print(f"PASS {name}")
            passed += 1
        except Exception as e:  # a failed check is reported, and the next one runs
            detail = e.details() if isinstance(e, grpc.RpcError) else str(e)
            print(f"FAIL {name}: {detail}")
            traceback.print_exc(limit=1, file=sys.stdout)
    print(f"{passed} of {len(checks)} checks passed")
    sw.q.put(None)
    return 0 if passed == len(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
