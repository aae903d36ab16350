//! Running a program: the per-worker driver of ingress and egress, and the replication decisions
//! between them.
//!
//! The data plane (or [`crate::sim`]) owns buffers, queues and the clock. Per batch it calls
//! [`Worker::begin_batch`] (one snapshot load), then [`Worker::ingress`] on each received frame,
//! queues the copies the [`IngressVerdict`] describes (see [`Worker::ingress_copies`]), later calls
//! [`Worker::egress`] on each dequeued copy, and finally [`Worker::end_batch`] before it sleeps.

use std::sync::Arc;

use crate::control::{Control, Snapshot};
use crate::externs::Rng;
use crate::frame::Frame;
use crate::metadata::{DropReason, InstanceType, PortId, StdMeta};
use crate::pre::Copy;
use crate::program::{Ctx, Program};

/// Switch-wide settings a program run needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The CPU port number (packet-in / packet-out).
    pub cpu_port: PortId,
    /// The recirculation port number (ingress_port of recirculated packets).
    pub recirc_port: PortId,
    /// Most recirculations plus resubmits of one packet before it is dropped.
    pub max_recirculations: u8,
    /// The packet generator's port (ingress_port of generated frames).
    pub pktgen_port: PortId,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cpu_port: 510,
            recirc_port: 68,
            max_recirculations: 8,
            pktgen_port: 509,
        }
    }
}

/// A program with its control plane: what every worker shares.
#[derive(Debug)]
pub struct Pipeline {
    /// The program.
    pub program: Arc<dyn Program>,
    /// Its tables and externs.
    pub control: Arc<Control>,
    /// Settings.
    pub config: Config,
}

impl Pipeline {
    /// `program` with empty tables, for `workers` workers.
    pub fn new(program: Arc<dyn Program>, workers: usize, config: Config) -> Arc<Self> {
        let control = Arc::new(Control::new(program.schema().clone(), workers.max(1)));
        Arc::new(Pipeline {
            program,
            control,
            config,
        })
    }
}

/// Where ingress sends a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// Dropped.
    Drop(DropReason),
    /// To one port and queue.
    Port {
        /// Egress port.
        port: PortId,
        /// Queue.
        qid: u8,
    },
    /// To every replica of a multicast group.
    Multicast {
        /// Group id.
        group: u16,
        /// Queue.
        qid: u8,
    },
    /// Back to the start of ingress.
    Resubmit,
}

/// The outcome of ingress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IngressVerdict {
    /// Where the packet goes.
    pub dest: Dest,
    /// An ingress-to-egress clone session, if requested.
    pub clone: Option<u32>,
}

/// The outcome of egress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EgressVerdict {
    /// Transmit on `md.egress_port`.
    Emit {
        /// An egress-to-egress clone session, if requested.
        clone: Option<u32>,
    },
    /// Back to ingress through the recirculation port.
    Recirculate {
        /// An egress-to-egress clone session, if requested.
        clone: Option<u32>,
    },
    /// Dropped.
    Drop {
        /// Why.
        reason: DropReason,
        /// An egress-to-egress clone session, if requested.
        clone: Option<u32>,
    },
}

/// One worker's driver. Not shared: each worker thread has its own.
#[derive(Debug)]
pub struct Worker {
    pipeline: Arc<Pipeline>,
    shard: usize,
    rng: Rng,
    snapshot: Option<Snapshot>,
    /// Trace lines of the current packet, when tracing.
    trace: Option<Vec<String>>,
}

impl Worker {
    /// Worker number `shard` (its counter shard) with a random seed.
    pub fn new(pipeline: Arc<Pipeline>, shard: usize, seed: u64) -> Self {
        Worker {
            pipeline,
            shard,
            rng: Rng::new(seed),
            snapshot: None,
            trace: None,
        }
    }

    /// The pipeline.
    pub fn pipeline(&self) -> &Arc<Pipeline> {
        &self.pipeline
    }

    /// Turns per-packet tracing on or off.
    pub fn set_tracing(&mut self, on: bool) {
        self.trace = on.then(Vec::new);
    }

