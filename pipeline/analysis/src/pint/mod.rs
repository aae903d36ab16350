//! PINT, probabilistic in-band network telemetry (Ben Basat et al., SIGCOMM 2020; docs/pint.md),
//! sans-IO.
//!
//! PINT replaces per-hop INT stacks with a fixed per-packet bit budget: each switch
//! probabilistically writes, XORs in, or aggregates a hashed or compressed value, and a collector
//! reconstructs per-flow information from many packets. This module is the arithmetic only:
//!
//! - [`hash`]: the global hash functions g, h and the value hash, shared by switches and collector;
//! - [`path`]: path tracing's per-hop Encoding Module (Baseline and XOR layers, split budgets);
//! - [`decode`]: the collector's Inference Module for path tracing (peeling, fast k-bit vectors);
//! - [`compress`]: multiplicative and additive value compression, and HPCC's path-maximum
//!   utilisation digest;
//! - [`latency`]: the latency query's Encoding and Recording Modules, and the Query Engine;
//! - [`kll`]: a seeded KLL quantile sketch;
//! - [`collector`]: the collector (per-flow path decoding and latency quantiles).
//!
//! Nothing here touches packets: the caller supplies the packet ID, the hop number and the
//! digest, and places the result wherever its header format puts it.

#![warn(missing_docs)]

pub mod collector;
pub mod compress;
pub mod decode;
pub mod eval;
pub mod fabric;
pub mod hash;
pub mod kll;
pub mod latency;
pub mod path;

#[cfg(test)]
mod compress_tests;
#[cfg(test)]
mod tests;

pub use compress::{Additive, HpccUtil, Multiplicative, UtilEwma};
pub use decode::{DecodeReport, PathDecoder, Record, Status, decode};
pub use hash::Hashes;
pub use latency::{LatencyCodec, LatencyConfig, Query};
pub use path::{Budget, Layer, LayerConfig, MAX_HOPS, PathTracing, XorLayer, encode_hop};

/// The packet ID PINT hashes ([X]: the paper's text we have does not define it): invariant fields
/// of the packet, here the flow's 5-tuple and a per-packet field that does not change along the
/// path (the IPv4 identification, or the TCP sequence number).
pub fn packet_id(src: u32, dst: u32, proto: u8, sport: u16, dport: u16, per_packet: u32) -> u64 {
    let a = u64::from(src) << 32 | u64::from(dst);
    let b = u64::from(proto) << 32 | u64::from(sport) << 16 | u64::from(dport);
    hash::mix64(hash::mix64(hash::mix64(a) ^ b) ^ u64::from(per_packet))
}

/// The hop number from the IPv4 TTL ([X]: the paper's text we have does not say how a switch learns
/// it): with hosts sending at `initial_ttl` and every switch decrementing once *after* encoding,
/// the switch seeing `ttl` is hop `initial_ttl − ttl + 1`, and the sink seeing `ttl` has a path of
/// `initial_ttl − ttl` hops. `None` when `ttl` is above `initial_ttl`.
pub fn hops_from_ttl(initial_ttl: u8, ttl: u8) -> Option<u32> {
    initial_ttl.checked_sub(ttl).map(u32::from)
}
