//! PINT's experiments E13 (path tracing, §4.2/§6.3) and E12 (latency quantiles, §6.2), sans-IO:
//! the switches' own encoders (`encode_hop`, `latency::encode_hop`) feed the collector's own
//! decoder ([`Collector`], [`PathDecoder`]), over many seeds. `pisa-pint e12|e13` prints them;
//! docs/pint.md has the tables and what they are compared with.

use std::time::Instant;

use super::collector::{Collector, CollectorConfig, SKETCH_K, SinkRecord};
use super::decode::{PathDecoder, Record, Status};
use super::hash::mix64;
use super::kll::exact_quantile;
use super::latency::{self, CodecKind, LatencyConfig, Query};
use super::path::{Budget, PathTracing};

/// A deterministic stream of 64-bit values.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// log*₂ k (iterated base-2 logarithm, at least 1 for k ≥ 2).
pub fn log_star2(k: u32) -> u32 {
    let mut x = f64::from(k);
    let mut n = 0;
    while x > 1.0 {
        x = x.log2();
        n += 1;
    }
    n
}

/// The paper's k·log log* k (§4.2), logs in base 2 (0 for k ≤ 2, where log* k ≤ 1).
pub fn paper_packets(k: u32) -> f64 {
    f64::from(k) * f64::from(log_star2(k)).log2().max(0.0)
}

/// Constraints per packet a hop needs among `n` candidates with `budget` (docs/pint.md, E[R] /
/// instances).
pub fn constraints_per_packet(n: usize, budget: Budget) -> f64 {
    let wrong = n.saturating_sub(1) as f64;
    let r: f64 = (0..64)
        .map(|c| 1.0 - (1.0 - 2f64.powi(-i32::from(budget.bits()) * c)).powf(wrong))
        .sum();
    r / f64::from(budget.instances())
}

/// Where an E13 path comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathKind {
    /// A host-to-host path of a k = 8 fat-tree (80 switches, all of them candidates): 1 hop
    /// (same edge), 3 (same pod) or 5 (across pods).
    FatTree8,
    /// A chain of k switches (the candidates are its switches).
    Chain,
}

/// A random path of `k` hops of `kind` with random distinct 32-bit switch IDs: (path, all
/// candidate IDs).
pub fn random_path(kind: PathKind, k: u32, rng: &mut Rng) -> (Vec<u32>, Vec<u32>) {
    let n = match kind {
        PathKind::FatTree8 => 80,
        PathKind::Chain => k as usize,
    };
    let mut ids: Vec<u32> = Vec::with_capacity(n);
    while ids.len() < n {
        let id = rng.next_u64() as u32;
        if id != 0 && !ids.contains(&id) {
            ids.push(id);
        }
    }
    let path = match kind {
        PathKind::Chain => ids.clone(),
        PathKind::FatTree8 => {
            // ids: 16 cores, then per pod 4 aggregation and 4 edge switches.
            let core = |c: usize| ids[c];
            let agg = |p: usize, a: usize| ids[16 + p * 8 + a];
            let edge = |p: usize, e: usize| ids[16 + p * 8 + 4 + e];
            let (p, e) = (rng.below(8), rng.below(4));
            let a = rng.below(4);
            match k {
                1 => vec![edge(p, e)],
                3 => vec![edge(p, e), agg(p, a), edge(p, (e + 1 + rng.below(3)) % 4)],
                _ => {
                    let q = (p + 1 + rng.below(7)) % 8;
                    // Aggregation a of every pod links to cores 4a .. 4a+3.
                    let c = core(a * 4 + rng.below(4));
                    vec![edge(p, e), agg(p, a), c, agg(q, a), edge(q, rng.below(4))]
                }
            }
        }
    };
    (path, ids)
}

/// One E13 row: a path length, topology and budget over many trials.
#[derive(Clone, Debug)]
pub struct E13Row {
    /// Path length.
    pub k: u32,
    /// Where the paths come from.
    pub kind: PathKind,
    /// Candidates (the fabric's switches).
    pub candidates: usize,
    /// The digest budget.
    pub budget: Budget,
    /// Trials (each its own hash seed, IDs, path, packet IDs).
    pub trials: usize,
    /// Packets to decode: median, and 90th percentile.
    pub median: f64,
    /// See `median`.
    pub p90: f64,
    /// The paper's k·log₂ log*₂ k.
    pub paper: f64,
    /// The same times E[R]/instances (hashed IDs need E[R] constraints per hop).
    pub paper_hashed: f64,
    /// Median time to decode a flow (all its records, until decoded), µs.
    pub decode_us: f64,
    /// Median time per record pushed, ns.
    pub ns_per_record: f64,
    /// Trials that did not decode the true path within the packet cap (or decoded a wrong one).
    pub failures: usize,
}

