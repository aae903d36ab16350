#!/usr/bin/env python3
"""p4runtime-shell 0.0.6 loads a BMv2 JSON program into `pisa-switch --no-p4`.

Run with the `shell` venv (scripts/py-clients.sh), as root, in the namespace where the switch's
ports sw1, sw2 have their peers p1, p2:

    python bmv2_json_shell.py --grpc-addr 127.0.0.1:9562 --device-id 1 \
        --p4info router.p4info.txt --json pipeline/bmv2/tests/programs/router.json --ports 1=p1,2=p2

The P4Info given is renumbered (every id moved) and leaves out the keyless tables p4c hides, as
p4c's own would differ from the ids the switch derives from names. Steps, each asserted:
before the load a frame is dropped; sh.setup loads the program (VERIFY_AND_COMMIT with the P4Info
and the JSON); two routes written with sh.TableEntry; a UDP frame from port 1 leaves port 2
routed by the program (MACs rewritten, TTL 63, fresh IPv4 checksum); GetForwardingPipelineConfig
returns the P4Info given; a packet-out leaves the port its packet_out metadata names; a punted
frame comes in with its ingress port in the packet_in metadata; a frame to an unrouted address is
dropped.
"""

import argparse
import sys
import tempfile

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

import p4runtime_sh.shell as sh

import netio
from netio import ROUTER, host_ip, host_mac

OFFSET = 0x100


def renumbered(path):
    p = p4info_pb2.P4Info()
    text_format.Parse(open(path).read(), p)
    keep = [t for t in p.tables if not t.preamble.name.startswith("tbl_")]
    del p.tables[:]
    p.tables.extend(keep)
    for t in p.tables:
        t.preamble.id += OFFSET
        for ref in t.action_refs:
            ref.id += OFFSET
        t.direct_resource_ids[:] = [d + OFFSET for d in t.direct_resource_ids]
    for a in p.actions:
        a.preamble.id += OFFSET
    for c in p.direct_counters:
        c.preamble.id += OFFSET
        c.direct_table_id += OFFSET
    for x in list(p.counters) + list(p.registers):
        x.preamble.id += OFFSET
    # The controller headers, as p4c declares the program's @controller_header headers.
    for i, (name, field) in enumerate((("packet_in", "ingress_port"), ("packet_out", "egress_port"))):
        c = p.controller_packet_metadata.add()
        c.preamble.id = 0x04000000 + OFFSET + i
        c.preamble.name = name
        c.preamble.alias = name
        for mid, (mname, width) in enumerate(((field, 9), ("_pad", 7)), start=1):
            m = c.metadata.add()
            m.id = mid
            m.name = mname
            m.bitwidth = width
    out = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    out.write(text_format.MessageToString(p))
    out.close()
    return out.name, p


def frame(dst_ip, tag):
    return netio.udp4_frame(ROUTER, host_mac(1), host_ip(1), dst_ip, 1234, 5678, tag)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc-addr", required=True)
    ap.add_argument("--device-id", type=int, required=True)
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--ports", required=True)
    args = ap.parse_args()
    ports = netio.Ports(netio.parse_ports(args.ports))
    ports.drain()

    tag = netio.new_tag("before")
    ports.send(1, frame(host_ip(2), tag))
    got = ports.recv(tag, timeout=0.5)
    assert not any(got.values()), f"a frame crossed a switch with no program: {netio.counts(got)}"
    print("PASS no program: the frame is dropped")

    p4info_path, p4info = renumbered(args.p4info)
    sh.setup(device_id=args.device_id, grpc_addr=args.grpc_addr, election_id=(0, 1),
             config=sh.FwdPipeConfig(p4info_path, args.json), verbose=False)
    print("PASS SetForwardingPipelineConfig with the renumbered P4Info and the JSON")

    for port in (1, 2):
        te = sh.TableEntry("ingress.ipv4_lpm")(action="ingress.set_nhop")
        te.match["hdr.ipv4.dstAddr"] = "10.0.%d.0/24" % port
        te.action["dmac"] = host_mac(port)
        te.action["smac"] = ROUTER
        te.action["port"] = str(port)
        te.insert()
    print("PASS two routes written with the P4Info's ids")

    tag = netio.new_tag("routed")
    ports.send(1, frame(host_ip(2), tag))
    got = ports.recv(tag, timeout=2.0, want=1)
    assert netio.counts(got) == {2: 1}, f"routed frame: {netio.counts(got)}"
    out = got[2][0]
    assert out[0:6] == netio.mac_bytes(host_mac(2)), out[0:6].hex()
    assert out[22] == 63, f"TTL {out[22]}"
    assert netio.ipv4_checksum(out[14:34]) == 0, "IPv4 checksum"
    print("PASS a UDP frame is routed by the loaded program")

    got_cfg = sh.client.get_p4info()
    assert got_cfg == p4info, "GetForwardingPipelineConfig returns another P4Info"
    print("PASS GetForwardingPipelineConfig returns the P4Info given")

    # Packet-out: the program reads its packet_out header and sends the frame out of port 2.
    tag = netio.new_tag("pktout")
    raw = netio.mac_bytes(host_mac(2)) + netio.mac_bytes(ROUTER) + b"\x88\xb5" + tag
    out = sh.PacketOut(payload=raw)
    out.metadata["egress_port"] = "2"
    out.metadata["_pad"] = "0"
    out.send()
    got = ports.recv(tag, timeout=2.0, want=1)
    assert netio.counts(got) == {2: 1}, f"packet-out: {netio.counts(got)}"
    assert got[2][0][12:] == raw[12:], "the packet_out header is not stripped"
    print("PASS a packet-out leaves the port its packet_out header names")

    # Packet-in: frames from port 1 that are not IPv4 are punted behind a packet_in header.
    te = sh.TableEntry("ingress.l2")(action="ingress.punt")
    te.match["standard_metadata.ingress_port"] = "1"
    te.insert()
    sniffer = sh.PacketIn()
    tag = netio.new_tag("pktin")
    ports.send(1, netio.mac_bytes(ROUTER) + netio.mac_bytes(host_mac(1)) + b"\x88\xb5" + tag)
    msgs = [m for m in sniffer.sniff(timeout=2) if tag in m.packet.payload]
    assert len(msgs) == 1, f"{len(msgs)} packet-ins"
    md = {m.metadata_id: int.from_bytes(m.value, "big") for m in msgs[0].packet.metadata}
    assert md.get(1) == 1, f"packet-in metadata {md}"
    print("PASS a punted frame comes in with its ingress port in the packet_in metadata")

    tag = netio.new_tag("unrouted")
    ports.send(1, frame("192.168.9.9", tag))
    got = ports.recv(tag, timeout=0.5)
    assert not any(got.values()), f"an unrouted frame left: {netio.counts(got)}"
    print("PASS an unrouted frame is dropped")
    sh.teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
