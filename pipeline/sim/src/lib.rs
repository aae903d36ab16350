//! Simulated switches on the one packet path ([`pipeline::driver`]), with time given by the caller.
//!
//! - [`SimSwitch`]: one switch; frames go in on a port and come out of ports, byte for byte. Tests
//!   and the demo use it.
//! - [`fabric`]: `pisa-sim`, whole fabrics of switches, links and hosts in virtual time.
//!
//! Both run the same [`Driver`] as the data plane's workers, with the traffic manager on the path,
//! so queue depths, tail drops, ECN marks and PFC behave as on the real switch.

pub mod fabric;
pub mod flow;
pub mod rx;
pub mod tcp;
pub mod traffic;
pub mod workload;

use std::collections::VecDeque;
use std::sync::Arc;

use pipeline::driver::{Buffers, Driver, Env, Pkt, PortTx, frame_bytes};
use pipeline::metadata::{InstanceType, PortId, StdMeta};
use pipeline::runtime::{Pipeline, Worker};
use pipeline::tm::{PortConfig, TrafficManager, TxState};

/// Bytes in front of a frame in a simulated buffer (as in the data plane's pool).
pub const HEADROOM: usize = 256;
/// Bytes per simulated buffer (as in the data plane's pool).
pub const BUF_SIZE: usize = 4096;

/// Packet buffers as plain vectors, recycled through a free list.
#[derive(Debug, Default)]
pub struct VecBuffers {
    free: Vec<Vec<u8>>,
}

impl VecBuffers {
    /// A buffer holding `bytes` after the headroom (larger than [`BUF_SIZE`] if it must be).
    pub fn frame(&mut self, bytes: &[u8]) -> Pkt<Vec<u8>> {
        let mut b = if HEADROOM + bytes.len() <= BUF_SIZE {
            self.alloc().unwrap_or_else(|| vec![0; BUF_SIZE])
        } else {
            vec![0; HEADROOM + bytes.len()]
        };
        b[HEADROOM..HEADROOM + bytes.len()].copy_from_slice(bytes);
        Pkt {
            buf: b,
            start: HEADROOM,
            len: bytes.len(),
        }
    }
}

impl Buffers for VecBuffers {
    type Buf = Vec<u8>;

    fn bytes<'a>(&'a self, b: &'a Vec<u8>) -> &'a [u8] {
        b
    }

    fn bytes_mut<'a>(&'a self, b: &'a mut Vec<u8>) -> &'a mut [u8] {
        b
    }

    fn alloc(&mut self) -> Option<Vec<u8>> {
        Some(self.free.pop().unwrap_or_else(|| vec![0; BUF_SIZE]))
    }

    fn free(&mut self, b: Vec<u8>) {
        if b.len() == BUF_SIZE && self.free.len() < 4096 {
            self.free.push(b);
        }
    }

    fn headroom(&self) -> usize {
        HEADROOM
    }
}

/// A frame that left the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// Egress port.
    pub port: PortId,
    /// Bytes on the wire.
    pub bytes: Vec<u8>,
    /// Instance type of the copy.
    pub instance_type: InstanceType,
    /// Replica id.
    pub rid: u16,
}

/// The environment of a [`SimSwitch`]: every port exists; ports with work are served in the
/// order they got it, so replicas leave in replica order.
#[derive(Debug, Default)]
struct OneSwitch {
    bufs: VecBuffers,
    ports: usize,
    woken: VecDeque<PortId>,
    last: Option<(InstanceType, u16)>,
    outputs: Vec<Output>,
    trace: Vec<String>,
}

impl Buffers for OneSwitch {
    type Buf = Vec<u8>;
    fn bytes<'a>(&'a self, b: &'a Vec<u8>) -> &'a [u8] {
        self.bufs.bytes(b)
    }
    fn bytes_mut<'a>(&'a self, b: &'a mut Vec<u8>) -> &'a mut [u8] {
        self.bufs.bytes_mut(b)
    }
    fn alloc(&mut self) -> Option<Vec<u8>> {
        self.bufs.alloc()
    }
    fn free(&mut self, b: Vec<u8>) {
        self.bufs.free(b);
    }
    fn headroom(&self) -> usize {
        HEADROOM
    }
}

