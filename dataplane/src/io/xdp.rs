//! AF_XDP ports (xsk-rs): one socket per port on queue 0, bound to the switch's shared UMEM (the
//! pool), so a frame received on one port is transmitted on another by passing its descriptor:
//! no copy in userspace. Copy mode on veth (zero copy where the driver offers it), native or
//! generic XDP.
//!
//! The XDP program is xsk-rs's (libxdp's default redirect-to-socket program): it is the only owner
//! of each port's XDP hook, attached when the socket is made and detached when its last queue
//! drops. A leftover program from a killed run (recognised by its name, [`OUR_PROGRAM`]) is removed
//! before binding; any other XDP program on the interface is left alone.
//!
//! Buffer ownership: a buffer given to the fill or TX ring is surrendered (its token consumed)
//! and adopted again when the RX or completion ring returns it, so the kernel and userspace never
//! hold a frame at the same time. The port keeps its fill ring stocked from the pool.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use xsk_rs::config::{BindFlags, Interface, LibxdpFlags, QueueSize, SocketConfig, XdpFlags};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue};

use super::{BATCH, Frame};
use crate::pool::{HEADROOM, LocalCache, Pool};

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (veth: needs a peer MTU <= 3506).
    Native,
    /// In the generic (skb) path: works everywhere, as fast on veth.
    Generic,
}

/// How to open an AF_XDP port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpSpec {
    /// Interface name.
    pub ifname: String,
    /// XDP mode.
    pub mode: XdpMode,
    /// Ask for zero copy (fails where the driver has none, e.g. veth).
    pub zero_copy: bool,
}

const RING: u32 = 2048;
/// Frames kept in the fill ring.
const FILL_TARGET: u32 = 1024;

/// An open AF_XDP port.
pub struct XdpPort {
    name: String,
    rx: RxQueue,
    tx: TxQueue,
    fill: FillQueue,
    comp: CompQueue,
    /// Frames in the TX ring not yet completed.
    in_flight: u32,
    /// Frames in the fill ring.
    filled: u32,
    /// Frames dropped because they no longer fit a descriptor.
    oversize: u64,
    descs: Vec<FrameDesc>,
}

impl std::fmt::Debug for XdpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpPort")
            .field("name", &self.name)
            .field("in_flight", &self.in_flight)
            .field("filled", &self.filled)
            .finish()
    }
}

/// The name the kernel reports for libxdp's default AF_XDP program, the one xsk-rs attaches to
/// each port: the only XDP program this switch owns.
pub const OUR_PROGRAM: &str = "xsk_def_prog";

/// An XDP program attached to an interface, as `ip -d -j link show` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    /// 1 native (driver), 2 generic (skb), 3 offloaded.
    pub mode: u64,
    /// The kernel's program id.
    pub id: u64,
    /// The program's name.
    pub name: String,
}

/// The XDP programs attached to the interfaces in `ip -d -j link show` output.
pub fn parse_attached(json: &str) -> Vec<Attached> {
    let Ok(serde_json::Value::Array(links)) = serde_json::from_str(json) else {
        return Vec::new();
    };
    let prog = |mode: Option<u64>, v: &serde_json::Value| {
        let p = v.get("prog")?;
        Some(Attached {
            mode: mode.or_else(|| v.get("mode")?.as_u64())?,
            id: p.get("id")?.as_u64()?,
            name: p.get("name")?.as_str()?.to_string(),
        })
    };
    let mut out = Vec::new();
    for xdp in links.iter().filter_map(|l| l.get("xdp")) {
        match xdp.get("attached").and_then(|a| a.as_array()) {
            Some(list) => out.extend(list.iter().filter_map(|a| prog(None, a))),
            None => out.extend(prog(None, xdp)),
        }
    }
    out
}

/// The XDP programs attached to `ifname` (empty if `ip` cannot tell).
pub fn attached(ifname: &str) -> Vec<Attached> {
    std::process::Command::new("ip")
        .args(["-d", "-j", "link", "show", "dev", ifname])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(Vec::new, |o| {
            parse_attached(&String::from_utf8_lossy(&o.stdout))
        })
}

