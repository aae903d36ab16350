//! `hula`: HULA (Katta et al., SOSR 2016), the papers' utilisation-aware baseline, on `basic`'s
//! routing, with `ecmp`'s flowlets and ECN marking.
//!
//! Each ToR's packet generator originates a probe every period Tp. Probes travel up/down through
//! the fabric; every switch they reach learns, per destination ToR, the best next hop and the
//! utilisation of the best path through it, and data packets take the best hop at each new
//! flowlet. docs/hula.md gives the algorithm and records our choices.
//!
//! **Probe** (one per ToR per Tp, from the generator port, [`InstanceType::Generated`]):
//! Ethernet (broadcast destination, the ToR's source MAC, EtherType [`ETHERTYPE`]) then
//! `tor_id: 24, util: 8` ([`PROBE_LEN`] bytes, padded to 60). A probe from ToR `t` arriving on
//! port `p` ([`HulaIds`] names the registers):
//! ```text
//! u = max(probe.util, util(p))
//! if u < path_util[t] or now - update_time[t] > keep_alive:   best_hop[t] = p; path_util[t] = u
//! elif p == best_hop[t]:                                        path_util[t] = u   (tracks a worse best)
//! update_time[t] = now (on either update);  probe.util = path_util[t];  replicate
//! ```
//! then goes on to the multicast group `ingress.hula_probe_fanout` names for its ingress port
//! (the plan builds them up/down: from the generator, every uplink; from below, every other
//! switch port; from above, every switch port below; group 0 ends the probe here). Probes from
//! ports without a fanout entry (hosts) are dropped before they can touch the tables.
//!
//! **Utilisation** `util(p)`: the estimator of HULA (and CONGA's DRE), `U <- D + U (1 - dt/tau)`
//! over the bytes ingress sends to port `p`, kept per port in `ingress.hula_util` /
//! `ingress.hula_util_time`, and quantised to 8 bits against the port's capacity per tau
//! (`ingress.hula_port_capacity`, bytes). It lives in ingress, so probes and data touch one
//! register in one stage, as on Tofino; it therefore counts what the traffic manager later drops
//! (an overloaded port reads 255) [I].
//!
//! **Data**: `ingress.hula_dst_tor_v4` / `_v6` (LPM on the destination) name the destination ToR;
//! at a new flowlet (gap `ingress.flowlet_gap_ns`, cells `ingress.flowlet_time`) the flow's cell
//! takes `best_hop[t]` (`ingress.hula_flowlet_hop`, hop + 1; 0 = none), and the packet leaves by
//! it, its MACs rewritten by `ingress.hula_port_macs`. Until a probe has been seen for `t`, and for
//! destinations with no ToR entry (a ToR's own hosts), `basic`'s route (ECMP) decides.

use std::collections::{BTreeMap, BTreeSet};

use super::basic::{FLOWLET_CELLS, Headers};
use super::hook::{Base, ComposeError, FlowletRegisters, Mechanism, Next};
use crate::PlanError;
use crate::plan_error::number;
use pipeline::externs::CounterKind;
use pipeline::frame::Frame;
use pipeline::metadata::{DropReason, HeaderKind, InstanceType, PORT_BITS, PortId, StdMeta};
use pipeline::program::Ctx;
use pipeline::schema::{ActionScope, CounterIx, RegisterIx, SchemaBuilder, TableIx, TableSpec};
use pipeline::table::MatchKind;
use topo::plan::{SwitchPlan, mac_text, switch_mac};
use topo::{End, Switch, Topology};

/// The probe's EtherType (IEEE 802 local experimental EtherType 1) [I].
pub const ETHERTYPE: u16 = 0x88b5;
/// Bytes of the probe header after Ethernet.
pub const PROBE_LEN: usize = 4;
/// Destination ToRs the registers hold (ToR ids are 1..TORS).
pub const TORS: usize = 1024;
/// Probes that arrive on port `p` (data or generator) go on in multicast group `GROUP_BASE + p`.
pub const GROUP_BASE: u16 = 1000;
/// The generator application that sends the probes.
pub const PKTGEN_APP: u8 = 0;
/// The default probe period Tp, µs [I] (see docs/hula.md).
pub const DEFAULT_PROBE_US: u64 = 1000;

