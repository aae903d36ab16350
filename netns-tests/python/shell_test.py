#!/usr/bin/env python3
"""p4runtime-shell 0.0.6 against pisa-switch running `basic`.

Run with the `shell` venv (scripts/py-clients.sh), as root, inside the namespace where the switch's
ports sw1..swN have their peers p1..pN:

    python shell_test.py --grpc-addr 127.0.0.1:9559 --device-id 1 \
        --p4info pipeline/programs/p4info/basic.txt --bin /tmp/dummy.bin --ports 1=p1,2=p2,3=p3,4=p4

Many small named checks; each prints PASS or FAIL (with the reason) and the items of
docs/p4runtime.md it covers. Exit status 1 if any check failed.

Mostly the shell's own API (TableEntry, ActionProfileMember, CounterEntry, PacketOut ...), as a
user would; the error cases build their requests from the protobufs, because the shell refuses
many malformed requests on the client side.
"""

import argparse
import contextlib
import faulthandler
import io
import queue
import sys
import threading
import time
import traceback

import grpc
from google.protobuf import text_format
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as p4r
from p4.v1 import p4runtime_pb2_grpc

import p4runtime_sh.shell as sh
from p4runtime_sh.global_options import Options, global_options
from p4runtime_sh.p4runtime import P4RuntimeException, P4RuntimeWriteException

from scapy.all import ARP, IP, UDP, Ether, IPv6, Raw  # noqa: E402

import netio
from netio import Fail, ROUTER, expect, host_ip, host_ip6, host_mac  # noqa: E402

PRIMARY = (0, 20)  # the election id of the main session
CODE = {v: k for k, v in code_pb2.Code.items()}


# ----------------------------------------------------------------------------------------------
# The check runner

CHECKS = []
RESULTS = []


def check(*items):
    """Registers a check covering the given p4runtime.md items (strings)."""

    def deco(f):
        CHECKS.append((f.__name__, items, f))
        return f

    return deco


def code_name(c):
    return CODE.get(c, str(c))


# ----------------------------------------------------------------------------------------------
# P4Info and raw protobuf helpers

class Info:
    """Names -> ids and widths, from the P4Info file."""

    def __init__(self, path):
        self.p4info = p4info_pb2.P4Info()
        with open(path) as f:
            text_format.Merge(f.read(), self.p4info)
        self.tables, self.actions, self.objs = {}, {}, {}
        for t in self.p4info.tables:
            fields = {m.name: (m.id, m.bitwidth) for m in t.match_fields}
            self.tables[t.preamble.alias] = (t.preamble.id, fields)
        for a in self.p4info.actions:
            params = {p.name: (p.id, p.bitwidth) for p in a.params}
            self.actions[a.preamble.alias] = (a.preamble.id, params)
        for kind in ("counters", "direct_counters", "meters", "direct_meters", "registers",
                     "action_profiles", "digests", "controller_packet_metadata"):
            for o in getattr(self.p4info, kind):
                self.objs[o.preamble.alias] = o.preamble.id

    def table(self, alias):
        return self.tables[alias][0]

    def field(self, table, name):
        return self.tables[table][1][name][0]

    def action(self, alias):
        return self.actions[alias][0]

    def id(self, alias):
        return self.objs[alias]


INFO = None
ARGS = None
PORTS = None


def u(v, n=None):
    """An int as a big-endian bytestring: canonical (n None) or n bytes."""
    if n is None:
        return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")
    return v.to_bytes(n, "big")


def mac(s):
    return netio.mac_bytes(s)


def exact(table, field, value):
    return p4r.FieldMatch(field_id=INFO.field(table, field), exact=p4r.FieldMatch.Exact(value=value))


def lpm(table, field, value, plen):
    return p4r.FieldMatch(field_id=INFO.field(table, field),
                          lpm=p4r.FieldMatch.LPM(value=value, prefix_len=plen))


def ternary(table, field, value, mask):
    return p4r.FieldMatch(field_id=INFO.field(table, field),
                          ternary=p4r.FieldMatch.Ternary(value=value, mask=mask))


def action(alias, **params):
    a = p4r.Action(action_id=INFO.action(alias))
    for name, value in params.items():
        a.params.add(param_id=INFO.actions[alias][1][name][0], value=value)
    return a


def table_entry(table, match=(), act=None, priority=0, default=False, member=None, group=None):
    e = p4r.TableEntry(table_id=INFO.table(table), priority=priority, is_default_action=default)
    e.match.extend(match)
    if act is not None:
        e.action.action.CopyFrom(act)
    if member is not None:
        e.action.action_profile_member_id = member
    if group is not None:
        e.action.action_profile_group_id = group
    return e


def update(kind, **entity):
    return p4r.Update(type=getattr(p4r.Update, kind), entity=p4r.Entity(**entity))


def l2_entry(dst, port_value):
    return table_entry("l2_exact", [exact("l2_exact", "hdr.ethernet.dst_addr", dst)],
                       action("l2_forward", port=port_value))


def details_of(err):
    """The per-update canonical codes of a failed Write (grpc-status-details-bin)."""
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            st = status_pb2.Status()
            st.ParseFromString(value)
            codes = []
            for any_ in st.details:
                e = p4r.Error()
                if not any_.Unpack(e):
                    raise Fail("a detail is not a p4.v1.Error: %s" % any_.type_url)
                codes.append(e.canonical_code)
            return st, codes
    return None, None


def raw_write(updates, atomicity=None, election=None, device_id=None, role=None, stub=None):
    """Sends a Write; returns (grpc code name, [per-update code names] or None, error)."""
    req = p4r.WriteRequest(device_id=ARGS.device_id if device_id is None else device_id)
    hi, lo = election if election is not None else PRIMARY
    req.election_id.high, req.election_id.low = hi, lo
    if role is not None:
        req.role = role
    if atomicity is not None:
        req.atomicity = atomicity
    req.updates.extend(updates)
    try:
        (stub or sh.client.stub).Write(req, timeout=30)
        return "OK", [], None
    except grpc.RpcError as e:
        _, codes = details_of(e)
        return e.code().name, None if codes is None else [code_name(c) for c in codes], e


def write_code(upd, **kw):
    """The canonical code of one update written alone."""
    code, per, err = raw_write([upd], **kw)
    if code == "UNKNOWN":
        expect(per is not None and len(per) == 1,
               "UNKNOWN without one p4.v1.Error detail: %s" % (err.details() if err else per))
        return per[0]
    return code


def expect_code(upd, want, what, **kw):
    got = write_code(upd, **kw)
    expect(got == want, "%s: expected %s, server answered %s" % (what, want, got))


def raw_read(*entities, device_id=None, stub=None):
    req = p4r.ReadRequest(device_id=ARGS.device_id if device_id is None else device_id)
    req.entities.extend(entities)
    out = []
    for rep in (stub or sh.client.stub).Read(req, timeout=30):
        out.extend(rep.entities)
    return out


def read_code(*entities, **kw):
    try:
        raw_read(*entities, **kw)
        return "OK"
    except grpc.RpcError as e:
        return e.code().name


def clear_all():
    """Removes every table entry, group, member, multicast group and clone session, and resets
    default entries, the way finsy's delete_all does, through Read and Write."""
    ents = raw_read(p4r.Entity(table_entry=p4r.TableEntry()))
    ups = [update("DELETE", table_entry=e.table_entry) for e in ents
           if not e.table_entry.is_default_action]
    for i in range(0, len(ups), 1000):
        raw_write(ups[i:i + 1000])
    for t in ("l2_exact", "acl"):
        raw_write([update("MODIFY", table_entry=table_entry(t, default=True))])
    for kind in ("action_profile_group", "action_profile_member"):
        ents = raw_read(p4r.Entity(**{kind: getattr(p4r, "ActionProfileGroup" if "group" in kind
                                                     else "ActionProfileMember")()}))
        raw_write([update("DELETE", **{kind: getattr(e, kind)}) for e in ents])
    pre = raw_read(p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        multicast_group_entry=p4r.MulticastGroupEntry())),
        p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
            clone_session_entry=p4r.CloneSessionEntry())))
    raw_write([update("DELETE", packet_replication_engine_entry=e.packet_replication_engine_entry)
               for e in pre])


def quiet():
    """The shell prints a lot when its (aliased) verbose/canonical option is on."""
    return contextlib.redirect_stdout(io.StringIO())


@contextlib.contextmanager
def canonical():
    """Turns the shell's canonical bytestring encoding on (setup(verbose=False) turned it off)."""
    global_options.set_option(Options.canonical_bytestrings, True)
    try:
        with quiet():
            yield
    finally:
        global_options.set_option(Options.canonical_bytestrings, False)


# ----------------------------------------------------------------------------------------------
# A second client's stream, for the arbitration checks

