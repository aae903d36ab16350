//! The one packet path (docs/architecture.md): parser, ingress, PRE, traffic manager, egress, PRE,
//! deparser.
//!
//! ```text
//! receive -> [MAC control: pause] -> ingress -> PRE (multicast, I2E clone, resubmit)
//!         -> TM enqueue (tail drop, ECN mark, shared buffer / PFC accounting)
//! transmit -> PFC frames -> TM dequeue (priority, shaping, pauses) -> egress
//!         -> PRE (E2E clone, recirculate) -> propagation delay -> ready to send
//! recirculation port (loopback): TM dequeue -> egress -> back to ingress
//! ```
//!
//! The data plane's workers and the simulators ([`crate::sim`]) both run packets through a
//! [`Driver`]; neither has a copy of this logic. What differs between them is behind [`Env`]:
//! where buffer bytes live (a UMEM, a heap pool, plain vectors), which ports exist, and whom to
//! wake when a packet is queued for a port. Time is an argument.
//!
//! # Who calls what
//!
//! Each worker (or simulated switch) owns one [`Driver`]. Any driver may enqueue for any port in
//! the shared [`TrafficManager`]; only the owner of a port calls [`Driver::transmit`] with that
//! port's [`PortTx`]. Per packet there is no allocation (buffers come from the [`Env`]), lock or
//! system call.

use std::collections::VecDeque;

use crate::ecn;
use crate::frame::Frame;
use crate::metadata::{DropReason, HeaderKind, InstanceType, PortId, StdMeta};
use crate::pre::Copy;
use crate::runtime::{Dest, EgressVerdict, Worker};
use crate::tm::{Dequeued, Queued, TrafficManager, TxState};
use crate::wire::{self, EtherType, EthernetFrame, MacAddr, PfcFrame, PfcRepr};

/// A frame in a buffer: `bytes[start..start + len]`.
#[derive(Debug)]
pub struct Pkt<B> {
    /// The buffer.
    pub buf: B,
    /// Offset of the frame in the buffer.
    pub start: usize,
    /// Frame length.
    pub len: usize,
}

/// Packet buffers: the data plane's pool, or the simulator's vectors.
pub trait Buffers {
    /// A buffer handle, owned by whoever holds the packet.
    type Buf;
    /// The whole buffer, to read.
    fn bytes<'a>(&'a self, b: &'a Self::Buf) -> &'a [u8];
    /// The whole buffer, to write.
    fn bytes_mut<'a>(&'a self, b: &'a mut Self::Buf) -> &'a mut [u8];
    /// A free buffer, if any is left.
    fn alloc(&mut self) -> Option<Self::Buf>;
    /// Gives a buffer back.
    fn free(&mut self, b: Self::Buf);
    /// Spare bytes kept in front of a frame written into a fresh buffer.
    fn headroom(&self) -> usize;
}

/// What the packet path needs from whoever runs it, besides buffers.
pub trait Env: Buffers {
    /// Whether `port` exists here (packets for other ports are dropped as `no_such_port`).
    fn has_port(&self, port: PortId) -> bool;
    /// `port` has something to do (a packet queued in an empty queue, a PFC frame to send):
    /// wake its owner if that is not the caller.
    fn wake(&mut self, port: PortId);
    /// A packet left egress for `port` (before its propagation delay), with its metadata.
    fn emitted(&mut self, _port: PortId, _md: &StdMeta) {}
    /// A frame is ready to go out of `port` (after its delay): the place for capture.
    fn departing(&mut self, _port: PortId, _frame: &Pkt<Self::Buf>, _now: u64) {}
    /// A PFC frame was queued for sending on `port`.
    fn pfc_sent(&mut self, _port: PortId) {}
    /// Per-packet trace lines of a stage that ran for `port`.
    fn trace(&mut self, _port: PortId, _lines: Vec<String>) {}
}

/// What [`Driver::receive`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// A PAUSE or PFC frame: consumed by the MAC, as in hardware (the program never sees it).
    Pause,
    /// Ran through ingress.
    Ingress,
}

