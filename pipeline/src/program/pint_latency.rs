//! `pint`'s latency query and Query Engine (PINT §5, §6.2; docs/pint.md),
//! hooked into [`super::pint::egress`].
//!
//! `egress.pint_query` (exact on the egress port; a miss: every packet carries path tracing)
//! holds `pint_latency(share, codec, bits, min_ns, max_ns)`. On a traced packet the Query Engine
//! ([`Query::choose`], a hash of the packet ID) puts `share`/2^16 of the packets on the latency
//! query; on those the hop compresses its latency, egress timestamp − ingress timestamp [I],
//! and overwrites the digest with the Baseline rule ([`crate::pint::latency::encode_hop`]). The
//! digest rides where path tracing's does (the IPv4 ID's high byte), and the sink exports the
//! query id in the record.
//!
//! Fabric keys (one value across the fabric, like `pint_seed=`): `pint_latency=` (the share:
//! `0.5`, `1/16`; default 0, latency off), `pint_lat_codec=mul|add` (default `mul`),
//! `pint_lat_bits=4|8` (default 8), `pint_lat_min_ns=` (default 100) and `pint_lat_max_ns=`
//! (default 10,000,000).

use crate::fabric::topo::{Switch, Topology};
use crate::metadata::{PORT_BITS, StdMeta};
use crate::pint::latency::{self, CodecKind, LatencyConfig, Query, SHARE_ONE, parse_share};
use crate::pint::{Hashes, Query as Q};
use crate::program::Ctx;
use crate::schema::{ActionScope, SchemaBuilder, TableIx, TableSpec};
use crate::table::MatchKind;

/// The schema objects of the latency query.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LatencyIds {
    action: usize,
    table: TableIx,
}

/// Declares `egress.pint_query` and its action.
pub(crate) fn declare(b: &mut SchemaBuilder, no_action: usize) -> LatencyIds {
    let action = b.action(
        "egress.pint_latency",
        &[
            ("share", 32),
            ("codec", 8),
            ("bits", 8),
            ("min_ns", 32),
            ("max_ns", 32),
        ],
    );
    let table = b.table(TableSpec {
        name: "egress.pint_query",
        fields: vec![("standard_metadata.egress_port", PORT_BITS, MatchKind::Exact)],
        actions: vec![
            (action, ActionScope::TableOnly),
            (no_action, ActionScope::TableAndDefault),
        ],
        default_action: (no_action, vec![]),
        const_default: false,
        size: 1 << PORT_BITS,
        idle_timeout: false,
    });
    LatencyIds { action, table }
}

/// The Query Engine and the latency query's Encoding Module on a traced packet at hop `hop`:
/// `Some(digest)` if the packet carries the latency query, `None` if it carries path tracing.
pub(crate) fn encode(
    cx: &mut Ctx<'_>,
    ids: &LatencyIds,
    md: &StdMeta,
    hashes: Hashes,
    packet_id: u64,
    hop: u32,
    carried: u32,
) -> Option<u32> {
    let r = cx.apply(ids.table, &[u128::from(md.egress_port)], 0);
    if usize::from(r.action.action) != ids.action {
        return None;
    }
    let share = r.action.arg(0) as u32;
    if Query::choose(hashes, packet_id, share) != Q::Latency {
        return None;
    }
    let kind = if r.action.arg(1) == 1 {
        CodecKind::Additive
    } else {
        CodecKind::Multiplicative
    };
    let cfg = LatencyConfig {
        kind,
        bits: (r.action.arg(2) as u8).clamp(1, 8),
        min_ns: r.action.arg(3) as u32,
        max_ns: r.action.arg(4) as u32,
    };
    let ns = md
        .egress_global_timestamp
        .saturating_sub(md.ingress_global_timestamp);
    let code = cfg.codec().encode(ns as f64);
    Some(latency::encode_hop(hashes, packet_id, hop, code, carried))
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
pub fn fabric_config(t: &Topology) -> Result<LatencyFabric, String> {
    let only: Vec<&Switch> = t.switches.iter().filter(|s| s.program == "pint").collect();
    config_of(&only)
}

pub(crate) fn config_of(only: &[&Switch]) -> Result<LatencyFabric, String> {
    use super::pint::agreed;
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

/// The plan's `egress.pint_query` entry for `port` (none when latency is off).
pub(crate) fn plan_line(l: &LatencyFabric, port: impl std::fmt::Display) -> Option<String> {
    (l.share > 0).then(|| {
        let c = &l.config;
        format!(
            "table_add pint_query pint_latency {port} => {} {} {} {} {}",
            l.share, c.kind as u8, c.bits, c.min_ns, c.max_ns
        )
    })
}
