#!/usr/bin/env python3
"""p4lang/PI's demo router (proto/demo_grpc), its controller's behaviour re-stated against pisa-switch.

PI's demo controller (proto/demo_grpc/app.cpp + simple_router_mgr.cpp) is C++ built inside PI with
gRPC; it cannot be built here. This script does, request for request and byte for byte, what
SimpleRouterMgr does with proto/demo_grpc/simple_router.{json,p4info.txt} (then
simple_router_wcounter.*), and checks each step's effect on the switch's ports and P4Runtime
stream. The expected values come from proto/demo_grpc/simple_router.p4 (cited as "p4:LINE").

What the controller does (simple_router_mgr.cpp):
  * SetForwardingPipelineConfig VERIFY_AND_COMMIT before opening any stream, with no election id,
    p4_device_config = a serialized legacy p4.tmp.P4DeviceConfig {reassign, extras, device_data}
    (assign());
  * a StreamChannel arbitration carrying the device id only, no election id (send_init());
  * Writes with no election id, one INSERT per request, values at the full width of a C integer
    (uint_to_string(): 4 bytes for an address, 2 for a port), MACs 6 bytes;
  * ARP for its interfaces answered with a packet-out, IPv4 punted for want of a next-hop MAC
    queued, the next hop ARPed for, `forward` written on the reply and the packet re-injected;
  * update_config_(): VERIFY_AND_SAVE (P4DeviceConfig with device_data only), the entries written
    again, COMMIT; then out_count read over P4Runtime.

Every check prints PASS or FAIL with its name; the last line counts them. With --election-id
auto (the default) the three `demo/...` checks use no election id, as the controller does; if
the switch does not make such a controller primary, the rest run with election id 1 (said on a
NOTE line), so that the data-path checks still say something. `cli` runs PI's
tests/CLI/testdata/table_dump.in through simple_switch_CLI against a switch started with PI's
tests/testdata/simple_router.json.

Run by scripts/pi-simple-router.sh, inside the namespace where pisa-switch (--no-p4, port 1 on
sw1, port 2 on sw2, `-- --cpu-port 64`) has its ports' peers p1 and p2, with the `shell` venv's
python.
"""

import argparse
import os
import queue
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as p4r
from p4.v1 import p4runtime_pb2_grpc

from suitelib import CHECKS, Ports, check, expect


# simple_router.p4:17-19 (the controller's CPU_REASON enum, simple_router_mgr.cpp:50-54)
NO_ARP_ENTRY, ARP_MSG, DATA_PKT = 0, 1, 2
CPU_PORT = 64  # p4:19, and the switch's --cpu-port

# SimpleRouterMgr::static_config_(): the router's interfaces and routes.
IFACES = {1: (0x0A000001, bytes.fromhex("00aabb000000")), 2: (0x0A000101, bytes.fromhex("00aabb000001"))}
ROUTES = [(0x0A00000A, 32, 0x0A00000A, 1), (0x0A00010A, 32, 0x0A00010A, 2)]

# Hosts on the two ports (test-side addresses).
H1_MAC, H1_IP = bytes.fromhex("020000000101"), 0x0A00000A  # 10.0.0.10 behind port 1
H2_MAC, H2_IP = bytes.fromhex("020000000202"), 0x0A00010A  # 10.0.1.10 behind port 2
BCAST = b"\xff" * 6


# ----- frames -----

def csum16(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def eth(dst, src, ethertype):
    return dst + src + struct.pack("!H", ethertype)


def arp(op, hw_src, ip_src, hw_dst, ip_dst):
    # set_arp_header() of simple_router_mgr.cpp: Ethernet/IPv4, 6/4.
    return struct.pack("!HHBBH6sI6sI", 1, 0x0800, 6, 4, op, hw_src, ip_src, hw_dst, ip_dst)


def ipv4(src, dst, ttl, payload=b"pisa-switch/pi-simple-router", ident=0x1234):
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, 0, ttl, 17, 0,
                      struct.pack("!I", src), struct.pack("!I", dst))
    c = csum16(hdr)
    return hdr[:10] + struct.pack("!H", c) + hdr[12:] + payload


def cpu_header(reason, port):
    # cpu_header_t (p4:128-134): zeros:64, reason:16, port:16.
    return b"\0" * 8 + struct.pack("!HH", reason, port)


def ipv4_ok(frame_ip):
    """The IPv4 header's checksum verifies."""
    ihl = (frame_ip[0] & 0xF) * 4
    return csum16(frame_ip[:ihl]) == 0