/// The transmit side of one port, held by its owner.
#[derive(Debug)]
pub struct PortTx<B> {
    id: PortId,
    tx: TxState<Pkt<B>>,
    /// Frames held for the propagation delay: (release time, frame).
    delay: VecDeque<(u64, Pkt<B>)>,
    /// Frames ready to send, oldest first.
    pub out: VecDeque<Pkt<B>>,
    /// When this port last sent XOFF (to refresh it before it expires).
    last_xoff: u64,
}

impl<B> PortTx<B> {
    /// Whether [`Driver::transmit`] on this port would do nothing at `tm`: nothing queued or
    /// held, nothing in the delay line, no PFC frame to send or refresh.
    pub fn idle(&self, tm: &TrafficManager<Pkt<B>>) -> bool {
        self.delay.is_empty() && tm.idle(&self.tx)
    }

    /// The transmit side of `port` of `tm`.
    pub fn new(tm: &TrafficManager<Pkt<B>>, port: PortId) -> Self {
        PortTx {
            id: port,
            tx: tm.tx_state(port),
            delay: VecDeque::new(),
            out: VecDeque::new(),
            last_xoff: 0,
        }
    }

    /// The port number.
    pub fn id(&self) -> PortId {
        self.id
    }

    /// Frames between the TM and the wire (delayed or ready).
    pub fn backlog(&self) -> usize {
        self.delay.len() + self.out.len()
    }

    /// Takes every frame the port still holds (on shutdown).
    pub fn drain(&mut self) -> impl Iterator<Item = Pkt<B>> + '_ {
        self.out
            .drain(..)
            .chain(self.delay.drain(..).map(|(_, f)| f))
    }
}

/// One worker's packet path: its program runtime, the packets re-entering ingress, and scratch
/// space. Not shared.
#[derive(Debug)]
pub struct Driver<B> {
    worker: Worker,
    /// Packets re-entering ingress (recirculated, resubmitted, injected): frame and metadata.
    again: VecDeque<(Pkt<B>, StdMeta)>,
    copies: Vec<Copy>,
}

impl<B> Driver<B> {
    /// A driver running `worker`.
    pub fn new(worker: Worker) -> Self {
        Driver {
            worker,
            again: VecDeque::new(),
            copies: Vec::new(),
        }
    }

    /// The program runtime (tracing, drop counting).
    pub fn worker(&mut self) -> &mut Worker {
        &mut self.worker
    }

    /// Loads the table snapshot for a batch.
    #[inline]
    pub fn begin_batch(&mut self) {
        self.worker.begin_batch();
    }

    /// Releases the snapshot (call before sleeping).
    #[inline]
    pub fn end_batch(&mut self) {
        self.worker.end_batch();
    }

    /// Whether packets wait to re-enter ingress.
    pub fn pending(&self) -> bool {
        !self.again.is_empty()
    }

    /// Queues a frame for ingress with metadata `md` (packet-out from the controller, generated
    /// packets); it runs on the next [`Driver::run_pending`].
    pub fn inject(&mut self, pkt: Pkt<B>, md: StdMeta) {
        self.again.push_back((pkt, md));
    }

