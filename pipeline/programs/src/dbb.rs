//! `dbb`: deterministic bandwidth-based packet-level traffic splitting (Wu, Yen, Hsieh and
//! Tseng; docs/dbb.md) on `basic`'s routing, with `ecmp`'s ECN marking. Each switch walks, per
//! (source ToR, sink ToR) pair, the circular list of next hops that [`analysis::dbb::compile`] lays out, so that over every
//! dispatching cycle each link carries exactly its `N_ij` packets. docs/dbb.md records the choices,
//! and its "Open questions" the A-DBB ids cited here.
//!
//! **Pair** (A-DBB-3 [I]): `ingress.dbb_pair_v4` / `_v6`, ternary on (source address,
//! destination address, `meta.pure_ack`), name the pair and its list's length at this switch;
//! the plan's entries match the two ToRs' prefixes. A miss routes as `basic` does (ECMP on the
//! 5-tuple): a ToR's own hosts, the sink ToR delivering, and pure ACKs unless configured.
//!
//! **Counter** [P §III-E], one action each, so the plan picks per entry:
//! - `dbb_shared`: one circular counter per pair, `ingress.dbb_pair_count[pair]`;
//! - `dbb_independent`: one per flow, `ingress.dbb_flow_count[crc32(5-tuple) % 8192]` (A-DBB-4;
//!   a cell starts at index 0 on its first use only, and nothing resets it: a later flow that
//!   hashes to a used cell continues its counter. Flows that share a cell share a counter; when
//!   they belong to different pairs it is counted as a collision in
//!   `ingress.dbb_flow_collisions[0]`, the cell's last pair kept in `ingress.dbb_flow_pair`).
//!
//! Either way `index = count % len; count = index + 1 mod len` in one read-modify-write (a
//! counter that another pair's flow left beyond `len` is read modulo `len`).
//!
//! **Dispatch**: `ingress.dbb_dispatch`, exact on (pair, index), gives the port and the MACs of
//! its link (`dbb_hop`, then `set_nhop`'s rewrite). A missing entry drops as `dbb_no_hop`.
//!
//! **Fabric plan**: `basic`'s routes (the ECMP fallback), `ecmp`'s ECN thresholds, then for every
//! ordered pair of ToRs (switches with hosts) the compiler's lists, from the topology's
//! switch-to-switch links in both directions with their rates as bandwidths (of a balanced
//! max-flow where the compiler's own leaves links idle, [`analysis::dbb::compile`]); each switch gets the
//! pair entries and dispatch entries of the lists it has. Pair ids are `1..` in topology order of
//! (source, sink). A list is installed as its shortest period (`[S2, S3, S2, S3]` as `[S2, S3]`),
//! which walks the same sequence [X]. Parameters on a switch's line: `counter=shared|independent`
//! (for the scheme `dbb`; `dbb-shared` and `dbb-independent` fix it) and `acks=ecmp|dbb` (whether
//! pure TCP ACKs are dispatched too; A-DBB-6: default `ecmp`, [I]).

use std::collections::BTreeMap;

use super::basic::Headers;
use super::hook::{Base, ComposeError, Mechanism, Steer};
use crate::PlanError;
use crate::plan_error::bad_value;
use analysis::dbb::{Input, Link, Ratio, compile};
use pipeline::metadata::{DropReason, PORT_BITS, PortId, StdMeta};
use pipeline::program::Ctx;
use pipeline::schema::{ActionScope, RegisterIx, SchemaBuilder, TableIx, TableSpec};
use pipeline::table::MatchKind;
use topo::plan::{SwitchPlan, mac_text, neighbour_macs, routed, switch_mac};
use topo::tors::{Tor, tors};
use topo::{End, Switch, Topology};