def dec_ttl(ip):
    """`ip` with TTL one less and the checksum recomputed: set_nhop's add_to_field(ipv4.ttl, -1)
    (p4:154), the checksum by `calculated_field ipv4.hdrChecksum { update ... }` (p4:91-94)."""
    hdr = bytearray(ip[:20])
    hdr[8] -= 1
    hdr[10:12] = b"\0\0"
    hdr[10:12] = struct.pack("!H", csum16(bytes(hdr)))
    return bytes(hdr) + ip[20:]


# ----- the wire -----

# ----- the controller -----

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field, data):
    return varint(field << 3 | 2) + varint(len(data)) + data


def legacy_device_config(device_data, reassign=False, extras=None):
    """A serialized p4.tmp.P4DeviceConfig (PI proto/p4/tmp/p4config.proto): reassign = 1 (bool),
    extras = 2 (Extras { map<string, string> kv = 1 }), device_data = 3 (bytes)."""
    out = b"\x08\x01" if reassign else b""
    if extras:
        kv = b"".join(ld(1, ld(1, k.encode()) + ld(2, v.encode())) for k, v in extras.items())
        out += ld(2, kv)
    return out + ld(3, device_data)


def u32(i):
    return struct.pack("!I", i)  # uint_to_string<uint32_t>: 4 bytes, network order


def u16(i):
    return struct.pack("!H", i)  # uint_to_string<uint16_t>: 2 bytes, network order