class Stream:
    def __init__(self, election, device_id=None, role=None):
        self.channel = grpc.insecure_channel(ARGS.grpc_addr)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.out = queue.Queue()
        self.rx = queue.Queue()
        self.call = self.stub.StreamChannel(iter(self.out.get, None))
        self.thread = threading.Thread(target=self._recv, daemon=True)
        self.thread.start()
        self.election = election
        req = p4r.StreamMessageRequest()
        req.arbitration.device_id = ARGS.device_id if device_id is None else device_id
        req.arbitration.election_id.high, req.arbitration.election_id.low = election
        if role is not None:
            req.arbitration.role.name = role
        self.out.put(req)

    def _recv(self):
        try:
            for m in self.call:
                self.rx.put(("msg", m))
            self.rx.put(("end", None))
        except grpc.RpcError as e:
            self.rx.put(("error", e))

    ended = False

    def next(self, timeout=3):
        try:
            item = self.rx.get(timeout=timeout)
        except queue.Empty:
            return ("timeout", None)
        if item[0] in ("end", "error"):
            self.ended = True
        return item

    def arbitration(self, timeout=3):
        while True:
            kind, m = self.next(timeout)
            if kind != "msg" or m.HasField("arbitration"):
                return kind, m

    def close(self, timeout=3):
        """Half-closes; returns True if the server ended the stream."""
        self.out.put(None)
        deadline = time.monotonic() + timeout
        ended = self.ended
        while not ended and time.monotonic() < deadline:
            kind, _ = self.next(max(0.01, deadline - time.monotonic()))
            if kind in ("end", "error"):
                ended = True
                break
        self.channel.close()
        return ended


def eid(m):
    return (m.arbitration.election_id.high, m.arbitration.election_id.low)


# ----------------------------------------------------------------------------------------------
# Sessions through the shell

def shell_setup(config=True, election=PRIMARY):
    cfg = sh.FwdPipeConfig(ARGS.p4info, ARGS.bin) if config else None
    try:
        sh.setup(device_id=ARGS.device_id, grpc_addr=ARGS.grpc_addr, election_id=election,
                 config=cfg, verbose=False)
    except SystemExit:
        raise Fail("sh.setup exited (handshake, SetForwardingPipelineConfig or GetP4Info failed)")


def shell_teardown():
    """sh.teardown() joins the stream thread: it returns only if the server ends the stream when
    the client half-closes it (item 4)."""
    t = threading.Thread(target=sh.teardown, daemon=True)
    t.start()
    t.join(10)
    expect(not t.is_alive(), "sh.teardown() hung: the server did not end the stream on half-close")


PACKET_IN = None
DIGESTS = None


def stream_queue(kind, timeout):
    return sh.client.get_stream_packet(kind, timeout=timeout)


# ----------------------------------------------------------------------------------------------
# Session and pipeline config

@check("1", "4", "9", "26")
def connect_without_config():
    shell_setup(config=False, election=(0, 10))
    names = {t.preamble.alias for t in sh.context.p4info.tables}
    expect(names == set(INFO.tables), "P4Info from the server has tables %s" % sorted(names))
    v = sh.APIVersion()
    parts = v.split(".")
    expect(len(parts) >= 3 and all(p.split("-")[0].isdigit() for p in parts[:3]),
           "Capabilities p4runtime_api_version %r is not semver" % v)
    shell_teardown()


@check("1", "10", "11")
def connect_with_config():
    global PACKET_IN, DIGESTS
    shell_setup(config=True)
    got = sh.context.p4info
    want = INFO.p4info
    expect(got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
           or text_format.MessageToString(got) == text_format.MessageToString(want),
           "GetForwardingPipelineConfig P4Info differs from pipeline/programs/p4info/basic.txt")
    PACKET_IN = sh.PacketIn()
    DIGESTS = sh.DigestList()


@check("9")
def get_config_response_types():
    G = p4r.GetForwardingPipelineConfigRequest
    stub = sh.client.stub
    r = stub.GetForwardingPipelineConfig(G(device_id=ARGS.device_id, response_type=G.ALL))
    expect(r.config.HasField("p4info") and r.config.p4info.tables, "ALL: no P4Info")
    r = stub.GetForwardingPipelineConfig(G(device_id=ARGS.device_id, response_type=G.COOKIE_ONLY))
    expect(not r.config.HasField("p4info"), "COOKIE_ONLY returned the P4Info")
    r2 = stub.GetForwardingPipelineConfig(
        G(device_id=ARGS.device_id, response_type=G.P4INFO_AND_COOKIE))
    expect(r2.config.HasField("p4info"), "P4INFO_AND_COOKIE: no P4Info")
    expect(r.config.cookie.cookie == r2.config.cookie.cookie, "cookie differs between responses")
    r = stub.GetForwardingPipelineConfig(
        G(device_id=ARGS.device_id, response_type=G.DEVICE_CONFIG_AND_COOKIE))
    expect(not r.config.HasField("p4info"), "DEVICE_CONFIG_AND_COOKIE returned the P4Info")


def set_config(action, p4info=None, election=PRIMARY, stub=None):
    S = p4r.SetForwardingPipelineConfigRequest
    req = S(device_id=ARGS.device_id, action=getattr(S, action))
    req.election_id.high, req.election_id.low = election
    req.config.p4info.CopyFrom(p4info if p4info is not None else INFO.p4info)
    req.config.p4_device_config = b"\x00dummy"
    req.config.cookie.cookie = 0x1234
    try:
        (stub or sh.client.stub).SetForwardingPipelineConfig(req, timeout=10)
        return "OK"
    except grpc.RpcError as e:
        return e.code().name


def count_l2():
    return len(raw_read(p4r.Entity(table_entry=p4r.TableEntry(table_id=INFO.table("l2_exact")))))


@check("10")
def set_config_actions():
    clear_all()
    code, _, _ = raw_write([update("INSERT", table_entry=l2_entry(mac("02:00:00:00:aa:01"), u(1)))])
    expect(code == "OK", "insert: %s" % code)
    got = set_config("VERIFY")
    expect(got == "OK", "VERIFY with basic's P4Info: %s" % got)
    expect(count_l2() == 1, "VERIFY changed the forwarding state")
    got = set_config("RECONCILE_AND_COMMIT")
    expect(got in ("OK", "UNIMPLEMENTED"), "RECONCILE_AND_COMMIT: %s" % got)
    if got == "OK":
        expect(count_l2() == 1, "RECONCILE_AND_COMMIT lost the table entries")
    got = set_config("VERIFY_AND_COMMIT")
    expect(got == "OK", "VERIFY_AND_COMMIT: %s" % got)
    expect(count_l2() == 0, "VERIFY_AND_COMMIT kept the table entries (PTF needs clean tables)")
    G = p4r.GetForwardingPipelineConfigRequest
    r = sh.client.stub.GetForwardingPipelineConfig(
        G(device_id=ARGS.device_id, response_type=G.COOKIE_ONLY))
    expect(r.config.cookie.cookie == 0x1234, "the cookie set (0x1234) reads back as %#x"
           % r.config.cookie.cookie)


@check("10")
def set_config_rejects_other_p4info():
    other = p4info_pb2.P4Info()
    other.CopyFrom(INFO.p4info)
    other.tables[0].size = 17
    other.tables[0].preamble.name = "ingress.something_else"
    for act in ("VERIFY", "VERIFY_AND_COMMIT"):
        got = set_config(act, p4info=other)
        expect(got == "INVALID_ARGUMENT", "%s with a foreign P4Info: %s" % (act, got))
    got = set_config("VERIFY_AND_COMMIT")
    expect(got == "OK", "re-pushing basic: %s" % got)


# ----------------------------------------------------------------------------------------------
# Tables through the shell's own API

def shell_entries(table, **kw):
    return list(sh.TableEntry(table)(**kw).read())


@check("14", "15", "23")
def l2_exact_insert_modify_delete_read():
    clear_all()
    te = sh.TableEntry("l2_exact")(action="l2_forward")
    te.match["hdr.ethernet.dst_addr"] = "02:00:00:00:02:01"
    te.action["port"] = "2"
    te.insert()
    got = shell_entries("l2_exact")
    expect(len(got) == 1, "read after insert: %d entries" % len(got))
    e = got[0]
    expect(e.action.action_name == "ingress.l2_forward", "action %s" % e.action.action_name)
    expect(e.action["port"].value == b"\x02", "port param reads back as %r (canonical b'\\x02')"
           % e.action["port"].value)
    expect(e.match["hdr.ethernet.dst_addr"].exact.value == mac("02:00:00:00:02:01"),
           "match reads back as %r" % e.match["hdr.ethernet.dst_addr"].exact.value)
    te2 = sh.TableEntry("l2_exact")(action="drop")
    te2.match["hdr.ethernet.dst_addr"] = "02:00:00:00:02:01"
    te2.modify()
    got = shell_entries("l2_exact")
    expect(len(got) == 1 and got[0].action.action_name == "ingress.drop",
           "read after modify: %s" % [str(g) for g in got])
    te2.delete()
    expect(shell_entries("l2_exact") == [], "entry still there after delete")