/// The packet cap of one E13 trial.
const E13_CAP: usize = 200_000;

/// E13: for each (kind, k) and budget, `trials` flows.
pub fn e13(cases: &[(PathKind, u32)], trials: usize, seed: u64) -> Vec<E13Row> {
    let mut rows = Vec::new();
    for &(kind, k) in cases {
        for budget in [Budget::SINGLE_8, Budget::SPLIT_2X4] {
            let mut used = Vec::with_capacity(trials);
            let mut times = Vec::with_capacity(trials);
            let mut per_rec = Vec::with_capacity(trials);
            let mut failures = 0;
            let mut n = 0;
            for t in 0..trials as u64 {
                let mut rng = Rng(mix64(seed ^ mix64(t ^ u64::from(k) << 40)));
                let (path, ids) = random_path(kind, k, &mut rng);
                n = ids.len();
                let d = if kind == PathKind::FatTree8 { 5 } else { k };
                let cfg = PathTracing::new(rng.next_u64(), budget, d);
                let mut dec = PathDecoder::new(&cfg, k, &ids);
                let (mut pushed, mut el) = (0u32, 0.0);
                // Records are made in chunks outside the timed section: only decoding is timed.
                while (pushed as usize) < E13_CAP && dec.status() == Status::Incomplete {
                    let chunk: Vec<Record> = (0..64)
                        .map(|_| {
                            let packet_id = rng.next_u64();
                            let digest = path.iter().enumerate().fold(0, |dig, (i, &id)| {
                                cfg.encode_hop(packet_id, i as u32 + 1, id, dig)
                            });
                            Record {
                                packet_id,
                                hops: k,
                                digest,
                            }
                        })
                        .collect();
                    let start = Instant::now();
                    for r in chunk {
                        pushed += 1;
                        if dec.push(r) != Status::Incomplete {
                            break;
                        }
                    }
                    el += start.elapsed().as_secs_f64();
                }
                let rep = dec.report();
                if rep.path.as_deref() == Some(&path[..]) {
                    used.push(rep.packets_used as f64);
                    times.push(el * 1e6);
                    per_rec.push(el * 1e9 / f64::from(pushed.max(1)));
                } else {
                    failures += 1;
                }
            }
            let paper = paper_packets(k);
            rows.push(E13Row {
                k,
                kind,
                candidates: n,
                budget,
                trials,
                median: quantile(&mut used, 0.5),
                p90: quantile(&mut used, 0.9),
                paper,
                paper_hashed: paper * constraints_per_packet(n, budget),
                decode_us: quantile(&mut times, 0.5),
                ns_per_record: quantile(&mut per_rec, 0.5),
                failures,
            });
        }
    }
    rows
}

/// Nearest-rank quantile of unsorted values (0 when empty).
fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    exact_quantile(v, q).unwrap_or(0.0)
}

/// The E13 cases of docs/pint.md: fat-tree paths of 1, 3 and 5 hops, chains of 2 to 32.
pub const E13_CASES: [(PathKind, u32); 10] = [
    (PathKind::FatTree8, 1),
    (PathKind::FatTree8, 3),
    (PathKind::FatTree8, 5),
    (PathKind::Chain, 2),
    (PathKind::Chain, 4),
    (PathKind::Chain, 8),
    (PathKind::Chain, 12),
    (PathKind::Chain, 16),
    (PathKind::Chain, 24),
    (PathKind::Chain, 32),
];

/// One E12 point: relative error of the per-hop p50 and p99 after `packets` packets.
#[derive(Clone, Debug)]
pub struct E12Row {
    /// The latency digest's bits.
    pub bits: u8,
    /// Quantiles from the KLL sketch (true) or from all samples (false).
    pub sketch: bool,
    /// Packets received (each carries one hop's latency).
    pub packets: usize,
    /// Median over trials of the mean over hops of |estimate − truth| / truth.
    pub p50_err: f64,
    /// See `p50_err`.
    pub p99_err: f64,
    /// The most items any hop's sketch held.
    pub sketch_items: usize,
}

/// E12's latency model [X]: per hop, a base latency uniform in [1, 5] µs plus, with probability
/// ρ (uniform in [0.1, 0.9] per hop), an exponential queueing delay of mean m (log-uniform in
/// [5, 200] µs per hop).
#[derive(Clone, Copy, Debug)]
struct HopModel {
    base_lo: f64,
    rho: f64,
    mean: f64,
}

impl HopModel {
    fn random(rng: &mut Rng) -> HopModel {
        HopModel {
            base_lo: 1000.0,
            rho: 0.1 + 0.8 * rng.unit(),
            mean: (5_000f64.ln() + rng.unit() * (200_000f64.ln() - 5_000f64.ln())).exp(),
        }
    }