class Controller:
    def __init__(self, addr, device_id, demo_dir):
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(grpc.insecure_channel(addr))
        self.device_id = device_id
        self.demo_dir = demo_dir
        self.election_id = None  # the demo sends none
        self.q = None
        self.inbox = None
        self.p4info = None
        self.first_arbitration = None
        self.queued = {}  # next hop -> [packet-in payloads] (SimpleRouterMgr::packet_queues)

    def eid(self):
        return {} if self.election_id is None else {"election_id": p4r.Uint128(high=0, low=self.election_id)}

    # -- stream --
    def open_stream(self):
        self.close_stream()
        self.q = queue.Queue()
        q = self.q

        def requests():
            while True:
                item = q.get()
                if item is None:
                    return
                yield item

        responses = self.stub.StreamChannel(requests())
        inbox = queue.Queue()
        self.inbox = inbox

        def reader():
            try:
                for msg in responses:
                    inbox.put(msg)
            except grpc.RpcError as e:
                inbox.put(e)

        threading.Thread(target=reader, daemon=True).start()
        # send_init(): MasterArbitrationUpdate with the device id only (plus ours, if any).
        arb = p4r.MasterArbitrationUpdate(device_id=self.device_id, **self.eid())
        q.put(p4r.StreamMessageRequest(arbitration=arb))
        self.first_arbitration = self.next_message("arbitration", 3.0)

    def close_stream(self):
        if self.q is not None:
            self.q.put(None)
            self.q = None
            time.sleep(0.2)

    def next_message(self, kind, timeout):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                msg = self.inbox.get(timeout=left)
            except queue.Empty:
                return None
            if isinstance(msg, grpc.RpcError):
                raise AssertionError(f"stream ended: {msg.code().name} {msg.details()}")
            if msg.HasField(kind):
                return msg

    def packet_in(self, timeout=2.0):
        m = self.next_message("packet", timeout)
        return None if m is None else m.packet

    def drain_stream(self):
        while self.inbox is not None:
            try:
                m = self.inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(m, grpc.RpcError):
                return

    def packet_out(self, payload):
        # send_packet_out(): payload only, no metadata (the P4Info has no packet_out header).
        self.q.put(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=payload)))

    # -- pipeline --
    def read_p4info(self, name):
        p = p4info_pb2.P4Info()
        text_format.Parse(open(os.path.join(self.demo_dir, name + ".p4info.txt")).read(), p)
        return p

    def json(self, name):
        return open(os.path.join(self.demo_dir, name + ".json"), "rb").read()

    def set_config(self, action, p4info=None, device_config=None):
        req = p4r.SetForwardingPipelineConfigRequest(device_id=self.device_id, action=action, **self.eid())
        if p4info is not None:
            req.config.p4info.CopyFrom(p4info)
            req.config.p4_device_config = device_config
        self.stub.SetForwardingPipelineConfig(req)

    def assign(self, name, form):
        """assign(): VERIFY_AND_COMMIT; `form` legacy (as the demo) or raw (the JSON itself)."""
        p4info = self.read_p4info(name)
        data = self.json(name)
        if form == "legacy":
            data = legacy_device_config(data, reassign=True, extras={
                "port": "9090", "notifications": "ipc:///tmp/bmv2-0-notifications.ipc",
                "cpu_iface": "veth251"})
        self.set_config(p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, p4info, data)
        self.p4info = p4info

    # -- ids, as pi_p4info_*_from_name --
    def table(self, name):
        return next(t for t in self.p4info.tables if t.preamble.name == name)

    def action(self, name):
        return next(a for a in self.p4info.actions if a.preamble.name == name)

    def entry(self, table, field, match, action, params=()):
        t = self.table(table)
        a = self.action(action)
        fm = p4r.FieldMatch(field_id=next(f.id for f in t.match_fields if f.name == field))
        if isinstance(match, tuple):
            fm.lpm.value, fm.lpm.prefix_len = match
        else:
            fm.exact.value = match
        act = p4r.Action(action_id=a.preamble.id)
        for pname, value in params:
            act.params.add(param_id=next(p.id for p in a.params if p.name == pname), value=value)
        return p4r.TableEntry(table_id=t.preamble.id, match=[fm], action=p4r.TableAction(action=act))

    def add_one_entry(self, te):
        """add_one_entry(): one INSERT per WriteRequest, device id only (plus ours, if any)."""
        self.stub.Write(p4r.WriteRequest(device_id=self.device_id, **self.eid(), updates=[
            p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=te))]))

    def default_entries(self):
        # set_default_entries(): forward nhop 0 -> _drop (uint_to_string(uint32_t(0)): 4 bytes).
        return [self.entry("forward", "routing_metadata.nhop_ipv4", u32(0), "_drop")]

    def static_entries(self):
        # static_config_(DEVICE_STATE): add_route_ (LPM value uint_to_string(nhop)), then
        # add_iface_ -> assign_mac_addr (egress port as uint_to_string(uint16_t)).
        out = []
        for _prefix, plen, nhop, port in ROUTES:
            out.append(self.entry("ipv4_lpm", "ipv4.dstAddr", (u32(nhop), plen), "set_nhop",
                                  [("nhop_ipv4", u32(nhop)), ("port", u16(port))]))
        for port, (_ip, mac) in IFACES.items():
            out.append(self.entry("send_frame", "standard_metadata.egress_port", u16(port),
                                  "rewrite_mac", [("smac", mac)]))
        return out

    def arp_entry(self, addr, mac):
        # add_arp_entry(): forward nhop (4 bytes) -> set_dmac(6-byte MAC).
        return self.entry("forward", "routing_metadata.nhop_ipv4", u32(addr), "set_dmac", [("dmac", mac)])

    def read_table_entries(self):
        out = []
        for rep in self.stub.Read(p4r.ReadRequest(device_id=self.device_id, entities=[
                p4r.Entity(table_entry=p4r.TableEntry())])):
            out.extend(e.table_entry for e in rep.entities)
        return out

    def read_counter(self, name, index):
        # query_counter_(): CounterEntry {counter_id, index}.
        cid = next(c.preamble.id for c in self.p4info.counters if c.preamble.name == name)
        for rep in self.stub.Read(p4r.ReadRequest(device_id=self.device_id, entities=[
                p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=cid, index=p4r.Index(index=index)))])):
            for e in rep.entities:
                if e.counter_entry.counter_id == cid and e.counter_entry.index.index == index:
                    return e.counter_entry.data
        raise AssertionError(f"{name}[{index}] not in the Read reply")

    # -- the controller's packet handling (PacketHandler, handle_arp_*, handle_ip) --
    def arp_reply_for(self, arp_req_frame):
        """handle_arp_request(): for an ARP request to one of our interfaces, the reply's
        packet-out (cpu header reason ARP_MSG, port = the interface's)."""
        op, hw_src, ip_src, _hw_dst, ip_dst = struct.unpack("!6xH6sI6sI", arp_req_frame[14:42])
        for port, (ip, mac) in IFACES.items():
            if ip == ip_dst:
                return (cpu_header(ARP_MSG, port) + eth(hw_src, mac, 0x0806)
                        + arp(2, mac, ip, hw_src, ip_src))
        return None

    def arp_request_out(self, port, dst_addr):
        """send_arp_request(): broadcast from the port's interface."""
        ip, mac = IFACES[port]
        return cpu_header(ARP_MSG, port) + eth(BCAST, mac, 0x0806) + arp(1, mac, ip, BCAST, dst_addr)

    def reinject(self, punted, port, dmac):
        """handle_arp_reply(): the queued packet-in, cpu header rewritten to DATA_PKT/port,
        Ethernet destination set to the MAC learnt."""
        return cpu_header(DATA_PKT, port) + dmac + punted[18:]


# ----- checks -----

def no_frames(ports, what):
    got = ports.recv_all(0.5)
    expect(not got, f"{what}: {len(got)} frame(s) on port(s) {sorted({p for p, _ in got})}")


class State:
    pass


S = State()


@check("demo/set-config-before-any-stream-without-election-id")
def set_config_no_stream(c, ports):
    # assign() calls SetForwardingPipelineConfig before send_init(): no stream is open and the
    # request has no election id. PI's server accepts it (pi_server.cpp:451-458).
    saved, c.election_id = c.election_id, None
    try:
        c.assign("simple_router", "raw")
    finally:
        c.election_id = saved