@check("15", "25")
def smac_insert_modify_delete_read():
    clear_all()
    te = sh.TableEntry("smac")(action="NoAction")
    te.match["hdr.ethernet.src_addr"] = "02:00:00:00:01:01"
    te.idle_timeout_ns = 60 * 10**9
    te.insert()
    got = shell_entries("smac")
    expect(len(got) == 1 and got[0].idle_timeout_ns == 60 * 10**9,
           "read after insert: %s" % [str(g) for g in got])
    te.idle_timeout_ns = 120 * 10**9
    te.modify()
    got = shell_entries("smac")
    expect(len(got) == 1 and got[0].idle_timeout_ns == 120 * 10**9,
           "idle_timeout_ns after modify: %s" % [g.idle_timeout_ns for g in got])
    te.delete()
    expect(shell_entries("smac") == [], "entry still there after delete")


def make_member(mid, port, dmac=None):
    m = sh.ActionProfileMember("ecmp_selector")(member_id=mid, action="set_nhop")
    m.action["dmac"] = dmac or host_mac(port)
    m.action["smac"] = ROUTER
    m.action["port"] = str(port)
    m.insert()
    return m


@check("15", "21")
def ipv4_lpm_member_group_oneshot():
    clear_all()
    m1, m2 = make_member(1, 2), make_member(2, 3)
    g = sh.ActionProfileGroup("ecmp_selector")(group_id=10)
    g.add(1).add(2)
    g.insert()
    te = sh.TableEntry("ipv4_lpm")
    te.match["hdr.ipv4.dst_addr"] = "10.0.2.0/24"
    te.member_id = 1
    te.insert()
    got = shell_entries("ipv4_lpm")
    expect(len(got) == 1 and got[0].member_id == 1, "after insert: %s" % [str(x) for x in got])
    expect(got[0].match["hdr.ipv4.dst_addr"].lpm.prefix_len == 24, "prefix_len")
    te.group_id = 10
    te.modify()
    got = shell_entries("ipv4_lpm")
    expect(len(got) == 1 and got[0].group_id == 10, "after modify: %s" % [str(x) for x in got])
    te.delete()
    expect(shell_entries("ipv4_lpm") == [], "entry still there after delete")
    # One-shot action selection (spec 9.2.3).
    te = sh.TableEntry("ipv4_lpm")
    te.match["hdr.ipv4.dst_addr"] = "10.0.3.0/24"
    a1 = sh.Action("set_nhop")
    a1["dmac"], a1["smac"], a1["port"] = host_mac(3), ROUTER, "3"
    a2 = sh.Action("set_nhop")
    a2["dmac"], a2["smac"], a2["port"] = host_mac(4), ROUTER, "4"
    te.oneshot.add(a1).add(a2)
    te.insert()
    got = shell_entries("ipv4_lpm")
    expect(len(got) == 1, "one-shot entry: %d entries read" % len(got))
    te.delete()
    g.delete()
    m1.delete()
    m2.delete()


@check("15", "21")
def ipv6_lpm_insert_modify_delete_read():
    clear_all()
    m1, m2 = make_member(1, 2), make_member(2, 3)
    te = sh.TableEntry("ipv6_lpm")
    te.match["hdr.ipv6.dst_addr"] = "2001:db8:2::/48"
    te.member_id = 1
    te.insert()
    got = shell_entries("ipv6_lpm")
    expect(len(got) == 1 and got[0].member_id == 1, "after insert: %s" % [str(x) for x in got])
    te.member_id = 2
    te.modify()
    got = shell_entries("ipv6_lpm")
    expect(len(got) == 1 and got[0].member_id == 2, "after modify: %s" % [str(x) for x in got])
    te.delete()
    expect(shell_entries("ipv6_lpm") == [], "entry still there after delete")
    m1.delete()
    m2.delete()


@check("15", "18")
def acl_insert_modify_delete_read():
    clear_all()
    te = sh.TableEntry("acl")(action="drop", priority=10)
    te.match["hdr.ethernet.ether_type"] = "0x0800"
    te.match["hdr.ipv4.dst_addr"] = "10.0.2.0&&&255.255.255.0"
    te.insert()
    got = shell_entries("acl")
    expect(len(got) == 1 and got[0].priority == 10, "after insert: %s" % [str(x) for x in got])
    expect(got[0]._counter_data is None and got[0]._meter_config is None,
           "a read that did not ask for counter_data/meter_config got them")
    m = got[0].match["hdr.ipv4.dst_addr"].ternary
    expect(m.value == bytes([10, 0, 2, 0]) and m.mask == bytes([255, 255, 255, 0]),
           "ternary reads back as %r/%r" % (m.value, m.mask))
    te2 = sh.TableEntry("acl")(action="punt_to_cpu", priority=10)
    te2.match["hdr.ethernet.ether_type"] = "0x0800"
    te2.match["hdr.ipv4.dst_addr"] = "10.0.2.0&&&255.255.255.0"
    te2.modify()
    got = shell_entries("acl")
    expect(len(got) == 1 and got[0].action.action_name == "ingress.punt_to_cpu",
           "after modify: %s" % [str(x) for x in got])
    # Asking for the direct resources returns them.
    q = sh.TableEntry("acl")
    q.counter_data.packet_count = 0
    got = list(q.read())
    expect(len(got) == 1 and got[0]._counter_data is not None,
           "a read asking for counter_data did not get it")
    te2.delete()
    expect(shell_entries("acl") == [], "entry still there after delete")


@check("23")
def wildcard_reads():
    clear_all()
    raw_write([update("INSERT", table_entry=l2_entry(mac("02:00:00:00:bb:01"), u(1)))])
    make_member(1, 2)
    te = sh.TableEntry("ipv6_lpm")
    te.match["hdr.ipv6.dst_addr"] = "2001:db8:5::/48"
    te.member_id = 1
    te.insert()
    ents = raw_read(p4r.Entity(table_entry=p4r.TableEntry()))
    tids = sorted(e.table_entry.table_id for e in ents if not e.table_entry.is_default_action)
    expect(tids == sorted([INFO.table("l2_exact"), INFO.table("ipv6_lpm")]),
           "table_id 0 read returned tables %s" % tids)
    mem = raw_read(p4r.Entity(action_profile_member=p4r.ActionProfileMember()))
    expect(len(mem) == 1, "action_profile_id 0 member read: %d" % len(mem))
    expect(read_code(p4r.Entity()) == "INVALID_ARGUMENT",
           "an Entity with no oneof set: %s" % read_code(p4r.Entity()))
    clear_all()


@check("16")
def default_entries():
    clear_all()
    te = sh.TableEntry("l2_exact")(is_default=True, action="drop")
    te.modify()
    got = list(sh.TableEntry("l2_exact")(is_default=True).read())
    expect(len(got) == 1 and got[0].is_default and got[0].action.action_name == "ingress.drop",
           "default read: %s" % [str(x) for x in got])
    # MODIFY without an action resets the initial default (NoAction).
    code = write_code(update("MODIFY", table_entry=table_entry("l2_exact", default=True)))
    expect(code == "OK", "MODIFY default without action: %s" % code)
    got = list(sh.TableEntry("l2_exact")(is_default=True).read())
    expect(len(got) == 1 and got[0].action.action_name == "NoAction",
           "default after reset: %s" % [str(x) for x in got])
    expect_code(update("INSERT", table_entry=table_entry("l2_exact", default=True,
                                                         act=action("drop"))),
                "INVALID_ARGUMENT", "INSERT of a default entry")
    expect_code(update("MODIFY", table_entry=table_entry(
        "l2_exact", [exact("l2_exact", "hdr.ethernet.dst_addr", mac("02:00:00:00:02:01"))],
        action("drop"), default=True)), "INVALID_ARGUMENT", "default entry with a match")
    expect_code(update("MODIFY", table_entry=table_entry("smac", default=True,
                                                         act=action("learn"))),
                "PERMISSION_DENIED", "MODIFY of smac's const default action")
    got = list(sh.TableEntry("acl")(is_default=True).read())
    expect(len(got) == 1, "acl default read: %d entries" % len(got))


