//! PINT's latency query (PINT §5, §6.2) and the Query Engine that chooses, per packet, which
//! query its digest carries ([X]: PINT §3.4 is not in the text we worked from), sans-IO.
//!
//! **Encoding.** Hop i measures its hop latency (egress timestamp − ingress timestamp [I]),
//! compresses it to `bits` bits ([`LatencyCodec`]) and overwrites the digest iff
//! g(packet, i) < 1/i, the Baseline rule of path tracing ([`baseline_writes`]) on an instance of
//! its own ([`LATENCY_INSTANCE`]): every hop of a k-hop path is equally likely to be the last
//! writer, and the collector recomputes which one was ([`writer`]).
//!
//! **Query Engine [X].** A hash of the packet ID ([`Query::choose`]) puts a fabric-wide fraction
//! of the packets (`latency_share` / 2^16) on the latency query and the rest on path tracing.
//! Every switch and the collector compute the same choice; the sink also exports it.

use super::compress::{Additive, Multiplicative};
use super::hash::{Hashes, mix64};
use super::path::{baseline_writer, baseline_writes};

/// The hash instance of the latency query's g: independent of path tracing's instances.
pub const LATENCY_INSTANCE: u8 = 0x40;
/// Domain separator of the Query Engine's hash.
const DOMAIN_QUERY: u64 = 0x5155_4552_5945_4e47; // "QUERYENG"
/// The share denominator: shares are in units of 2^-16 of the packets.
pub const SHARE_ONE: u32 = 1 << 16;

/// What a packet's digest carries. The value is the record's `query` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Query {
    /// Path tracing (switch IDs, [`crate::pint::encode_hop`]).
    Path = 0,
    /// Hop latency (this module).
    Latency = 1,
}

impl Query {
    /// The Query Engine [X]: the packet carries the latency query iff the top 16 bits of a hash
    /// of its ID are below `latency_share` (out of [`SHARE_ONE`]).
    pub fn choose(hashes: Hashes, packet_id: u64, latency_share: u32) -> Query {
        let h = mix64(mix64(hashes.seed() ^ DOMAIN_QUERY) ^ packet_id);
        if ((h >> 48) as u32) < latency_share {
            Query::Latency
        } else {
            Query::Path
        }
    }

    /// From the record's `query` field.
    pub fn from_code(code: u8) -> Option<Query> {
        match code {
            0 => Some(Query::Path),
            1 => Some(Query::Latency),
            _ => None,
        }
    }
}

/// A fraction as a share of [`SHARE_ONE`]: `0.25`, `1/16` or `1`; `None` outside [0, 1].
pub fn parse_share(v: &str) -> Option<u32> {
    let f = match v.split_once('/') {
        Some((n, d)) => n.trim().parse::<f64>().ok()? / d.trim().parse::<f64>().ok()?,
        None => v.parse::<f64>().ok()?,
    };
    (0.0..=1.0)
        .contains(&f)
        .then(|| (f * f64::from(SHARE_ONE)).round() as u32)
}

/// Which compression the latency query uses (PINT §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CodecKind {
    /// Multiplicative: round(log_(1+ε)² v), within a factor 1+ε.
    Multiplicative = 0,
    /// Additive: round(v / 2Δ), within Δ.
    Additive = 1,
}

/// The latency query's configuration, identical at every switch and at the collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LatencyConfig {
    /// Multiplicative or additive.
    pub kind: CodecKind,
    /// The digest's bits b (4 or 8 in the paper).
    pub bits: u8,
    /// Multiplicative: the smallest latency with bounded error, ns [X].
    pub min_ns: u32,
    /// The largest latency with bounded error, ns; larger ones saturate [X].
    pub max_ns: u32,
}

impl LatencyConfig {
    /// The default [X]: multiplicative, 8 bits, 100 ns … 10 ms.
    pub const DEFAULT: LatencyConfig = LatencyConfig {
        kind: CodecKind::Multiplicative,
        bits: 8,
        min_ns: 100,
        max_ns: 10_000_000,
    };

    /// The codec this configuration describes.
    pub fn codec(&self) -> LatencyCodec {
        LatencyCodec::new(*self)
    }
}

/// The compressor of hop latencies: `bits` bits spread over [min_ns, max_ns].
///
/// - Multiplicative [P §4.3, X for the range]: β = (1+ε)² with ε chosen so that the 2^b − 1
///   nonzero codes span [min, max]: ε = (max/min)^(1/(2(2^b − 2))) − 1. Code 0 stands for 0
///   (latencies below min/√β).
/// - Additive [P §4.3, X for the range]: Δ = max / (2(2^b − 1)), step 2Δ.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LatencyCodec {
    /// With its ε.
    Multiplicative(Multiplicative, f64),
    /// With its Δ.
    Additive(Additive, f64),
}

impl LatencyCodec {
    /// The codec of `c` (bits clamped to 1..=16, min ≥ 1 ns, max > min).
    pub fn new(c: LatencyConfig) -> LatencyCodec {
        let bits = c.bits.clamp(1, 16);
        let codes = f64::from((1u32 << bits) - 1);
        let min = f64::from(c.min_ns.max(1));
        let max = f64::from(c.max_ns).max(min * 2.0);
        match c.kind {
            CodecKind::Multiplicative => {
                let steps = (codes - 1.0).max(1.0);
                let eps = (max / min).powf(1.0 / (2.0 * steps)) - 1.0;
                LatencyCodec::Multiplicative(Multiplicative::nearest(eps, bits, max), eps)
            }
            CodecKind::Additive => {
                let delta = max / (2.0 * codes);
                LatencyCodec::Additive(Additive::paper(delta, bits), delta)
            }
        }
    }

