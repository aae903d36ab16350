//! The traffic manager (docs/architecture.md): per egress port, up to 8 strict-priority FIFO queues
//! with depth limits in packets and bytes and tail drop, optional ECN marking above a threshold,
//! per-port shaping (bits/s or packets/s), a shared-buffer mode with per-ingress accounting and
//! PFC (802.1Qbb) generation, and honouring of received pause frames.
//!
//! # Who calls what
//!
//! - Any worker calls [`TrafficManager::enqueue`] for any port: queue depths count every packet
//!   bound for a port, whichever worker received it. Depth counters are atomics reserved *before*
//!   the push, so a full queue never holds more than its limit; the queues themselves are
//!   lock-free (crossbeam `SegQueue`).
//! - Exactly one worker owns each port's transmit side and calls [`TrafficManager::dequeue`] for it
//!   (it holds the port's [`TxState`]: shaper tokens and the head-of-line packets). No lock is taken
//!   per packet.
//! - Configuration (limits, rates, thresholds) lives in atomics and may change at run time.
//! - A shaped port measures its link lateness on each dequeue ([`fidelity`]): how much later than
//!   back to back at its rate a backlogged port sends. The owner records it; anyone reads it
//!   ([`TrafficManager::lateness`]).
//!
//! Time is an argument (`now_ns`), so everything here is testable without a clock.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

use crate::hist::{Histogram, Snapshot};
use crate::metadata::{PortId, StdMeta};
use crossbeam::queue::SegQueue;
use fidelity::{LastDeparture, LinkMonitor};

/// Strict-priority queues per port (queue 7 is served first).
pub const QUEUES: usize = 8;

/// A packet waiting in a queue: its buffer handle, length and metadata.
#[derive(Debug)]
pub struct Queued<B> {
    /// Where the frame is (a UMEM address, a pool index, an owned buffer...).
    pub buf: B,
    /// Frame length in bytes.
    pub len: u32,
    /// Metadata; the TM fills enqueue and dequeue fields.
    pub meta: StdMeta,
}

/// Shaping of a port's transmit rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shaping {
    /// As fast as the port goes.
    #[default]
    None,
    /// Bits per second (Ethernet frame bytes x 8; preamble and IFG not counted).
    BitsPerSec(u64),
    /// Packets per second.
    PacketsPerSec(u64),
}

/// A port's settings; every field can change at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// Queue depth limit in packets (per queue).
    pub max_packets: u32,
    /// Queue depth limit in bytes (per queue).
    pub max_bytes: u64,
    /// Mark ECN CE on ECN-capable packets when the queue holds at least this many packets.
    pub ecn_threshold: Option<u32>,
    /// Transmit rate.
    pub shaping: Shaping,
    /// Shaper burst in bytes (bits/s) or packets (packets/s); at least one packet always passes.
    pub burst: u64,
    /// Propagation delay added after transmission, ns.
    pub delay_ns: u64,
    /// Link speed for PFC quanta (512 bit times each), bits/s.
    pub link_bps: u64,
    /// Honour received PAUSE/PFC frames (they are consumed and counted either way). Always on
    /// in a TM whose shared buffer has PFC thresholds, or on a port with `pfc_xoff`: a switch
    /// that sends PFC obeys it.
    pub pfc: bool,
    /// PFC on this port as an ingress port, in packets: pause the upstream's class when the
    /// switch holds this many packets of that class that arrived here (in any egress queue)
    /// (P4QCN's Q_PFC, docs/p4qcn.md), resume when it holds fewer than [`PortConfig::pfc_xon`].
    /// Independent of the shared buffer's byte thresholds; use one or the other.
    pub pfc_xoff: Option<u32>,
    /// The resume threshold of `pfc_xoff`, in packets: XON once fewer than this many remain
    /// (at most `pfc_xoff`; equal to it resumes as soon as the count is back under XOFF, one
    /// frame per packet at a queue that hovers there). None: 3/4 of `pfc_xoff`, rounded up
    /// (Juniper's defaults are XON 3,750 for XOFF 5,000; 802.1Qbb leaves thresholds to the
    /// implementation).
    pub pfc_xon: Option<u32>,
}