/// HULA on `basic` (it needs `basic`'s flowlets, whose cells it uses).
#[derive(Clone, Copy, Debug)]
pub struct Hula {
    ids: HulaIds,
    flowlets: FlowletRegisters,
}

impl Mechanism for Hula {
    const OWN_FLOWLETS: bool = true;

    fn declare(b: &mut SchemaBuilder, base: &Base) -> Result<Self, ComposeError> {
        let flowlets = base.need_flowlets("hula")?;
        Ok(Hula {
            ids: declare(b, base.no_action, FLOWLET_CELLS),
            flowlets,
        })
    }

    #[inline]
    fn parsed(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta, h: &Headers) -> Next {
        if h.ether_type != ETHERTYPE {
            return Next::Continue;
        }
        probe(cx, &self.ids, pkt, md, h.l3);
        Next::Done
    }

    #[inline]
    fn routed(
        &self,
        cx: &mut Ctx<'_>,
        pkt: &mut Frame<'_>,
        md: &mut StdMeta,
        h: &Headers,
        flow_hash: u64,
    ) {
        let f = self.flowlets;
        steer(
            cx,
            &self.ids,
            f.time,
            f.gap,
            pkt,
            md,
            (h.ipv4, h.dst()),
            flow_hash,
        );
    }
}

/// The schema objects HULA adds to `basic`.
#[derive(Clone, Copy, Debug)]
struct HulaIds {
    set_dst_tor: usize,
    fanout: usize,
    set_macs: usize,
    dst_tor_v4: TableIx,
    dst_tor_v6: TableIx,
    probe_fanout: TableIx,
    port_macs: TableIx,
    best_hop: RegisterIx,
    path_util: RegisterIx,
    update_time: RegisterIx,
    flowlet_hop: RegisterIx,
    util: RegisterIx,
    util_time: RegisterIx,
    capacity: RegisterIx,
    tau: RegisterIx,
    keep_alive: RegisterIx,
    self_tor: RegisterIx,
    probes_rx: CounterIx,
    from_host: DropReason,
    own_probe: DropReason,
    bad_tor: DropReason,
    probe_end: DropReason,
}