    /// Takes every packet waiting to re-enter ingress (on shutdown).
    pub fn drain(&mut self) -> impl Iterator<Item = Pkt<B>> + '_ {
        self.again.drain(..).map(|(p, _)| p)
    }

    /// A frame received on data port `port` at `now`: PAUSE/PFC frames are consumed here (the
    /// MAC's job) and go to the traffic manager, which pauses that port's transmit side only if
    /// the port has PFC enabled; everything else runs through ingress and is queued for its
    /// egress ports.
    pub fn receive<E: Env<Buf = B>>(
        &mut self,
        env: &mut E,
        tm: &TrafficManager<Pkt<B>>,
        port: PortId,
        pkt: Pkt<B>,
        now: u64,
    ) -> Received {
        if let Some(pause) = mac_control(env.bytes(&pkt.buf).get(pkt.start..pkt.start + pkt.len)) {
            match pause {
                Ok((vector, quanta)) => {
                    tm.pause_received(port, vector, quanta, now);
                }
                // A MAC control frame that is no PAUSE or PFC frame: counted, never forwarded.
                Err(e) => self
                    .worker
                    .count_drop(DropReason::Malformed(HeaderKind::Pfc, e), pkt.len as u32),
            }
            env.free(pkt.buf);
            return Received::Pause;
        }
        let md = StdMeta::new(port, pkt.len, now);
        self.ingress(env, tm, pkt, md, now);
        Received::Ingress
    }

    /// Runs up to `budget` waiting packets through ingress; returns whether any ran.
    pub fn run_pending<E: Env<Buf = B>>(
        &mut self,
        env: &mut E,
        tm: &TrafficManager<Pkt<B>>,
        now: u64,
        budget: usize,
    ) -> bool {
        let mut ran = false;
        for _ in 0..budget {
            let Some((pkt, md)) = self.again.pop_front() else {
                break;
            };
            ran = true;
            self.ingress(env, tm, pkt, md, now);
        }
        ran
    }

    fn ingress<E: Env<Buf = B>>(
        &mut self,
        env: &mut E,
        tm: &TrafficManager<Pkt<B>>,
        mut f: Pkt<B>,
        mut md: StdMeta,
        now: u64,
    ) {
        let verdict = {
            let mut pf = Frame::new(env.bytes_mut(&mut f.buf), f.start, f.len);
            let v = self.worker.ingress(now, &mut pf, &mut md);
            f.start = pf.start();
            f.len = pf.len();
            v
        };
        self.flush_trace(env, md.ingress_port);
        if verdict.dest == Dest::Resubmit {
            Worker::prepare_resubmit(&mut md);
            self.again.push_back((f, md));
            return;
        }
        let mut copies = std::mem::take(&mut self.copies);
        copies.clear();
        self.worker.ingress_copies(&verdict, |c| copies.push(c));
        let mut original = Some(f);
        let n = copies.len();
        for (k, c) in copies.drain(..).enumerate() {
            // The last copy takes the original buffer; the others get copies of it.
            let frame = if k + 1 == n {
                original.take().map(|mut o| {
                    if c.truncate != 0 {
                        o.len = o.len.min(c.truncate as usize);
                    }
                    o
                })
            } else {
                original
                    .as_ref()
                    .and_then(|o| duplicate(env, o, c.truncate))
            };
            let Some(frame) = frame else {
                self.worker.count_drop(DropReason::TailDrop, 0);
                continue;
            };
            self.enqueue(env, tm, frame, copy_meta(&md, &c), now);
        }
        self.copies = copies;
        if let Some(f) = original {
            env.free(f.buf);
        }
    }

    fn enqueue<E: Env<Buf = B>>(
        &mut self,
        env: &mut E,
        tm: &TrafficManager<Pkt<B>>,
        f: Pkt<B>,
        md: StdMeta,
        now: u64,
    ) {
        let port = md.egress_port;
        let len = u32::try_from(f.len).unwrap_or(u32::MAX);
        if !env.has_port(port) {
            // No port with this number: nobody would ever dequeue it.
            self.worker.count_drop(DropReason::NoSuchPort, len);
            env.free(f.buf);
            return;
        }
        let ingress = md.ingress_port;
        let q = Queued {
            buf: f,
            len,
            meta: md,
        };
        let marking = &*env;
        let result = tm.enqueue_marking(port, q, now, |q| {
            let bytes = marking.bytes_mut(&mut q.buf.buf);
            if let Some(frame) = bytes.get_mut(q.buf.start..q.buf.start + q.buf.len) {
                ecn::mark_ce(frame);
            }
        });
        match result {
            Ok(a) => {
                if a.wake {
                    env.wake(port);
                }
                if tm.pfc_pending(ingress) {
                    env.wake(ingress);
                }
            }
            Err((q, _)) => {
                self.worker.count_drop(DropReason::TailDrop, len);
                env.free(q.buf.buf);
            }
        }
    }

    /// Port `port`'s turn: sends a due PFC frame, then dequeues up to `budget` packets by
    /// priority and shaping, runs egress on each, and moves frames whose propagation delay is
    /// over to `port.out`. Returns (did work, when to come back at the latest).
    pub fn transmit<E: Env<Buf = B>>(
        &mut self,
        env: &mut E,
        tm: &TrafficManager<Pkt<B>>,
        port: &mut PortTx<B>,
        now: u64,
        budget: usize,
    ) -> (bool, Option<u64>) {
        let mut busy = false;
        let id = port.id;
        if let Some((vector, quanta)) = tm.pfc_due(id, port.last_xoff, now) {
            busy = true;
            if self.send_pfc(env, port, vector, quanta, now) {
                env.pfc_sent(id);
            } else {
                // No buffer now: ask again on the next pass rather than lose an XON.
                tm.pfc_retry(id);
            }
        }
        let mut next = tm.pfc_refresh_at(id, port.last_xoff, now);
        for _ in 0..budget {
            match tm.dequeue(&mut port.tx, now) {
                Dequeued::Packet(q) => {
                    busy = true;
                    let ingress = q.meta.ingress_port;
                    if let Some((f, md)) = self.egress(env, tm, q, now) {
                        env.emitted(id, &md);
                        let delay = tm.delay_ns(id);
                        if delay == 0 {
                            env.departing(id, &f, now);
                            port.out.push_back(f);
                            tm.release(id, 1);
                        } else {
                            port.delay.push_back((now.saturating_add(delay), f));
                        }
                    } else {
                        tm.release(id, 1);
                    }
                    if tm.pfc_pending(ingress) {
                        env.wake(ingress);
                    }
                }
                Dequeued::Wait { at } => {
                    next = earliest(next, Some(at));
                    break;
                }
                Dequeued::Empty => break,
            }
        }
        while port.delay.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, f)) = port.delay.pop_front() {
                env.departing(id, &f, now);
                port.out.push_back(f);
                tm.release(id, 1);
            }
        }
        if let Some((t, _)) = port.delay.front() {
            next = earliest(next, Some(*t));
        }
        (busy, next)
    }

    /// The CPU port's turn: dequeues up to `budget` packets bound for it, runs egress, and hands
    /// each emitted frame to `deliver` (packet-in) with its metadata (`qid` is the CPU port's
    /// queue it came through, its packet-in class). Returns whether it did work.
    pub fn transmit_cpu<E: Env<Buf = B>>(
        &mut self,
        env: &mut E,
        tm: &TrafficManager<Pkt<B>>,
        tx: &mut TxState<Pkt<B>>,
        now: u64,
        budget: usize,
        mut deliver: impl FnMut(&[u8], &StdMeta),
    ) -> bool {
        self.drain_to(env, tm, tx, now, budget, |_, env, f, md| {
            deliver(frame_bytes(env, &f), &md);
            env.free(f.buf);
        })
    }

    /// The recirculation port's turn (Tofino's loopback port): dequeues up to `budget` packets
    /// queued for it (egress_spec or clone replicas naming the recirculation port), runs egress
    /// on each with `egress_port` = that port, and sends what egress emits back to ingress as a
    /// recirculated packet (bridged metadata kept, the recirculation count raised, so a loop
    /// ends at the runtime's cap). Returns whether it did work.
    pub fn transmit_loopback<E: Env<Buf = B>>(
        &mut self,
        env: &mut E,
        tm: &TrafficManager<Pkt<B>>,
        tx: &mut TxState<Pkt<B>>,
        now: u64,
        budget: usize,
    ) -> bool {
        self.drain_to(env, tm, tx, now, budget, |d, env, f, md| {
            if md.recirc_count >= d.worker.max_recirculations() {
                d.worker
                    .count_drop(DropReason::RecircLimit, u32::try_from(f.len).unwrap_or(0));
                env.free(f.buf);
                return;
            }
            let rmd = d.worker.prepare_recirculate(&md, f.len, now);
            d.again.push_back((f, rmd));
        })
    }

    /// Dequeues up to `budget` packets of a port that is not a wire (the CPU port, the
    /// loopback), runs egress on each and hands what egress emits to `out`. Returns whether it
    /// did work.
    fn drain_to<E: Env<Buf = B>>(
        &mut self,
        env: &mut E,
        tm: &TrafficManager<Pkt<B>>,
        tx: &mut TxState<Pkt<B>>,
        now: u64,
        budget: usize,
        mut out: impl FnMut(&mut Self, &mut E, Pkt<B>, StdMeta),
    ) -> bool {
        let mut busy = false;
        for _ in 0..budget {
            let Dequeued::Packet(q) = tm.dequeue(tx, now) else {
                break;
            };
            busy = true;
            let port = q.meta.egress_port;
            tm.release(tx.port(), 1);
            if let Some((f, md)) = self.egress(env, tm, q, now) {
                env.emitted(port, &md);
                out(self, env, f, md);
            }
        }
        busy
    }

    /// Runs egress on a dequeued packet: E2E clones are queued, a recirculated packet waits to
    /// re-enter ingress, a dropped one is freed. Returns the frame to send, with its metadata.
    fn egress<E: Env<Buf = B>>(
        &mut self,
        env: &mut E,
        tm: &TrafficManager<Pkt<B>>,
        q: Queued<Pkt<B>>,
        now: u64,
    ) -> Option<(Pkt<B>, StdMeta)> {
        let Queued {
            buf: mut f,
            meta: mut md,
            ..
        } = q;
        let verdict = {
            let mut pf = Frame::new(env.bytes_mut(&mut f.buf), f.start, f.len);
            let v = self.worker.egress(now, &mut pf, &mut md);
            f.start = pf.start();
            f.len = pf.len();
            v
        };
        self.flush_trace(env, md.egress_port);
        let (EgressVerdict::Emit { clone }
        | EgressVerdict::Recirculate { clone }
        | EgressVerdict::Drop { clone, .. }) = verdict;
        // E2E clones: copies of the packet as egress left it, queued for the session's ports. A
        // clone does not clone itself again (no replication loops).
        if let Some(session) = clone.filter(|_| md.instance_type != InstanceType::EgressClone) {
            let mut copies = std::mem::take(&mut self.copies);
            copies.clear();
            self.worker
                .clone_copies(session, InstanceType::EgressClone, |c| copies.push(c));
            for c in copies.drain(..) {
                let Some(d) = duplicate(env, &f, c.truncate) else {
                    self.worker.count_drop(DropReason::TailDrop, 0);
                    continue;
                };
                self.enqueue(env, tm, d, copy_meta(&md, &c), now);
            }
            self.copies = copies;
        }
        // What egress appended for its clones leaves with them only.
        let tail = std::mem::take(&mut md.e2e_tail);
        if tail != 0 {
            f.len = f.len.saturating_sub(tail as usize);
        }
        match verdict {
            EgressVerdict::Emit { .. } => Some((f, md)),
            EgressVerdict::Recirculate { .. } => {
                let rmd = self.worker.prepare_recirculate(&md, f.len, now);
                self.again.push_back((f, rmd));
                None
            }
            EgressVerdict::Drop { .. } => {
                env.free(f.buf);
                None
            }
        }
    }

    /// Builds a PFC frame in a fresh buffer at the head of `port.out`; false without a buffer.
    fn send_pfc<E: Env<Buf = B>>(
        &mut self,
        env: &mut E,
        port: &mut PortTx<B>,
        vector: u16,
        quanta: [u16; 8],
        now: u64,
    ) -> bool {
        let Some(mut b) = env.alloc() else {
            return false;
        };
        let repr = PfcRepr::Pfc {
            class_enable_vector: vector,
            quanta,
        };
        let hr = env.headroom();
        let len = 14 + repr.buffer_len();
        let bytes = env.bytes_mut(&mut b);
        let Some(frame) = bytes.get_mut(hr..hr + len) else {
            env.free(b);
            return false;
        };
        frame[0..6].copy_from_slice(MacAddr::MAC_CONTROL.as_bytes());
        frame[6..12].copy_from_slice(&pfc_source_mac(port.id));
        frame[12..14].copy_from_slice(&EtherType::MAC_CONTROL.0.to_be_bytes());
        repr.emit(&mut PfcFrame::new_unchecked(&mut frame[14..]));
        let pfc = Pkt {
            buf: b,
            start: hr,
            len,
        };
        env.departing(port.id, &pfc, now);
        port.out.push_front(pfc);
        if quanta.iter().any(|&q| q != 0) {
            port.last_xoff = now;
        }
        true
    }

    fn flush_trace<E: Env<Buf = B>>(&mut self, env: &mut E, port: PortId) {
        let lines = self.worker.take_trace();
        if !lines.is_empty() {
            env.trace(port, lines);
        }
    }
}

