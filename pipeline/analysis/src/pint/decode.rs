//! Path tracing, the collector side: the Inference Module (PINT §4.2) decoding one flow's path
//! from its (packet ID, hop count, digest) records by peeling.
//!
//! For every instance of every record the decoder recomputes the packet's layer and the hops
//! that acted on it (Baseline: the last writer; XOR: the fast k-bit vector of contributors), XORs
//! out the hashes of hops already known and then:
//!
//! - if exactly one contributing hop is unknown, the residual is h(M_j, packet) for that hop j: a
//!   *constraint* on j, which narrows j's candidate set to the switch IDs whose hash matches;
//! - if none is unknown, the residual must be 0 (a consistency check);
//! - otherwise the packet waits until all but one of its hops are known (peeling).
//!
//! **Resolution rule.** A hop is resolved when exactly one candidate agrees with *every*
//! constraint seen for it and at least `min_constraints` constraints were seen (default 1). With
//! b-bit hashes a constraint leaves each wrong candidate with probability 2^-b, so a hop needs
//! about log₂(|V|)/b constraints before its set shrinks to one. A hop whose candidate set becomes
//! empty, a resolved hop contradicted by a later constraint, or a fully known XOR packet with a
//! nonzero residual makes the flow **inconsistent** (wrong seed, wrong candidate set, or the path
//! changed): decoding stops and reports no path.

use std::borrow::Cow;

use super::path::{HopMask, Layer, MAX_HOPS, PathTracing, baseline_writer, xor_mask};

/// What the sink exports per packet: the collector's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// The packet ID the switches hashed (see [`crate::pint::packet_id`]).
    pub packet_id: u64,
    /// Hops the packet traversed (k), from its TTL (see [`crate::pint::hops_from_ttl`]).
    pub hops: u32,
    /// The digest as it left the last hop.
    pub digest: u32,
}

/// Where decoding stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Every hop is resolved.
    Decoded,
    /// More packets are needed.
    Incomplete,
    /// The records contradict each other or the candidate set: no path will be reported.
    Inconsistent,
}

/// The decoder's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeReport {
    /// The switch IDs in hop order, when [`Status::Decoded`].
    pub path: Option<Vec<u32>>,
    /// Records consumed (including ignored ones) up to and including the one that completed
    /// decoding, or all records offered if it did not complete.
    pub packets_used: usize,
    /// Records skipped because their hop count differed from the flow's.
    pub ignored: usize,
    /// The outcome.
    pub status: Status,
}

#[derive(Clone, Debug, Default)]
struct Hop {
    /// Indices into the candidate list agreeing with every constraint; `None` before the first.
    cands: Option<Vec<u32>>,
    constraints: u32,
    value: Option<u32>,
}

#[derive(Clone, Debug)]
struct Waiting {
    packet_id: u64,
    instance: u8,
    residual: u32,
    unknown: HopMask,
}

/// The streaming Inference Module for one flow of a known hop count `k`.
#[derive(Debug)]
pub struct PathDecoder<'a> {
    cfg: Cow<'a, PathTracing>,
    candidates: Vec<u32>,
    k: u32,
    min_constraints: u32,
    hops: Vec<Hop>,
    waiting: Vec<Waiting>,
    /// Per hop (index hop−1): indices into `waiting` of packets that have it unknown.
    by_hop: Vec<Vec<usize>>,
    queue: Vec<u32>,
    unresolved: u32,
    packets: usize,
    ignored: usize,
    inconsistent: bool,
}

impl<'a> PathDecoder<'a> {
    /// A decoder for `k`-hop paths (1..=[`MAX_HOPS`]; clamped) whose switches are among
    /// `candidates` (the fabric's switch IDs; duplicates are removed).
    pub fn new(cfg: &'a PathTracing, k: u32, candidates: &[u32]) -> PathDecoder<'a> {
        PathDecoder::with_cfg(Cow::Borrowed(cfg), k, candidates)
    }

    /// [`PathDecoder::new`] owning its configuration (a collector keeping one decoder per flow).
    pub fn owned(cfg: PathTracing, k: u32, candidates: &[u32]) -> PathDecoder<'static> {
        PathDecoder::with_cfg(Cow::Owned(cfg), k, candidates)
    }

    fn with_cfg(cfg: Cow<'a, PathTracing>, k: u32, candidates: &[u32]) -> PathDecoder<'a> {
        let k = k.clamp(1, MAX_HOPS);
        let mut candidates = candidates.to_vec();
        candidates.sort_unstable();
        candidates.dedup();
        PathDecoder {
            cfg,
            candidates,
            k,
            min_constraints: 1,
            hops: vec![Hop::default(); k as usize],
            waiting: Vec::new(),
            by_hop: vec![Vec::new(); k as usize],
            queue: Vec::new(),
            unresolved: k,
            packets: 0,
            ignored: 0,
            inconsistent: false,
        }
    }

    /// Requires at least `n` (≥ 1) agreeing constraints before a hop counts as resolved.
    pub fn with_min_constraints(mut self, n: u32) -> PathDecoder<'a> {
        self.min_constraints = n.max(1);
        self
    }

    /// The path length this decoder expects.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Where decoding stands.
    pub fn status(&self) -> Status {
        if self.inconsistent {
            Status::Inconsistent
        } else if self.unresolved == 0 {
            Status::Decoded
        } else {
            Status::Incomplete
        }
    }

    /// Hops resolved so far.
    pub fn resolved(&self) -> u32 {
        self.k - self.unresolved
    }