    /// Takes the trace lines recorded since the last call.
    pub fn take_trace(&mut self) -> Vec<String> {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Loads the table snapshot for a batch.
    #[inline]
    pub fn begin_batch(&mut self) {
        self.snapshot = Some(self.pipeline.control.snapshot());
    }

    /// Releases the snapshot (call before sleeping).
    #[inline]
    pub fn end_batch(&mut self) {
        self.snapshot = None;
    }

    fn run(
        &mut self,
        now_ns: u64,
        pkt: &mut Frame<'_>,
        md: &mut StdMeta,
        stage: fn(&dyn Program, &mut Ctx<'_>, &mut Frame<'_>, &mut StdMeta),
    ) {
        if self.snapshot.is_none() {
            self.begin_batch();
        }
        let p = &*self.pipeline;
        let Some(state) = self.snapshot.as_deref() else {
            return;
        };
        let mut cx = Ctx {
            state,
            externs: p.control.externs(),
            shard: self.shard,
            now_ns,
            rng: &mut self.rng,
            cpu_port: p.config.cpu_port,
            packet_len: u32::try_from(pkt.len()).unwrap_or(u32::MAX),
            trace: self.trace.as_mut(),
        };
        stage(&*p.program, &mut cx, pkt, md);
    }

    /// Runs ingress on `pkt`, which arrived as `md` says.
    pub fn ingress(
        &mut self,
        now_ns: u64,
        pkt: &mut Frame<'_>,
        md: &mut StdMeta,
    ) -> IngressVerdict {
        md.ingress_global_timestamp = now_ns;
        md.packet_length = u32::try_from(pkt.len()).unwrap_or(u32::MAX);
        self.run(now_ns, pkt, md, |p, cx, f, m| p.ingress(cx, f, m));
        let clone = md.clone_session.take();
        let dest = if let Some(reason) = md.drop {
            Dest::Drop(reason)
        } else if md.resubmit {
            if md.recirc_count >= self.pipeline.config.max_recirculations {
                Dest::Drop(DropReason::RecircLimit)
            } else {
                Dest::Resubmit
            }
        } else if md.mcast_grp != 0 {
            Dest::Multicast {
                group: md.mcast_grp,
                qid: md.qid,
            }
        } else if let Some(port) = md.egress_spec {
            Dest::Port { port, qid: md.qid }
        } else {
            Dest::Drop(DropReason::NoEgress)
        };
        if let Dest::Drop(reason) = dest {
            self.count_drop(reason, md.packet_length);
        }
        if let Some(t) = self.trace.as_mut() {
            t.push(format!("stage=ingress verdict={dest:?} clone={clone:?}"));
        }
        IngressVerdict { dest, clone }
    }

    /// Prepares `md` of a resubmitted packet for its next ingress pass.
    pub fn prepare_resubmit(md: &mut StdMeta) {
        *md = StdMeta {
            ingress_port: md.ingress_port,
            instance_type: InstanceType::Resubmitted,
            recirc_count: md.recirc_count.saturating_add(1),
            bridged: md.bridged,
            ..StdMeta::default()
        };
    }

    /// The copies an ingress verdict asks for (multicast replicas and clones). Unknown groups and
    /// sessions yield none and are counted as drops.
    pub fn ingress_copies(&self, verdict: &IngressVerdict, mut out: impl FnMut(Copy)) {
        let Some(state) = self.snapshot.as_deref() else {
            return;
        };
        if let Dest::Multicast { group, qid } = verdict.dest {
            match state.pre.multicast(group, qid) {
                Some(copies) => copies.for_each(&mut out),
                None => self.count_drop(DropReason::NoSuchGroup, 0),
            }
        } else if let Dest::Port { port, qid } = verdict.dest {
            out(Copy {
                port,
                rid: 0,
                instance_type: InstanceType::Normal,
                qid,
                truncate: 0,
            });
        }
        if let Some(session) = verdict.clone {
            self.clone_copies(session, InstanceType::IngressClone, out);
        }
    }

    /// The copies of clone session `session`.
    pub fn clone_copies(&self, session: u32, kind: InstanceType, out: impl FnMut(Copy)) {
        let Some(state) = self.snapshot.as_deref() else {
            return;
        };
        match state.pre.clone_copies(session, kind) {
            Some(copies) => copies.for_each(out),
            None => self.count_drop(DropReason::NoSuchGroup, 0),
        }
    }

    /// Runs egress on one copy; `md.egress_port` and the queue fields are set by the caller.
    pub fn egress(&mut self, now_ns: u64, pkt: &mut Frame<'_>, md: &mut StdMeta) -> EgressVerdict {
        md.egress_global_timestamp = now_ns;
        self.run(now_ns, pkt, md, |p, cx, f, m| p.egress(cx, f, m));
        let clone = md.clone_session.take();
        let verdict = if let Some(reason) = md.drop {
            EgressVerdict::Drop { reason, clone }
        } else if md.recirculate {
            if md.recirc_count >= self.pipeline.config.max_recirculations {
                EgressVerdict::Drop {
                    reason: DropReason::RecircLimit,
                    clone,
                }
            } else {
                EgressVerdict::Recirculate { clone }
            }
        } else {
            EgressVerdict::Emit { clone }
        };
        if let EgressVerdict::Drop { reason, .. } = verdict {
            self.count_drop(reason, u32::try_from(pkt.len()).unwrap_or(u32::MAX));
        }
        if let Some(t) = self.trace.as_mut() {
            t.push(format!(
                "stage=egress port={} verdict={verdict:?} qid={} enq_qdepth={} deq_qdepth={} \
                 deq_timedelta={}",
                md.egress_port, md.qid, md.enq_qdepth, md.deq_qdepth, md.deq_timedelta
            ));
        }
        verdict
    }

    /// Most recirculations plus resubmits of one packet.
    pub fn max_recirculations(&self) -> u8 {
        self.pipeline.config.max_recirculations
    }

    /// Metadata of a packet recirculated after egress.
    pub fn prepare_recirculate(&self, md: &StdMeta, len: usize, now_ns: u64) -> StdMeta {
        StdMeta {
            instance_type: InstanceType::Recirculated,
            recirc_count: md.recirc_count.saturating_add(1),
            bridged: md.bridged,
            ..StdMeta::new(self.pipeline.config.recirc_port, len, now_ns)
        }
    }

    /// Counts a drop decided outside the program (e.g. by the traffic manager).
    pub fn count_drop(&self, reason: DropReason, bytes: u32) {
        self.pipeline
            .control
            .externs()
            .count_drop(self.shard, reason, bytes);
    }
}