    /// The code of a latency of `ns` nanoseconds.
    pub fn encode(&self, ns: f64) -> u32 {
        match self {
            LatencyCodec::Multiplicative(m, _) => m.encode_nearest(ns),
            LatencyCodec::Additive(a, _) => a.encode_nearest(ns),
        }
    }

    /// The latency a code stands for, ns.
    pub fn decode(&self, code: u32) -> f64 {
        match self {
            LatencyCodec::Multiplicative(m, _) => m.decode(code),
            LatencyCodec::Additive(a, _) => a.decode(code),
        }
    }

    /// The error bound on the codec's range: ε (relative) or Δ (ns, absolute).
    pub fn error_bound(&self) -> f64 {
        match self {
            LatencyCodec::Multiplicative(_, e) | LatencyCodec::Additive(_, e) => *e,
        }
    }

    /// The range with bounded error, ns.
    pub fn range(&self) -> (f64, f64) {
        match self {
            LatencyCodec::Multiplicative(m, _) => (m.min_value(), m.max_value()),
            LatencyCodec::Additive(a, _) => (0.0, a.max_value()),
        }
    }
}

/// The Encoding Module of the latency query at hop `hop` (1-based), sans-IO: the digest the
/// packet leaves with, given the code of this hop's latency and the digest it carries (ignored
/// at hop 1, which always writes).
pub fn encode_hop(hashes: Hashes, packet_id: u64, hop: u32, code: u32, carried: u32) -> u32 {
    if baseline_writes(hashes, packet_id, LATENCY_INSTANCE, hop) {
        code
    } else {
        carried
    }
}

/// The Recording Module: the hop whose latency a packet of a `k`-hop path carries.
pub fn writer(hashes: Hashes, packet_id: u64, k: u32) -> u32 {
    baseline_writer(hashes, packet_id, LATENCY_INSTANCE, k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn query_engine_honours_the_share() {
        let h = Hashes::new(7);
        for (share, want) in [
            (0u32, 0.0),
            (SHARE_ONE / 16, 1.0 / 16.0),
            (SHARE_ONE / 2, 0.5),
        ] {
            let n = 200_000u64;
            let lat = (0..n)
                .filter(|&p| Query::choose(h, mix64(p), share) == Query::Latency)
                .count() as f64
                / n as f64;
            assert!((lat - want).abs() < 0.005, "share {share}: {lat}");
        }
        assert!((0..1000).all(|p| Query::choose(h, p, SHARE_ONE) == Query::Latency));
    }

    #[test]
    fn shares_parse() {
        assert_eq!(parse_share("1/16"), Some(SHARE_ONE / 16));
        assert_eq!(parse_share("0.5"), Some(SHARE_ONE / 2));
        assert_eq!(parse_share("1"), Some(SHARE_ONE));
        assert_eq!(parse_share("0"), Some(0));
        assert_eq!(parse_share("1.5"), None);
        assert_eq!(parse_share("x"), None);
    }

    /// Each hop of a k-hop path is the last writer of 1/k of the packets, and the collector's
    /// [`writer`] names the hop whose code the packet carries.
    #[test]
    fn s4_4_last_writer_is_uniform_and_recovered() {
        let h = Hashes::new(99);
        let k = 8u32;
        let n = 80_000u64;
        let mut count = vec![0u64; k as usize + 1];
        for p in 0..n {
            let pid = mix64(p ^ 0xabc);
            let mut d = 0;
            for hop in 1..=k {
                d = encode_hop(h, pid, hop, hop, d);
            }
            assert_eq!(d, writer(h, pid, k));
            count[d as usize] += 1;
        }
        for c in &count[1..] {
            let f = *c as f64 / n as f64;
            assert!((f - 1.0 / 8.0).abs() < 0.01, "{count:?}");
        }
    }

    proptest! {
        /// §4.3: the latency codec's error is within a factor 1+ε (multiplicative) or Δ
        /// (additive) on its range, for b = 4 and 8, and the codes fit b bits.
        #[test]
        fn s4_3_latency_codec_error_within_bound(
            add in any::<bool>(), eight in any::<bool>(), t in 0.0f64..=1.0,
            min_ns in 1u32..10_000, ratio in 10u32..100_000,
        ) {
            let cfg = LatencyConfig {
                kind: if add { CodecKind::Additive } else { CodecKind::Multiplicative },
                bits: if eight { 8 } else { 4 },
                min_ns,
                max_ns: min_ns.saturating_mul(ratio),
            };
            let c = cfg.codec();
            let (lo, hi) = c.range();
            let v = if add { lo + t * (hi - lo) } else { (lo.ln() + t * (hi.ln() - lo.ln())).exp() };
            let code = c.encode(v);
            prop_assert!(code < (1 << cfg.bits));
            let d = c.decode(code);
            let e = c.error_bound();
            if add {
                prop_assert!((d - v).abs() <= e * (1.0 + 1e-9), "v {v} d {d} Δ {e}");
            } else {
                prop_assert!(d <= v * (1.0 + e) * (1.0 + 1e-9) && d * (1.0 + e) * (1.0 + 1e-9) >= v,
                    "v {v} d {d} ε {e}");
                prop_assert!(hi >= f64::from(cfg.max_ns) * (1.0 - 1e-9));
                prop_assert!(lo <= f64::from(cfg.min_ns) * (1.0 + e) * (1.0 + e) * (1.0 + 1e-9));
            }
        }
    }
}
