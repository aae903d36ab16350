//! The fabric's PINT configuration, read from the topology lines of the switches that run `pint`:
//! the path-tracing hashes and budget, and the latency query. The `pint` program's plan programs
//! the switches with it, and the collector (`pisa-sim`'s, `pisa-pint`'s) decodes with it, so both
//! read it here.

use topo::{Switch, Topology};

use super::latency::{CodecKind, LatencyConfig, SHARE_ONE, parse_share};
use super::{Budget, MAX_HOPS, PathTracing};

/// The hash seed when no switch gives `pint_seed=`.
pub const DEFAULT_SEED: u64 = 0x5049_4e54_5345_4544; // "PINTSEED"
/// The hosts' initial TTL when no switch gives `pint_ttl=` (Linux's and `pisa-sim`'s).
pub const DEFAULT_TTL: u8 = 64;

/// The fabric's path-tracing parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FabricConfig {
    /// The seed of the global hashes g and h.
    pub seed: u64,
    /// The digest's budget (8 bits or 2 × 4 bits).
    pub budget: Budget,
    /// D, the longest path the layers are set for.
    pub max_hops: u32,
    /// The hosts' initial TTL.
    pub initial_ttl: u8,
}

impl FabricConfig {
    /// The configuration switches and collector share.
    pub fn path_tracing(&self) -> PathTracing {
        PathTracing::new(self.seed, self.budget, self.max_hops)
    }
}

/// `pint_bits=`: `8` (one 8-bit hash) or `2x4` (two 4-bit hashes).
pub fn parse_bits(v: &str) -> Option<Budget> {
    match v {
        "8" => Some(Budget::SINGLE_8),
        "2x4" => Some(Budget::SPLIT_2X4),
        _ => None,
    }
}

fn parse_u64(v: &str) -> Option<u64> {
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// The one value of `key` the switches running `pint` give (`None`: none gives it); an error if
/// two give different values or one is malformed.
pub fn agreed<T: PartialEq + Copy>(
    switches: &[&Switch],
    key: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, String> {
    let mut found: Option<(T, &str)> = None;
    for s in switches {
        let Some(v) = s.params.get(key) else { continue };
        let x = parse(v).ok_or_else(|| format!("switch {}: bad {key}={v}", s.name))?;
        match found {
            Some((y, other)) if y != x => {
                return Err(format!(
                    "switch {}: {key}={v} differs from switch {other}'s: PINT needs one value \
                     across the fabric",
                    s.name
                ));
            }
            Some(_) => {}
            None => found = Some((x, s.name.as_str())),
        }
    }
    Ok(found.map(|(x, _)| x))
}

/// The path-tracing parameters of the switches of `t` that run `pint` (`None` if none does):
/// the values their lines give, which must agree, or the defaults.
pub fn fabric_config(t: &Topology) -> Result<Option<FabricConfig>, String> {
    let only: Vec<&Switch> = t.switches.iter().filter(|s| s.program == "pint").collect();
    if only.is_empty() {
        return Ok(None);
    }
    config_of(t, &only).map(Some)
}

/// The path-tracing parameters of `only` (switches of `t` running `pint`): the values their lines
/// give, which must agree, or the defaults.
pub fn config_of(t: &Topology, only: &[&Switch]) -> Result<FabricConfig, String> {
    let seed = agreed(only, "pint_seed", parse_u64)?.unwrap_or(DEFAULT_SEED);
    let budget = agreed(only, "pint_bits", parse_bits)?.unwrap_or(Budget::SINGLE_8);
    let max_hops = agreed(only, "pint_max_hops", |v| {
        v.parse().ok().filter(|d| (1..=MAX_HOPS).contains(d))
    })?;
    let max_hops =
        max_hops.unwrap_or_else(|| (topo::plan::host_path_switches(t) as u32).clamp(1, MAX_HOPS));
    let initial_ttl = agreed(only, "pint_ttl", |v| v.parse().ok().filter(|&x| x > 0))?;
    Ok(FabricConfig {
        seed,
        budget,
        max_hops,
        initial_ttl: initial_ttl.unwrap_or(DEFAULT_TTL),
    })
}

/// The fabric's latency query: the share of packets that carry it and its compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyFabric {
    /// Packets on the latency query, out of [`SHARE_ONE`].
    pub share: u32,
    /// The compression.
    pub config: LatencyConfig,
}

/// The latency keys of the `pint` switches of `t` (the defaults where none gives them).
pub fn latency_fabric_config(t: &Topology) -> Result<LatencyFabric, String> {
    let only: Vec<&Switch> = t.switches.iter().filter(|s| s.program == "pint").collect();
    latency_config_of(&only)
}

/// The latency keys of `only` (switches running `pint`), which must agree, or the defaults.
pub fn latency_config_of(only: &[&Switch]) -> Result<LatencyFabric, String> {
    let d = LatencyConfig::DEFAULT;
    let share = agreed(only, "pint_latency", parse_share)?.unwrap_or(0);
    let kind = agreed(only, "pint_lat_codec", |v| match v {
        "mul" => Some(CodecKind::Multiplicative),
        "add" => Some(CodecKind::Additive),
        _ => None,
    })?
    .unwrap_or(d.kind);
    let bits = agreed(only, "pint_lat_bits", |v| match v {
        "4" => Some(4u8),
        "8" => Some(8),
        _ => None,
    })?
    .unwrap_or(d.bits);
    let ns = |v: &str| v.parse::<u32>().ok().filter(|&x| x > 0);
    let min_ns = agreed(only, "pint_lat_min_ns", ns)?.unwrap_or(d.min_ns);
    let max_ns = agreed(only, "pint_lat_max_ns", ns)?.unwrap_or(d.max_ns);
    if max_ns <= min_ns {
        return Err(format!(
            "pint_lat_max_ns={max_ns} must exceed pint_lat_min_ns={min_ns}"
        ));
    }
    debug_assert!(share <= SHARE_ONE);
    Ok(LatencyFabric {
        share,
        config: LatencyConfig {
            kind,
            bits,
            min_ns,
            max_ns,
        },
    })
}
