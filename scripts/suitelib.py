"""What the scripts that check a switch from outside share (bmv2-suite.py, pi-simple-router.py):
raw frames on veth ends (an AF_PACKET socket per port, bound to its interface), and the registry
of named checks."""

import select
import socket
import time

ETH_P_ALL = 0x0003
# A frame this host sent, seen again by its own packet socket: not a receipt.
PACKET_OUTGOING = 4


class Ports:
    """Port number -> interface; sends on one, receives from any."""

    def __init__(self, mapping):
        self.socks = {}
        for port, ifname in mapping.items():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((ifname, 0))
            s.setblocking(False)
            self.socks[port] = s

    def drain(self):
        for s in self.socks.values():
            while True:
                try:
                    s.recv(65535)
                except BlockingIOError:
                    break

    def send(self, port, frame):
        self.socks[port].send(frame)

    def recv_one(self, timeout=2.0):
        """(port, frame) of the first frame any port receives, or None."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select(list(self.socks.values()), [], [], left)
            for port, s in self.socks.items():
                if s in ready:
                    try:
                        data, addr = s.recvfrom(65535)
                    except BlockingIOError:
                        continue
                    if addr[2] != PACKET_OUTGOING:
                        return port, data

    def recv_all(self, timeout=1.0):
        """Every frame until none comes for `timeout` (the first) and then 0.3 s."""
        got = []
        while True:
            r = self.recv_one(timeout)
            if r is None:
                return got
            got.append(r)
            timeout = 0.3


# Named checks, in the order they are declared: `@check("suite/Name")` on a function.
CHECKS = []


def check(name):
    def deco(f):
        CHECKS.append((name, f))
        return f
    return deco


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)