@check("demo/arbitration-without-election-id-is-primary")
def arbitration_no_id(c, ports):
    # send_init(): device id only. PI makes the connection with election id 0 (convert_u128 of
    # an unset Uint128, pi_server.cpp:501-517); alone, it is primary: status OK (:325-345).
    c.election_id = None
    c.open_stream()
    a = c.first_arbitration
    expect(a is not None, "no arbitration reply")
    code = a.arbitration.status.code
    expect(code == 0, f"arbitration status {code} ({a.arbitration.status.message!r}), not OK")


@check("demo/write-without-election-id")
def write_no_id(c, ports):
    # add_one_entry(): no election id; PI accepts it from the (id-0) primary (pi_server.cpp:417-423).
    if c.p4info is None:
        c.p4info = c.read_p4info("simple_router")
    c.add_one_entry(c.default_entries()[0])


@check("load/raw-json")
def load_raw(c, ports):
    c.assign("simple_router", "raw")
    got = c.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(
        device_id=c.device_id, response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE))
    expect({t.preamble.name for t in got.config.p4info.tables}
           == {t.preamble.name for t in c.p4info.tables}, "GetForwardingPipelineConfig: other tables")


@check("load/legacy-p4-device-config")
def load_legacy(c, ports):
    # The controller's own form: P4DeviceConfig {reassign: true, extras {port, notifications,
    # cpu_iface}, device_data: JSON}; PI unwraps it (device_mgr.cpp:499-508).
    try:
        c.assign("simple_router", "legacy")
        S.form = "legacy"
    except grpc.RpcError:
        S.form = "raw"
        c.assign("simple_router", "raw")  # the rest runs on the raw JSON
        raise


@check("entries/demo-writes-accepted")
def demo_writes(c, ports):
    # app.cpp: set_default_entries(); static_config(). Values as the demo encodes them:
    # 4-byte addresses, 2-byte ports for 9-bit fields (non-canonical, within the width).
    errors = []
    for te in c.default_entries() + c.static_entries():
        try:
            c.add_one_entry(te)
        except grpc.RpcError as e:
            errors.append(f"{c.p4info.tables[[t.preamble.id for t in c.p4info.tables].index(te.table_id)].preamble.name}: "
                          f"{e.code().name} {e.details()}")
    expect(not errors, "; ".join(errors))
    n = len(c.read_table_entries())
    expect(n == 5, f"{n} entries read back, 5 written")


@check("packet-in/arp-request")
def arp_request_in(c, ports):
    # An ARP request on port 1: parse_ethernet -> parse_arp (p4:57-63, 110-113); ingress applies
    # send_arp_to_cpu (p4:232-234), whose default do_send_to_cpu(CPU_REASON_ARP_MSG, CPU_PORT)
    # (p4:225) adds cpu_header {zeros 0, reason 1, port = ingress port} (p4:173-178) and sends it
    # to port 64; ipv4 is invalid, so nothing else. Egress skips send_frame (p4:243). Deparse
    # order cpu_header, ethernet, arp, ipv4 (the JSON's deparser).
    ports.drain()
    c.drain_stream()
    frame = eth(BCAST, H1_MAC, 0x0806) + arp(1, H1_MAC, H1_IP, b"\0" * 6, IFACES[1][0])
    ports.send(1, frame)
    p = c.packet_in()
    expect(p is not None, "no packet-in")
    expect(p.payload == cpu_header(ARP_MSG, 1) + frame,
           f"packet-in {p.payload.hex()}, expected {(cpu_header(ARP_MSG, 1) + frame).hex()}")
    expect(not p.metadata, f"packet-in metadata {list(p.metadata)} (the P4Info declares none)")
    no_frames(ports, "the ARP request also left a port")
    S.arp_req = frame


@check("packet-out/arp-reply")
def arp_reply_out(c, ports):
    # The controller's answer (handle_arp_request) with cpu header {0, ARP_MSG, 1}: start's
    # select(current(0, 64)) == 0 -> parse_cpu_header (p4:46-50); decap_cpu_header sets
    # egress_spec = cpu_header.port and removes it (p4:209-212, 229-230); at egress cpu_header is
    # invalid, so send_frame's rewrite_mac(00:aa:bb:00:00:00) for port 1 applies (p4:193-195, 243-244).
    out = c.arp_reply_for(S.arp_req)
    ports.drain()
    c.packet_out(out)
    got = ports.recv_all()
    expect([p for p, _ in got] == [1], f"left on ports {[p for p, _ in got]}, expected [1]")
    expect(got[0][1] == out[12:], f"frame {got[0][1].hex()}, expected {out[12:].hex()}")