/// Declares HULA's tables, registers and drop reasons.
fn declare(b: &mut SchemaBuilder, no_action: usize, cells: usize) -> HulaIds {
    use ActionScope::*;
    use MatchKind::*;
    let set_dst_tor = b.action("ingress.set_dst_tor", &[("tor", 24)]);
    let fanout = b.action("ingress.hula_fanout", &[("group", 16)]);
    let set_macs = b.action("ingress.set_macs", &[("dmac", 48), ("smac", 48)]);
    let tor_table = |b: &mut SchemaBuilder, name, field, width| {
        b.table(TableSpec {
            name,
            fields: vec![(field, width, Lpm)],
            actions: vec![(set_dst_tor, TableOnly), (no_action, DefaultOnly)],
            default_action: (no_action, vec![]),
            const_default: false,
            size: 4096,
            idle_timeout: false,
        })
    };
    let dst_tor_v4 = tor_table(b, "ingress.hula_dst_tor_v4", "hdr.ipv4.dst_addr", 32);
    let dst_tor_v6 = tor_table(b, "ingress.hula_dst_tor_v6", "hdr.ipv6.dst_addr", 128);
    let probe_fanout = b.table(TableSpec {
        name: "ingress.hula_probe_fanout",
        fields: vec![("standard_metadata.ingress_port", PORT_BITS, Exact)],
        actions: vec![(fanout, TableOnly), (no_action, DefaultOnly)],
        default_action: (no_action, vec![]),
        const_default: false,
        size: 512,
        idle_timeout: false,
    });
    let port_macs = b.table(TableSpec {
        name: "ingress.hula_port_macs",
        fields: vec![("standard_metadata.egress_spec", PORT_BITS, Exact)],
        actions: vec![(set_macs, TableOnly), (no_action, DefaultOnly)],
        default_action: (no_action, vec![]),
        const_default: false,
        size: 512,
        idle_timeout: false,
    });
    let ports = 1 << PORT_BITS;
    HulaIds {
        set_dst_tor,
        fanout,
        set_macs,
        dst_tor_v4,
        dst_tor_v6,
        probe_fanout,
        port_macs,
        best_hop: b.register("ingress.hula_best_hop", 16, TORS),
        path_util: b.register("ingress.hula_path_util", 8, TORS),
        update_time: b.register("ingress.hula_update_time", 48, TORS),
        flowlet_hop: b.register("ingress.hula_flowlet_hop", 16, cells),
        util: b.register("ingress.hula_util", 48, ports),
        util_time: b.register("ingress.hula_util_time", 48, ports),
        capacity: b.register("ingress.hula_port_capacity", 48, ports),
        tau: b.register("ingress.hula_tau_ns", 32, 1),
        keep_alive: b.register("ingress.hula_keep_alive_ns", 32, 1),
        self_tor: b.register("ingress.hula_self_tor", 24, 1),
        probes_rx: b.counter("ingress.hula_probes_rx", CounterKind::Packets, ports),
        from_host: b.drop_reason("hula_probe_from_host"),
        own_probe: b.drop_reason("hula_own_probe"),
        bad_tor: b.drop_reason("hula_bad_tor"),
        probe_end: b.consume_reason("hula_probe_end"),
    }
}

/// Port `port`'s estimator decayed to `now` (without a packet), bytes.
fn decayed(cx: &Ctx<'_>, h: &HulaIds, port: usize, now: u64, tau: u64) -> u64 {
    let u = cx.register(h.util).read(port).unwrap_or(0);
    let dt = now.saturating_sub(cx.register(h.util_time).read(port).unwrap_or(0));
    if dt >= tau {
        0
    } else {
        // u < 2^48 and dt < tau < 2^32: the product fits in u128, the result in u64.
        u - (u128::from(u) * u128::from(dt) / u128::from(tau)) as u64
    }
}

/// `U <- D + U (1 - dt/tau)` on port `port` for a packet of `len` bytes sent to it at `now`.
fn account(cx: &Ctx<'_>, h: &HulaIds, port: PortId, len: u32, now: u64) {
    let tau = cx.register(h.tau).read(0).unwrap_or(0);
    let port = usize::from(port);
    if tau == 0 {
        return;
    }
    let u = decayed(cx, h, port, now, tau) + u64::from(len);
    cx.register(h.util).write(port, u);
    cx.register(h.util_time).write(port, now);
}

/// Port `port`'s utilisation on 8 bits (255 = at or above capacity; 0 if the capacity is unset).
fn util8(cx: &Ctx<'_>, h: &HulaIds, port: PortId, now: u64) -> u64 {
    let tau = cx.register(h.tau).read(0).unwrap_or(0);
    let cap = cx.register(h.capacity).read(usize::from(port)).unwrap_or(0);
    if tau == 0 || cap == 0 {
        return 0;
    }
    (decayed(cx, h, usize::from(port), now, tau) * 255 / cap).min(255)
}

