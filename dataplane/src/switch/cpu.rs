//! The CPU port: the controller side (packet-ins out, packet-outs in), worker 0's transmit turn
//! for it, and the copy of packet-ins and digests the switch-local agent gets; and worker 0's
//! turn for the recirculation (loopback) port.

use super::worker::DpEnv;
use super::*;

/// Packet-ins waiting for the agent at most.
pub const AGENT_QUEUE: usize = 1024;

/// Packet-ins waiting for the controller side (the P4Runtime service) at most.
pub const PACKET_IN_QUEUE: usize = 4096;

/// Packet-in classes: a packet-in's class is the CPU port's traffic-manager queue it came
/// through (its `qid`, the class of service a program or a clone session picked).
pub const CPU_CLASSES: usize = 8;

/// The limits of one packet-in class (issue 10, defect 9). A class is policed on its own, so a
/// flood in one class cannot starve another: its rate (a token bucket in packets per second), and
/// the share of the controller's queue ([`PACKET_IN_QUEUE`]) and of the agent's queue
/// ([`AGENT_QUEUE`]) its packet-ins may fill. By default class 0, the queue programs punt on
/// (`basic`'s ARP, NDP and ACL punts), gets [`CpuClass::PUNT`]; classes 1 to 7, for what a
/// program sends its agent or controller on purpose (clone sessions with a class of service,
/// feedback), get [`CpuClass::FEEDBACK`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuClass {
    /// Packet-ins per second this class delivers at most (0: no rate limit).
    pub rate_pps: u64,
    /// Packet-ins the class may deliver at once after a quiet spell (the bucket's depth).
    pub burst: u32,
    /// The share of each queue (the controller's and the agent's) this class may fill, in
    /// eighths (1 to 8): a class at 4 leaves half of each queue to the others.
    pub share_eighths: u8,
}

impl CpuClass {
    /// Punts: 20,000 packet-ins per second (a burst of 2,000), at most half of each queue.
    pub const PUNT: CpuClass = CpuClass {
        rate_pps: 20_000,
        burst: 2_000,
        share_eighths: 4,
    };
    /// Feedback: no rate limit, the whole of each queue.
    pub const FEEDBACK: CpuClass = CpuClass {
        rate_pps: 0,
        burst: 0,
        share_eighths: 8,
    };
}

/// What became of one class's packet-ins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuClassStats {
    /// Handed to the controller side.
    pub delivered: u64,
    /// Dropped by the class's rate limit (neither the controller nor the agent got them).
    pub policed: u64,
    /// Refused because the class's share of the controller's queue was full.
    pub controller_full: u64,
    /// Not copied to the agent because the class's share of its queue was full.
    pub agent_full: u64,
}

/// The classes' settings and counters, shared by worker 0 (which delivers packet-ins) and the
/// admin side.
#[derive(Debug)]
pub(super) struct CpuClasses {
    rate_pps: [AtomicU64; CPU_CLASSES],
    burst: [AtomicU64; CPU_CLASSES],
    share: [AtomicU64; CPU_CLASSES],
    delivered: [AtomicU64; CPU_CLASSES],
    policed: [AtomicU64; CPU_CLASSES],
    controller_full: [AtomicU64; CPU_CLASSES],
    agent_full: [AtomicU64; CPU_CLASSES],
}

impl Default for CpuClasses {
    fn default() -> Self {
        let c = CpuClasses {
            rate_pps: Default::default(),
            burst: Default::default(),
            share: Default::default(),
            delivered: Default::default(),
            policed: Default::default(),
            controller_full: Default::default(),
            agent_full: Default::default(),
        };
        for class in 0..CPU_CLASSES {
            let def = if class == 0 {
                CpuClass::PUNT
            } else {
                CpuClass::FEEDBACK
            };
            c.set(class, def);
        }
        c
    }
}

impl CpuClasses {
    fn set(&self, class: usize, c: CpuClass) {
        self.rate_pps[class].store(c.rate_pps, Ordering::Relaxed);
        self.burst[class].store(u64::from(c.burst), Ordering::Relaxed);
        self.share[class].store(u64::from(c.share_eighths.clamp(1, 8)), Ordering::Relaxed);
    }

    fn get(&self, class: usize) -> CpuClass {
        CpuClass {
            rate_pps: self.rate_pps[class].load(Ordering::Relaxed),
            burst: u32::try_from(self.burst[class].load(Ordering::Relaxed)).unwrap_or(u32::MAX),
            share_eighths: u8::try_from(self.share[class].load(Ordering::Relaxed)).unwrap_or(8),
        }
    }