@check("packet-in/unresolved-next-hop")
def unresolved(c, ports):
    # IPv4 10.0.0.10 -> 10.0.1.10 on port 1, TTL 64: ipv4_lpm 10.0.1.10/32 -> set_nhop(10.0.1.10,
    # 2): TTL 63 (p4:151-155); forward has no entry for 10.0.1.10, so its default
    # do_send_to_cpu(CPU_REASON_NO_ARP_ENTRY, CPU_PORT) (p4:189) punts it with cpu_header
    # {0, 0, ingress port 1}; the checksum is recomputed (p4:91-94).
    ports.drain()
    c.drain_stream()
    ip = ipv4(H1_IP, H2_IP, 64)
    frame = eth(IFACES[1][1], H1_MAC, 0x0800) + ip
    ports.send(1, frame)
    p = c.packet_in()
    expect(p is not None, "no packet-in")
    want = cpu_header(NO_ARP_ENTRY, 1) + frame[:14] + dec_ttl(ip)
    expect(p.payload[:12] == want[:12], f"cpu header {p.payload[:12].hex()}, expected {want[:12].hex()}")
    expect(p.payload[12 + 14 + 8] == 63, f"TTL {p.payload[12 + 14 + 8]}, expected 63")
    expect(ipv4_ok(p.payload[26:46]), "IPv4 checksum does not verify")
    expect(p.payload == want, f"packet-in {p.payload.hex()}, expected {want.hex()}")
    no_frames(ports, "the punted packet also left a port")
    S.punted = p.payload


@check("packet-out/arp-request-for-next-hop")
def arp_for_nhop(c, ports):
    # handle_ip(): queue the packet, send_arp_request(2, 10.0.1.10): the packet-out leaves port 2
    # without the cpu header (p4:209-212), smac rewritten to port 2's (same value, p4:193-195).
    dst = struct.unpack("!I", S.punted[12 + 14 + 16:12 + 14 + 20])[0]
    expect(dst == H2_IP, f"punted packet's destination {dst:#x}")
    c.queued.setdefault(dst, []).append(S.punted)
    out = c.arp_request_out(2, dst)
    ports.drain()
    c.packet_out(out)
    got = ports.recv_all()
    expect([p for p, _ in got] == [2], f"left on ports {[p for p, _ in got]}, expected [2]")
    expect(got[0][1] == out[12:], f"frame {got[0][1].hex()}, expected {out[12:].hex()}")


@check("packet-in/arp-reply-from-next-hop")
def arp_reply_in(c, ports):
    # Host 2 answers on port 2: punted by send_arp_to_cpu with reason ARP_MSG, port 2 (p4:225, 176).
    c.drain_stream()
    frame = eth(IFACES[2][1], H2_MAC, 0x0806) + arp(2, H2_MAC, H2_IP, IFACES[2][1], IFACES[2][0])
    ports.send(2, frame)
    p = c.packet_in()
    expect(p is not None, "no packet-in")
    expect(p.payload == cpu_header(ARP_MSG, 2) + frame, f"packet-in {p.payload.hex()}")
    S.arp_rep = p.payload


@check("packet-out/reinject-queued")
def reinject(c, ports):
    # handle_arp_reply(): forward 10.0.1.10 -> set_dmac(host 2), then the queued packet with cpu
    # header {0, DATA_PKT, 2} and dmac = host 2: decapped to port 2 (p4:209-212), smac
    # 00:aa:bb:00:00:01 (p4:193-195); its TTL (63) and checksum are those of the first pass.
    _op, hw_src, ip_src = struct.unpack("!6xH6sI", S.arp_rep[12 + 14:12 + 14 + 18])
    c.add_one_entry(c.arp_entry(ip_src, hw_src))
    ports.drain()
    for pkt in c.queued.pop(ip_src, []):
        c.packet_out(c.reinject(pkt, 2, hw_src))
    got = ports.recv_all()
    expect([p for p, _ in got] == [2], f"left on ports {[p for p, _ in got]}, expected [2]")
    f = got[0][1]
    want = H2_MAC + IFACES[2][1] + S.punted[12 + 12:]
    expect(f == want, f"frame {f.hex()}, expected {want.hex()}")
    expect(f[22] == 63 and ipv4_ok(f[14:34]), f"TTL {f[22]} / checksum")