/// Ingress for a probe (EtherType [`ETHERTYPE`]; `l3` is where its header starts).
fn probe(cx: &mut Ctx<'_>, h: &HulaIds, pkt: &mut Frame<'_>, md: &mut StdMeta, l3: usize) {
    let Some(hdr) = pkt.data().get(l3..l3 + PROBE_LEN) else {
        md.mark_to_drop(DropReason::Malformed(
            HeaderKind::Shim,
            pipeline::wire::Error::Truncated,
        ));
        return;
    };
    let tor = usize::from(hdr[0]) << 16 | usize::from(hdr[1]) << 8 | usize::from(hdr[2]);
    let mut util = u64::from(hdr[3]);
    let port = md.ingress_port;
    let now = md.ingress_global_timestamp;
    let fan = cx.apply(h.probe_fanout, &[u128::from(port)], 0);
    if usize::from(fan.action.action) != h.fanout {
        md.mark_to_drop(h.from_host);
        return;
    }
    let group = fan.action.arg(0) as u16;
    if md.instance_type != InstanceType::Generated {
        cx.count(h.probes_rx, usize::from(port));
        let me = cx.register(h.self_tor).read(0).unwrap_or(0);
        if tor == 0 || tor >= TORS {
            md.mark_to_drop(h.bad_tor);
            return;
        }
        if tor as u64 == me {
            md.mark_to_drop(h.own_probe);
            return;
        }
        let u = util.max(util8(cx, h, port, now));
        let best = cx.register(h.path_util).read(tor).unwrap_or(0);
        let updated = cx.register(h.update_time).read(tor).unwrap_or(0);
        let hop = cx.register(h.best_hop).read(tor).unwrap_or(0);
        let keep_alive = cx.register(h.keep_alive).read(0).unwrap_or(0);
        let fresh = updated != 0 && now.saturating_sub(updated) <= keep_alive;
        if !fresh || u < best {
            cx.register(h.best_hop).write(tor, u64::from(port));
            cx.register(h.path_util).write(tor, u);
            cx.register(h.update_time).write(tor, now);
            util = u;
            cx.trace(|| format!("hula tor={tor} best_hop={port} util={u} (was {hop}/{best})"));
        } else if u64::from(port) == hop {
            cx.register(h.path_util).write(tor, u);
            cx.register(h.update_time).write(tor, now);
            util = u;
        } else {
            util = best;
        }
        pkt.data_mut()[l3 + 3] = util as u8;
    }
    if group == 0 {
        md.mark_to_drop(h.probe_end);
    } else {
        md.mcast_grp = group;
    }
}

/// Ingress for a routed data packet that `basic`'s route sent to `md.egress_spec`: at a new
/// flowlet the flow takes the best hop to its destination ToR; the chosen port's estimator counts
/// the packet.
#[allow(
    clippy::too_many_arguments,
    reason = "the parsed fields a P4 control would see"
)]
fn steer(
    cx: &mut Ctx<'_>,
    h: &HulaIds,
    flowlet_time: RegisterIx,
    flowlet_gap: RegisterIx,
    pkt: &mut Frame<'_>,
    md: &mut StdMeta,
    dst: (bool, u128),
    flow_hash: u64,
) {
    let now = md.ingress_global_timestamp;
    let (ipv4, key) = dst;
    let table = if ipv4 { h.dst_tor_v4 } else { h.dst_tor_v6 };
    let r = cx.apply(table, &[key], 0);
    if usize::from(r.action.action) == h.set_dst_tor {
        let tor = (r.action.arg(0) as usize).min(TORS - 1);
        let cell = (flow_hash as usize) % cx.register(h.flowlet_hop).size();
        let gap = cx.register(flowlet_gap).read(0).unwrap_or(0);
        let last = cx.register(flowlet_time).read(cell).unwrap_or(0);
        cx.register(flowlet_time).write(cell, now);
        let hop = if gap == 0 || now.saturating_sub(last) > gap {
            let known = cx.register(h.update_time).read(tor).unwrap_or(0) != 0;
            let hop = if known {
                cx.register(h.best_hop).read(tor).unwrap_or(0) + 1
            } else {
                0
            };
            cx.register(h.flowlet_hop).write(cell, hop);
            cx.trace(|| format!("hula new flowlet cell={cell} tor={tor} hop={hop}"));
            hop
        } else {
            cx.register(h.flowlet_hop).read(cell).unwrap_or(0)
        };
        if let Some(port) = hop.checked_sub(1).map(|p| p as PortId)
            && md.egress_spec != Some(port)
        {
            let m = cx.apply(h.port_macs, &[u128::from(port)], 0);
            if usize::from(m.action.action) == h.set_macs {
                let d = pkt.data_mut();
                d[0..6].copy_from_slice(&m.action.arg(0).to_be_bytes()[10..16]);
                d[6..12].copy_from_slice(&m.action.arg(1).to_be_bytes()[10..16]);
                md.egress_spec = Some(port);
            }
        }
    }
    if let Some(port) = md.egress_spec {
        account(cx, h, port, md.packet_length, now);
    }
}