/// The resume threshold of a packet XOFF threshold `xoff` when none is set: 3/4 of it, rounded
/// up ([`PortConfig::pfc_xon`]).
pub fn default_pfc_xon(xoff: u32) -> u32 {
    (u64::from(xoff) * 3).div_ceil(4) as u32
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            max_packets: 1024,
            max_bytes: 4 << 20,
            ecn_threshold: None,
            shaping: Shaping::None,
            burst: 0,
            delay_ns: 0,
            link_bps: 10_000_000_000,
            pfc: false,
            pfc_xoff: None,
            pfc_xon: None,
        }
    }
}

/// Shared-buffer mode: one pool for every queue of the switch, accounted per ingress port and
/// class, with PFC thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedBuffer {
    /// Pool size in bytes.
    pub total_bytes: u64,
    /// PFC: pause an ingress port's class when its occupancy reaches this many bytes.
    pub xoff_bytes: Option<u64>,
    /// PFC: resume when the occupancy falls to this many bytes.
    pub xon_bytes: u64,
    /// Pause time sent in XOFF frames, in quanta (512 bit times).
    pub pause_quanta: u16,
}

/// Why the TM refused a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The queue was at its packet or byte limit.
    QueueFull,
    /// The shared buffer was full, or the port holds its share of the switch's buffers
    /// ([`TrafficManager::set_port_buffers`]).
    BufferFull,
    /// No such port or queue.
    NoSuchPort,
}

/// What enqueue tells the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// Packets in the queue before this one.
    pub depth: u32,
    /// The packet should be marked CE (if it is ECN-capable).
    pub mark_ecn: bool,
    /// The port's owner should be woken (the queue was empty).
    pub wake: bool,
}

#[derive(Debug, Default)]
struct Queue<B> {
    q: SegQueue<Queued<B>>,
    packets: AtomicU32,
    bytes: AtomicU64,
    enqueued: AtomicU64,
    dropped: AtomicU64,
    marked: AtomicU64,
}

#[derive(Debug)]
struct Limits {
    max_packets: AtomicU32,
    max_bytes: AtomicU64,
    ecn_threshold: AtomicU32,
    /// 0 none, 1 bits/s, 2 packets/s.
    shaping_kind: AtomicU8,
    rate: AtomicU64,
    burst: AtomicU64,
    delay_ns: AtomicU64,
    link_bps: AtomicU64,
    pfc: AtomicBool,
    /// 0: no packet threshold.
    pfc_xoff_packets: AtomicU32,
    /// 0: the default ([`default_pfc_xon`]).
    pfc_xon_packets: AtomicU32,
}

#[derive(Debug)]
struct Port<B> {
    queues: [Queue<B>; QUEUES],
    limits: Limits,
    /// Received PFC: per class, paused until this time (ns).
    paused_until: [AtomicU64; QUEUES],
    /// Received PFC: per class, ns of pause granted so far (wrapping), the part of the current
    /// pause still to come included ([`TrafficManager::paused_ns`] takes it out).
    paused_ns: [AtomicU64; QUEUES],
    /// Shared buffer: bytes this port has in the pool as an ingress port, per class.
    ingress_bytes: [AtomicU64; QUEUES],
    /// Packets that arrived on this port and sit in some egress queue, per class (counted once
    /// any port has a packet threshold, [`PortConfig::pfc_xoff`]).
    ingress_packets: [AtomicU32; QUEUES],
    /// PFC this port should send (as an ingress port): bit c = class c is in XOFF.
    pfc_state: AtomicU8,
    /// `pfc_state` changed and a frame should go out.
    pfc_dirty: AtomicBool,
    /// Bit q set: queue q may hold packets (set after a push into an empty queue, cleared by the
    /// owner when it takes the last one), so the owner probes only those queues.
    occupied: AtomicU8,
    /// Packets this port holds as an egress port: in its queues, and after egress in its
    /// propagation-delay line (until the driver releases them, [`TrafficManager::release`]).
    held: AtomicU32,
    /// Link lateness, from the first time the port is given a rate ([`fidelity`]); allocated by
    /// [`TrafficManager::configure`], never on the packet path.
    monitor: OnceLock<Box<LinkMonitor>>,
    /// Queueing delay (enqueue to dequeue) of every packet that left, ns; recorded by the port's
    /// owner ([`TrafficManager::dequeue`]), read by anyone ([`TrafficManager::queue_delay`]).
    sojourn: Box<Histogram>,
}