    /// How many of a queue of `capacity` packet-ins `class` may fill.
    fn limit(&self, class: usize, capacity: usize) -> usize {
        let share = usize::try_from(self.share[class].load(Ordering::Relaxed)).unwrap_or(8);
        (capacity * share.clamp(1, 8)).div_ceil(8)
    }
}

/// Worker 0's token buckets, one per class, in nanopackets (10^9 per packet-in).
#[derive(Debug, Default)]
pub(super) struct CpuBuckets {
    tokens: [u128; CPU_CLASSES],
    last: [u64; CPU_CLASSES],
}

impl CpuBuckets {
    /// Takes one packet-in's token of `class` at `now`; false when the class is over its rate.
    fn admit(&mut self, classes: &CpuClasses, class: usize, now: u64) -> bool {
        let rate = classes.rate_pps[class].load(Ordering::Relaxed);
        if rate == 0 {
            return true;
        }
        const UNIT: u128 = 1_000_000_000;
        let depth = u128::from(classes.burst[class].load(Ordering::Relaxed).max(1)) * UNIT;
        let elapsed = u128::from(now.saturating_sub(self.last[class]));
        self.last[class] = now;
        self.tokens[class] = (self.tokens[class] + elapsed * u128::from(rate)).min(depth);
        if self.tokens[class] >= UNIT {
            self.tokens[class] -= UNIT;
            true
        } else {
            false
        }
    }
}

impl Shared {
    /// Tells the agent digests wait for it (an empty frame on its queue; one at a time).
    pub(super) fn ring_agent_doorbell(&self) {
        let pipeline = self.pipeline.load();
        let externs = pipeline.control.externs();
        if !externs.agent_digests.is_empty() && !self.agent_doorbell.swap(true, Ordering::AcqRel) {
            let _ = self.agent_in.0.try_send(Vec::new());
        }
    }
}

/// The controller side of the CPU port: packet-ins out, packet-outs in.
#[derive(Debug, Clone)]
pub struct CpuPort {
    /// Frames the switch sent to the CPU port (with the program's packet_in header).
    pub packet_in: Receiver<Vec<u8>>,
    /// Frames to inject from the CPU port (with the program's packet_out header).
    pub(super) packet_out: Sender<Vec<u8>>,
    pub(super) shared: Arc<Shared>,
}

/// Why [`CpuPort::send`] refused a packet-out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketOutRefused {
    /// The queue to the data plane is full (or the switch stopped).
    Full,
    /// The frame is longer than a buffer carries ([`CpuPort::max_frame`]): it is refused whole,
    /// never cut.
    TooLong {
        /// The frame's length (controller header and payload).
        len: usize,
        /// The longest frame the CPU port takes.
        max: usize,
    },
}

impl CpuPort {
    /// The longest frame (controller header and payload) a packet-out may be: what a buffer
    /// carries after its headroom (3,840 bytes with the default 4,096-byte buffers).
    pub fn max_frame(&self) -> usize {
        self.shared.pool.buf_size() - HEADROOM
    }

    /// Injects a frame as if the controller sent it (it enters ingress on the CPU port). Never
    /// blocks: it is called from the P4Runtime service's async runtime, where a blocking send
    /// would stall every other call while worker 0 is slow. A frame longer than
    /// [`CpuPort::max_frame`] is refused whole and counted in [`CpuPort::too_long`]; when the
    /// queue to the data plane is full (or the switch stopped) the frame is dropped and counted
    /// in [`CpuPort::dropped`].
    pub fn send(&self, frame: Vec<u8>) -> Result<(), PacketOutRefused> {
        let max = self.max_frame();
        if frame.len() > max {
            self.shared
                .packet_out_too_long
                .fetch_add(1, Ordering::Relaxed);
            return Err(PacketOutRefused::TooLong {
                len: frame.len(),
                max,
            });
        }
        match self.packet_out.try_send(frame) {
            Ok(()) => {
                self.shared.wake(0);
                Ok(())
            }
            Err(_) => {
                self.shared
                    .packet_out_dropped
                    .fetch_add(1, Ordering::Relaxed);
                // Worker 0 may be asleep with a full queue: wake it so that it drains.
                self.shared.wake(0);
                Err(PacketOutRefused::Full)
            }
        }
    }

