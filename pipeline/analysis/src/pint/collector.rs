//! PINT's collector, sans-IO: the Recording and Inference Modules over the records the sinks
//! export (docs/pint.md). Used by `pisa-sim` and by `pisa-pint`.
//!
//! Records are grouped by flow (5-tuple). Per flow: a [`PathDecoder`] for the path-tracing
//! records (the fast peeling decoder), and per hop the latency samples the latency records carry
//! (the hop is recomputed from g, [`latency::writer`]), kept both in full and in a KLL sketch.
//! A flow's path length k is the hop count of its first record; records of another length (a
//! route change) are counted and set aside.

use std::collections::BTreeMap;

use super::decode::{DecodeReport, PathDecoder, Record};
use super::kll::{Kll, exact_quantile};
use super::latency::{self, LatencyCodec, LatencyConfig, Query};
use super::path::PathTracing;

/// A flow's 5-tuple: source and destination address, protocol, ports.
pub type FlowKey = (u32, u32, u8, u16, u16);

/// One record as the sink exports it (the digest `egress.pint_record`: packet ID, hops, query
/// and digest packed in one field as query << 8 | digest, then the 5-tuple).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SinkRecord {
    /// The packet ID every hop hashed.
    pub packet_id: u64,
    /// The path length k.
    pub hops: u32,
    /// The digest.
    pub digest: u32,
    /// The 5-tuple.
    pub flow: FlowKey,
    /// Which query the digest carries ([`Query`]'s code).
    pub query: u8,
}

impl SinkRecord {
    /// The number of fields of the record digest.
    pub const FIELDS: usize = 8;

    /// From the digest's field values, in `RECORD_FIELDS` order.
    pub fn from_values(v: &[u128]) -> Option<SinkRecord> {
        if v.len() < Self::FIELDS {
            return None;
        }
        Some(SinkRecord {
            packet_id: v[0] as u64,
            hops: v[1] as u32,
            digest: (v[2] & 0xff) as u32,
            flow: (
                v[3] as u32,
                v[4] as u32,
                v[5] as u8,
                v[6] as u16,
                v[7] as u16,
            ),
            query: (v[2] >> 8) as u8,
        })
    }

    /// The field values, in `RECORD_FIELDS` order.
    pub fn values(&self) -> [u128; Self::FIELDS] {
        let (src, dst, proto, sport, dport) = self.flow;
        [
            u128::from(self.packet_id),
            u128::from(self.hops),
            u128::from(self.query) << 8 | u128::from(self.digest & 0xff),
            u128::from(src),
            u128::from(dst),
            u128::from(proto),
            u128::from(sport),
            u128::from(dport),
        ]
    }

    /// One line of the record file `pisa-sim --pint-records` writes and `pisa-pint` reads: the
    /// field values in decimal, space-separated.
    pub fn to_line(&self) -> String {
        let v: Vec<String> = self.values().iter().map(u128::to_string).collect();
        v.join(" ")
    }

    /// Parses [`SinkRecord::to_line`]'s format.
    pub fn parse_line(line: &str) -> Option<SinkRecord> {
        let v: Option<Vec<u128>> = line.split_whitespace().map(|t| t.parse().ok()).collect();
        let v = v?;
        (v.len() == Self::FIELDS).then(|| SinkRecord::from_values(&v))?
    }
}

/// What the collector must share with the switches.
#[derive(Clone, Debug)]
pub struct CollectorConfig {
    /// Path tracing's seed, budget and layers.
    pub path: PathTracing,
    /// The latency query's compression.
    pub latency: LatencyConfig,
    /// The fabric's switch IDs.
    pub candidates: Vec<u32>,
    /// The KLL sketch's k (per flow and hop).
    pub sketch_k: usize,
}

/// The sketch's k [X]: its levels hold about 3k ≈ 100 items.
pub const SKETCH_K: usize = 34;
/// The sketch's hard cap [X]: PINT §6.2's "100 digests", whatever the number of samples.
pub const SKETCH_ITEMS: usize = 100;

/// One hop's latency samples.
#[derive(Clone, Debug)]
struct HopLatency {
    samples: Vec<f64>,
    sketch: Kll,
}

#[derive(Debug)]
struct Flow {
    k: u32,
    records: u64,
    path: PathDecoder<'static>,
    hops: Vec<HopLatency>,
    latency_records: u64,
    latency_ignored: u64,
}

/// Per-hop latency quantiles of a flow, ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HopQuantiles {
    /// The hop, 1-based.
    pub hop: u32,
    /// Samples received for it.
    pub samples: usize,
    /// Median and 99th percentile of all samples.
    pub p50: f64,
    /// See `p50`.
    pub p99: f64,
    /// The same from the KLL sketch.
    pub p50_sketch: f64,
    /// See `p50_sketch`.
    pub p99_sketch: f64,
    /// The most items the sketch held.
    pub sketch_items: usize,
}

/// What the collector knows about one flow.
#[derive(Clone, Debug)]
pub struct FlowReport {
    /// The 5-tuple.
    pub flow: FlowKey,
    /// The path length k.
    pub hops: u32,
    /// Records received (every query).
    pub records: u64,
    /// Path tracing's state.
    pub path: DecodeReport,
    /// Latency records received, and those of another path length.
    pub latency_records: u64,
    /// See `latency_records`.
    pub latency_ignored: u64,
    /// Per hop with samples.
    pub latency: Vec<HopQuantiles>,
}