    /// The decoded path (switch IDs in hop order) once every hop is resolved.
    pub fn path(&self) -> Option<Vec<u32>> {
        if self.status() != Status::Decoded {
            return None;
        }
        self.hops.iter().map(|h| h.value).collect()
    }

    /// The report so far.
    pub fn report(&self) -> DecodeReport {
        DecodeReport {
            path: self.path(),
            packets_used: self.packets,
            ignored: self.ignored,
            status: self.status(),
        }
    }

    /// Feeds one record; returns the status after it. Records after the flow is decoded or found
    /// inconsistent are not counted.
    pub fn push(&mut self, rec: Record) -> Status {
        if self.status() != Status::Incomplete {
            return self.status();
        }
        self.packets += 1;
        if rec.hops != self.k {
            self.ignored += 1;
            return self.status();
        }
        let (hashes, budget) = (self.cfg.hashes, self.cfg.budget);
        for inst in 0..budget.instances() {
            let digest = budget.field(rec.digest, inst);
            match self.cfg.layers.choose(hashes, rec.packet_id, inst) {
                Layer::Baseline => {
                    let hop = baseline_writer(hashes, rec.packet_id, inst, self.k);
                    self.constrain(hop, rec.packet_id, inst, digest);
                }
                Layer::Xor { index, log2_inv_p } => {
                    let mask = xor_mask(hashes, rec.packet_id, inst, index, log2_inv_p, self.k);
                    self.xor_packet(rec.packet_id, inst, digest, mask);
                }
            }
            self.peel();
            if self.inconsistent {
                break;
            }
        }
        self.status()
    }

    fn hash(&self, value: u32, packet_id: u64, instance: u8) -> u32 {
        let cfg = &self.cfg;
        cfg.hashes
            .value(value, packet_id, instance, cfg.budget.bits())
    }

    fn xor_packet(&mut self, packet_id: u64, instance: u8, digest: u32, mask: HopMask) {
        let mut residual = digest;
        let mut unknown = HopMask::default();
        for hop in mask.iter() {
            match self.hops[(hop - 1) as usize].value {
                Some(v) => residual ^= self.hash(v, packet_id, instance),
                None => unknown.insert(hop),
            }
        }
        match unknown.len() {
            0 => self.inconsistent |= residual != 0,
            1 => {
                let hop = unknown.iter().next().unwrap_or(1);
                self.constrain(hop, packet_id, instance, residual);
            }
            _ => {
                let idx = self.waiting.len();
                for hop in unknown.iter() {
                    self.by_hop[(hop - 1) as usize].push(idx);
                }
                self.waiting.push(Waiting {
                    packet_id,
                    instance,
                    residual,
                    unknown,
                });
            }
        }
    }

    /// Hop `hop` carried h(M_hop, packet) = `digest` on this packet.
    fn constrain(&mut self, hop: u32, packet_id: u64, instance: u8, digest: u32) {
        let i = (hop - 1) as usize;
        if let Some(v) = self.hops[i].value {
            self.inconsistent |= self.hash(v, packet_id, instance) != digest;
            return;
        }
        let cands = match self.hops[i].cands.take() {
            Some(mut c) => {
                c.retain(|&ci| {
                    self.hash(self.candidates[ci as usize], packet_id, instance) == digest
                });
                c
            }
            None => (0..self.candidates.len() as u32)
                .filter(|&ci| {
                    self.hash(self.candidates[ci as usize], packet_id, instance) == digest
                })
                .collect(),
        };
        let h = &mut self.hops[i];
        h.constraints += 1;
        if cands.is_empty() {
            self.inconsistent = true;
        } else if cands.len() == 1 && h.constraints >= self.min_constraints {
            h.value = Some(self.candidates[cands[0] as usize]);
            self.unresolved -= 1;
            self.queue.push(hop);
        }
        h.cands = Some(cands);
    }

    /// Propagates newly resolved hops through the waiting XOR packets.
    fn peel(&mut self) {
        while let Some(hop) = self.queue.pop() {
            if self.inconsistent {
                return;
            }
            let Some(v) = self.hops[(hop - 1) as usize].value else {
                continue;
            };
            for idx in std::mem::take(&mut self.by_hop[(hop - 1) as usize]) {
                if !self.waiting[idx].unknown.contains(hop) {
                    continue;
                }
                let (packet_id, instance) =
                    (self.waiting[idx].packet_id, self.waiting[idx].instance);
                let h = self.hash(v, packet_id, instance);
                let w = &mut self.waiting[idx];
                w.residual ^= h;
                w.unknown.remove(hop);
                if w.unknown.len() == 1 {
                    let last = w.unknown.iter().next().unwrap_or(1);
                    let residual = w.residual;
                    // Consumed: it is now a Baseline-like constraint on its last hop.
                    w.unknown = HopMask::default();
                    self.constrain(last, packet_id, instance, residual);
                }
            }
        }
    }
}

/// Decodes one flow: `k` is taken from the first record's hop count (the TTL-derived length the
/// record carries); records with another hop count are ignored. Stops at the first record after
/// which the path is decoded (or found inconsistent).
pub fn decode(
    cfg: &PathTracing,
    candidates: &[u32],
    records: impl IntoIterator<Item = Record>,
) -> DecodeReport {
    let mut records = records.into_iter().peekable();
    let Some(first) = records.peek() else {
        return DecodeReport {
            path: None,
            packets_used: 0,
            ignored: 0,
            status: Status::Incomplete,
        };
    };
    let mut dec = PathDecoder::new(cfg, first.hops, candidates);
    for rec in records {
        if dec.push(rec) != Status::Incomplete {
            break;
        }
    }
    dec.report()
}
