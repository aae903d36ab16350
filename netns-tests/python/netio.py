"""Raw frame I/O on the test's veth ends (p1..pN), standard library only.

The switch owns sw1..swN; the tests send and receive on their peers through AF_PACKET sockets.
Every frame a test sends carries a unique tag in its payload, and receiving keeps only frames
with that tag, so stray kernel traffic cannot confuse a check.
"""

import itertools
import os
import select
import socket
import struct
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4

_counter = itertools.count(1)


def new_tag(name=""):
    """A payload marker unique to this process and call."""
    return b"PISA%05d%06d%s" % (os.getpid() % 100000, next(_counter), name.encode()[:16])


def parse_ports(spec):
    """'1=p1,2=p2' -> {1: 'p1', 2: 'p2'}."""
    out = {}
    for item in spec.split(","):
        num, _, ifname = item.partition("=")
        out[int(num)] = ifname
    return out


class Ports:
    """One raw socket per port, bound to the interface the test uses as that port."""

    def __init__(self, mapping):
        self.ifnames = dict(mapping)
        self.socks = {}
        for port, ifname in self.ifnames.items():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            s.bind((ifname, 0))
            s.setblocking(False)
            self.socks[port] = s
        self.by_fd = {s.fileno(): p for p, s in self.socks.items()}

    def close(self):
        for s in self.socks.values():
            s.close()

    def drain(self):
        for s in self.socks.values():
            while True:
                try:
                    s.recv(65535)
                except BlockingIOError:
                    break

    def send(self, port, frame):
        self.socks[port].send(bytes(frame))

    def recv(self, tag, timeout=1.0, want=None, quiet=0.2):
        """Frames carrying `tag`, per port: {port: [bytes, ...]}.

        Returns after `timeout`, or `quiet` seconds after `want` (a total frame count) is
        reached, so that extra (unexpected) frames are still seen.
        """
        got = {p: [] for p in self.socks}
        deadline = time.monotonic() + timeout
        total = 0
        while True:
            now = time.monotonic()
            if want is not None and total >= want:
                deadline = min(deadline, now + quiet)
            left = deadline - now
            if left <= 0:
                break
            ready, _, _ = select.select(list(self.socks.values()), [], [], left)
            for s in ready:
                while True:
                    try:
                        data, addr = s.recvfrom(65535)
                    except BlockingIOError:
                        break
                    if addr[2] == PACKET_OUTGOING:
                        continue
                    if tag in data:
                        got[self.by_fd[s.fileno()]].append(data)
                        total += 1
        return got


def counts(got):
    """{port: n} for the ports that received something."""
    return {p: len(v) for p, v in got.items() if v}


def mac_bytes(mac):
    return bytes(int(x, 16) for x in mac.split(":"))


def ipv4_checksum(hdr):
    s = 0
    for i in range(0, len(hdr), 2):
        s += (hdr[i] << 8) | hdr[i + 1]
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def udp4_frame(dst_mac, src_mac, src_ip, dst_ip, sport, dport, payload, ttl=64):
    """An Ethernet/IPv4/UDP frame built by hand (UDP checksum 0 = none)."""
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, ttl, 17, 0,
                               socket.inet_aton(src_ip), socket.inet_aton(dst_ip)))
    struct.pack_into("!H", ip, 10, ipv4_checksum(ip))
    return mac_bytes(dst_mac) + mac_bytes(src_mac) + b"\x08\x00" + bytes(ip) + udp


# The addressing of the `basic` tests: host N hangs off switch port N.
ROUTER = "02:00:00:00:00:fe"


def host_mac(port):
    return "02:00:00:00:%02x:01" % port


def host_ip(port):
    return "10.0.%d.1" % port


def host_ip6(port):
    return "2001:db8:%x::1" % port


class Fail(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise Fail(msg)
