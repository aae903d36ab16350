//! A deterministic in-memory switch: a program, its PRE, an unbounded FIFO per port in place of the
//! traffic manager, and recirculation. Tests and the demo use it to run frames through a program
//! byte for byte, with time given by the caller.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::frame::OwnedFrame;
use crate::metadata::{InstanceType, PortId, StdMeta};
use crate::pre::Copy;
use crate::runtime::{Dest, EgressVerdict, Pipeline, Worker};

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

/// The in-memory switch.
#[derive(Debug)]
pub struct SimSwitch {
    worker: Worker,
}

impl SimSwitch {
    /// A switch running `pipeline` with one worker.
    pub fn new(pipeline: Arc<Pipeline>) -> Self {
        SimSwitch {
            worker: Worker::new(pipeline, 0, 0x5eed),
        }
    }

    /// The worker (for tracing).
    pub fn worker(&mut self) -> &mut Worker {
        &mut self.worker
    }

    /// Sends `bytes` into `port` at `now_ns`; returns every frame that leaves, in order.
    pub fn inject(&mut self, port: PortId, bytes: &[u8], now_ns: u64) -> Vec<Output> {
        let mut outputs = Vec::new();
        let mut arrivals = VecDeque::from([(
            OwnedFrame::from_bytes(bytes),
            StdMeta::new(port, bytes.len(), now_ns),
        )]);
        self.worker.begin_batch();
        // Bounded: every pass increments recirc_count, which the runtime caps.
        while let Some((mut frame, mut md)) = arrivals.pop_front() {
            let verdict = frame.with_frame(|f| self.worker.ingress(now_ns, f, &mut md));
            if verdict.dest == Dest::Resubmit {
                Worker::prepare_resubmit(&mut md);
                arrivals.push_back((frame, md));
                continue;
            }
            let mut copies: Vec<Copy> = Vec::new();
            self.worker.ingress_copies(&verdict, |c| copies.push(c));
            for c in copies {
                self.egress_copy(&frame, &md, c, now_ns, &mut outputs, &mut arrivals);
            }
        }
        self.worker.end_batch();
        outputs
    }

    fn egress_copy(
        &mut self,
        frame: &OwnedFrame,
        md: &StdMeta,
        c: Copy,
        now_ns: u64,
        outputs: &mut Vec<Output>,
        arrivals: &mut VecDeque<(OwnedFrame, StdMeta)>,
    ) {
        let mut bytes = frame.data().to_vec();
        if c.truncate != 0 {
            bytes.truncate(c.truncate as usize);
        }
        let mut copy = OwnedFrame::from_bytes(&bytes);
        let mut emd = StdMeta {
            egress_port: c.port,
            egress_rid: c.rid,
            instance_type: if c.instance_type == InstanceType::Normal {
                md.instance_type
            } else {
                c.instance_type
            },
            qid: c.qid,
            enq_timestamp: now_ns,
            clone_session: None,
            drop: None,
            ..*md
        };
        let verdict = copy.with_frame(|f| self.worker.egress(now_ns, f, &mut emd));
        let clone = match verdict {
            EgressVerdict::Emit { clone } => {
                outputs.push(Output {
                    port: c.port,
                    bytes: copy.data().to_vec(),
                    instance_type: emd.instance_type,
                    rid: c.rid,
                });
                clone
            }
            EgressVerdict::Recirculate { clone } => {
                let rmd = self
                    .worker
                    .prepare_recirculate(&emd, copy.data().len(), now_ns);
                arrivals.push_back((copy.clone(), rmd));
                clone
            }
            EgressVerdict::Drop { clone, .. } => clone,
        };
        // An E2E clone does not clone itself again (no replication loops).
        let clone = clone.filter(|_| emd.instance_type != InstanceType::EgressClone);
        if let Some(session) = clone {
            let mut copies = Vec::new();
            self.worker
                .clone_copies(session, InstanceType::EgressClone, |c| copies.push(c));
            let mut cmd = emd;
            cmd.instance_type = InstanceType::EgressClone;
            for c in copies {
                self.egress_copy(&copy, &cmd, c, now_ns, outputs, arrivals);
            }
        }
    }
}