/// Removes the program a killed run of the switch left on `ifname` ([`OUR_PROGRAM`]), and only
/// that: other tools' XDP programs are left alone. Returns those (for the error message if the
/// port then cannot bind).
pub fn detach_leftover(ifname: &str) -> Vec<Attached> {
    let mut foreign = Vec::new();
    for a in attached(ifname) {
        if a.name != OUR_PROGRAM {
            foreign.push(a);
            continue;
        }
        let kind = match a.mode {
            1 => "xdpdrv",
            3 => "xdpoffload",
            _ => "xdpgeneric",
        };
        let _ = std::process::Command::new("ip")
            .args(["link", "set", "dev", ifname, kind, "off"])
            .stderr(std::process::Stdio::null())
            .status();
    }
    foreign
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl XdpPort {
    /// Binds a socket on `spec.ifname`, queue 0, to `pool`'s UMEM and stocks its fill ring.
    pub fn open(spec: &XdpSpec, pool: &Pool, cache: &mut LocalCache) -> io::Result<Self> {
        let (umem, _) = pool
            .as_umem()
            .ok_or_else(|| other("AF_XDP ports need a UMEM pool"))?;
        let foreign = detach_leftover(&spec.ifname);
        let mut bind = if spec.zero_copy {
            BindFlags::XDP_ZEROCOPY
        } else {
            BindFlags::XDP_COPY
        };
        bind |= BindFlags::XDP_USE_NEED_WAKEUP;
        let xdp = match spec.mode {
            XdpMode::Native => XdpFlags::XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => XdpFlags::XDP_FLAGS_SKB_MODE,
        };
        let config = SocketConfig::builder()
            .rx_queue_size(QueueSize::new(RING).map_err(other)?)
            .tx_queue_size(QueueSize::new(RING).map_err(other)?)
            .bind_flags(bind)
            .xdp_flags(xdp)
            .libxdp_flags(LibxdpFlags::empty())
            .build();
        let iface: Interface = spec.ifname.parse().map_err(other)?;
        // SAFETY: `umem` is the pool's UMEM, and each (interface, queue 0) pair is bound once
        // per switch (ports are distinct interfaces), so the fill and completion rings returned
        // here are this socket's own.
        let (tx, rx, rings) =
            unsafe { Socket::new(config, umem, &iface, 0) }.map_err(|e| match foreign.first() {
                Some(a) => other(format!(
                    "{e} ({} has another XDP program, {} id {}, which the switch leaves alone)",
                    spec.ifname, a.name, a.id
                )),
                None => other(e),
            })?;
        let (fill, comp) = rings.ok_or_else(|| other("no fill/completion ring for this socket"))?;
        // Let one sendto() move up to 128 frames (docs/af_xdp-notes.md, pitfall 2); best effort.
        let budget: libc::c_int = 128;
        // SAFETY: setsockopt reads `budget` (a live c_int) for the duration of the call.
        unsafe {
            libc::setsockopt(
                tx.fd().as_raw_fd(),
                283, // SOL_XDP
                9,   // XDP_MAX_TX_SKB_BUDGET
                (&raw const budget).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        let mut port = XdpPort {
            name: spec.ifname.clone(),
            rx,
            tx,
            fill,
            comp,
            in_flight: 0,
            filled: 0,
            oversize: 0,
            descs: vec![FrameDesc::default(); RING as usize],
        };
        port.refill(pool, cache);
        Ok(port)
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The descriptor to poll for received frames.
    pub fn fd(&self) -> RawFd {
        self.rx.fd().as_raw_fd()
    }

    /// Tops the fill ring up to its target from the pool.
    fn refill(&mut self, pool: &Pool, cache: &mut LocalCache) {
        let Some((_, base)) = pool.as_umem() else {
            return;
        };
        let want = FILL_TARGET
            .saturating_sub(self.filled)
            .min(BATCH as u32 * 4) as usize;
        let mut n = 0;
        while n < want {
            let Some(b) = cache.alloc(pool) else { break };
            self.descs[n] = base[pool.surrender(b) as usize];
            n += 1;
        }
        if n == 0 {
            return;
        }
        // SAFETY: the descriptors are base descriptors of this UMEM for buffers just surrendered
        // (no token exists), each given once.
        let given = unsafe { self.fill.produce(&self.descs[..n]) };
        if given == 0 {
            // The ring had no room: take the buffers back.
            for d in &self.descs[..n] {
                // SAFETY: these buffers were surrendered above and not given to the kernel.
                cache.free(pool, unsafe { pool.adopt(index_of(pool, d)) });
            }
            return;
        }
        self.filled += n as u32;
        if self.fill.needs_wakeup() {
            // Zero copy with need_wakeup: the driver waits for a poll to use the new frames.
            let _ = self.fill.wakeup(self.rx.fd_mut(), 0);
        }
    }

    /// Receives up to [`BATCH`] frames into `out`; returns how many.
    pub fn recv(&mut self, pool: &Pool, cache: &mut LocalCache, out: &mut Vec<Frame>) -> usize {
        // SAFETY: `descs` is scratch space; consume writes the descriptors of received frames,
        // which belong to the pool's UMEM.
        let n = unsafe { self.rx.consume(&mut self.descs[..BATCH]) };
        for d in &self.descs[..n] {
            // SAFETY: the kernel returned this frame on the RX ring: it was surrendered to the
            // fill ring and no token exists for it.
            let buf = unsafe { pool.adopt(index_of(pool, d)) };
            let start = d.addr() % pool.buf_size();
            let len = d.lengths().data().min(pool.buf_size() - start);
            out.push(Frame { buf, start, len });
        }
        self.filled = self.filled.saturating_sub(n as u32);
        self.refill(pool, cache);
        n
    }

    /// Reclaims completed transmissions into `cache`.
    fn complete(&mut self, pool: &Pool, cache: &mut LocalCache) {
        if self.in_flight == 0 {
            return;
        }
        // SAFETY: `descs` is scratch space; consume writes the addresses of completed frames.
        let n = unsafe { self.comp.consume(&mut self.descs[..]) };
        for d in &self.descs[..n] {
            // SAFETY: the kernel finished sending this frame, which was surrendered to the TX
            // ring; no token exists for it.
            cache.free(pool, unsafe { pool.adopt(index_of(pool, d)) });
        }
        self.in_flight = self.in_flight.saturating_sub(n as u32);
    }

    /// Sends frames from the front of `frames` (as many as the TX ring takes) and kicks the
    /// kernel until the ring drains; returns how many were queued.
    pub fn send(
        &mut self,
        pool: &Pool,
        cache: &mut LocalCache,
        frames: &mut VecDeque<Frame>,
    ) -> usize {
        self.complete(pool, cache);
        let Some((umem, base)) = pool.as_umem() else {
            return 0;
        };
        let n = frames
            .len()
            .min(BATCH)
            .min(self.tx.nb_free(BATCH as u32) as usize);
        let mut k = 0;
        for mut f in frames.drain(..n) {
            // A frame whose start moved (headers pushed or popped) goes back to the data offset
            // the descriptor names.
            if f.start != HEADROOM {
                if f.len > pool.buf_size() - HEADROOM {
                    // Grown past what a descriptor can carry from its data offset: drop it.
                    self.oversize += 1;
                    cache.free(pool, f.buf);
                    continue;
                }
                pool.bytes_mut(&mut f.buf)
                    .copy_within(f.start..f.start + f.len, HEADROOM);
            }
            let mut d = base[pool.surrender(f.buf) as usize];
            // SAFETY: `d` is this UMEM's descriptor of a frame surrendered just above: nothing
            // else accesses it; only its length is set.
            unsafe { umem.data_mut(&mut d) }.cursor().set_pos(f.len);
            self.descs[k] = d;
            k += 1;
        }
        if k > 0 {
            // SAFETY: the descriptors name surrendered frames of this UMEM, each once; the ring
            // had `n` free slots (checked above).
            let queued = unsafe { self.tx.produce(&self.descs[..k]) };
            debug_assert_eq!(queued, k);
            self.in_flight += queued as u32;
        }
        // Copy mode moves at most 32 (or the raised budget) frames per sendto: kick until the
        // ring is empty or the kernel stops taking frames.
        let mut rounds = 0;
        while self.tx.nb_free_exact() < RING && rounds < 16 {
            if self.tx.wakeup().is_err() {
                break;
            }
            rounds += 1;
        }
        self.complete(pool, cache);
        n
    }

    /// Frames dropped because they grew too large to send.
    pub fn oversize(&self) -> u64 {
        self.oversize
    }

    /// Frames still in the TX ring.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// A second descriptor of this port's socket, for reading its counters from another thread
    /// ([`XdpStats::read`]) while the worker owns the port.
    pub fn stats_fd(&self) -> io::Result<OwnedFd> {
        // SAFETY: the descriptor is the socket xsk-rs's queues own; it stays open while `self`
        // lives, which outlasts this borrow (it is only duplicated here).
        let fd = unsafe { BorrowedFd::borrow_raw(self.rx.fd().as_raw_fd()) };
        fd.try_clone_to_owned()
    }
}

/// An AF_XDP socket's drop counters (`getsockopt(SOL_XDP, XDP_STATISTICS)`, uapi
/// `linux/if_xdp.h`), counted by the kernel since the socket was made. A kernel that returns
/// only the first three (before 5.9) leaves the others 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpStats {
    /// Received frames dropped: no buffer in the fill ring (copy mode), or too large for one.
    pub rx_dropped: u64,
    /// Received frames dropped because of an invalid descriptor.
    pub rx_invalid_descs: u64,
    /// Frames to send dropped because of an invalid descriptor.
    pub tx_invalid_descs: u64,
    /// Received frames dropped because the RX ring was full (the worker did not drain it).
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty (no buffer to receive into).
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel read the TX ring and found it empty: a send that drains the ring ends
    /// with one, so this grows with traffic and is not a loss.
    pub tx_ring_empty_descs: u64,
}

impl XdpStats {
    /// Decodes a `struct xdp_statistics`; fields past the end of `b` read 0.
    pub fn parse(b: &[u8]) -> XdpStats {
        let at = |i: usize| {
            b.get(i * 8..i * 8 + 8)
                .map_or(0, |s| u64::from_ne_bytes(s.try_into().unwrap_or_default()))
        };
        XdpStats {
            rx_dropped: at(0),
            rx_invalid_descs: at(1),
            tx_invalid_descs: at(2),
            rx_ring_full: at(3),
            rx_fill_ring_empty_descs: at(4),
            tx_ring_empty_descs: at(5),
        }
    }

    /// Reads the counters of the AF_XDP socket `fd`. xsk-rs offers the same call
    /// (`Fd::xdp_statistics`) only on the descriptor it owns, which the port's worker holds;
    /// this one works on a duplicate ([`XdpPort::stats_fd`]).
    pub fn read(fd: &impl AsRawFd) -> io::Result<XdpStats> {
        let mut b = [0u8; 48];
        let n = crate::sockopt::get_bytes(fd, libc::SOL_XDP, libc::XDP_STATISTICS, &mut b)?;
        Ok(XdpStats::parse(&b[..n]))
    }
}

fn index_of(pool: &Pool, d: &FrameDesc) -> u32 {
    (d.addr() / pool.buf_size()) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attached_programs_are_read_from_ip_json() {
        // Shapes `ip -d -j link show` prints (iproute2 6.1): one program, and two at once.
        let one = r#"[{"ifname":"p1","xdp":{"mode":2,"prog":{"id":7,"name":"xsk_def_prog"},
            "attached":[{"mode":2,"prog":{"id":7,"name":"xsk_def_prog"}}]}}]"#;
        let two = r#"[{"ifname":"p1","xdp":{"mode":4,"attached":[
            {"mode":1,"prog":{"id":8,"name":"foreign_pass"}},
            {"mode":2,"prog":{"id":9,"name":"xsk_def_prog"}}]}}]"#;
        let a = |mode, id, name: &str| Attached {
            mode,
            id,
            name: name.into(),
        };
        assert_eq!(parse_attached(one), vec![a(2, 7, OUR_PROGRAM)]);
        assert_eq!(
            parse_attached(two),
            vec![a(1, 8, "foreign_pass"), a(2, 9, OUR_PROGRAM)]
        );
        assert!(parse_attached(r#"[{"ifname":"p1"}]"#).is_empty());
        assert!(parse_attached("not json").is_empty());
    }

    #[test]
    fn xdp_statistics_decode_in_the_kernels_field_order() {
        let b: Vec<u8> = (1..=6u64).flat_map(u64::to_ne_bytes).collect();
        let s = XdpStats::parse(&b);
        assert_eq!(
            [
                s.rx_dropped,
                s.rx_invalid_descs,
                s.tx_invalid_descs,
                s.rx_ring_full,
                s.rx_fill_ring_empty_descs,
                s.tx_ring_empty_descs
            ],
            [1, 2, 3, 4, 5, 6]
        );
        // An old kernel's three fields.
        assert_eq!(XdpStats::parse(&b[..24]).rx_ring_full, 0);
        // Not an AF_XDP socket: the kernel refuses.
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(XdpStats::read(&u).is_err());
    }
}