    fn draw(&self, rng: &mut Rng) -> f64 {
        let base = self.base_lo + 4000.0 * rng.unit();
        let queue = if rng.unit() < self.rho {
            -self.mean * (1.0 - rng.unit()).ln()
        } else {
            0.0
        };
        base + queue
    }
}

/// E12's codec [X]: multiplicative over [1 µs, 10 ms] (ε = 0.018 at 8 bits, 0.39 at 4 bits).
pub fn e12_config(bits: u8) -> LatencyConfig {
    LatencyConfig {
        kind: CodecKind::Multiplicative,
        bits,
        min_ns: 1_000,
        max_ns: 10_000_000,
    }
}

/// E12: a `hops`-hop path, every packet on the latency query, checkpoints at `packets`; for
/// b = 4 and 8, with and without the sketch.
pub fn e12(hops: u32, packets: &[usize], trials: usize, seed: u64) -> Vec<E12Row> {
    let max_n = packets.iter().copied().max().unwrap_or(0);
    let mut rows = Vec::new();
    for bits in [4u8, 8] {
        // errors[checkpoint][sketch] = per-trial (p50, p99) errors.
        let mut errs = vec![[Vec::new(), Vec::new()]; packets.len()];
        let mut items = vec![0usize; packets.len()];
        for t in 0..trials as u64 {
            let mut rng = Rng(mix64(seed ^ mix64(t) ^ u64::from(bits) << 56));
            let models: Vec<HopModel> = (0..hops).map(|_| HopModel::random(&mut rng)).collect();
            let ids: Vec<u32> = (1..=hops).collect();
            let cfg = CollectorConfig {
                path: PathTracing::new(rng.next_u64(), Budget::SINGLE_8, hops),
                latency: e12_config(bits),
                candidates: ids.clone(),
                sketch_k: SKETCH_K,
            };
            let hashes = cfg.path.hashes;
            let codec = cfg.latency.codec();
            let mut c = Collector::new(cfg);
            let mut truth: Vec<Vec<f64>> = vec![Vec::new(); hops as usize];
            let mut next = 0;
            for n in 1..=max_n {
                let packet_id = rng.next_u64();
                let mut digest = 0;
                for hop in 1..=hops {
                    let v = models[hop as usize - 1].draw(&mut rng);
                    truth[hop as usize - 1].push(v);
                    let code = codec.encode(v);
                    digest = latency::encode_hop(hashes, packet_id, hop, code, digest);
                }
                c.push(SinkRecord {
                    packet_id,
                    hops,
                    digest,
                    flow: (1, 2, 17, 1, 2),
                    query: Query::Latency as u8,
                });
                if packets.get(next) == Some(&n) {
                    let f = &c.flows()[0];
                    let mut e = [[0.0; 2]; 2];
                    for (h, samples) in truth.iter().enumerate() {
                        let mut tr = samples.clone();
                        tr.sort_by(f64::total_cmp);
                        let t50 = exact_quantile(&tr, 0.5).unwrap_or(0.0);
                        let t99 = exact_quantile(&tr, 0.99).unwrap_or(0.0);
                        // A hop with no sample yet has estimate 0: error 1.
                        let q = f.latency.iter().find(|q| q.hop as usize == h + 1);
                        let est = q.map_or([[0.0; 2]; 2], |q| {
                            [[q.p50, q.p99], [q.p50_sketch, q.p99_sketch]]
                        });
                        for s in 0..2 {
                            e[s][0] += (est[s][0] - t50).abs() / t50 / f64::from(hops);
                            e[s][1] += (est[s][1] - t99).abs() / t99 / f64::from(hops);
                        }
                        if let Some(q) = q {
                            items[next] = items[next].max(q.sketch_items);
                        }
                    }
                    errs[next][0].push(e[0]);
                    errs[next][1].push(e[1]);
                    next += 1;
                }
            }
        }
        for (i, &n) in packets.iter().enumerate() {
            for (s, sketch) in [(0, false), (1, true)] {
                let mut p50: Vec<f64> = errs[i][s].iter().map(|e| e[0]).collect();
                let mut p99: Vec<f64> = errs[i][s].iter().map(|e| e[1]).collect();
                rows.push(E12Row {
                    bits,
                    sketch,
                    packets: n,
                    p50_err: quantile(&mut p50, 0.5),
                    p99_err: quantile(&mut p99, 0.5),
                    sketch_items: items[i],
                });
            }
        }
    }
    rows
}

/// E12's checkpoints (packets received).
pub const E12_PACKETS: [usize; 11] = [
    25, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000,
];