/// The metadata of copy `c` (a replica, a clone, or the packet itself) of a packet with `md`: its
/// port, replica id and queue, and its instance type unless it is the packet itself.
fn copy_meta(md: &StdMeta, c: &Copy) -> StdMeta {
    let mut m = *md;
    // A copy's own egress decides these: a clone made as its original asked to recirculate
    // does not recirculate too, nor is a clone of a packet its program dropped (mark_to_drop
    // with clone3/clone_preserving_field_list, in ingress or egress) dropped with it: BMv2
    // makes the clone before it drops the original, and egress starts with a fresh egress_spec.
    m.e2e_tail = 0;
    m.recirculate = false;
    m.drop = None;
    m.egress_port = c.port;
    m.egress_rid = c.rid;
    m.qid = c.qid;
    if c.instance_type != InstanceType::Normal {
        m.instance_type = c.instance_type;
    }
    m
}

/// The source MAC of PFC frames a switch sends on `port` (locally administered).
pub fn pfc_source_mac(port: PortId) -> [u8; 6] {
    [0x02, 0x50, 0x49, 0x53, (port >> 8) as u8, port as u8]
}

fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The bytes of frame `f`.
pub fn frame_bytes<'a, E: Buffers>(env: &'a E, f: &'a Pkt<E::Buf>) -> &'a [u8] {
    env.bytes(&f.buf)
        .get(f.start..f.start + f.len)
        .unwrap_or_default()
}