    /// Packet-outs dropped because the queue to the data plane was full.
    pub fn dropped(&self) -> u64 {
        self.shared.packet_out_dropped.load(Ordering::Relaxed)
    }

    /// Packet-outs refused because they were longer than [`CpuPort::max_frame`].
    pub fn too_long(&self) -> u64 {
        self.shared.packet_out_too_long.load(Ordering::Relaxed)
    }

    /// The limits of packet-in class `class` (0 to 7), if there is such a class.
    pub fn class(&self, class: usize) -> Option<CpuClass> {
        (class < CPU_CLASSES).then(|| self.shared.cpu_classes.get(class))
    }

    /// Sets the limits of packet-in class `class` (0 to 7; a share outside 1..=8 is clamped).
    pub fn set_class(&self, class: usize, c: CpuClass) -> Result<(), String> {
        if class >= CPU_CLASSES {
            return Err(format!("no packet-in class {class} (0 to 7)"));
        }
        self.shared.cpu_classes.set(class, c);
        Ok(())
    }

    /// What became of class `class`'s packet-ins so far.
    pub fn class_stats(&self, class: usize) -> Option<CpuClassStats> {
        let x = &self.shared.cpu_classes;
        let l = |a: &[AtomicU64; CPU_CLASSES]| a[class].load(Ordering::Relaxed);
        (class < CPU_CLASSES).then(|| CpuClassStats {
            delivered: l(&x.delivered),
            policed: l(&x.policed),
            controller_full: l(&x.controller_full),
            agent_full: l(&x.agent_full),
        })
    }
}

impl WorkerLoop {
    /// Dequeues what is bound for the CPU port and hands it to the controller side.
    pub(super) fn transmit_cpu(&mut self, sh: &Shared, now: u64) -> bool {
        let cpu = sh.config.cpu_port;
        let mut tx = self.cpu_tx.take().unwrap_or_else(|| sh.tm.tx_state(cpu));
        let mut env = DpEnv {
            sh,
            cache: &mut self.cache,
            me: self.id,
        };
        let c = &sh.counters[usize::from(cpu)];
        let classes = &sh.cpu_classes;
        let buckets = &mut self.cpu_buckets;
        let busy = self
            .driver
            .transmit_cpu(&mut env, &sh.tm, &mut tx, now, BATCH, |bytes, md| {
                // The class is the CPU port's queue the packet-in came through (0..=7).
                let class = usize::from(md.qid) % CPU_CLASSES;
                if !buckets.admit(classes, class, now) {
                    classes.policed[class].fetch_add(1, Ordering::Relaxed);
                    c.errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                // Each class may fill only its share of each queue, so that a flood in one
                // leaves room for the others; the length is only read by this thread's sends
                // and lowered by the consumer, so a class never goes past its share.
                if sh.packet_in.len() >= classes.limit(class, PACKET_IN_QUEUE)
                    || sh.packet_in.try_send(bytes.to_vec()).is_err()
                {
                    classes.controller_full[class].fetch_add(1, Ordering::Relaxed);
                    c.errors.fetch_add(1, Ordering::Relaxed);
                } else {
                    classes.delivered[class].fetch_add(1, Ordering::Relaxed);
                    c.tx.fetch_add(1, Ordering::Relaxed);
                }
                if sh.agent_attached.load(Ordering::Relaxed)
                    && (sh.agent_in.0.len() >= classes.limit(class, AGENT_QUEUE)
                        || sh.agent_in.0.try_send(bytes.to_vec()).is_err())
                {
                    classes.agent_full[class].fetch_add(1, Ordering::Relaxed);
                    sh.agent_in_dropped.fetch_add(1, Ordering::Relaxed);
                }
            });
        self.cpu_tx = Some(tx);
        busy
    }

    /// The recirculation port's turn: what egress emits there re-enters ingress on the next
    /// pass.
    pub(super) fn transmit_loopback(&mut self, sh: &Shared, now: u64) -> bool {
        let port = sh.config.recirc_port;
        let mut tx = self.loop_tx.take().unwrap_or_else(|| sh.tm.tx_state(port));
        let mut env = DpEnv {
            sh,
            cache: &mut self.cache,
            me: self.id,
        };
        let busy = self
            .driver
            .transmit_loopback(&mut env, &sh.tm, &mut tx, now, BATCH);
        self.loop_tx = Some(tx);
        busy
    }
}