@check("14")
def bytestring_forms():
    clear_all()
    # Padded (what setup(verbose=False) sends) was used above; now canonical, then read back.
    with canonical():
        te = sh.TableEntry("l2_exact")(action="l2_forward")
        te.match["hdr.ethernet.dst_addr"] = "00:00:00:00:00:07"
        te.action["port"] = "3"
        te.insert()
    got = raw_read(p4r.Entity(table_entry=p4r.TableEntry(table_id=INFO.table("l2_exact"))))
    got = [e.table_entry for e in got if not e.table_entry.is_default_action]
    expect(len(got) == 1, "%d entries" % len(got))
    expect(got[0].match[0].exact.value == b"\x07",
           "canonical key reads back as %r" % got[0].match[0].exact.value)
    # The same key zero-padded is the same entry.
    expect_code(update("INSERT", table_entry=l2_entry(u(7, 6), u(3, 2))), "ALREADY_EXISTS",
                "padded form of an existing key")
    expect_code(update("DELETE", table_entry=l2_entry(u(7, 6), u(3, 2))), "OK",
                "DELETE by the padded form")
    expect_code(update("INSERT", table_entry=l2_entry(b"", u(3))), "OUT_OF_RANGE",
                "empty exact value")
    # Spec 8.3 is read two ways for a longer-than-needed zero-padded string: note, not a check.
    print("    note: a 7-byte zero-padded value for a 48-bit field: %s"
          % write_code(update("INSERT", table_entry=l2_entry(u(0x99, 7), u(3)))))
    expect_code(update("INSERT", table_entry=l2_entry(u(1 << 48), u(3))), "OUT_OF_RANGE",
                "49-bit value for a 48-bit field")
    expect_code(update("INSERT", table_entry=l2_entry(u(8), u(512))), "OUT_OF_RANGE",
                "port 512 for a 9-bit param")
    expect_code(update("INSERT", table_entry=l2_entry(u(8), b"")), "OUT_OF_RANGE",
                "empty action param")


# ----------------------------------------------------------------------------------------------
# Write errors (items 12-22)

@check("12")
def batch_error_details():
    clear_all()
    a, b, c = (l2_entry(mac("02:00:00:00:cc:%02x" % i), u(1)) for i in (1, 2, 3))
    code, _, _ = raw_write([update("INSERT", table_entry=b)])
    expect(code == "OK", "setup insert: %s" % code)
    code, per, err = raw_write([update("INSERT", table_entry=a), update("INSERT", table_entry=b),
                                update("INSERT", table_entry=c)])
    expect(code == "UNKNOWN", "batch with one failing update: gRPC %s (want UNKNOWN)" % code)
    st, _ = details_of(err)
    expect(st is not None, "no grpc-status-details-bin trailer")
    expect(st.code == code_pb2.UNKNOWN, "google.rpc.Status code %d (want 2)" % st.code)
    expect(per == ["OK", "ALREADY_EXISTS", "OK"], "per-update codes %s" % per)
    expect(count_l2() == 3, "the two good updates were not applied (CONTINUE_ON_ERROR)")
    # The shell's own view of it.
    try:
        te = sh.TableEntry("l2_exact")(action="l2_forward")
        te.match["hdr.ethernet.dst_addr"] = "02:00:00:00:cc:02"
        te.action["port"] = "1"
        te.insert()
        raise Fail("shell insert of a duplicate succeeded")
    except P4RuntimeWriteException as e:
        expect(len(e.errors) == 1 and e.errors[0][1].canonical_code == code_pb2.ALREADY_EXISTS,
               "shell saw %s" % e)
    # Many failures: the trailer must stay under gRPC's 8 KB metadata limit. One minimal
    # p4.v1.Error Any is ~39 bytes, so ~190 failed updates is the most any server can report
    # within 8 KB: 150 must work; 300 cannot, and is only noted.
    ups = [update("INSERT", table_entry=b) for _ in range(150)]
    code, per, err = raw_write(ups)
    expect(code == "UNKNOWN", "150 failing updates: gRPC %s (trailer too big?) %s"
           % (code, err.details() if err else ""))
    expect(per is not None and len(per) == 150 and set(per) == {"ALREADY_EXISTS"},
           "150 failing updates: %s details" % (None if per is None else len(per)))
    code, per, err = raw_write([update("INSERT", table_entry=b) for _ in range(300)])
    print("    note: 300 failing updates -> gRPC %s%s" % (code, "" if code == "UNKNOWN" else
                                                         ": " + (err.details() or "")[:120]))
    clear_all()


@check("15")
def entry_validation_errors():
    clear_all()
    port = u(1)
    F = "hdr.ethernet.dst_addr"
    cases = [
        ("priority on an exact table", table_entry(
            "l2_exact", [exact("l2_exact", F, mac("02:00:00:00:dd:01"))],
            action("l2_forward", port=port), priority=5), "INVALID_ARGUMENT"),
        ("exact field omitted", table_entry("l2_exact", [], action("l2_forward", port=port)),
         "INVALID_ARGUMENT"),
        ("ternary table without priority", table_entry(
            "acl", [ternary("acl", "hdr.ethernet.ether_type", u(0x800), u(0xffff))],
            action("drop")), "INVALID_ARGUMENT"),
        ("ternary mask 0", table_entry(
            "acl", [ternary("acl", "hdr.ethernet.ether_type", u(0), u(0))],
            action("drop"), priority=1), "INVALID_ARGUMENT"),
        ("ternary value & mask != value", table_entry(
            "acl", [ternary("acl", "hdr.ethernet.ether_type", u(0x801), u(0xff00))],
            action("drop"), priority=1), "INVALID_ARGUMENT"),
        ("action not in the table's action_refs", table_entry(
            "l2_exact", [exact("l2_exact", F, mac("02:00:00:00:dd:02"))],
            action("punt_to_cpu")), "INVALID_ARGUMENT"),
        ("missing action param", table_entry(
            "l2_exact", [exact("l2_exact", F, mac("02:00:00:00:dd:03"))],
            p4r.Action(action_id=INFO.action("l2_forward"))), "INVALID_ARGUMENT"),
        ("unknown table id", p4r.TableEntry(table_id=0x02ffffff), "NOT_FOUND"),
    ]
    # The LPM cases go to ipv4_lpm with a member.
    make_member(1, 2)
    lp = "hdr.ipv4.dst_addr"
    cases += [
        ("LPM prefix_len 0", table_entry("ipv4_lpm", [lpm("ipv4_lpm", lp, u(0, 4), 0)],
                                         member=1), "INVALID_ARGUMENT"),
        ("LPM trailing bits set", table_entry("ipv4_lpm", [lpm("ipv4_lpm", lp,
                                                               bytes([10, 0, 2, 1]), 24)],
                                              member=1), "INVALID_ARGUMENT"),
        ("LPM prefix_len > width", table_entry("ipv4_lpm", [lpm("ipv4_lpm", lp,
                                                                bytes([10, 0, 2, 0]), 33)],
                                               member=1), "INVALID_ARGUMENT"),
        ("member that does not exist", table_entry("ipv4_lpm", [lpm("ipv4_lpm", lp,
                                                                    bytes([10, 0, 2, 0]), 24)],
                                                   member=99), "NOT_FOUND"),
        ("direct action on an indirect table", table_entry(
            "ipv4_lpm", [lpm("ipv4_lpm", lp, bytes([10, 0, 2, 0]), 24)], action("drop")),
         "INVALID_ARGUMENT"),
    ]
    bad = []
    for what, te, want in cases:
        got = write_code(update("INSERT", table_entry=te))
        if got != want:
            bad.append("%s: expected %s, got %s" % (what, want, got))
    expect(not bad, "; ".join(bad))
    clear_all()


@check("15")
def scope_violations_permission_denied():
    clear_all()
    smac_key = [exact("smac", "hdr.ethernet.src_addr", mac("02:00:00:00:01:01"))]
    expect_code(update("INSERT", table_entry=table_entry("smac", smac_key, action("learn"))),
                "PERMISSION_DENIED", "smac entry with its DEFAULT_ONLY action learn")
    expect_code(update("INSERT", table_entry=table_entry("smac", smac_key, action("NoAction"))),
                "OK", "smac entry with its TABLE_ONLY action")
    expect_code(update("MODIFY", table_entry=table_entry("smac", default=True,
                                                         act=action("NoAction"))),
                "PERMISSION_DENIED", "smac default (const) set to its TABLE_ONLY action")
    clear_all()


@check("15")
def duplicate_and_missing_entries():
    clear_all()
    e = l2_entry(mac("02:00:00:00:ee:01"), u(1))
    expect_code(update("MODIFY", table_entry=e), "NOT_FOUND", "MODIFY of a missing entry")
    expect_code(update("DELETE", table_entry=e), "NOT_FOUND", "DELETE of a missing entry")
    expect_code(update("INSERT", table_entry=e), "OK", "INSERT")
    expect_code(update("INSERT", table_entry=e), "ALREADY_EXISTS", "second INSERT")
    clear_all()


