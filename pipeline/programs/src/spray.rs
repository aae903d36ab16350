//! `spray`: packet-level traffic splitting (PLTS: Dixit et al., INFOCOM 2013, §III.A) on `basic`'s
//! routing, with `ecmp`'s ECN marking. Each packet toward a destination with several equal-cost
//! next hops picks one of them on its own; destinations with one next hop (a fat-tree's downward
//! paths) keep `basic`'s route. docs/spray.md records the choices, and the A-PLTS ids cited here.
//!
//! **Tables.** `ingress.spray_v4` / `ingress.spray_v6` (LPM on the destination) are consulted
//! before `basic`'s `ipv4_lpm` / `ipv6_lpm`; a hit names a group of next hops (`group`, with
//! `size` members) and, by its action, the mode. A miss routes as `basic` does.
//! `ingress.spray_members` (exact on group and member index `0..size`) gives each member's port
//! and the MACs of its link (`spray_hop`: the rewrite of `set_nhop`, TTL or hop limit included).
//!
//! **Modes**, one action each, so a controller picks the mode per route:
//! - `spray_random` (PLTS-Random): member `uniform(0..size)` from the worker's seeded generator,
//!   independently per packet.
//! - `spray_counter` (PLTS-Counter): the member whose port has sent the fewest bytes
//!   (`ingress.spray_port_bytes[port]`, 64 bits), ties to the lowest port number [X]; the chosen
//!   port's counter grows by the packet's length. At 1 Tb/s a 64-bit byte counter lasts 4.6
//!   years, so it never wraps (A-PLTS-2); only sprayed packets count [I].
//! - `spray_rr` (PLTS-RR): per flow, the member after the one the flow's previous packet took;
//!   `ingress.spray_rr_next[crc32(5-tuple) % 8192]` holds the next member (a new cell starts at
//!   member 0, A-PLTS-3 [I]; flows that share a cell share a cycle).
//! - `spray_rr_prefix` (the per-destination variant the paper does not evaluate): the same with
//!   one cell per route (`ingress.spray_prefix_next[entry]`, v6 routes from [`ROUTES`] on), so
//!   every flow to one destination prefix shares a cycle.
//!
//! A route whose group has no member at the index drawn is dropped as `spray_no_member`.
//!
//! **Fabric plan**: `basic`'s routes, `ecmp`'s ECN thresholds, then per destination ToR with
//! more than one next hop from this switch a spray route for each of the ToR's prefixes
//! ([`topo::tors`]), and one member entry per (group, port). The mode comes from the
//! scheme (`spray-random`, `spray-counter`, `spray-rr`, `spray-rr-prefix`) or, for `spray`, from
//! `mode=` on the switch's line (default `random`).

use std::collections::{BTreeMap, BTreeSet};

use super::basic::Headers;
use super::hook::{Base, ComposeError, Mechanism, Steer};
use crate::PlanError;
use crate::plan_error::bad_value;
use pipeline::metadata::{DropReason, PORT_BITS, PortId, StdMeta};
use pipeline::program::Ctx;
use pipeline::schema::{ActionScope, RegisterIx, SchemaBuilder, TableIx, TableSpec};
use pipeline::table::MatchKind;
use topo::plan::{SwitchPlan, mac_text, neighbour_macs, next_hops, routed, switch_mac};
use topo::tors::tors;
use topo::{Switch, Topology};

/// Routes per spray table (v4 and v6 each).
pub const ROUTES: usize = 4096;
/// Most members of one group.
pub const MAX_MEMBERS: usize = 64;
/// Group ids are `1..GROUPS`.
pub const GROUPS: usize = 1024;
/// Cells of the per-flow round-robin register.
pub const RR_CELLS: usize = 8192;

/// How a packet picks among a route's next hops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// PLTS-Random.
    Random,
    /// PLTS-Counter.
    Counter,
    /// PLTS-RR, per flow.
    Rr,
    /// Round robin per destination prefix.
    RrPrefix,
}

impl Mode {
    /// Every mode, in documentation order.
    pub const ALL: [Mode; 4] = [Mode::Random, Mode::Counter, Mode::Rr, Mode::RrPrefix];

    /// Its name (`mode=` values and scheme suffixes).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Random => "random",
            Mode::Counter => "counter",
            Mode::Rr => "rr",
            Mode::RrPrefix => "rr-prefix",
        }
    }

    /// The action of its routes.
    pub fn action(self) -> &'static str {
        match self {
            Mode::Random => "spray_random",
            Mode::Counter => "spray_counter",
            Mode::Rr => "spray_rr",
            Mode::RrPrefix => "spray_rr_prefix",
        }
    }
}

/// The values `mode=` takes, for errors.
const MODES: &str = "random, counter, rr or rr-prefix";

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("mode={s}: {MODES}"))
    }
}

/// Packet spraying on `basic`: spray routes before `basic`'s LPM.
#[derive(Clone, Copy, Debug)]
pub struct Spray(SprayIds);