/// Pair ids are `1..PAIRS`.
pub const PAIRS: usize = 1 << 16;
/// Cells of the per-flow counter register.
pub const FLOW_CELLS: usize = 8192;
/// Entries of each pair table (v4, v6).
pub const PAIR_ENTRIES: usize = 16_384;
/// Entries of the dispatch table.
pub const DISPATCH_ENTRIES: usize = 65_536;
/// Bits of a list index (lists hold up to `analysis::dbb::MAX_CYCLE` = 2^20 entries).
pub const INDEX_BITS: u8 = 20;

/// Which counter a pair's packets advance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// One per (source ToR, sink ToR) pair.
    Shared,
    /// One per flow (5-tuple).
    Independent,
}

impl Counter {
    /// Its name (`counter=` values and scheme suffixes).
    pub fn name(self) -> &'static str {
        match self {
            Counter::Shared => "shared",
            Counter::Independent => "independent",
        }
    }

    fn action(self) -> &'static str {
        match self {
            Counter::Shared => "dbb_shared",
            Counter::Independent => "dbb_independent",
        }
    }
}

/// The values `counter=` takes, for errors.
const COUNTERS: &str = "shared or independent";

impl std::str::FromStr for Counter {
    type Err = String;
    fn from_str(s: &str) -> Result<Counter, String> {
        match s {
            "shared" => Ok(Counter::Shared),
            "independent" => Ok(Counter::Independent),
            _ => Err(format!("counter={s}: {COUNTERS}")),
        }
    }
}

/// DBB on `basic`: per-pair dispatch cycles before `basic`'s LPM.
#[derive(Clone, Copy, Debug)]
pub struct Dbb(DbbIds);

impl Mechanism for Dbb {
    fn declare(b: &mut SchemaBuilder, base: &Base) -> Result<Self, ComposeError> {
        Ok(Dbb(declare(b, base.no_action)))
    }

    #[inline]
    fn steer(&self, cx: &mut Ctx<'_>, md: &mut StdMeta, h: &Headers, flow_hash: u64) -> Steer {
        steer(
            cx,
            &self.0,
            md,
            (h.ipv4, h.src(), h.dst(), h.pure_ack),
            flow_hash,
        )
    }
}

/// The schema objects DBB adds to `basic`.
#[derive(Clone, Copy, Debug)]
struct DbbIds {
    shared: usize,
    independent: usize,
    ecmp: usize,
    ecmp_count: RegisterIx,
    hop: usize,
    pair_v4: TableIx,
    pair_v6: TableIx,
    dispatch: TableIx,
    pair_count: RegisterIx,
    flow_count: RegisterIx,
    flow_pair: RegisterIx,
    collisions: RegisterIx,
    no_hop: DropReason,
}