/// The collector.
#[derive(Debug)]
pub struct Collector {
    cfg: CollectorConfig,
    codec: LatencyCodec,
    flows: BTreeMap<FlowKey, Flow>,
    unknown_query: u64,
}

impl Collector {
    /// A collector for `cfg`.
    pub fn new(cfg: CollectorConfig) -> Collector {
        Collector {
            codec: cfg.latency.codec(),
            cfg,
            flows: BTreeMap::new(),
            unknown_query: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CollectorConfig {
        &self.cfg
    }

    /// Records whose query id is unknown (dropped).
    pub fn unknown_query(&self) -> u64 {
        self.unknown_query
    }

    /// Takes one record.
    pub fn push(&mut self, r: SinkRecord) {
        let Some(query) = Query::from_code(r.query) else {
            self.unknown_query += 1;
            return;
        };
        let cfg = &self.cfg;
        let flow = self.flows.entry(r.flow).or_insert_with(|| Flow {
            k: r.hops,
            records: 0,
            path: PathDecoder::owned(cfg.path.clone(), r.hops, &cfg.candidates),
            hops: Vec::new(),
            latency_records: 0,
            latency_ignored: 0,
        });
        flow.records += 1;
        match query {
            Query::Path => {
                flow.path.push(Record {
                    packet_id: r.packet_id,
                    hops: r.hops,
                    digest: r.digest,
                });
            }
            Query::Latency => {
                flow.latency_records += 1;
                if r.hops != flow.k || r.hops == 0 {
                    flow.latency_ignored += 1;
                    return;
                }
                let hop = latency::writer(cfg.path.hashes, r.packet_id, r.hops);
                if flow.hops.len() < hop as usize {
                    let seed = cfg.path.hashes.seed();
                    let k = cfg.sketch_k;
                    flow.hops.resize_with(hop as usize, || HopLatency {
                        samples: Vec::new(),
                        sketch: Kll::with_cap(k, SKETCH_ITEMS, seed),
                    });
                }
                let v = self.codec.decode(r.digest);
                let h = &mut flow.hops[hop as usize - 1];
                h.samples.push(v);
                h.sketch.update(v);
            }
        }
    }

    /// Every flow seen, in 5-tuple order.
    pub fn flows(&self) -> Vec<FlowReport> {
        self.flows
            .iter()
            .map(|(&flow, f)| FlowReport {
                flow,
                hops: f.k,
                records: f.records,
                path: f.path.report(),
                latency_records: f.latency_records,
                latency_ignored: f.latency_ignored,
                latency: f
                    .hops
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| !h.samples.is_empty())
                    .map(|(i, h)| {
                        let mut s = h.samples.clone();
                        s.sort_by(f64::total_cmp);
                        let q = |x| exact_quantile(&s, x).unwrap_or(0.0);
                        let qs = |x| h.sketch.quantile(x).unwrap_or(0.0);
                        HopQuantiles {
                            hop: i as u32 + 1,
                            samples: s.len(),
                            p50: q(0.5),
                            p99: q(0.99),
                            p50_sketch: qs(0.5),
                            p99_sketch: qs(0.99),
                            sketch_items: h.sketch.max_retained(),
                        }
                    })
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pint::Budget;
    use proptest::prelude::*;

    proptest! {
        /// The record file's line and the digest's values round-trip every record.
        #[test]
        fn records_round_trip(pid in any::<u64>(), hops in 0u32..=u32::from(u16::MAX),
                              digest in 0u32..256, q in 0u8..=255, s in any::<u32>(),
                              d in any::<u32>(), p in any::<u8>(), sp in any::<u16>(),
                              dp in any::<u16>()) {
            let r = SinkRecord { packet_id: pid, hops, digest, flow: (s, d, p, sp, dp), query: q };
            prop_assert_eq!(SinkRecord::parse_line(&r.to_line()), Some(r));
            prop_assert_eq!(SinkRecord::from_values(&r.values()), Some(r));
        }
    }

    #[test]
    fn malformed_lines_and_unknown_queries_are_set_aside() {
        assert_eq!(SinkRecord::parse_line("1 2 3"), None);
        assert_eq!(SinkRecord::parse_line("1 2 3 4 5 6 7 8 9"), None);
        assert_eq!(SinkRecord::parse_line("1 2 x 4 5 6 7 8"), None);
        let mut c = Collector::new(CollectorConfig {
            path: PathTracing::new(1, Budget::SINGLE_8, 4),
            latency: LatencyConfig::DEFAULT,
            candidates: vec![1, 2, 3, 4],
            sketch_k: SKETCH_K,
        });
        let mut r = SinkRecord::parse_line("5 4 7 1 2 17 3 4").unwrap();
        r.query = 9;
        c.push(r);
        assert_eq!(c.unknown_query(), 1);
        assert!(c.flows().is_empty());
        // A latency record of another path length is counted, not sampled.
        r.query = Query::Latency as u8;
        c.push(r);
        r.hops = 3;
        c.push(r);
        let f = &c.flows()[0];
        assert_eq!((f.latency_records, f.latency_ignored), (2, 1));
        assert_eq!(f.latency.iter().map(|h| h.samples).sum::<usize>(), 1);
    }
}