impl Env for OneSwitch {
    fn has_port(&self, port: PortId) -> bool {
        usize::from(port) < self.ports
    }
    fn wake(&mut self, port: PortId) {
        if !self.woken.contains(&port) {
            self.woken.push_back(port);
        }
    }
    fn emitted(&mut self, _port: PortId, md: &StdMeta) {
        self.last = Some((md.instance_type, md.egress_rid));
    }
    fn departing(&mut self, port: PortId, frame: &Pkt<Vec<u8>>, _now: u64) {
        let (instance_type, rid) = self.last.take().unwrap_or((InstanceType::Normal, 0));
        let bytes = frame_bytes(self, frame).to_vec();
        self.outputs.push(Output {
            port,
            bytes,
            instance_type,
            rid,
        });
    }
    fn trace(&mut self, _port: PortId, lines: Vec<String>) {
        self.trace.extend(lines);
    }
}

/// One switch in memory: its program, PRE and traffic manager (unshaped, default limits),
/// driven to completion by each injected frame.
#[derive(Debug)]
pub struct SimSwitch {
    driver: Driver<Vec<u8>>,
    recirc_port: PortId,
    loop_tx: TxState<Pkt<Vec<u8>>>,
    tm: TrafficManager<Pkt<Vec<u8>>>,
    tx: Vec<Option<PortTx<Vec<u8>>>>,
    env: OneSwitch,
}

impl SimSwitch {
    /// A switch running `pipeline` with one worker.
    pub fn new(pipeline: Arc<Pipeline>) -> Self {
        Self::with_tm(pipeline, PortConfig::default(), None)
    }

    /// A switch whose traffic manager starts with `config` on every port and, given one, a
    /// shared buffer (change ports later through [`SimSwitch::tm`]).
    pub fn with_tm(
        pipeline: Arc<Pipeline>,
        config: PortConfig,
        shared: Option<pipeline::tm::SharedBuffer>,
    ) -> Self {
        let ports = 1usize << pipeline::metadata::PORT_BITS;
        let tm = TrafficManager::new(ports, config, shared);
        SimSwitch {
            recirc_port: pipeline.config.recirc_port,
            loop_tx: tm.tx_state(pipeline.config.recirc_port),
            driver: Driver::new(Worker::new(pipeline, 0, 0x5eed)),
            tm,
            tx: (0..ports).map(|_| None).collect(),
            env: OneSwitch {
                ports,
                ..OneSwitch::default()
            },
        }
    }

    /// The traffic manager (its settings per port, depths and counters).
    pub fn tm(&self) -> &TrafficManager<Pkt<Vec<u8>>> {
        &self.tm
    }

    /// The program runtime (for tracing).
    pub fn worker(&mut self) -> &mut Worker {
        self.driver.worker()
    }

    /// Takes the trace lines recorded since the last call (with tracing on).
    pub fn take_trace(&mut self) -> Vec<String> {
        std::mem::take(&mut self.env.trace)
    }

    /// Sends `bytes` into `port` at `now_ns`; returns every frame that leaves, in order.
    pub fn inject(&mut self, port: PortId, bytes: &[u8], now_ns: u64) -> Vec<Output> {
        let pkt = self.env.bufs.frame(bytes);
        let (env, tm, driver) = (&mut self.env, &self.tm, &mut self.driver);
        driver.begin_batch();
        driver.receive(env, tm, port, pkt, now_ns);
        // Bounded: every recirculation and resubmission counts against the runtime's cap, and
        // clones do not clone themselves.
        loop {
            driver.run_pending(env, tm, now_ns, usize::MAX);
            let Some(p) = env.woken.pop_front() else {
                if driver.pending() {
                    continue;
                }
                break;
            };
            let Some(slot) = self.tx.get_mut(usize::from(p)) else {
                continue;
            };
            if p == self.recirc_port {
                // The loopback: what egress emits there re-enters ingress.
                driver.transmit_loopback(env, tm, &mut self.loop_tx, now_ns, usize::MAX);
                continue;
            }
            let tx = slot.get_or_insert_with(|| PortTx::new(tm, p));
            driver.transmit(env, tm, tx, now_ns, usize::MAX);
            for f in tx.out.drain(..) {
                env.bufs.free(f.buf);
            }
        }
        driver.end_batch();
        std::mem::take(&mut env.outputs)
    }
}