def routed_once(c, ports, ttl=64, ident=0x2222):
    ip = ipv4(H1_IP, H2_IP, ttl, ident=ident)
    ports.drain()
    c.drain_stream()
    ports.send(1, eth(IFACES[1][1], H1_MAC, 0x0800) + ip)
    got = ports.recv_all()
    expect([p for p, _ in got] == [2], f"left on ports {[p for p, _ in got]}, expected [2]")
    f = got[0][1]
    want = H2_MAC + IFACES[2][1] + b"\x08\x00" + dec_ttl(ip)
    expect(f[:6] == H2_MAC, f"dmac {f[:6].hex()}")
    expect(f[6:12] == IFACES[2][1], f"smac {f[6:12].hex()}")
    expect(f[22] == ttl - 1, f"TTL {f[22]}, expected {ttl - 1}")
    expect(ipv4_ok(f[14:34]), "IPv4 checksum does not verify")
    expect(f == want, f"frame {f.hex()}, expected {want.hex()}")
    expect(c.packet_in(0.3) is None, "also punted to the controller")


@check("forward/routed")
def routed(c, ports):
    # With forward 10.0.1.10 -> set_dmac: ipv4_lpm set_nhop (p4:151-155, TTL-1, egress 2),
    # forward set_dmac (p4:169-171), egress send_frame rewrite_mac (p4:193-195), checksum (p4:91-94).
    routed_once(c, ports)


@check("forward/unrouted-dropped")
def unrouted(c, ports):
    # 10.0.2.10: ipv4_lpm misses -> default _drop (p4:157-166); forward then looks up nhop 0
    # (metadata never set) and hits the controller's nhop 0 -> _drop entry (set_default_entries):
    # without it, forward's default would punt it (p4:189). Nothing leaves, nothing is punted.
    ports.drain()
    c.drain_stream()
    ports.send(1, eth(IFACES[1][1], H1_MAC, 0x0800) + ipv4(H1_IP, 0x0A00020A, 64))
    no_frames(ports, "an unrouted packet left")
    expect(c.packet_in(0.3) is None, "an unrouted packet was punted")


@check("forward/ttl0-dropped")
def ttl0(c, ports):
    # TTL 0: `valid(ipv4) and ipv4.ttl > 0` is false (p4:235): no table applies, egress_spec
    # stays 0, and egress send_frame has no entry for port 0 -> default _drop (p4:205).
    ports.drain()
    c.drain_stream()
    ports.send(1, eth(IFACES[1][1], H1_MAC, 0x0800) + ipv4(H1_IP, H2_IP, 0))
    no_frames(ports, "a TTL-0 packet left")
    expect(c.packet_in(0.3) is None, "a TTL-0 packet was punted")


@check("swap/verify-and-save-write-commit")
def swap(c, ports):
    # update_config_(): VERIFY_AND_SAVE with P4DeviceConfig {device_data} only (reassign false,
    # no extras), set_default_entries(), static_config_(DEVICE_STATE), COMMIT (no config).
    p4info = c.read_p4info("simple_router_wcounter")
    data = c.json("simple_router_wcounter")
    if S.form == "legacy":
        data = legacy_device_config(data)
    c.set_config(p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_SAVE, p4info, data)
    c.p4info = p4info
    errors = []
    for te in c.default_entries() + c.static_entries():
        try:
            c.add_one_entry(te)
        except grpc.RpcError as e:
            errors.append(f"{e.code().name} {e.details()}")
    c.set_config(p4r.SetForwardingPipelineConfigRequest.COMMIT)
    expect(not errors, "writes between VERIFY_AND_SAVE and COMMIT: " + "; ".join(errors))
    got = c.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(
        device_id=c.device_id, response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE))
    expect([x.preamble.name for x in got.config.p4info.counters] == ["out_count"],
           "the running P4Info has no out_count")


@check("swap/entries-written-before-commit-stand")
def swap_entries(c, ports):
    # BMv2 applies runtime writes made after load_new_config to the new program (bm_sim
    # context.cpp: mt_add_entry on p4objects_rt), which COMMIT (swap_configs) puts in service:
    # the 5 entries are the new program's. The old forward 10.0.1.10 entry is gone.
    n = len(c.read_table_entries())
    expect(n == 5, f"{n} entries after COMMIT, 5 written between VERIFY_AND_SAVE and COMMIT")


