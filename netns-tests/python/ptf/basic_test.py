"""A PTF suite for pisa-switch running `basic`, written the way PTF suites for BMv2 are.

Run with the `ptf` venv (scripts/py-clients.sh), as root, in the namespace of the switch, with
PTF port N bound to the peer of the switch's port N:

    ptf --test-dir netns-tests/python/ptf -i 1@p1 -i 2@p2 -i 3@p3 -i 4@p4 \
        --test-params "grpcaddr='127.0.0.1:9559';device_id=1;p4info='.../basic.txt';bin='/tmp/x.bin'"

setUp connects with p4runtime-shell (election id (0,1), verbose=False: padded bytestrings) and
pushes the pipeline with VERIFY_AND_COMMIT, which must leave the tables empty; tearDown ends the
session. Covers p4runtime.md items 1, 4, 5, 6, 10, 14, 15, 21, 24 and the PTF section.
"""

import os
import sys

import ptf
import ptf.testutils as tu
from ptf.base_tests import BaseTest

import p4runtime_sh.shell as sh

# The helpers shared by the client tests live one directory up.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from netio import ROUTER, host_ip, host_ip6, host_mac  # noqa: E402


class BasicTest(BaseTest):
    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        sh.setup(
            device_id=int(tu.test_param_get("device_id", 1)),
            grpc_addr=tu.test_param_get("grpcaddr", "127.0.0.1:9559"),
            election_id=(0, 1),
            config=sh.FwdPipeConfig(tu.test_param_get("p4info"), tu.test_param_get("bin")),
            verbose=False,
        )
        # VERIFY_AND_COMMIT leaves every table empty (p4runtime.md item 10).
        left = [e for e in sh.TableEntry("l2_exact").read()]
        self.assertEqual(left, [], "state survived VERIFY_AND_COMMIT")

    def tearDown(self):
        sh.teardown()
        BaseTest.tearDown(self)

    # Helpers ------------------------------------------------------------------------------

    def member(self, mid, port):
        m = sh.ActionProfileMember("ecmp_selector")(member_id=mid, action="set_nhop")
        m.action["dmac"] = host_mac(port)
        m.action["smac"] = ROUTER
        m.action["port"] = str(port)
        m.insert()

    def route4(self, prefix, member_id=None, group_id=None):
        te = sh.TableEntry("ipv4_lpm")
        te.match["hdr.ipv4.dst_addr"] = prefix
        if group_id is not None:
            te.group_id = group_id
        else:
            te.member_id = member_id
        te.insert()

    def l2(self, dst, port):
        te = sh.TableEntry("l2_exact")(action="l2_forward")
        te.match["hdr.ethernet.dst_addr"] = dst
        te.action["port"] = str(port)
        te.insert()

    def acl(self, action, priority=10, **match):
        te = sh.TableEntry("acl")(action=action, priority=priority)
        for k, v in match.items():
            te.match[k] = v
        te.insert()


class Ipv4Route(BasicTest):
    """An IPv4 packet is routed: MACs rewritten, TTL decremented, checksum right."""

    def runTest(self):
        self.member(1, 2)
        self.route4("10.0.2.0/24", member_id=1)
        pkt = tu.simple_udp_packet(eth_dst=ROUTER, eth_src=host_mac(1), ip_src=host_ip(1),
                                   ip_dst=host_ip(2), ip_ttl=64)
        exp = tu.simple_udp_packet(eth_dst=host_mac(2), eth_src=ROUTER, ip_src=host_ip(1),
                                   ip_dst=host_ip(2), ip_ttl=63)
        tu.send_packet(self, 1, pkt)
        tu.verify_packet(self, exp, 2)
        tu.verify_no_other_packets(self)
        # A longer prefix wins.
        self.member(2, 3)
        self.route4("10.0.2.1/32", member_id=2)
        exp3 = tu.simple_udp_packet(eth_dst=host_mac(3), eth_src=ROUTER, ip_src=host_ip(1),
                                    ip_dst=host_ip(2), ip_ttl=63)
        tu.send_packet(self, 1, pkt)
        tu.verify_packet(self, exp3, 3)
        tu.verify_no_other_packets(self)


class Ipv6Route(BasicTest):
    """basic routes IPv6 too (ipv6_lpm, same action profile)."""

    def runTest(self):
        self.member(1, 4)
        te = sh.TableEntry("ipv6_lpm")
        te.match["hdr.ipv6.dst_addr"] = "2001:db8:4::/48"
        te.member_id = 1
        te.insert()
        pkt = tu.simple_udpv6_packet(eth_dst=ROUTER, eth_src=host_mac(1), ipv6_src=host_ip6(1),
                                     ipv6_dst=host_ip6(4), ipv6_hlim=64)
        exp = tu.simple_udpv6_packet(eth_dst=host_mac(4), eth_src=ROUTER, ipv6_src=host_ip6(1),
                                     ipv6_dst=host_ip6(4), ipv6_hlim=63)
        tu.send_packet(self, 1, pkt)
        tu.verify_packet(self, exp, 4)
        tu.verify_no_other_packets(self)