impl Mechanism for Spray {
    fn declare(b: &mut SchemaBuilder, base: &Base) -> Result<Self, ComposeError> {
        Ok(Spray(declare(b, base.no_action)))
    }

    #[inline]
    fn steer(&self, cx: &mut Ctx<'_>, md: &mut StdMeta, h: &Headers, flow_hash: u64) -> Steer {
        steer(cx, &self.0, md, (h.ipv4, h.dst()), flow_hash)
    }
}

/// The schema objects spraying adds to `basic`.
#[derive(Clone, Copy, Debug)]
struct SprayIds {
    random: usize,
    counter: usize,
    rr: usize,
    rr_prefix: usize,
    hop: usize,
    v4: TableIx,
    v6: TableIx,
    members: TableIx,
    port_bytes: RegisterIx,
    rr_next: RegisterIx,
    prefix_next: RegisterIx,
    no_member: DropReason,
}

/// Declares the spray tables, registers and drop reason.
fn declare(b: &mut SchemaBuilder, no_action: usize) -> SprayIds {
    use ActionScope::*;
    use MatchKind::*;
    let group: &[(&'static str, u8)] = &[("group", 16), ("size", 8)];
    let random = b.action("ingress.spray_random", group);
    let counter = b.action("ingress.spray_counter", group);
    let rr = b.action("ingress.spray_rr", group);
    let rr_prefix = b.action("ingress.spray_rr_prefix", group);
    let hop = b.action(
        "ingress.spray_hop",
        &[("dmac", 48), ("smac", 48), ("port", PORT_BITS)],
    );
    let modes = vec![
        (random, TableOnly),
        (counter, TableOnly),
        (rr, TableOnly),
        (rr_prefix, TableOnly),
        (no_action, DefaultOnly),
    ];
    let mut route_table = |name, field, width| {
        b.table(TableSpec {
            name,
            fields: vec![(field, width, Lpm)],
            actions: modes.clone(),
            default_action: (no_action, vec![]),
            const_default: false,
            size: ROUTES,
            idle_timeout: false,
        })
    };
    let v4 = route_table("ingress.spray_v4", "hdr.ipv4.dst_addr", 32);
    let v6 = route_table("ingress.spray_v6", "hdr.ipv6.dst_addr", 128);
    let members = b.table(TableSpec {
        name: "ingress.spray_members",
        fields: vec![
            ("meta.spray_group", 16, Exact),
            ("meta.spray_index", 8, Exact),
        ],
        actions: vec![(hop, TableOnly), (no_action, DefaultOnly)],
        default_action: (no_action, vec![]),
        const_default: false,
        size: 4096,
        idle_timeout: false,
    });
    SprayIds {
        random,
        counter,
        rr,
        rr_prefix,
        hop,
        v4,
        v6,
        members,
        port_bytes: b.register("ingress.spray_port_bytes", 64, 1 << PORT_BITS),
        rr_next: b.register("ingress.spray_rr_next", 8, RR_CELLS),
        prefix_next: b.register("ingress.spray_prefix_next", 8, 2 * ROUTES),
        no_member: b.drop_reason("spray_no_member"),
    }
}

/// Member `index` of `group`: the MACs and port of its link.
fn member(cx: &mut Ctx<'_>, s: &SprayIds, group: u128, index: usize) -> Option<Steer> {
    let m = cx.apply(s.members, &[group, index as u128], 0);
    (usize::from(m.action.action) == s.hop).then(|| Steer::Hop {
        dmac: m.action.arg(0),
        smac: m.action.arg(1),
        port: m.action.arg(2) as PortId,
    })
}

/// The next member of a round-robin cell of `size` members (and the cell moves on).
fn round_robin(cx: &Ctx<'_>, register: RegisterIx, cell: usize, size: usize) -> Option<usize> {
    let n = size as u64;
    let (old, _) = cx.register(register).rmw(cell, |v| (v % n + 1) % n)?;
    Some((old % n) as usize)
}

/// The member with the fewest bytes sent, ties to the lowest port; its counter counts the packet.
fn least_loaded(
    cx: &mut Ctx<'_>,
    s: &SprayIds,
    group: u128,
    size: usize,
    len: u32,
) -> Option<Steer> {
    let mut best: Option<(u64, PortId, Steer)> = None;
    for i in 0..size {
        let hop = member(cx, s, group, i)?;
        let Steer::Hop { port, .. } = hop else {
            return None;
        };
        let bytes = cx.register(s.port_bytes).read(usize::from(port))?;
        if best.is_none_or(|(b, p, _)| (bytes, port) < (b, p)) {
            best = Some((bytes, port, hop));
        }
    }
    let (bytes, port, hop) = best?;
    cx.register(s.port_bytes)
        .rmw(usize::from(port), |v| v.saturating_add(u64::from(len)))?;
    cx.trace(|| format!("spray counter port={port} bytes={bytes}"));
    Some(hop)
}

/// Ingress for a routed packet to `dst` (IPv4 or not, and the address): a spray route's member,
/// or [`Steer::Route`] when no spray route matches.
fn steer(
    cx: &mut Ctx<'_>,
    s: &SprayIds,
    md: &mut StdMeta,
    (ipv4, dst): (bool, u128),
    flow_hash: u64,
) -> Steer {
    let table = if ipv4 { s.v4 } else { s.v6 };
    let r = cx.apply(table, &[dst], 0);
    let Some(entry) = r.entry else {
        return Steer::Route;
    };
    let a = usize::from(r.action.action);
    let group = r.action.arg(0);
    let size = usize::try_from(r.action.arg(1))
        .unwrap_or(0)
        .min(MAX_MEMBERS);
    let hop = if size == 0 {
        None
    } else if a == s.counter {
        least_loaded(cx, s, group, size, md.packet_length)
    } else {
        let index = if a == s.random {
            Some(cx.rng.range(0, size as u64 - 1) as usize)
        } else if a == s.rr {
            round_robin(cx, s.rr_next, flow_hash as usize % RR_CELLS, size)
        } else if a == s.rr_prefix {
            let cell = if ipv4 { 0 } else { ROUTES } + entry as usize % ROUTES;
            round_robin(cx, s.prefix_next, cell, size)
        } else {
            return Steer::Route;
        };
        cx.trace(|| format!("spray group={group} member={index:?} of {size}"));
        index.and_then(|i| member(cx, s, group, i))
    };
    match hop {
        Some(h) => h,
        None => {
            md.mark_to_drop(s.no_member);
            Steer::Dropped
        }
    }
}

/// The mode of switch `s`: `mode=` on its line (the registry's presets `spray-random`, ...
/// set it), default random.
fn mode_of(s: &Switch) -> Result<Mode, PlanError> {
    s.params
        .get("mode")
        .map(|v| {
            v.parse::<Mode>()
                .map_err(|_| bad_value(s, "mode", v, MODES))
        })
        .transpose()
        .map(|m| m.unwrap_or(Mode::Random))
}

/// The fabric plan of `spray` (mode from `mode=`, default random).
pub fn plan(t: &Topology, only: &[&Switch]) -> Result<BTreeMap<String, SwitchPlan>, PlanError> {
    let mut plans = routed(t, only);
    let ports = t.ports();
    let hops = next_hops(t);
    let tors = tors(t);
    for s in only {
        let me = s.name.as_str();
        let Some(plan) = plans.get_mut(me) else {
            continue;
        };
        let mode = mode_of(s)?;
        plan.routes.extend(super::ecmp::ecn_thresholds(&ports, s)?);
        let index = t
            .switches
            .iter()
            .position(|x| x.name == me)
            .ok_or_else(|| PlanError::NoSwitch {
                switch: me.to_string(),
            })?;
        let my_mac = mac_text(switch_mac(index));
        let macs = neighbour_macs(t, me);
        let by_host: BTreeMap<usize, &BTreeSet<u16>> = hops
            .get(me)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|(h, next)| (*h, next))
            .collect();
        let mut groups: BTreeMap<&BTreeSet<u16>, usize> = BTreeMap::new();
        let mut routes = Vec::new();
        for tor in tors.iter().filter(|tor| tor.switch != me) {
            // Every host of a ToR is one hop further than the ToR: they share its next hops.
            let Some(&next) = tor.hosts.first().and_then(|h| by_host.get(h)) else {
                continue; // unreachable from here
            };
            if next.len() < 2 {
                continue; // a unique path stays unique
            }
            if next.len() > MAX_MEMBERS {
                return Err(PlanError::TooManyNextHops {
                    program: "spray",
                    switch: me.to_string(),
                    toward: tor.switch.clone(),
                    count: next.len(),
                    max: MAX_MEMBERS,
                });
            }
            let n = groups.len() + 1;
            let id = *groups.entry(next).or_insert(n);
            let (action, size) = (mode.action(), next.len());
            for key in tor.v4_lpm() {
                routes.push(format!("table_add spray_v4 {action} {key} => {id} {size}"));
            }
            for key in tor.v6_lpm() {
                routes.push(format!("table_add spray_v6 {action} {key} => {id} {size}"));
            }
        }
        if groups.len() >= GROUPS || routes.len() > 2 * ROUTES {
            return Err(PlanError::TablesFull {
                program: "spray",
                switch: me.to_string(),
                needs: format!("{} spray groups and {} routes", groups.len(), routes.len()),
                holds: format!(
                    "at most {} groups and {ROUTES} routes per family",
                    GROUPS - 1
                ),
            });
        }
        for (members, id) in &groups {
            for (i, p) in members.iter().enumerate() {
                let dmac = macs.get(p).copied().map(mac_text).unwrap_or_default();
                plan.routes.push(format!(
                    "table_add spray_members spray_hop {id} {i} => {dmac} {my_mac} {p}"
                ));
            }
        }
        plan.routes.extend(routes);
    }
    Ok(plans)
}