@check("swap/traffic-and-out_count")
def swap_traffic(c, ports):
    # The controller's round again (its forward entry for 10.0.1.10 is not rewritten): punt,
    # ARP request out of port 2, reply, forward entry, re-injection, then 3 routed packets.
    # out_count is counted in rewrite_mac (wcounter p4:195, `count(out_count,
    # standard_metadata.egress_port)`), i.e. by every frame send_frame sends out of port 2:
    # the ARP request, the re-injected packet and the 3 routed ones = 5; port 1 none.
    ports.drain()
    c.drain_stream()
    ip = ipv4(H1_IP, H2_IP, 64, ident=0x3333)
    ports.send(1, eth(IFACES[1][1], H1_MAC, 0x0800) + ip)
    p = c.packet_in()
    expect(p is not None and p.payload[:12] == cpu_header(NO_ARP_ENTRY, 1), "no reason-0 packet-in after the swap")
    c.packet_out(c.arp_request_out(2, H2_IP))
    got = ports.recv_all()
    expect([q for q, _ in got] == [2], f"ARP request left on {[q for q, _ in got]}")
    frame = eth(IFACES[2][1], H2_MAC, 0x0806) + arp(2, H2_MAC, H2_IP, IFACES[2][1], IFACES[2][0])
    ports.send(2, frame)
    r = c.packet_in()
    expect(r is not None and r.payload[:12] == cpu_header(ARP_MSG, 2), "no ARP reply packet-in")
    c.add_one_entry(c.arp_entry(H2_IP, H2_MAC))
    c.packet_out(c.reinject(p.payload, 2, H2_MAC))
    got = ports.recv_all()
    expect([q for q, _ in got] == [2], f"re-injected packet left on {[q for q, _ in got]}")
    for i in range(3):
        routed_once(c, ports, ident=0x4000 + i)
    d2 = c.read_counter("out_count", 2)
    d1 = c.read_counter("out_count", 1)
    expect(d2.packet_count == 5, f"out_count[2] = {d2.packet_count} packets, expected 5")
    expect(d1.packet_count == 0, f"out_count[1] = {d1.packet_count} packets, expected 0")


# ----- simple_switch_CLI on PI's tests/testdata/simple_router.json -----

def pi_param(value, bitwidth):
    """A PI CLI action parameter (PI CLI/utils.c param_to_bytes: a dotted quad for 32 bits, a MAC
    for 48, otherwise hexadecimal digits, with or without 0x) as simple_switch_CLI reads it
    (dotted quads and MACs as such, numbers by Python's int(x, 0))."""
    if bitwidth == 32 and re.fullmatch(r"\d+\.\d+\.\d+\.\d+", value):
        return value
    if bitwidth == 48 and re.fullmatch(r"[0-9a-fA-F]{1,2}(:[0-9a-fA-F]{1,2}){5}", value):
        return value
    return hex(int(value, 16))


def pi_to_bmv2_cli(line, doc):
    """A command of PI's CLI (pi_CLI_rpc) in simple_switch_CLI's syntax: the same meaning.
    PI: table_add T KEY... => ACTION PARAM...; table_set_default T ACTION PARAM...
    BMv2: table_add T ACTION KEY... => PARAM...; table_set_default T ACTION PARAM..."""
    w = line.split()
    if not w:
        return line
    widths = {a["name"]: [p["bitwidth"] for p in a["runtime_data"]] for a in doc["actions"]}
    if w[0] == "table_add":
        arrow = w.index("=>")
        table, keys, action, params = w[1], w[2:arrow], w[arrow + 1], w[arrow + 2:]
        params = [pi_param(v, b) for v, b in zip(params, widths[action])]
        return " ".join(["table_add", table, action] + keys + ["=>"] + params)
    if w[0] == "table_set_default":
        table, action, params = w[1], w[2], w[3:]
        params = [pi_param(v, b) for v, b in zip(params, widths[action])]
        return " ".join(["table_set_default", table, action] + params)
    return line  # table_dump, table_delete, table_reset_default: the same in both