/// The owner-side state of one port: shaper tokens and the packets popped but not yet allowed out.
#[derive(Debug)]
pub struct TxState<B> {
    port: PortId,
    /// Shaper tokens in nano-units (bytes or packets x 1e9).
    tokens: u128,
    /// When the shaper last counted its tokens (`None` before its first frame: a full bucket).
    /// Not a 0 sentinel: a simulator's clock starts at 0, and a bucket refilled at every call
    /// at time 0 let whatever left at 0 ns go at any rate.
    last_ns: Option<u64>,
    /// When the shaper last said "wait until": a worker that wakes up late is credited the
    /// lateness (up to 1 ms), so scheduling jitter does not lower a backlogged port's rate.
    wait_at: Option<u64>,
    head: [Option<Queued<B>>; QUEUES],
    /// The last departure, for link lateness.
    last: LastDeparture,
}

/// The result of a dequeue call.
#[derive(Debug)]
pub enum Dequeued<B> {
    /// A packet to run egress on and send.
    Packet(Queued<B>),
    /// Nothing can go before `at` ns (shaping or pause).
    Wait {
        /// When to try again.
        at: u64,
    },
    /// All queues are empty.
    Empty,
}

/// The traffic manager of one switch.
#[derive(Debug)]
pub struct TrafficManager<B> {
    ports: Vec<Port<B>>,
    shared: Option<SharedBuffer>,
    pool_bytes: AtomicU64,
    /// Packets one port may hold in its queues and delay line together (u32::MAX: no cap).
    port_buffers: AtomicU32,
    /// Count `ingress_packets` (set for good once a port gets a packet PFC threshold, so the
    /// fast path of switches without one skips it).
    count_ingress: AtomicBool,
}

const NANO: u128 = 1_000_000_000;

impl<B> TxState<B> {
    /// The port this state transmits on.
    pub fn port(&self) -> PortId {
        self.port
    }
}