@check("15", "28")
def table_full_and_large_request():
    clear_all()
    # 4096 entries with 700-byte metadata each: a ~3 MB WriteRequest (item 28: >= 4 MB accepted).
    ups = []
    for i in range(4096):
        e = l2_entry(u(0x020000100000 + i, 6), u(1, 2))
        e.metadata = b"m" * 700
        ups.append(update("INSERT", table_entry=e))
    code, per, err = raw_write(ups)
    expect(code == "OK", "4096 inserts (3 MB request): %s %s"
           % (code, err.details() if err else ""))
    extra = l2_entry(u(0x020000200000, 6), u(1))
    expect_code(update("INSERT", table_entry=extra), "RESOURCE_EXHAUSTED",
                "insert into the full l2_exact (size 4096)")
    n = count_l2()
    expect(n == 4096, "%d entries read back" % n)
    clear_all()


@check("18")
def direct_resource_rules():
    clear_all()
    # Full name: the shell's DirectCounterEntry insists on the table's full name.
    te = sh.TableEntry("ingress.acl")(action="NoAction", priority=1)
    te.match["hdr.ethernet.ether_type"] = "0x0800"
    te.insert()
    # The shell reads direct counters with only the table id: a wildcard.
    got = list(sh.DirectCounterEntry("acl_counter").read())
    expect(len(got) == 1, "DirectCounterEntry wildcard read: %d entries" % len(got))
    dc = sh.DirectCounterEntry("acl_counter")
    dc.table_entry = te
    dc.packet_count = 7
    dc.byte_count = 700
    dc.modify()
    got = list(dc.read())
    expect(len(got) == 1 and got[0].packet_count == 7 and got[0].byte_count == 700,
           "direct counter after MODIFY: %s" % [str(x) for x in got])
    dce = p4r.DirectCounterEntry()
    dce.table_entry.CopyFrom(got[0]._entry.table_entry)
    for kind in ("INSERT", "DELETE"):
        expect_code(update(kind, direct_counter_entry=dce), "INVALID_ARGUMENT",
                    "%s of a DirectCounterEntry" % kind)
    dm = sh.DirectMeterEntry("acl_meter")
    dm.table_entry = te
    dm.cir, dm.cburst, dm.pir, dm.pburst = 1000, 2000, 2000, 3000
    dm.modify()
    got = list(dm.read())
    expect(len(got) == 1 and got[0].cir == 1000 and got[0].pburst == 3000,
           "direct meter after MODIFY: %s" % [str(x) for x in got])
    clear_all()


@check("19")
def indexed_counter_meter_rules():
    c = sh.CounterEntry("port_rx")
    c.index = 300
    c.packet_count, c.byte_count = 5, 500
    c.modify()
    got = list(sh.CounterEntry("port_rx")(index=300).read())
    expect(len(got) == 1 and got[0].packet_count == 5 and got[0].byte_count == 500,
           "counter after MODIFY: %s" % [str(x) for x in got])
    whole = list(sh.CounterEntry("port_rx").read())
    expect(len(whole) == 512, "read without index: %d entries (size 512)" % len(whole))
    allc = raw_read(p4r.Entity(counter_entry=p4r.CounterEntry()))
    expect(len(allc) == 1024, "counter_id 0 read: %d entries (2 x 512)" % len(allc))
    ce = p4r.CounterEntry(counter_id=INFO.id("port_rx"))
    ce.index.index = 512
    ce.data.packet_count = 1
    expect_code(update("MODIFY", counter_entry=ce), "OUT_OF_RANGE", "counter index 512")
    expect(read_code(p4r.Entity(counter_entry=ce)) == "OUT_OF_RANGE",
           "read counter index 512: %s" % read_code(p4r.Entity(counter_entry=ce)))
    ce.index.index = 1
    expect_code(update("INSERT", counter_entry=ce), "INVALID_ARGUMENT", "INSERT of a counter")
    m = sh.MeterEntry("port_meter")(index=300)
    m.cir, m.cburst, m.pir, m.pburst = 100, 200, 300, 400
    m.modify()
    got = list(sh.MeterEntry("port_meter")(index=300).read())
    expect(len(got) == 1 and (got[0].cir, got[0].cburst, got[0].pir, got[0].pburst)
           == (100, 200, 300, 400), "meter after MODIFY: %s" % [str(x) for x in got])
    # MODIFY without a config resets it (unconfigured, every packet green).
    sh.MeterEntry("port_meter")(index=300).modify()
    got = list(sh.MeterEntry("port_meter")(index=300).read())
    expect(len(got) == 1 and not got[0]._entry.HasField("config"),
           "meter still configured after MODIFY without config: %s" % [str(x) for x in got])
    me = p4r.MeterEntry(meter_id=INFO.id("port_meter"))
    me.index.index = 512
    me.config.cir, me.config.cburst, me.config.pir, me.config.pburst = 1, 1, 1, 1
    expect_code(update("MODIFY", meter_entry=me), "OUT_OF_RANGE", "meter index 512")


@check("19")
def registers_read_write():
    rid = INFO.id("flow_last_seen")
    re_ = p4r.RegisterEntry(register_id=rid)
    re_.index.index = 42
    re_.data.bitstring = u(0xABCDEF)
    expect_code(update("MODIFY", register_entry=re_), "OK", "register MODIFY")
    q = p4r.RegisterEntry(register_id=rid)
    q.index.index = 42
    got = raw_read(p4r.Entity(register_entry=q))
    expect(len(got) == 1 and got[0].register_entry.data.bitstring == u(0xABCDEF),
           "register reads back %s" % [str(g) for g in got])
    whole = raw_read(p4r.Entity(register_entry=p4r.RegisterEntry(register_id=rid)))
    expect(len(whole) == 4096, "register read without index: %d cells" % len(whole))
    re_.index.index = 4096
    expect_code(update("MODIFY", register_entry=re_), "OUT_OF_RANGE", "register index 4096")
    re_.index.index = 1
    re_.data.bitstring = u(1 << 48)
    expect_code(update("MODIFY", register_entry=re_), "OUT_OF_RANGE", "49-bit register value")


@check("20")
def multicast_and_clone_entries():
    clear_all()
    g = sh.MulticastGroupEntry(7).add(2).add(3, 1)
    g.insert()
    got = list(sh.MulticastGroupEntry(7).read())
    expect(len(got) == 1 and [(r.egress_port, r.instance) for r in got[0].replicas]
           == [(2, 0), (3, 1)], "group 7 reads back %s" % [str(x) for x in got])
    allg = list(sh.MulticastGroupEntry().read())
    expect(len(allg) == 1, "wildcard group read (id 0): %d" % len(allg))
    sh.MulticastGroupEntry(7).add(4).modify()
    got = list(sh.MulticastGroupEntry(7).read())
    expect([r.egress_port for r in got[0].replicas] == [4], "after modify: %s" % got[0])
    # The v1.5 `port` bytes form, with metadata: read back as written.
    mg = p4r.MulticastGroupEntry(multicast_group_id=8, metadata=b"cookie")
    mg.replicas.add(port=u(2), instance=0)
    expect_code(update("INSERT", packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        multicast_group_entry=mg)), "OK", "group with Replica.port bytes")
    got = raw_read(p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        multicast_group_entry=p4r.MulticastGroupEntry(multicast_group_id=8))))
    expect(len(got) == 1, "group 8: %d read" % len(got))
    m = got[0].packet_replication_engine_entry.multicast_group_entry
    expect(m.metadata == b"cookie", "metadata not echoed: %r" % m.metadata)
    expect(len(m.replicas) == 1 and m.replicas[0].port == u(2) and m.replicas[0].egress_port == 0,
           "port-form replica read back as %s" % m.replicas)
    zero = p4r.MulticastGroupEntry(multicast_group_id=0)
    zero.replicas.add(egress_port=2)
    expect_code(update("INSERT", packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        multicast_group_entry=zero)), "INVALID_ARGUMENT", "multicast group id 0")
    expect_code(update("INSERT", packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        multicast_group_entry=mg)), "ALREADY_EXISTS", "second insert of group 8")
    cs = sh.CloneSessionEntry(5).add(4)
    cs.insert()
    got = list(sh.CloneSessionEntry(5).read())
    expect(len(got) == 1 and [r.egress_port for r in got[0].replicas] == [4],
           "clone session reads back %s" % [str(x) for x in got])
    z = p4r.CloneSessionEntry(session_id=0)
    z.replicas.add(egress_port=2)
    expect_code(update("INSERT", packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        clone_session_entry=z)), "INVALID_ARGUMENT", "clone session id 0")
    expect_code(update("DELETE", packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        multicast_group_entry=p4r.MulticastGroupEntry(multicast_group_id=99))), "NOT_FOUND",
        "DELETE of a missing group")
    clear_all()