/// Switch levels: 0 for a switch with hosts (a ToR), else one more than its nearest ToR's.
fn levels(t: &Topology) -> BTreeMap<&str, usize> {
    let ports = t.ports();
    let mut level: BTreeMap<&str, usize> = BTreeMap::new();
    let mut frontier: Vec<&str> = t
        .switches
        .iter()
        .map(|s| s.name.as_str())
        .filter(|s| ports[s].values().any(|(e, _)| matches!(e, End::Host(_))))
        .collect();
    for s in &frontier {
        level.insert(s, 0);
    }
    let mut d = 0;
    while !frontier.is_empty() {
        d += 1;
        let mut next = Vec::new();
        for s in frontier {
            for (e, _) in ports[s].values() {
                if let End::Switch(n, _) = e
                    && !level.contains_key(n.as_str())
                {
                    level.insert(n.as_str(), d);
                    next.push(n.as_str());
                }
            }
        }
        frontier = next;
    }
    level
}

fn param(s: &Switch, key: &str, default: u64) -> Result<u64, PlanError> {
    Ok(number(s, key)?.unwrap_or(default))
}

/// The probe `tor` originates, as the hex template of `pktgen_set`.
pub fn probe_frame(tor: u32, smac: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&smac);
    f[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    f[14..17].copy_from_slice(&tor.to_be_bytes()[1..4]);
    f
}

/// The probe group of port `from` (its fanout entry, and the group if it has members).
fn fanout(r: &mut Vec<String>, from: PortId, members: &[u16]) {
    if members.is_empty() {
        r.push(format!(
            "table_add hula_probe_fanout hula_fanout {from} => 0"
        ));
        return;
    }
    let id = GROUP_BASE + from;
    let m: Vec<String> = members.iter().map(u16::to_string).collect();
    r.push(format!("mc_group_create {id} {}", m.join(" ")));
    r.push(format!(
        "table_add hula_probe_fanout hula_fanout {from} => {id}"
    ));
}