impl<B> TrafficManager<B> {
    /// A TM with ports `0..ports` configured as `config`, and optionally a shared buffer.
    pub fn new(ports: usize, config: PortConfig, shared: Option<SharedBuffer>) -> Self {
        let ports = (0..ports)
            .map(|_| Port {
                queues: std::array::from_fn(|_| Queue {
                    q: SegQueue::new(),
                    packets: AtomicU32::new(0),
                    bytes: AtomicU64::new(0),
                    enqueued: AtomicU64::new(0),
                    dropped: AtomicU64::new(0),
                    marked: AtomicU64::new(0),
                }),
                limits: Limits {
                    max_packets: AtomicU32::new(0),
                    max_bytes: AtomicU64::new(0),
                    ecn_threshold: AtomicU32::new(u32::MAX),
                    shaping_kind: AtomicU8::new(0),
                    rate: AtomicU64::new(0),
                    burst: AtomicU64::new(0),
                    delay_ns: AtomicU64::new(0),
                    link_bps: AtomicU64::new(0),
                    pfc: AtomicBool::new(false),
                    pfc_xoff_packets: AtomicU32::new(0),
                    pfc_xon_packets: AtomicU32::new(0),
                },
                paused_until: std::array::from_fn(|_| AtomicU64::new(0)),
                paused_ns: std::array::from_fn(|_| AtomicU64::new(0)),
                ingress_bytes: std::array::from_fn(|_| AtomicU64::new(0)),
                ingress_packets: std::array::from_fn(|_| AtomicU32::new(0)),
                pfc_state: AtomicU8::new(0),
                pfc_dirty: AtomicBool::new(false),
                occupied: AtomicU8::new(0),
                held: AtomicU32::new(0),
                monitor: OnceLock::new(),
                sojourn: Box::default(),
            })
            .collect();
        let tm = TrafficManager {
            ports,
            shared,
            pool_bytes: AtomicU64::new(0),
            port_buffers: AtomicU32::new(u32::MAX),
            count_ingress: AtomicBool::new(false),
        };
        for p in 0..tm.ports.len() {
            tm.configure(p as PortId, config);
        }
        tm
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// Changes a port's settings (takes effect for the next packets).
    pub fn configure(&self, port: PortId, c: PortConfig) -> bool {
        let Some(p) = self.ports.get(usize::from(port)) else {
            return false;
        };
        let l = &p.limits;
        l.max_packets.store(c.max_packets, Ordering::Relaxed);
        l.max_bytes.store(c.max_bytes, Ordering::Relaxed);
        l.ecn_threshold
            .store(c.ecn_threshold.unwrap_or(u32::MAX), Ordering::Relaxed);
        let (kind, rate) = match c.shaping {
            Shaping::None => (0, 0),
            Shaping::BitsPerSec(r) => (1, r),
            Shaping::PacketsPerSec(r) => (2, r),
        };
        l.rate.store(rate, Ordering::Relaxed);
        l.burst.store(c.burst, Ordering::Relaxed);
        l.shaping_kind.store(kind, Ordering::Relaxed);
        l.delay_ns.store(c.delay_ns, Ordering::Relaxed);
        l.link_bps.store(c.link_bps.max(1), Ordering::Relaxed);
        l.pfc.store(c.pfc, Ordering::Relaxed);
        l.pfc_xoff_packets
            .store(c.pfc_xoff.unwrap_or(0), Ordering::Relaxed);
        l.pfc_xon_packets
            .store(c.pfc_xon.unwrap_or(0), Ordering::Relaxed);
        if c.pfc_xoff.is_some() {
            self.count_ingress.store(true, Ordering::Release);
        }
        if c.shaping != Shaping::None {
            p.monitor.get_or_init(Box::default);
        }
        true
    }

    /// The link lateness of `port` since it was first given a rate ([`fidelity`]); None if it
    /// never had one (an unshaped port has no ideal departure time).
    pub fn lateness(&self, port: PortId) -> Option<Lateness> {
        Some(self.ports.get(usize::from(port))?.monitor.get()?.snapshot())
    }

    /// The queueing delay of every packet that has left `port` (enqueue to dequeue, ns): where
    /// sprayed paths merge, the difference between two paths' delays is what reorders a flow.
    pub fn queue_delay(&self, port: PortId) -> Option<Snapshot> {
        Some(self.ports.get(usize::from(port))?.sojourn.snapshot())
    }

    /// Caps the packets one port holds as an egress port, in its 8 queues and its
    /// propagation-delay line together: a packet beyond it is refused
    /// ([`Refused::BufferFull`]), so a delay line can hold the port's whole share but no more.
    /// The data plane derives it from its pool, so
    /// that congested or delayed ports cannot take the buffers reception needs
    /// (docs/hardening.md).
    pub fn set_port_buffers(&self, cap: u32) {
        self.port_buffers.store(cap.max(1), Ordering::Relaxed);
    }

    /// The cap of [`TrafficManager::set_port_buffers`] (u32::MAX: none).
    pub fn port_buffers(&self) -> u32 {
        self.port_buffers.load(Ordering::Relaxed)
    }

    /// Packets `port` holds (queued, or after egress in its delay line).
    pub fn held(&self, port: PortId) -> u32 {
        self.ports
            .get(usize::from(port))
            .map_or(0, |p| p.held.load(Ordering::Relaxed))
    }

    /// `n` packets `port` held left it (sent, dropped or recirculated by egress, or out of the
    /// delay line).
    pub fn release(&self, port: PortId, n: u32) {
        if let Some(p) = self.ports.get(usize::from(port)) {
            p.held.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// A port's propagation delay, ns (read per transmitted packet).
    #[inline]
    pub fn delay_ns(&self, port: PortId) -> u64 {
        self.ports
            .get(usize::from(port))
            .map_or(0, |p| p.limits.delay_ns.load(Ordering::Relaxed))
    }

    /// A port's current settings.
    pub fn config(&self, port: PortId) -> Option<PortConfig> {
        let l = &self.ports.get(usize::from(port))?.limits;
        let rate = l.rate.load(Ordering::Relaxed);
        let ecn = l.ecn_threshold.load(Ordering::Relaxed);
        Some(PortConfig {
            max_packets: l.max_packets.load(Ordering::Relaxed),
            max_bytes: l.max_bytes.load(Ordering::Relaxed),
            ecn_threshold: (ecn != u32::MAX).then_some(ecn),
            shaping: match l.shaping_kind.load(Ordering::Relaxed) {
                1 => Shaping::BitsPerSec(rate),
                2 => Shaping::PacketsPerSec(rate),
                _ => Shaping::None,
            },
            burst: l.burst.load(Ordering::Relaxed),
            delay_ns: l.delay_ns.load(Ordering::Relaxed),
            link_bps: l.link_bps.load(Ordering::Relaxed),
            pfc: l.pfc.load(Ordering::Relaxed),
            pfc_xoff: Some(l.pfc_xoff_packets.load(Ordering::Relaxed)).filter(|&x| x != 0),
            pfc_xon: Some(l.pfc_xon_packets.load(Ordering::Relaxed)).filter(|&x| x != 0),
        })
    }

    /// The owner-side state of `port`, held by the one worker that transmits on it.
    pub fn tx_state(&self, port: PortId) -> TxState<B> {
        TxState {
            port,
            tokens: 0,
            last_ns: None,
            wait_at: None,
            head: std::array::from_fn(|_| None),
            last: LastDeparture::default(),
        }
    }

    /// Queues `pkt` for `port`, queue `pkt.meta.qid`, at `now_ns`; sets the enqueue metadata.
    /// On refusal the packet comes back with the reason (the caller frees its buffer and counts
    /// the drop).
    pub fn enqueue(
        &self,
        port: PortId,
        pkt: Queued<B>,
        now_ns: u64,
    ) -> Result<Admitted, (Queued<B>, Refused)> {
        self.enqueue_marking(port, pkt, now_ns, |_| {})
    }

    /// [`TrafficManager::enqueue`], calling `mark` on the packet before it is queued when the
    /// queue is at or above its ECN threshold (the caller sets CE on ECN-capable packets).
    pub fn enqueue_marking(
        &self,
        port: PortId,
        mut pkt: Queued<B>,
        now_ns: u64,
        mark: impl FnOnce(&mut Queued<B>),
    ) -> Result<Admitted, (Queued<B>, Refused)> {
        let qid = usize::from(pkt.meta.qid.min(QUEUES as u8 - 1));
        let Some(p) = self.ports.get(usize::from(port)) else {
            return Err((pkt, Refused::NoSuchPort));
        };
        let q = &p.queues[qid];
        // The port's share of the switch's buffers first (queues and delay line together).
        if p.held.fetch_add(1, Ordering::AcqRel) >= self.port_buffers.load(Ordering::Relaxed) {
            p.held.fetch_sub(1, Ordering::AcqRel);
            q.dropped.fetch_add(1, Ordering::Relaxed);
            return Err((pkt, Refused::BufferFull));
        }
        let len = u64::from(pkt.len);
        let depth = q.packets.fetch_add(1, Ordering::AcqRel);
        let bytes = q.bytes.fetch_add(len, Ordering::AcqRel);
        let l = &p.limits;
        if depth >= l.max_packets.load(Ordering::Relaxed)
            || bytes + len > l.max_bytes.load(Ordering::Relaxed)
        {
            q.packets.fetch_sub(1, Ordering::AcqRel);
            q.bytes.fetch_sub(len, Ordering::AcqRel);
            p.held.fetch_sub(1, Ordering::AcqRel);
            q.dropped.fetch_add(1, Ordering::Relaxed);
            return Err((pkt, Refused::QueueFull));
        }
        if let Some(sb) = &self.shared {
            let used = self.pool_bytes.fetch_add(len, Ordering::AcqRel);
            if used + len > sb.total_bytes {
                self.pool_bytes.fetch_sub(len, Ordering::AcqRel);
                q.packets.fetch_sub(1, Ordering::AcqRel);
                q.bytes.fetch_sub(len, Ordering::AcqRel);
                p.held.fetch_sub(1, Ordering::AcqRel);
                q.dropped.fetch_add(1, Ordering::Relaxed);
                return Err((pkt, Refused::BufferFull));
            }
            if let Some(ing) = self.ports.get(usize::from(pkt.meta.ingress_port)) {
                let occ = ing.ingress_bytes[qid].fetch_add(len, Ordering::AcqRel) + len;
                if sb.xoff_bytes.is_some_and(|x| occ >= x) {
                    let bit = 1u8 << qid;
                    if ing.pfc_state.fetch_or(bit, Ordering::AcqRel) & bit == 0 {
                        ing.pfc_dirty.store(true, Ordering::Release);
                    }
                }
            }
        }
        if self.count_ingress.load(Ordering::Relaxed)
            && let Some(ing) = self.ports.get(usize::from(pkt.meta.ingress_port))
        {
            let occ = ing.ingress_packets[qid].fetch_add(1, Ordering::AcqRel) + 1;
            let xoff = ing.limits.pfc_xoff_packets.load(Ordering::Relaxed);
            let bit = 1u8 << qid;
            if xoff != 0 && occ >= xoff && ing.pfc_state.fetch_or(bit, Ordering::AcqRel) & bit == 0
            {
                ing.pfc_dirty.store(true, Ordering::Release);
            }
        }
        let mark_ecn = depth >= l.ecn_threshold.load(Ordering::Relaxed);
        if mark_ecn {
            q.marked.fetch_add(1, Ordering::Relaxed);
            mark(&mut pkt);
        }
        pkt.meta.enq_qdepth = depth;
        pkt.meta.enq_qdepth_bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        pkt.meta.enq_timestamp = now_ns;
        pkt.meta.egress_port = port;
        q.enqueued.fetch_add(1, Ordering::Relaxed);
        q.q.push(pkt);
        // Set the bit whenever it is clear (not only for depth 0: a refused packet may have
        // held depth 0 for a moment); the one who sets it wakes the owner.
        let bit = 1u8 << qid;
        let wake = p.occupied.load(Ordering::SeqCst) & bit == 0
            && p.occupied.fetch_or(bit, Ordering::SeqCst) & bit == 0;
        Ok(Admitted {
            depth,
            mark_ecn,
            wake,
        })
    }

    /// Whether a turn of `tx`'s port has nothing to do: no frame queued or held, no PFC frame
    /// to send and none to refresh. [`TrafficManager::dequeue`] would return
    /// [`Dequeued::Empty`] and change nothing, so a caller that polls many ports (the
    /// simulator) may skip it.
    pub fn idle(&self, tx: &TxState<B>) -> bool {
        let Some(p) = self.ports.get(usize::from(tx.port)) else {
            return true;
        };
        tx.head.iter().all(Option::is_none)
            && p.occupied.load(Ordering::SeqCst) == 0
            && p.pfc_state.load(Ordering::Acquire) == 0
            && !p.pfc_dirty.load(Ordering::Acquire)
    }

    /// The next packet `port` may send at `now_ns`, by strict priority, honouring shaping and
    /// received pauses. Only the port's owner calls this, with the port's [`TxState`].
    pub fn dequeue(&self, tx: &mut TxState<B>, now_ns: u64) -> Dequeued<B> {
        let Some(p) = self.ports.get(usize::from(tx.port)) else {
            return Dequeued::Empty;
        };
        let mut wait: Option<u64> = None;
        // Whether a class with frames was paused, and whether the shaper held the port back.
        let (mut paused, mut shaped_out) = (false, false);
        let earliest = |w: &mut Option<u64>, at: u64| *w = Some(w.map_or(at, |x| x.min(at)));
        let mut occupied = u32::from(p.occupied.load(Ordering::SeqCst));
        for (qid, h) in tx.head.iter().enumerate() {
            occupied |= u32::from(h.is_some()) << qid;
        }
        while occupied != 0 {
            let qid = 31 - occupied.leading_zeros() as usize;
            occupied &= !(1 << qid);
            let until = p.paused_until[qid].load(Ordering::Acquire);
            if until > now_ns {
                if tx.head[qid].is_some() || !p.queues[qid].q.is_empty() {
                    earliest(&mut wait, until);
                    paused = true;
                }
                continue;
            }
            if tx.head[qid].is_none() {
                tx.head[qid] = p.queues[qid].q.pop();
            }
            let Some(head) = &tx.head[qid] else { continue };
            match self.shaper_admits(tx, &p.limits, head.len, now_ns) {
                Ok(()) => {
                    let Some(mut pkt) = tx.head[qid].take() else {
                        continue;
                    };
                    let q = &p.queues[qid];
                    let len = u64::from(pkt.len);
                    let left = q.packets.fetch_sub(1, Ordering::SeqCst) - 1;
                    if left == 0 {
                        // Clear the bit, then look again: an enqueue that raced with us has
                        // either been seen here or will set the bit after this.
                        p.occupied.fetch_and(!(1u8 << qid), Ordering::SeqCst);
                        if q.packets.load(Ordering::SeqCst) > 0 {
                            p.occupied.fetch_or(1u8 << qid, Ordering::SeqCst);
                        }
                    }
                    let left_bytes = q.bytes.fetch_sub(len, Ordering::AcqRel) - len;
                    self.release_shared(pkt.meta.ingress_port, qid, len);
                    self.release_ingress(pkt.meta.ingress_port, qid);
                    pkt.meta.deq_qdepth = left;
                    pkt.meta.deq_qdepth_bytes = u32::try_from(left_bytes).unwrap_or(u32::MAX);
                    pkt.meta.deq_timedelta = now_ns.saturating_sub(pkt.meta.enq_timestamp);
                    p.sojourn.record(pkt.meta.deq_timedelta);
                    if let Some(m) = p.monitor.get() {
                        let backlogged = left > 0 || Self::others_waiting(p, qid);
                        let l = &p.limits;
                        let kind = l.shaping_kind.load(Ordering::Relaxed);
                        let ser = fidelity::ser_ns(kind, l.rate.load(Ordering::Relaxed), pkt.len);
                        tx.last.depart(m, ser, backlogged, now_ns);
                    }
                    return Dequeued::Packet(pkt);
                }
                Err(at) => {
                    // Strict priority: a shaped-out port sends nothing else either.
                    earliest(&mut wait, at);
                    shaped_out = true;
                    break;
                }
            }
        }
        // Nothing could go, and not for the rate: paused classes held the only frames, so the
        // next departure has no ideal time.
        if paused && !shaped_out {
            tx.last.pause_gap = true;
        }
        match wait {
            Some(at) => Dequeued::Wait { at },
            None => Dequeued::Empty,
        }
    }

    /// Whether a queue of `p` other than `qid` holds frames (the ones whose bit is set).
    #[inline]
    fn others_waiting(p: &Port<B>, qid: usize) -> bool {
        let mut bits = u32::from(p.occupied.load(Ordering::Relaxed)) & !(1 << qid);
        while bits != 0 {
            let q = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if p.queues[q].packets.load(Ordering::Relaxed) > 0 {
                return true;
            }
        }
        false
    }

    fn shaper_admits(
        &self,
        tx: &mut TxState<B>,
        l: &Limits,
        len: u32,
        now: u64,
    ) -> Result<(), u64> {
        let rate = u128::from(l.rate.load(Ordering::Relaxed));
        let kind = l.shaping_kind.load(Ordering::Relaxed);
        if kind == 0 || rate == 0 {
            return Ok(());
        }
        let cost = if kind == 1 { u128::from(len) * 8 } else { 1 };
        let burst = u128::from(l.burst.load(Ordering::Relaxed));
        let burst = if kind == 1 { burst * 8 } else { burst };
        let mut cap = burst.max(cost) * NANO;
        if let Some(at) = tx.wait_at.take() {
            cap += u128::from(now.saturating_sub(at).min(1_000_000)) * rate;
        }
        match tx.last_ns {
            None => tx.tokens = cap,
            Some(last) => {
                let dt = u128::from(now.saturating_sub(last));
                tx.tokens = (tx.tokens + dt * rate).min(cap);
            }
        }
        tx.last_ns = Some(tx.last_ns.map_or(now, |l| l.max(now)));
        let need = cost * NANO;
        if tx.tokens >= need {
            tx.tokens -= need;
            Ok(())
        } else {
            let missing = need - tx.tokens;
            let at = now + u64::try_from(missing.div_ceil(rate)).unwrap_or(u64::MAX / 2);
            tx.wait_at = Some(at);
            Err(at)
        }
    }

    /// Packets and bytes queued on `port`, queue `qid`.
    pub fn depth(&self, port: PortId, qid: usize) -> (u32, u64) {
        self.ports
            .get(usize::from(port))
            .and_then(|p| p.queues.get(qid))
            .map_or((0, 0), |q| {
                (
                    q.packets.load(Ordering::Acquire),
                    q.bytes.load(Ordering::Acquire),
                )
            })
    }

    /// Per-queue counters of `port`: (enqueued, tail-dropped, ECN-marked) for each queue.
    pub fn stats(&self, port: PortId) -> Vec<(u64, u64, u64)> {
        self.ports
            .get(usize::from(port))
            .map_or_else(Vec::new, |p| {
                p.queues
                    .iter()
                    .map(|q| {
                        (
                            q.enqueued.load(Ordering::Relaxed),
                            q.dropped.load(Ordering::Relaxed),
                            q.marked.load(Ordering::Relaxed),
                        )
                    })
                    .collect()
            })
    }
}

pub mod fidelity;
mod pfc;
mod setting;
#[cfg(test)]
mod tests;

pub use fidelity::Lateness;
pub use setting::{MAX_DELAY_NS, Setting};