class TtlExpiry(BasicTest):
    """TTL 1 and hop limit 1 are dropped, TTL 2 is forwarded with TTL 1."""

    def runTest(self):
        self.member(1, 2)
        self.route4("10.0.2.0/24", member_id=1)
        for ttl in (0, 1):
            tu.send_packet(self, 1, tu.simple_udp_packet(eth_dst=ROUTER, eth_src=host_mac(1),
                                                         ip_src=host_ip(1), ip_dst=host_ip(2),
                                                         ip_ttl=ttl))
        te = sh.TableEntry("ipv6_lpm")
        te.match["hdr.ipv6.dst_addr"] = "2001:db8:2::/48"
        te.member_id = 1
        te.insert()
        tu.send_packet(self, 1, tu.simple_udpv6_packet(eth_dst=ROUTER, eth_src=host_mac(1),
                                                       ipv6_src=host_ip6(1),
                                                       ipv6_dst=host_ip6(2), ipv6_hlim=1))
        tu.verify_no_other_packets(self)
        tu.send_packet(self, 1, tu.simple_udp_packet(eth_dst=ROUTER, eth_src=host_mac(1),
                                                     ip_src=host_ip(1), ip_dst=host_ip(2),
                                                     ip_ttl=2))
        tu.verify_packet(self, tu.simple_udp_packet(eth_dst=host_mac(2), eth_src=ROUTER,
                                                    ip_src=host_ip(1), ip_dst=host_ip(2),
                                                    ip_ttl=1), 2)
        tu.verify_no_other_packets(self)


class EcmpSpread(BasicTest):
    """A route to an action-selector group spreads flows over all its members, each flow
    sticking to one."""

    def runTest(self):
        ports = [2, 3, 4]
        for p in ports:
            self.member(p, p)
        g = sh.ActionProfileGroup("ecmp_selector")(group_id=1)
        for p in ports:
            g.add(p)
        g.insert()
        self.route4("10.9.0.0/16", group_id=1)
        hits = {p: 0 for p in ports}
        for i in range(60):
            kw = dict(ip_src=host_ip(1), ip_dst="10.9.0.%d" % (i + 1), udp_sport=2000 + i)
            tu.send_packet(self, 1, tu.simple_udp_packet(eth_dst=ROUTER, eth_src=host_mac(1),
                                                         ip_ttl=64, **kw))
            exps = [tu.simple_udp_packet(eth_dst=host_mac(p), eth_src=ROUTER, ip_ttl=63, **kw)
                    for p in ports]
            idx = tu.verify_any_packet_any_port(self, exps, ports)
            hits[ports[idx]] += 1
        tu.verify_no_other_packets(self)
        for p in ports:
            self.assertGreater(hits[p], 5, "uneven ECMP spread: %s" % hits)
        # One flow, one port.
        kw = dict(ip_src=host_ip(1), ip_dst="10.9.9.9", udp_sport=999)
        seen = set()
        for _ in range(5):
            tu.send_packet(self, 1, tu.simple_udp_packet(eth_dst=ROUTER, eth_src=host_mac(1),
                                                         ip_ttl=64, **kw))
            exps = [tu.simple_udp_packet(eth_dst=host_mac(p), eth_src=ROUTER, ip_ttl=63, **kw)
                    for p in ports]
            seen.add(tu.verify_any_packet_any_port(self, exps, ports))
        self.assertEqual(len(seen), 1, "one flow took several paths")


class AclDrop(BasicTest):
    """The ternary ACL drops what it matches and only that."""

    def runTest(self):
        self.l2(host_mac(2), 2)
        self.acl("drop", **{"hdr.ipv4.src_addr": "10.0.1.0&&&255.255.255.0",
                            "meta.l4_dst_port": "53"})
        dropped = tu.simple_udp_packet(eth_dst=host_mac(2), eth_src=host_mac(1),
                                       ip_src=host_ip(1), ip_dst=host_ip(2), udp_dport=53)
        passed = tu.simple_udp_packet(eth_dst=host_mac(2), eth_src=host_mac(1),
                                      ip_src=host_ip(1), ip_dst=host_ip(2), udp_dport=54)
        tu.send_packet(self, 1, dropped)
        tu.verify_no_other_packets(self)
        tu.send_packet(self, 1, passed)
        tu.verify_packet(self, passed, 2)
        tu.verify_no_other_packets(self)
        # A higher-priority permit wins over the drop.
        self.acl("NoAction", priority=20, **{"meta.l4_dst_port": "53"})
        tu.send_packet(self, 1, dropped)
        tu.verify_packet(self, dropped, 2)
        tu.verify_no_other_packets(self)


class AclPunt(BasicTest):
    """A frame punted by the ACL reaches the controller as a packet-in with its ingress port."""

    def runTest(self):
        self.l2(host_mac(2), 2)
        self.acl("punt_to_cpu", **{"hdr.ethernet.ether_type": "0x0800",
                                   "meta.ip_proto": "17", "meta.l4_dst_port": "9999"})
        pin = sh.PacketIn()
        pkt = tu.simple_udp_packet(eth_dst=host_mac(2), eth_src=host_mac(1), ip_src=host_ip(1),
                                   ip_dst=host_ip(2), udp_dport=9999)
        tu.send_packet(self, 3, pkt)
        tu.verify_no_other_packets(self)
        msgs = [m for m in pin.sniff(timeout=2) if m.packet.payload == bytes(pkt)]
        self.assertEqual(len(msgs), 1, "packet-ins for the punted frame: %d" % len(msgs))
        md = {m.metadata_id: m.value for m in msgs[0].packet.metadata}
        self.assertEqual(int.from_bytes(md.get(1, b""), "big"), 3, "ingress_port %r" % md)


class PacketOut(BasicTest):
    """A packet-out leaves on the port its header names, unchanged."""

    def runTest(self):
        for port in (1, 2, 3, 4):
            pkt = tu.simple_udp_packet(eth_dst=host_mac(port), eth_src=ROUTER,
                                       ip_src="10.0.0.254", ip_dst=host_ip(port))
            po = sh.PacketOut(bytes(pkt))
            po.metadata["egress_port"] = str(port)
            po.metadata["_pad"] = "0"
            po.send()
            tu.verify_packet(self, pkt, port)
            tu.verify_no_other_packets(self)
