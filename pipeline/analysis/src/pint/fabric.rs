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

/// Why the PINT keys of a fabric's `pint` switches cannot be used: what the `pint` plan and
/// the collectors (`pisa-sim`'s, `pisa-pint`'s) refuse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A switch's line gives a key a value that does not parse.
    #[error("switch {switch}: bad {key}={value} (expected {expected})")]
    BadValue {
        /// The switch whose line gives it.
        switch: String,
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// What the key takes.
        expected: String,
    },
    /// Two switches give a key different values, where the fabric needs one.
    #[error(
        "switch {switch}: {key}={value} differs from switch {other}'s: PINT needs one value \
         across the fabric"
    )]
    Disagree {
        /// The switch whose value differs.
        switch: String,
        /// The key.
        key: String,
        /// Its value there.
        value: String,
        /// The switch that gave the key first, with another value.
        other: String,
    },
    /// The latency query's range is empty.
    #[error("pint_lat_max_ns={max_ns} must exceed pint_lat_min_ns={min_ns}")]
    LatencyRange {
        /// `pint_lat_min_ns`.
        min_ns: u32,
        /// `pint_lat_max_ns`.
        max_ns: u32,
    },
}

/// For callers whose errors are still text: the simulator's fabric (`sim::fabric`).
impl From<ConfigError> for String {
    fn from(e: ConfigError) -> String {
        e.to_string()
    }
}

/// The one value of `key` the switches running `pint` give (`None`: none gives it); an error if
/// two give different values or one is malformed (`expected` says what it takes, for the
/// error).
pub fn agreed<T: PartialEq + Copy>(
    switches: &[&Switch],
    key: &str,
    expected: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, ConfigError> {
    let mut found: Option<(T, &str)> = None;
    for s in switches {
        let Some(v) = s.params.get(key) else { continue };
        let x = parse(v).ok_or_else(|| ConfigError::BadValue {
            switch: s.name.clone(),
            key: key.to_string(),
            value: v.clone(),
            expected: expected.to_string(),
        })?;
        match found {
            Some((y, other)) if y != x => {
                return Err(ConfigError::Disagree {
                    switch: s.name.clone(),
                    key: key.to_string(),
                    value: v.clone(),
                    other: other.to_string(),
                });
            }
            Some(_) => {}
            None => found = Some((x, s.name.as_str())),
        }
    }
    Ok(found.map(|(x, _)| x))
}

/// The path-tracing parameters of the switches of `t` that run `pint` (`None` if none does):
/// the values their lines give, which must agree, or the defaults.
pub fn fabric_config(t: &Topology) -> Result<Option<FabricConfig>, ConfigError> {
    let only: Vec<&Switch> = t.switches.iter().filter(|s| s.program == "pint").collect();
    if only.is_empty() {
        return Ok(None);
    }
    config_of(t, &only).map(Some)
}

/// The path-tracing parameters of `only` (switches of `t` running `pint`): the values their lines
/// give, which must agree, or the defaults.
pub fn config_of(t: &Topology, only: &[&Switch]) -> Result<FabricConfig, ConfigError> {
    let seed = agreed(only, "pint_seed", "a number, decimal or 0x hex", parse_u64)?
        .unwrap_or(DEFAULT_SEED);
    let budget = agreed(only, "pint_bits", "8 or 2x4", parse_bits)?.unwrap_or(Budget::SINGLE_8);
    let max_hops = agreed(only, "pint_max_hops", &format!("1..={MAX_HOPS}"), |v| {
        v.parse().ok().filter(|d| (1..=MAX_HOPS).contains(d))
    })?;
    let max_hops =
        max_hops.unwrap_or_else(|| (topo::plan::host_path_switches(t) as u32).clamp(1, MAX_HOPS));
    let initial_ttl = agreed(only, "pint_ttl", "1..=255", |v| {
        v.parse().ok().filter(|&x| x > 0)
    })?;
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
pub fn latency_fabric_config(t: &Topology) -> Result<LatencyFabric, ConfigError> {
    let only: Vec<&Switch> = t.switches.iter().filter(|s| s.program == "pint").collect();
    latency_config_of(&only)
}

/// The latency keys of `only` (switches running `pint`), which must agree, or the defaults.
pub fn latency_config_of(only: &[&Switch]) -> Result<LatencyFabric, ConfigError> {
    let d = LatencyConfig::DEFAULT;
    let share = agreed(
        only,
        "pint_latency",
        "a share of packets 0..=1, as a decimal or a fraction n/d",
        parse_share,
    )?
    .unwrap_or(0);
    let kind = agreed(only, "pint_lat_codec", "mul or add", |v| match v {
        "mul" => Some(CodecKind::Multiplicative),
        "add" => Some(CodecKind::Additive),
        _ => None,
    })?
    .unwrap_or(d.kind);
    let bits = agreed(only, "pint_lat_bits", "4 or 8", |v| match v {
        "4" => Some(4u8),
        "8" => Some(8),
        _ => None,
    })?
    .unwrap_or(d.bits);
    let ns = |v: &str| v.parse::<u32>().ok().filter(|&x| x > 0);
    let positive = "a number of ns, at least 1";
    let min_ns = agreed(only, "pint_lat_min_ns", positive, ns)?.unwrap_or(d.min_ns);
    let max_ns = agreed(only, "pint_lat_max_ns", positive, ns)?.unwrap_or(d.max_ns);
    if max_ns <= min_ns {
        return Err(ConfigError::LatencyRange { min_ns, max_ns });
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
