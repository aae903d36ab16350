//! `pint`'s latency query and Query Engine (PINT §5, §6.2; docs/pint.md),
//! hooked into [`super::pint::egress`].
//!
//! `egress.pint_query` (exact on the egress port; a miss: every packet carries path tracing)
//! holds `pint_latency(share, codec, bits, min_ns, max_ns)`. On a traced packet the Query Engine
//! ([`Query::choose`], a hash of the packet ID) puts `share`/2^16 of the packets on the latency
//! query; on those the hop compresses its latency, egress timestamp − ingress timestamp [I],
//! and overwrites the digest with the Baseline rule ([`analysis::pint::latency::encode_hop`]). The
//! digest rides where path tracing's does (the IPv4 ID's high byte), and the sink exports the
//! query id in the record.
//!
//! Fabric keys (one value across the fabric, like `pint_seed=`): `pint_latency=` (the share:
//! `0.5`, `1/16`; default 0, latency off), `pint_lat_codec=mul|add` (default `mul`),
//! `pint_lat_bits=4|8` (default 8), `pint_lat_min_ns=` (default 100) and `pint_lat_max_ns=`
//! (default 10,000,000).

use analysis::pint::latency::{self, CodecKind, LatencyConfig, Query};
use analysis::pint::{Hashes, Query as Q};
use pipeline::metadata::{PORT_BITS, StdMeta};
use pipeline::program::Ctx;
use pipeline::schema::{ActionScope, SchemaBuilder, TableIx, TableSpec};
use pipeline::table::MatchKind;

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

/// The plan's `egress.pint_query` entry for `port` (none when latency is off).
pub(crate) fn plan_line(
    l: &crate::pint::LatencyFabric,
    port: impl std::fmt::Display,
) -> Option<String> {
    (l.share > 0).then(|| {
        let c = &l.config;
        format!(
            "table_add pint_query pint_latency {port} => {} {} {} {} {}",
            l.share, c.kind as u8, c.bits, c.min_ns, c.max_ns
        )
    })
}