/// A copy of `f` in a new buffer (at most `truncate` bytes if non-zero). The copy starts at the
/// buffer's headroom, or earlier when the frame would not fit after it (a frame that grew into
/// its own headroom, e.g. by a restored VLAN tag), so no copy runs past its buffer.
fn duplicate<E: Buffers>(env: &mut E, f: &Pkt<E::Buf>, truncate: u32) -> Option<Pkt<E::Buf>> {
    let mut b = env.alloc()?;
    let hr = env.headroom();
    let src = frame_bytes(env, f);
    let dst = env.bytes_mut(&mut b);
    let mut len = src.len().min(dst.len());
    if truncate != 0 {
        len = len.min(truncate as usize);
    }
    let start = hr.min(dst.len() - len);
    dst[start..start + len].copy_from_slice(&src[..len]);
    Some(Pkt { buf: b, start, len })
}

/// `Some(pause)` for a MAC control frame (`Ok((vector, quanta))` for a well-formed PAUSE or PFC
/// frame, the error for one the MAC cannot use), `None` for every other frame. A PAUSE frame
/// pauses every class (vector 0xff). Simulated hosts read pauses with it too.
pub fn mac_control(bytes: Option<&[u8]>) -> Option<Result<(u16, [u16; 8]), wire::Error>> {
    let eth = EthernetFrame::new_checked(bytes?).ok()?;
    if eth.ethertype() != EtherType::MAC_CONTROL {
        return None;
    }
    Some(
        PfcFrame::new_checked(eth.payload())
            .and_then(|pfc| PfcRepr::parse(&pfc))
            .map(|r| match r {
                PfcRepr::Pfc {
                    class_enable_vector,
                    quanta,
                } => (class_enable_vector, quanta),
                PfcRepr::Pause { quanta } => (0xff, [quanta; 8]),
            }),
    )
}