/// The fabric plan of `hula`: `ecmp`'s (routes, flowlet gap, ECN threshold), then HULA's
/// registers, tables, probe groups and, at each ToR, the probe generator. Parameters on a
/// switch's line: `probe_us=` (Tp, default [`DEFAULT_PROBE_US`]), `tau_us=` (default 2 Tp),
/// `keep_alive_us=` (default 3 Tp), and `ecmp`'s `flowlet_gap_us=` and `ecn_k=`.
pub fn plan(t: &Topology, only: &[&Switch]) -> Result<BTreeMap<String, SwitchPlan>, PlanError> {
    let mut plans = super::ecmp::plan(t, only)?;
    let ports = t.ports();
    let level = levels(t);
    // ToR ids, 1-based in topology order.
    let tors: BTreeMap<&str, u32> = t
        .switches
        .iter()
        .filter(|s| level.get(s.name.as_str()) == Some(&0))
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i as u32 + 1))
        .collect();
    if tors.len() >= TORS {
        return Err(PlanError::TooManyTors {
            program: "hula",
            tors: tors.len(),
            max: TORS - 1,
        });
    }
    let pktgen_port = pipeline::runtime::Config::default().pktgen_port;
    for s in only {
        let Some(plan) = plans.get_mut(&s.name) else {
            continue;
        };
        let me = s.name.as_str();
        let probe_us = param(s, "probe_us", DEFAULT_PROBE_US)?;
        let tau_us = param(s, "tau_us", 2 * probe_us)?;
        let keep_alive_us = param(s, "keep_alive_us", 3 * probe_us)?;
        let range = "probe_us, tau_us and keep_alive_us must be 1..4000000";
        for (key, value, ok) in [
            ("probe_us", probe_us, probe_us != 0),
            ("tau_us", tau_us, (1..=4_000_000).contains(&tau_us)),
            ("keep_alive_us", keep_alive_us, keep_alive_us <= 4_000_000),
        ] {
            if !ok {
                return Err(PlanError::OutOfRange {
                    switch: me.to_string(),
                    key: key.to_string(),
                    value,
                    range,
                });
            }
        }
        let tau_ns = tau_us * 1000;
        let r = &mut plan.routes;
        r.push(format!("register_write hula_tau_ns 0 {tau_ns}"));
        r.push(format!(
            "register_write hula_keep_alive_ns 0 {}",
            keep_alive_us * 1000
        ));
        let idx = t.switches.iter().position(|x| x.name == me).unwrap_or(0);
        let smac = mac_text(switch_mac(idx));
        let mine = ports.get(me).cloned().unwrap_or_default();
        let lvl = |n: &str| level.get(n).copied();
        let (mut up, mut down) = (BTreeSet::new(), BTreeSet::new());
        for (&p, (e, props)) in &mine {
            let cap =
                (u128::from(props.rate_bps) * u128::from(tau_ns) / 8_000_000_000).clamp(1, 1 << 48);
            r.push(format!("register_write hula_port_capacity {p} {cap}"));
            if let End::Switch(n, _) = e {
                let dmac = mac_text(switch_mac(
                    t.switches.iter().position(|x| &x.name == n).unwrap_or(0),
                ));
                r.push(format!(
                    "table_add hula_port_macs set_macs {p} => {dmac} {smac}"
                ));
                match (lvl(n), lvl(me)) {
                    (Some(a), Some(b)) if a > b => {
                        up.insert(p);
                    }
                    (Some(a), Some(b)) if a < b => {
                        down.insert(p);
                    }
                    _ => {}
                }
            }
        }
        let down_v: Vec<u16> = down.iter().copied().collect();
        for &p in &up {
            fanout(r, p, &down_v);
        }
        for &p in &down {
            let members: Vec<u16> = up
                .iter()
                .chain(down.iter().filter(|&&q| q != p))
                .copied()
                .collect();
            fanout(r, p, &members);
        }
        if let Some(&id) = tors.get(me) {
            r.push(format!("register_write hula_self_tor 0 {id}"));
            fanout(r, pktgen_port, &up.iter().copied().collect::<Vec<_>>());
            plan.tm.push(format!(
                "pktgen_set {PKTGEN_APP} {probe_us} 1 1 raw {}",
                pipeline::pktgen::hex(&probe_frame(id, switch_mac(idx)))
            ));
            plan.tm.push(format!("pktgen_enable {PKTGEN_APP}"));
        }
        // Destination ToRs: every host not attached here.
        for h in &t.hosts {
            let Some((at, _)) = t.host_attachment(&h.name) else {
                continue;
            };
            if at == me {
                continue;
            }
            let Some(&id) = tors.get(at) else { continue };
            r.push(format!(
                "table_add hula_dst_tor_v4 set_dst_tor {}/32 => {id}",
                h.ipv4
            ));
            r.push(format!(
                "table_add hula_dst_tor_v6 set_dst_tor {}/128 => {id}",
                h.ipv6
            ));
        }
    }
    Ok(plans)
}