@check("21")
def action_profile_rules():
    clear_all()
    make_member(1, 2)
    make_member(2, 3)
    g = p4r.ActionProfileGroup(action_profile_id=INFO.id("ecmp_selector"), group_id=3)
    g.members.add(member_id=1)  # weight 0 = the default, 1
    g.members.add(member_id=2, weight=2)
    expect_code(update("INSERT", action_profile_group=g), "OK", "group with default weight")
    got = raw_read(p4r.Entity(action_profile_group=p4r.ActionProfileGroup(
        action_profile_id=INFO.id("ecmp_selector"), group_id=3)))
    expect(len(got) == 1, "group read: %d" % len(got))
    weights = sorted((m.member_id, m.weight) for m in got[0].action_profile_group.members)
    expect(weights in ([(1, 1), (2, 2)], [(1, 0), (2, 2)]), "weights read back %s" % weights)
    bad = p4r.ActionProfileGroup(action_profile_id=INFO.id("ecmp_selector"), group_id=4)
    bad.members.add(member_id=77, weight=1)
    expect_code(update("INSERT", action_profile_group=bad), "NOT_FOUND",
                "group with a missing member")
    m = p4r.ActionProfileMember(action_profile_id=INFO.id("ecmp_selector"), member_id=1,
                                action=action("set_nhop", dmac=u(1), smac=u(2), port=u(3)))
    expect_code(update("INSERT", action_profile_member=m), "ALREADY_EXISTS", "duplicate member")
    expect_code(update("DELETE", action_profile_member=m), "FAILED_PRECONDITION",
                "DELETE of a member a group still uses")
    clear_all()


@check("22")
def digest_entry_config():
    d = sh.DigestEntry("mac_learn")
    d.max_list_size, d.max_timeout_ns, d.ack_timeout_ns = 1, 0, 10**9
    d.insert()
    got = list(sh.DigestEntry("mac_learn").read())
    expect(len(got) == 1 and got[0].ack_timeout_ns == 10**9,
           "digest entry reads back %s" % [str(x) for x in got])
    d.ack_timeout_ns = 2 * 10**9
    d.modify()
    d.delete()
    expect_code(update("DELETE", digest_entry=p4r.DigestEntry(digest_id=INFO.id("mac_learn"))),
                "NOT_FOUND", "DELETE of an unconfigured digest")


@check("13")
def atomicity_modes():
    clear_all()
    e = l2_entry(mac("02:00:00:00:ff:01"), u(1))
    raw_write([update("INSERT", table_entry=e)])
    f = l2_entry(mac("02:00:00:00:ff:02"), u(1))
    notes = []
    for mode in ("ROLLBACK_ON_ERROR", "DATAPLANE_ATOMIC"):
        code, per, _ = raw_write([update("INSERT", table_entry=f), update("INSERT", table_entry=e)],
                                 atomicity=getattr(p4r.WriteRequest, mode))
        if code == "UNIMPLEMENTED":
            notes.append("%s unimplemented" % mode)
            continue
        expect(code == "UNKNOWN", "%s with a failing update: %s" % (mode, code))
        expect(count_l2() == 1, "%s applied part of a failed batch" % mode)
    if notes:
        print("    note: " + ", ".join(notes))
    clear_all()


# ----------------------------------------------------------------------------------------------
# Traffic

def udp(src_port, dst_port_mac, dst_ip, sport=1234, dport=4321, ttl=64, size=None, tag=b""):
    f = (Ether(src=host_mac(src_port), dst=dst_port_mac) /
         IP(src=host_ip(src_port), dst=dst_ip, ttl=ttl) / UDP(sport=sport, dport=dport) /
         Raw(tag))
    if size and len(f) < size:
        f = f / Raw(b"\x00" * (size - len(f)))
    return bytes(f)


def send_and_collect(port, frames, tag, want=None, timeout=1.5):
    PORTS.drain()
    for f in frames:
        PORTS.send(port, f)
    return PORTS.recv(tag, timeout=timeout, want=want)


def l2_forward(dst, port):
    te = sh.TableEntry("l2_exact")(action="l2_forward")
    te.match["hdr.ethernet.dst_addr"] = dst
    te.action["port"] = str(port)
    te.insert()
    return te


@check("traffic")
def traffic_l2_forward():
    clear_all()
    l2_forward(host_mac(2), 2)
    tag = netio.new_tag("l2")
    got = send_and_collect(1, [udp(1, host_mac(2), host_ip(2), tag=tag)] * 3, tag, want=3)
    expect(netio.counts(got) == {2: 3}, "frames per port %s (want {2: 3})" % netio.counts(got))


def route_v4(prefix, plen, port, member_id=None):
    mid = member_id or port
    make_member(mid, port)
    te = sh.TableEntry("ipv4_lpm")
    te.match["hdr.ipv4.dst_addr"] = "%s/%d" % (prefix, plen)
    te.member_id = mid
    te.insert()


@check("traffic")
def traffic_ipv4_route_and_ttl():
    clear_all()
    route_v4("10.0.3.0", 24, 3)
    tag = netio.new_tag("v4")
    got = send_and_collect(1, [udp(1, ROUTER, host_ip(3), ttl=64, tag=tag)], tag, want=1)
    expect(netio.counts(got) == {3: 1}, "frames per port %s (want {3: 1})" % netio.counts(got))
    p = Ether(got[3][0])
    expect(p.dst == host_mac(3) and p.src == ROUTER, "MACs not rewritten: %s > %s" % (p.src, p.dst))
    expect(p[IP].ttl == 63, "TTL %d (want 63)" % p[IP].ttl)
    chk = p[IP].chksum
    del p[IP].chksum
    expect(Ether(bytes(p))[IP].chksum == chk, "IPv4 checksum wrong after TTL decrement")
    tag = netio.new_tag("ttl")
    got = send_and_collect(1, [udp(1, ROUTER, host_ip(3), ttl=1, tag=tag)], tag, timeout=0.8)
    expect(netio.counts(got) == {}, "TTL 1 was forwarded: %s" % netio.counts(got))
    tag = netio.new_tag("miss")
    got = send_and_collect(1, [udp(1, ROUTER, "10.7.7.7", tag=tag)], tag, timeout=0.8)
    expect(netio.counts(got) == {}, "a route miss was forwarded: %s" % netio.counts(got))


@check("traffic")
def traffic_ipv6_route():
    clear_all()
    make_member(4, 4)
    te = sh.TableEntry("ipv6_lpm")
    te.match["hdr.ipv6.dst_addr"] = "2001:db8:4::/48"
    te.member_id = 4
    te.insert()
    tag = netio.new_tag("v6")
    f = bytes(Ether(src=host_mac(1), dst=ROUTER) / IPv6(src=host_ip6(1), dst=host_ip6(4), hlim=9)
              / UDP(sport=1, dport=2) / Raw(tag))
    got = send_and_collect(1, [f], tag, want=1)
    expect(netio.counts(got) == {4: 1}, "frames per port %s (want {4: 1})" % netio.counts(got))
    p = Ether(got[4][0])
    expect(p[IPv6].hlim == 8 and p.dst == host_mac(4), "hop limit %d, dst %s" % (p[IPv6].hlim,
                                                                                 p.dst))