/// Declares DBB's tables, registers and drop reason.
fn declare(b: &mut SchemaBuilder, no_action: usize) -> DbbIds {
    use ActionScope::*;
    use MatchKind::*;
    let pair: &[(&'static str, u8)] = &[("pair", 16), ("len", INDEX_BITS + 1)];
    let shared = b.action("ingress.dbb_shared", pair);
    let independent = b.action("ingress.dbb_independent", pair);
    // A pair the compiler cannot serve: ECMP, counted per pair.
    let ecmp = b.action("ingress.dbb_ecmp", &[("pair", 16)]);
    let hop = b.action(
        "ingress.dbb_hop",
        &[("dmac", 48), ("smac", 48), ("port", PORT_BITS)],
    );
    let mut pair_table = |name, src, dst, width| {
        b.table(TableSpec {
            name,
            fields: vec![
                (src, width, Ternary),
                (dst, width, Ternary),
                ("meta.pure_ack", 1, Ternary),
            ],
            actions: vec![
                (shared, TableOnly),
                (independent, TableOnly),
                (ecmp, TableOnly),
                (no_action, DefaultOnly),
            ],
            default_action: (no_action, vec![]),
            const_default: false,
            size: PAIR_ENTRIES,
            idle_timeout: false,
        })
    };
    let pair_v4 = pair_table(
        "ingress.dbb_pair_v4",
        "hdr.ipv4.src_addr",
        "hdr.ipv4.dst_addr",
        32,
    );
    let pair_v6 = pair_table(
        "ingress.dbb_pair_v6",
        "hdr.ipv6.src_addr",
        "hdr.ipv6.dst_addr",
        128,
    );
    let dispatch = b.table(TableSpec {
        name: "ingress.dbb_dispatch",
        fields: vec![
            ("meta.dbb_pair", 16, Exact),
            ("meta.dbb_index", INDEX_BITS, Exact),
        ],
        actions: vec![(hop, TableOnly), (no_action, DefaultOnly)],
        default_action: (no_action, vec![]),
        const_default: false,
        size: DISPATCH_ENTRIES,
        idle_timeout: false,
    });
    DbbIds {
        shared,
        independent,
        ecmp,
        ecmp_count: b.register("ingress.dbb_ecmp_count", 64, PAIRS),
        hop,
        pair_v4,
        pair_v6,
        dispatch,
        pair_count: b.register("ingress.dbb_pair_count", 32, PAIRS),
        flow_count: b.register("ingress.dbb_flow_count", 32, FLOW_CELLS),
        flow_pair: b.register("ingress.dbb_flow_pair", 16, FLOW_CELLS),
        collisions: b.register("ingress.dbb_flow_collisions", 64, 1),
        no_hop: b.drop_reason("dbb_no_hop"),
    }
}

/// Ingress for a routed packet (IPv4 or not, source, destination, pure ACK): the next hop of
/// its pair's list, or [`Steer::Route`] when no pair entry matches.
fn steer(
    cx: &mut Ctx<'_>,
    d: &DbbIds,
    md: &mut StdMeta,
    (ipv4, src, dst, pure_ack): (bool, u128, u128, bool),
    flow_hash: u64,
) -> Steer {
    let table = if ipv4 { d.pair_v4 } else { d.pair_v6 };
    let r = cx.apply(table, &[src, dst, u128::from(pure_ack)], 0);
    if r.entry.is_none() {
        return Steer::Route;
    }
    let a = usize::from(r.action.action);
    let pair = r.action.arg(0);
    let len = r.action.arg(1) as u64;
    let (register, cell) = if a == d.shared {
        (d.pair_count, pair as usize)
    } else if a == d.independent {
        let cell = flow_hash as usize % FLOW_CELLS;
        // Another pair's flow had this cell: the two share a counter.
        let last = cx.register(d.flow_pair).rmw(cell, |_| pair as u64);
        if last.is_some_and(|(old, _)| old != 0 && old != pair as u64) {
            cx.register(d.collisions).rmw(0, |v| v + 1);
        }
        (d.flow_count, cell)
    } else {
        if a == d.ecmp {
            cx.register(d.ecmp_count).rmw(pair as usize, |v| v + 1);
            cx.trace(|| format!("dbb pair={pair} falls back to ECMP"));
        }
        return Steer::Route;
    };
    let index = (len > 0)
        .then(|| cx.register(register).rmw(cell, |v| (v % len + 1) % len))
        .flatten()
        .map(|(old, _)| old % len);
    let hop = index.and_then(|i| {
        let m = cx.apply(d.dispatch, &[pair, u128::from(i)], 0);
        (usize::from(m.action.action) == d.hop).then(|| Steer::Hop {
            dmac: m.action.arg(0),
            smac: m.action.arg(1),
            port: m.action.arg(2) as PortId,
        })
    });
    cx.trace(|| format!("dbb pair={pair} index={index:?} of {len} hop={hop:?}"));
    match hop {
        Some(h) => h,
        None => {
            md.mark_to_drop(d.no_hop);
            Steer::Dropped
        }
    }
}

/// The shortest prefix of `v` that `v` repeats.
fn period<T: PartialEq>(v: &[T]) -> &[T] {
    (1..=v.len())
        .find(|&p| v.len().is_multiple_of(p) && v.chunks(p).all(|c| c == &v[..p]))
        .map_or(v, |p| &v[..p])
}

/// What the compiler gets from `t`: every switch-to-switch link in both directions, named
/// `switch:port` after the port it leaves by (so parallel links are distinct), with its rate
/// as its bandwidth; and each name's port.
pub fn compiler_links(t: &Topology) -> (Vec<Link>, BTreeMap<String, u16>) {
    let mut links = Vec::new();
    let mut ports = BTreeMap::new();
    for l in &t.links {
        let (End::Switch(a, pa), End::Switch(b, pb)) = (&l.a, &l.b) else {
            continue;
        };
        let bandwidth = Ratio::new(i128::from(l.props.rate_bps), 1).unwrap_or(Ratio::ZERO);
        for (from, port, to) in [(a, *pa, b), (b, *pb, a)] {
            let id = format!("{from}:{port}");
            ports.insert(id.clone(), port);
            links.push(Link {
                id: Some(id),
                from: from.clone(),
                to: to.clone(),
                bandwidth,
            });
        }
    }
    (links, ports)
}

/// A switch's settings from its line and the scheme.
#[derive(Clone, Copy, Debug)]
struct Settings {
    counter: Counter,
    acks: bool,
}

fn settings(s: &Switch) -> Result<Settings, PlanError> {
    let counter = s
        .params
        .get("counter")
        .map(|v| {
            v.parse::<Counter>()
                .map_err(|_| bad_value(s, "counter", v, COUNTERS))
        })
        .transpose()?
        .unwrap_or(Counter::Shared);
    let acks = match s.params.get("acks").map(String::as_str) {
        None | Some("ecmp") => false,
        Some("dbb") => true,
        Some(v) => return Err(bad_value(s, "acks", v, "ecmp or dbb")),
    };
    Ok(Settings { counter, acks })
}

/// One switch's DBB lines, and how many entries each table gets.
#[derive(Debug, Default)]
struct Lines {
    routes: Vec<String>,
    pair_v4: usize,
    pair_v6: usize,
    dispatch: usize,
}

impl Lines {
    /// The pair entries of (`src`, `dst`): one per (source prefix, sink prefix) of each family,
    /// `action` with the pure-ACK key `ack` and the action's arguments `args`, priority 1.
    fn pair_entries(&mut self, src: &Tor, dst: &Tor, action: &str, ack: &str, args: &str) {
        for (table, keys, count) in [
            (
                "dbb_pair_v4",
                (src.v4_ternary(), dst.v4_ternary()),
                &mut self.pair_v4,
            ),
            (
                "dbb_pair_v6",
                (src.v6_ternary(), dst.v6_ternary()),
                &mut self.pair_v6,
            ),
        ] {
            for s in &keys.0 {
                for d in &keys.1 {
                    self.routes.push(format!(
                        "table_add {table} {action} {s} {d} {ack} => {args} 1"
                    ));
                    *count += 1;
                }
            }
        }
    }
}

/// The fabric plan of `dbb` (counter from `counter=`, default shared; the registry's presets
/// `dbb-shared` and `dbb-independent` set it).
pub fn plan(t: &Topology, only: &[&Switch]) -> Result<BTreeMap<String, SwitchPlan>, PlanError> {
    let mut plans = routed(t, only);
    let ports = t.ports();
    let mut set: BTreeMap<&str, (Settings, Lines)> = BTreeMap::new();
    for s in only {
        set.insert(&s.name, (settings(s)?, Lines::default()));
    }
    let tors = tors(t);
    let (links, port_of) = compiler_links(t);
    let mut input = Input {
        source: String::new(),
        sink: String::new(),
        links,
    };
    let mut pair = 0usize;
    for src in &tors {
        for dst in tors.iter().filter(|d| d.switch != src.switch) {
            pair += 1;
            if pair >= PAIRS {
                return Err(PlanError::TooManyPairs {
                    program: "dbb",
                    tors: tors.len(),
                    pairs: tors.len() * (tors.len() - 1),
                    max: PAIRS - 1,
                });
            }
            input.source.clone_from(&src.switch);
            input.sink.clone_from(&dst.switch);
            let out = match compile(&input) {
                Ok(out) => out,
                // A pair outside the model (a failed link, uneven stages): ECMP for this pair
                // alone, said as a warning in the source ToR's plan and counted per packet in
                // `ingress.dbb_ecmp_count`. The switches after the source miss the pair table
                // and route by ECMP anyway.
                Err(error) => {
                    let why = PlanError::Dbb {
                        src: src.switch.clone(),
                        dst: dst.switch.clone(),
                        error: Box::new(error),
                    };
                    if let Some((_, lines)) = set.get_mut(src.switch.as_str()) {
                        lines
                            .routes
                            .push(format!("# warning: {why}; pair {pair} uses ECMP"));
                        lines.pair_entries(src, dst, "dbb_ecmp", "0&&&0", &pair.to_string());
                    }
                    continue;
                }
            };
            for list in &out.lists {
                let Some((cfg, lines)) = set.get_mut(list.switch.as_str()) else {
                    continue;
                };
                let hops: Vec<u16> = list
                    .next_hops
                    .iter()
                    .map(|id| port_of.get(id).copied().unwrap_or(0))
                    .collect();
                let hops = period(&hops);
                let (action, len) = (cfg.counter.action(), hops.len());
                let ack = if cfg.acks { "0&&&0" } else { "0&&&1" };
                lines.pair_entries(src, dst, action, ack, &format!("{pair} {len}"));
                let me = list.switch.as_str();
                let index = t.switches.iter().position(|x| x.name == me).unwrap_or(0);
                let smac = mac_text(switch_mac(index));
                let macs = neighbour_macs(t, me);
                for (i, p) in hops.iter().enumerate() {
                    let dmac = macs.get(p).copied().map(mac_text).unwrap_or_default();
                    lines.routes.push(format!(
                        "table_add dbb_dispatch dbb_hop {pair} {i} => {dmac} {smac} {p}"
                    ));
                }
                lines.dispatch += hops.len();
            }
        }
    }
    for s in only {
        let Some(plan) = plans.get_mut(&s.name) else {
            continue;
        };
        plan.routes.extend(super::ecmp::ecn_thresholds(&ports, s)?);
        let Some((_, lines)) = set.remove(s.name.as_str()) else {
            continue;
        };
        if lines.pair_v4.max(lines.pair_v6) > PAIR_ENTRIES || lines.dispatch > DISPATCH_ENTRIES {
            return Err(PlanError::TablesFull {
                program: "dbb",
                switch: s.name.clone(),
                needs: format!(
                    "{} pair entries and {} dispatch entries",
                    lines.pair_v4.max(lines.pair_v6),
                    lines.dispatch
                ),
                holds: format!("{PAIR_ENTRIES} pair entries per family and {DISPATCH_ENTRIES}"),
            });
        }
        plan.routes.extend(lines.routes);
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::period;

    #[test]
    fn lists_are_installed_as_their_shortest_period() {
        assert_eq!(period(&[2, 3, 2, 3]), &[2, 3]);
        assert_eq!(period(&[6, 6, 6, 6]), &[6]);
        assert_eq!(
            period(&[2, 3, 3, 3, 3, 2, 3, 3, 3, 3]),
            &[2, 3, 3, 3, 3],
            "Fig. 5's S1"
        );
        assert_eq!(period(&[5, 5, 4, 5, 4, 5, 4, 5]), &[5, 5, 4, 5, 4, 5, 4, 5]);
        assert_eq!(period::<u8>(&[]), &[] as &[u8]);
    }
}