def cli_checks(args):
    """PI's tests/CLI/testdata/table_dump.in (written for PI's own CLI) through simple_switch_CLI,
    each command translated to its syntax; the expected state after each table_dump is
    table_dump.out's meaning: the entries (LPM key and prefix, action and its data) and the
    default entry (EMPTY: the JSON gives ipv4_lpm no default_entry). PI's CLI reads action data
    in hexadecimal: `13` is 0x13 (table_dump.out prints 0013)."""
    import json
    doc = json.load(open(args.cli_json))
    commands = "\n".join(pi_to_bmv2_cli(l, doc) for l in open(args.cli_in).read().splitlines()) + "\n"
    r = subprocess.run([args.cli, "--thrift-port", str(args.thrift_port)], input=commands,
                       capture_output=True, text=True, timeout=60)
    out = r.stdout
    errors = [l for l in out.splitlines() if "Error" in l or "Invalid" in l]
    dumps = out.split("RuntimeCmd: ")
    results = [d for d in dumps if "TABLE ENTRIES" in d]

    def parse(d):
        entries = []
        for m in re.finditer(r"\*\s*ipv4\.dstAddr\s*:\s*LPM\s+([0-9a-f]+)/(\d+)\s*\n"
                             r"Action entry: (\S+) - ([0-9a-f, ]*)", d):
            entries.append((int(m[1], 16), int(m[2]), m[3], [int(x, 16) for x in m[4].split(",") if x.strip()]))
        dm = re.search(r"Dumping default entry\s*\n(Action entry: (\S+) - ?([0-9a-f, ]*)|EMPTY)", d)
        default = "?"
        if dm:
            default = None if dm[1] == "EMPTY" else (dm[2], [int(x, 16) for x in dm[3].split(",") if x.strip()])
        return entries, default

    ip = lambda s: struct.unpack("!I", socket.inet_aton(s))[0]
    e1 = (ip("10.0.0.1"), 12, "set_nhop", [ip("10.0.0.1"), 0x13])
    e2 = (ip("192.0.0.0"), 8, "set_nhop", [ip("192.168.0.1"), 0x4])
    dflt = ("set_nhop", [ip("8.8.8.8"), 0x9])
    # The program's own default: the JSON's default_entry for ipv4_lpm (this JSON, p4c-bm's
    # format 2.0, gives none: BMv2 then has no default entry, simple_switch_CLI prints EMPTY, as
    # table_dump.out does); table_reset_default returns to it.
    lpm = next(t for p in doc["pipelines"] for t in p["tables"] if t["name"] == "ipv4_lpm")
    prog = None
    if lpm.get("default_entry"):
        d = lpm["default_entry"]
        prog = (next(a["name"] for a in doc["actions"] if a["id"] == d["action_id"]),
                [int(x, 16) for x in d.get("action_data", [])])
    expected = [([e1], prog), ([e1, e2], dflt), ([e2], dflt), ([], prog)]
    passed = 0
    names = ["after-first-add", "after-set-default-and-second-add", "after-delete-0",
             "after-reset-default-and-delete-1"]
    for i, name in enumerate(names):
        full = f"cli/table_dump.in/{name}"
        try:
            expect(i < len(results), f"no table_dump answer #{i + 1} (CLI rc {r.returncode}; stderr {r.stderr[-300:]!r})")
            entries, default = parse(results[i])
            want_entries, want_default = expected[i]

            def norm(es):  # BMv2 may keep the key as given or masked by the prefix
                return sorted((k & (0xFFFFFFFF << (32 - p)) & 0xFFFFFFFF, p, a, d) for k, p, a, d in es)

            expect(norm(entries) == norm(want_entries), f"entries {entries}, expected {want_entries}")
            expect(default == want_default, f"default {default or 'EMPTY'}, expected {want_default or 'EMPTY'}")
            print(f"PASS {full}")
            passed += 1
        except Exception as e:
            print(f"FAIL {full}: {e}")
    if errors:
        print("  simple_switch_CLI said: " + " | ".join(errors))
    return passed, len(names)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grpc")
    g.add_argument("--grpc-addr", default="127.0.0.1:9559")
    g.add_argument("--device-id", type=int, default=0)
    g.add_argument("--demo-dir", required=True, help="PI's proto/demo_grpc")
    g.add_argument("--election-id", default="auto",
                   help="auto (none, as the demo; 1 if the switch refuses that), none, or a number")
    g.add_argument("--ports", default="1=p1,2=p2")
    g.add_argument("--only")
    cl = sub.add_parser("cli")
    cl.add_argument("--cli", required=True)
    cl.add_argument("--cli-in", required=True)
    cl.add_argument("--cli-json", required=True)
    cl.add_argument("--thrift-port", type=int, default=9090)
    args = ap.parse_args()
    if args.cmd == "cli":
        passed, total = cli_checks(args)
        print(f"{passed} of {total} pass")
        return 0 if passed == total else 1

    ports = Ports({int(k): v for k, v in (x.split("=") for x in args.ports.split(","))})
    c = Controller(args.grpc_addr, args.device_id, args.demo_dir)
    S.form = "legacy"
    fixed = None if args.election_id in ("auto", "none") else int(args.election_id)
    passed = 0
    checks = [(n, f) for n, f in CHECKS
              if args.only is None or args.only in n or n.startswith(("load/", "entries/"))]
    for name, f in checks:
        if not name.startswith("demo/"):
            if c.q is None:  # the demo checks were left out
                c.election_id = fixed
                c.open_stream()
            if c.election_id != fixed and fixed is not None:
                c.election_id = fixed
                c.open_stream()
            a = c.first_arbitration
            if c.election_id is None and args.election_id == "auto" and (
                    a is None or a.arbitration.status.code != 0):
                print("NOTE the switch does not make a controller without election id primary: "
                      "the remaining checks use election id 1")
                c.election_id = 1
                c.open_stream()
        try:
            f(c, ports)
            print(f"PASS {name}")
            passed += 1
        except Exception as e:  # a failed check is reported, and the next one runs
            detail = f"{e.code().name}: {e.details()}" if isinstance(e, grpc.RpcError) else str(e)
            print(f"FAIL {name}: {detail}")
            traceback.print_exc(limit=1, file=sys.stdout)
    print(f"{passed} of {len(checks)} pass")
    c.close_stream()
    return 0 if passed == len(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