@check("21", "traffic")
def traffic_ecmp_spread():
    clear_all()
    for port in (2, 3, 4):
        make_member(port, port)
    g = sh.ActionProfileGroup("ecmp_selector")(group_id=1)
    g.add(2).add(3).add(4)
    g.insert()
    te = sh.TableEntry("ipv4_lpm")
    te.match["hdr.ipv4.dst_addr"] = "10.9.0.0/16"
    te.group_id = 1
    te.insert()
    tag = netio.new_tag("ecmp")
    frames = [udp(1, ROUTER, "10.9.%d.%d" % (i // 200, i % 200 + 1), sport=1000 + i, tag=tag)
              for i in range(90)]
    got = send_and_collect(1, frames, tag, want=90, timeout=3)
    c = netio.counts(got)
    expect(sum(c.values()) == 90, "%d of 90 frames arrived: %s" % (sum(c.values()), c))
    expect(set(c) == {2, 3, 4} and min(c.values()) >= 10, "uneven spread %s" % c)
    # The same flow always takes the same path.
    tag = netio.new_tag("ecmp1")
    got = send_and_collect(1, [udp(1, ROUTER, "10.9.1.1", sport=7, tag=tag)] * 10, tag, want=10)
    expect(len(netio.counts(got)) == 1, "one flow went out on %s" % netio.counts(got))


def counter(name, index):
    got = list(sh.CounterEntry(name)(index=index).read())
    expect(len(got) == 1, "%s[%d]: %d entries read" % (name, index, len(got)))
    return got[0].packet_count, got[0].byte_count


@check("19", "traffic")
def traffic_counters_move():
    clear_all()
    l2_forward(host_mac(2), 2)
    rx0, tx0 = counter("port_rx", 1), counter("port_tx", 2)
    tag = netio.new_tag("cnt")
    f = udp(1, host_mac(2), host_ip(2), tag=tag, size=100)
    got = send_and_collect(1, [f] * 10, tag, want=10)
    expect(netio.counts(got) == {2: 10}, "frames per port %s" % netio.counts(got))
    time.sleep(0.2)
    rx1, tx1 = counter("port_rx", 1), counter("port_tx", 2)
    expect(rx1[0] - rx0[0] == 10 and rx1[1] - rx0[1] == 10 * len(f),
           "port_rx[1] moved by %s (want 10 packets, %d bytes)"
           % ((rx1[0] - rx0[0], rx1[1] - rx0[1]), 10 * len(f)))
    expect(tx1[0] - tx0[0] == 10 and tx1[1] - tx0[1] == 10 * len(f),
           "port_tx[2] moved by %s (want 10 packets, %d bytes)"
           % ((tx1[0] - tx0[0], tx1[1] - tx0[1]), 10 * len(f)))


def acl_entry(act, priority=10, ether_type="0x0800", dst_ip=None, dport=None, **params):
    te = sh.TableEntry("ingress.acl")(action=act, priority=priority)
    te.match["hdr.ethernet.ether_type"] = ether_type
    if dst_ip:
        te.match["hdr.ipv4.dst_addr"] = dst_ip
    if dport:
        te.match["meta.l4_dst_port"] = str(dport)
    for k, v in params.items():
        te.action[k] = v
    return te


@check("18", "traffic")
def traffic_direct_counter_moves():
    clear_all()
    l2_forward(host_mac(2), 2)
    te = acl_entry("NoAction", dst_ip=host_ip(2))
    te.insert()
    tag = netio.new_tag("dc")
    f = udp(1, host_mac(2), host_ip(2), tag=tag, size=120)
    got = send_and_collect(1, [f] * 5, tag, want=5)
    expect(netio.counts(got) == {2: 5}, "frames per port %s" % netio.counts(got))
    time.sleep(0.2)
    dc = sh.DirectCounterEntry("acl_counter")
    dc.table_entry = te
    got = list(dc.read())
    expect(len(got) == 1 and got[0].packet_count == 5 and got[0].byte_count == 5 * len(f),
           "acl_counter: %s (want 5 packets, %d bytes)"
           % ([(x.packet_count, x.byte_count) for x in got], 5 * len(f)))
    q = sh.TableEntry("acl")
    q.counter_data.packet_count = 0
    got = list(q.read())
    expect(len(got) == 1 and got[0].counter_data.packet_count == 5,
           "table read with counter_data: %s" % [str(x) for x in got])


def meter_run(tag_name, n=6, size=500):
    tag = netio.new_tag(tag_name)
    f = udp(1, host_mac(2), host_ip(2), tag=tag, size=size)
    got = send_and_collect(1, [f] * n, tag, want=n, timeout=1.5)
    return netio.counts(got).get(2, 0)


@check("19", "traffic")
def traffic_port_meter_colours():
    clear_all()
    l2_forward(host_mac(2), 2)
    m = sh.MeterEntry("port_meter")(index=1)
    # 1 byte/s: the buckets hold 1600 bytes, so three 500-byte frames pass (green or yellow) and
    # the rest are red, which basic drops.
    m.cir, m.cburst, m.pir, m.pburst = 1, 600, 1, 1600
    m.modify()
    try:
        passed = meter_run("meter")
        expect(passed == 3, "%d of 6 frames passed a 1600-byte peak bucket (want 3)" % passed)
    finally:
        sh.MeterEntry("port_meter")(index=1).modify()
    passed = meter_run("nometer")
    expect(passed == 6, "%d of 6 frames passed the unconfigured meter" % passed)


@check("18", "traffic")
def traffic_direct_meter_colours():
    clear_all()
    l2_forward(host_mac(2), 2)
    te = acl_entry("NoAction", dst_ip=host_ip(2))
    te.meter_config.cir = 1
    te.meter_config.cburst = 1100
    te.meter_config.pir = 1
    te.meter_config.pburst = 1100
    te.insert()
    passed = meter_run("dmeter")
    expect(passed == 2, "%d of 6 frames passed a 1100-byte direct meter (want 2)" % passed)
    dm = sh.DirectMeterEntry("acl_meter")
    dm.table_entry = te
    dm.cir, dm.cburst, dm.pir, dm.pburst = 1, 1600, 1, 1600
    dm.modify()
    passed = meter_run("dmeter2")
    expect(passed == 3, "%d of 6 frames passed after the meter was set to 1600 bytes (want 3)"
           % passed)


@check("20", "traffic")
def traffic_multicast_replicates():
    clear_all()
    sh.MulticastGroupEntry(7).add(2).add(3).add(4).insert()
    te = sh.TableEntry("l2_exact")(action="l2_multicast")
    te.match["hdr.ethernet.dst_addr"] = "01:00:5e:00:00:07"
    te.action["group"] = "7"
    te.insert()
    tag = netio.new_tag("mc")
    got = send_and_collect(1, [udp(1, "01:00:5e:00:00:07", "239.0.0.7", tag=tag)], tag, want=3)
    expect(netio.counts(got) == {2: 1, 3: 1, 4: 1},
           "copies per port %s (want one on each of 2, 3, 4)" % netio.counts(got))


@check("20", "traffic")
def traffic_clone_session():
    clear_all()
    sh.CloneSessionEntry(5).add(4).insert()
    l2_forward(host_mac(2), 2)
    acl_entry("clone_to_session", dst_ip=host_ip(2), session_id="5").insert()
    tag = netio.new_tag("clone")
    got = send_and_collect(1, [udp(1, host_mac(2), host_ip(2), tag=tag)], tag, want=2)
    expect(netio.counts(got) == {2: 1, 4: 1},
           "frames per port %s (want the original on 2, the clone on 4)" % netio.counts(got))


@check("24", "traffic")
def traffic_packet_out():
    tag = netio.new_tag("pout")
    frame = udp(1, host_mac(3), host_ip(3), tag=tag)
    PORTS.drain()
    for port in (3, 4):
        po = sh.PacketOut(frame)
        po.metadata["egress_port"] = str(port)
        po.metadata["_pad"] = "0"
        po.send()
    got = PORTS.recv(tag, timeout=1.5, want=2)
    expect(netio.counts(got) == {3: 1, 4: 1}, "packet-outs arrived on %s" % netio.counts(got))
    expect(got[3][0] == frame, "the payload changed on its way out")
    # A packet-out to the CPU port is dropped (optionally with a StreamError); the stream lives.
    po = sh.PacketOut(frame)
    po.metadata["egress_port"] = "510"
    po.send()
    time.sleep(0.3)
    expect(sh.APIVersion(), "server gone after a bad packet-out")


def packet_ins(timeout):
    return list(PACKET_IN.sniff(timeout=timeout))


def md(pkt_in):
    return {m.metadata_id: m.value for m in pkt_in.packet.metadata}


@check("24", "traffic")
def traffic_acl_punt_packet_in():
    clear_all()
    packet_ins(0.1)
    l2_forward(host_mac(2), 2)
    acl_entry("punt_to_cpu", dst_ip=host_ip(2), dport=7777).insert()
    tag = netio.new_tag("punt")
    frame = udp(1, host_mac(2), host_ip(2), dport=7777, tag=tag)
    got = send_and_collect(1, [frame], tag, timeout=0.8)
    expect(netio.counts(got) == {}, "a punted frame also went to %s" % netio.counts(got))
    pins = [p for p in packet_ins(2) if tag in p.packet.payload]
    expect(len(pins) == 1, "%d packet-ins for the punted frame" % len(pins))
    expect(pins[0].packet.payload == frame, "packet-in payload differs from the frame sent")
    meta = md(pins[0])
    expect(meta.get(1) in (b"\x01", b"\x00\x01"), "ingress_port metadata %r (want 1)"
           % meta.get(1))
    # ARP always goes to the CPU.
    tag = netio.new_tag("arp")
    arp = bytes(Ether(src=host_mac(3), dst="ff:ff:ff:ff:ff:ff") /
                ARP(psrc=host_ip(3), pdst="10.0.3.254", hwsrc=host_mac(3)) / Raw(tag))
    PORTS.send(3, arp)
    pins = [p for p in packet_ins(2) if tag in p.packet.payload]
    expect(len(pins) == 1 and md(pins[0]).get(1) in (b"\x03", b"\x00\x03"),
           "ARP packet-in: %s" % [str(p) for p in pins])


@check("22", "traffic")
def traffic_digest_learn():
    clear_all()
    d = sh.DigestEntry("mac_learn")
    d.max_list_size, d.max_timeout_ns, d.ack_timeout_ns = 1, 0, 10**9
    d.insert()
    try:
        list(DIGESTS.sniff(timeout=0.1))
        l2_forward(host_mac(2), 2)
        tag = netio.new_tag("dig")
        f = bytes(Ether(src="02:00:00:00:77:01", dst=host_mac(2)) /
                  IP(src="10.0.1.77", dst=host_ip(2)) / UDP() / Raw(tag))
        send_and_collect(1, [f], tag, want=1)
        lists = list(DIGESTS.sniff(timeout=2))
        expect(lists, "no DigestList for a frame with an unknown source MAC")
        dl = lists[0].digest
        expect(dl.digest_id == INFO.id("mac_learn"), "digest_id %d" % dl.digest_id)
        members = dl.data[0].struct.members
        expect(len(members) == 2 and members[0].bitstring.lstrip(b"\x00")
               == mac("02:00:00:00:77:01") and members[1].bitstring.lstrip(b"\x00") == b"\x01",
               "digest data %s" % dl.data[0])
    finally:
        sh.DigestEntry("mac_learn").delete()


@check("25", "traffic")
def idle_timeout_notification():
    clear_all()
    while stream_queue("idle_timeout_notification", 0.05) is not None:
        pass
    te = sh.TableEntry("smac")(action="NoAction")
    te.match["hdr.ethernet.src_addr"] = "02:00:00:00:66:01"
    te.idle_timeout_ns = 300 * 10**6
    te.insert()
    msg = stream_queue("idle_timeout_notification", 5)
    expect(msg is not None, "no IdleTimeoutNotification within 5 s of a 300 ms idle timeout")
    ents = msg.idle_timeout_notification.table_entry
    expect(len(ents) >= 1 and ents[0].table_id == INFO.table("smac"),
           "notification for %s" % [e.table_id for e in ents])
    clear_all()


# ----------------------------------------------------------------------------------------------
# Arbitration (last: a higher election id changes who is primary for good)

@check("1", "2", "6")
def backup_client():
    s = Stream((0, 5))
    try:
        kind, m = s.arbitration()
        expect(kind == "msg", "no arbitration reply for a backup (%s)" % kind)
        expect(m.arbitration.status.code == code_pb2.ALREADY_EXISTS,
               "backup got status %s (want ALREADY_EXISTS)"
               % code_name(m.arbitration.status.code))
        expect(eid(m) == PRIMARY, "backup's reply carries election id %s, not the primary's %s"
               % (eid(m), PRIMARY))
        e = l2_entry(mac("02:00:00:00:99:01"), u(1))
        got = write_code(update("INSERT", table_entry=e), election=(0, 5), stub=s.stub)
        expect(got == "PERMISSION_DENIED", "Write from the backup: %s" % got)
        got = set_config("VERIFY_AND_COMMIT", election=(0, 5), stub=s.stub)
        expect(got == "PERMISSION_DENIED", "SetForwardingPipelineConfig from the backup: %s" % got)
        expect(read_code(p4r.Entity(table_entry=p4r.TableEntry()), stub=s.stub) == "OK",
               "a backup cannot read")
    finally:
        expect(s.close(), "the server did not end the backup's stream on half-close")


@check("3")
def election_id_in_use():
    s = Stream(PRIMARY)
    try:
        kind, m = s.arbitration()
        expect(kind == "error", "a second stream with the primary's election id got %s %s"
               % (kind, m))
        expect(m.code() == grpc.StatusCode.INVALID_ARGUMENT,
               "duplicate election id: %s (want INVALID_ARGUMENT)" % m.code().name)
        import re
        expect(re.search(r"election id .*(used|exists)", m.details() or ""),
               "message %r does not match finsy's `election id .*(used|exists)`" % m.details())
    finally:
        s.close()
    expect(sh.APIVersion(), "primary lost")
    code, _, _ = raw_write([update("MODIFY", table_entry=table_entry("l2_exact", default=True))])
    expect(code == "OK", "the primary can no longer write: %s" % code)


@check("8")
def unknown_role():
    s = Stream((0, 50), role="no-such-role")
    try:
        kind, m = s.arbitration()
        if kind == "error":
            expect(m.code() == grpc.StatusCode.NOT_FOUND, "unknown role: stream ended with %s"
                   % m.code().name)
        else:
            expect(kind == "msg" and m.arbitration.status.code == code_pb2.NOT_FOUND,
                   "unknown role: %s %s" % (kind, m))
    finally:
        s.close()


@check("7")
def wrong_device_id():
    other = ARGS.device_id + 1
    e = l2_entry(mac("02:00:00:00:99:02"), u(1))
    code, _, _ = raw_write([update("INSERT", table_entry=e)], device_id=other)
    expect(code == "NOT_FOUND", "Write to device %d: %s (want NOT_FOUND)" % (other, code))
    code = read_code(p4r.Entity(table_entry=p4r.TableEntry()), device_id=other)
    expect(code == "NOT_FOUND", "Read of device %d: %s (want NOT_FOUND)" % (other, code))


@check("1", "5", "6")
def takeover_and_highest_ever():
    while stream_queue("arbitration", 0.05) is not None:
        pass
    hi = Stream((0, 30))
    try:
        kind, m = hi.arbitration()
        expect(kind == "msg" and m.arbitration.status.code == code_pb2.OK,
               "higher election id is not primary: %s %s" % (kind, m))
        note = stream_queue("arbitration", 3)
        expect(note is not None, "the old primary was not told it lost (no arbitration update)")
        expect(note.arbitration.status.code != code_pb2.OK and eid(note) == (0, 30),
               "old primary's update: status %s, election id %s"
               % (code_name(note.arbitration.status.code), eid(note)))
        e = l2_entry(mac("02:00:00:00:99:03"), u(1))
        expect(write_code(update("INSERT", table_entry=e)) == "PERMISSION_DENIED",
               "the old primary can still write")
    finally:
        hi.close()
    # Spec: the highest id ever seen (0,30) stays the bar; (0,25) does not become primary.
    lo = Stream((0, 25))
    try:
        kind, m = lo.arbitration()
        expect(kind == "msg" and m.arbitration.status.code != code_pb2.OK,
               "(0,25) became primary after (0,30) left: the spec keeps the highest id ever seen")
    finally:
        lo.close()


@check("4")
def teardown_clean():
    shell_teardown()


# ----------------------------------------------------------------------------------------------

def main():
    global ARGS, INFO, PORTS
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc-addr", default="127.0.0.1:9559")
    ap.add_argument("--device-id", type=int, default=1)
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--ports", default="1=p1,2=p2,3=p3,4=p4")
    ap.add_argument("--only", help="comma-separated check names (the session checks always run)")
    ap.add_argument("--timeout", type=int, default=100, help="whole-run watchdog, seconds")
    ARGS = ap.parse_args()
    faulthandler.dump_traceback_later(ARGS.timeout, exit=True)
    INFO = Info(ARGS.p4info)
    PORTS = netio.Ports(netio.parse_ports(ARGS.ports))
    only = set(ARGS.only.split(",")) if ARGS.only else None
    always = {"connect_without_config", "connect_with_config", "teardown_clean"}
    connected = False
    for name, items, f in CHECKS:
        if only and name not in only and name not in always:
            continue
        if name != "connect_without_config" and name != "connect_with_config" and not connected:
            RESULTS.append((name, False, "skipped: no session"))
            print("FAIL %-40s skipped: no primary session" % name, flush=True)
            continue
        t0 = time.monotonic()
        try:
            f()
            ok, why = True, ""
        except Fail as e:
            ok, why = False, str(e)
        except P4RuntimeWriteException as e:
            ok, why = False, "write failed: %s" % str(e).strip().replace("\n", " ")
        except P4RuntimeException as e:
            ok, why = False, "rpc failed: %s" % e
        except grpc.RpcError as e:
            ok, why = False, "rpc failed: %s %s" % (e.code().name, e.details())
        except Exception as e:  # noqa: BLE001 - any crash is a failed check
            ok, why = False, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())
        if name == "connect_with_config":
            connected = ok
        dt = time.monotonic() - t0
        RESULTS.append((name, ok, why))
        print("%s %-40s [%s] %.1fs%s" % ("PASS" if ok else "FAIL", name, ",".join(items), dt,
                                         "" if ok else "\n    " + why), flush=True)
    PORTS.close()
    passed = sum(1 for r in RESULTS if r[1])
    failed = len(RESULTS) - passed
    print()
    print("shell: %d passed, %d failed" % (passed, failed))
    for name, ok, why in RESULTS:
        if not ok:
            print("  FAILED %s: %s" % (name, why.splitlines()[0] if why else ""))
    sys.stdout.flush()
    # Stream threads of the shell may linger after a failed teardown: do not wait for them.
    import os
    os._exit(1 if failed else 0)


if __name__ == "__main__":
    main()
