//! The CPU port: the controller side (packet-ins out, packet-outs in), worker 0's transmit turn
//! for it, and the copy of packet-ins and digests the switch-local agent gets.

use super::worker::DpEnv;
use super::*;

/// Packet-ins waiting for the agent at most.
pub const AGENT_QUEUE: usize = 1024;

impl Shared {
    /// Tells the agent digests wait for it (an empty frame on its queue; one at a time).
    pub(super) fn ring_agent_doorbell(&self) {
        let externs = self.pipeline.control.externs();
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
}

impl WorkerLoop {
    /// Dequeues what is bound for the CPU port and hands it to the controller side.
    pub(super) fn transmit_cpu(&mut self, sh: &Shared, now: u64) -> bool {
        let cpu = sh.pipeline.config.cpu_port;
        let mut tx = self.cpu_tx.take().unwrap_or_else(|| sh.tm.tx_state(cpu));
        let mut env = DpEnv {
            sh,
            cache: &mut self.cache,
            me: self.id,
        };
        let c = &sh.counters[usize::from(cpu)];
        let busy = self
            .driver
            .transmit_cpu(&mut env, &sh.tm, &mut tx, now, BATCH, |bytes| {
                if sh.packet_in.try_send(bytes.to_vec()).is_err() {
                    c.errors.fetch_add(1, Ordering::Relaxed);
                } else {
                    c.tx.fetch_add(1, Ordering::Relaxed);
                }
                if sh.agent_attached.load(Ordering::Relaxed)
                    && sh.agent_in.0.try_send(bytes.to_vec()).is_err()
                {
                    sh.agent_in_dropped.fetch_add(1, Ordering::Relaxed);
                }
            });
        self.cpu_tx = Some(tx);
        busy
    }
}
