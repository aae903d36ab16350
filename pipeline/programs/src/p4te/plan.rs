//! The fabric plan of `p4te` (and `p4te-nra`): any leaf-spine or fat-tree, programmed with the
//! paper's experiment values unless a switch's topology line overrides them (docs/p4te.md).
//!
//! | parameter (`key=` on the line) | default | source |
//! |---|---|---|
//! | `delta` (Δ, packets) | round(p90 / 3), p90 taken as the ECN threshold K of `ecmp` at the switch's slowest port (the queue under ECN sits near K) | [P §7: Δ = 2 from a p90 of 6 under ECMP+ECN] |
//! | `meter_values` | `experiment`: the defaults of the next two rows; `design`: CIR 75%, PIR 95%, bursts of 5% of a second of the port's rate (50 ms) | [P §6.1.2 against §7, A-P4TE-3] |
//! | `cir_pct`, `pir_pct` | 90, 100 (% of each port's rate); 75, 95 with `meter_values=design` | [P §7, A-P4TE-3] |
//! | `meter_burst_us` | 1,000 µs of the port's rate (at least 2 full frames); 50,000 with `meter_values=design` | not stated [I] |
//! | `link_meter` | `egress`: the link meter sees what the port sends (at most its rate); `offered`: an ingress meter per port sees every packet routed to it, before the traffic manager | [X] A-P4TE-24 |
//! | `color_hold_us` | `meter_burst_us`: a port's colour is the worst its meter gave in that time; 0 = each packet's own colour | [X] A-P4TE-23 |
//! | `short_pct`, `large_pct` | 90, 10 (class safe rates, % of the ingress port's rate) | [P §4.1.3, Fig. 5d] |
//! | `buffer_ms` | 200 ms of link time, at most 1,024 packets of 1,500 B; 0 = the topology's queue depths (what the other schemes get) | [A-P4TE-2] |
//! | `rtt_us` | estimated from the topology (below); the experiment runner sets the measured one | |
//! | `flowlet_gap_us` | 40/70 of the RTT | [P App. A.1: 40 ms at a 70 ms RTT] |
//! | `rc_bytes` (B) | the RTT × the host link rate, with the RTT the larger of `rtt_us` and the one the gap stands for (70/40 of `flowlet_gap_us`) | [A-P4TE-14] |
//! | `ecn` | 0: no ECN marking (the paper gives P4TE none); 1: CE beyond `ecmp`'s K per port | [X], for experiments |
//! | `ecn_k` | K for every port when `ecn=1` | |
//! | `rate_control` | `on`; `off` turns FACKs off (the scheme `p4te-nra` presets it) | [P §7.3: P4TE-NRA] |
//! | `routing` | `alg2`; `queue`, `color` or `static` route every tagged flowlet by the queue-depth groups alone, the utilisation groups alone, or ECMP over the up ports (ablations, [`super::Routing`]) | [X] |
//!
//! The RTT estimate: the longest host-to-host path's propagation delay both ways, a 1,500-byte
//! frame's serialisation on each of its links, and 30 µs per switch traversal (the measured
//! per-hop p50 of `pisa-switch` on this machine, docs/performance.md).

use std::collections::{BTreeMap, BTreeSet};

use super::Routing;
use super::agent::{ECMP_GROUP, QUEUE_GROUPS, UTIL_GROUPS, priority};
use crate::PlanError;
use crate::ecmp::dctcp_k;
use crate::plan_error::{bad_value, number};
use pipeline::commands::bmv2_priority;
use topo::plan::{SwitchPlan, mac_text, neighbour_macs, next_hops, switch_mac, tm_lines};
use topo::{End, Role, Switch, Topology};

/// Per switch traversal, µs, for the RTT estimate.
const SWITCH_US: u64 = 30;
/// Frame size the rates and buffers are reckoned in.
const FRAME: u64 = 1500;

fn param(s: &Switch, key: &str) -> Result<Option<u64>, PlanError> {
    number(s, key)
}

/// The fabric's base RTT estimate, µs (see the module documentation).
pub fn estimate_rtt_us(t: &Topology) -> u64 {
    let mut host = (u64::MAX, 0u64);
    let mut fabric = (u64::MAX, 0u64);
    for l in &t.links {
        let e = if matches!(l.a, End::Host(_)) || matches!(l.b, End::Host(_)) {
            &mut host
        } else {
            &mut fabric
        };
        e.0 = e.0.min(l.props.rate_bps.max(1));
        e.1 = e.1.max(l.props.delay_us);
    }
    let roles: BTreeSet<Role> = t
        .switches
        .iter()
        .filter_map(|s| t.role_of(&s.name))
        .collect();
    // Switch-to-switch links on the longest path.
    let fabric_links: u64 = if roles.contains(&Role::Core) {
        4
    } else if roles.contains(&Role::Spine) || roles.contains(&Role::Agg) {
        2
    } else {
        0
    };
    let ser = |rate: u64| {
        if rate == u64::MAX {
            0
        } else {
            FRAME * 8 * 1_000_000 / rate
        }
    };
    2 * (2 * host.1 + fabric_links * fabric.1)
        + 2 * ser(host.0)
        + fabric_links * ser(fabric.0)
        + 2 * (fabric_links + 1) * SWITCH_US
}

/// The plan of `p4te`: rate adaptation on unless the switch's line says `rate_control=off`
/// (the registry's preset `p4te-nra`).
pub fn plan(t: &Topology, only: &[&Switch]) -> Result<BTreeMap<String, SwitchPlan>, PlanError> {
    let hops = next_hops(t);
    let ports = t.ports();
    let rtt_default = estimate_rtt_us(t);
    let host_rate = t
        .links
        .iter()
        .filter(|l| matches!(l.a, End::Host(_)) || matches!(l.b, End::Host(_)))
        .map(|l| l.props.rate_bps)
        .min()
        .unwrap_or(0);
    let mut out = BTreeMap::new();
    for s in only {
        let me = s.name.as_str();
        let index = t
            .switches
            .iter()
            .position(|x| x.name == s.name)
            .ok_or_else(|| PlanError::NoSwitch {
                switch: me.to_string(),
            })?;
        let my_mac = mac_text(switch_mac(index));
        let my_ports = ports.get(me).cloned().unwrap_or_default();
        let get = |k: &str, d: u64| param(s, k).map(|v| v.unwrap_or(d));
        let rate_control = match s.params.get("rate_control").map(String::as_str) {
            None | Some("on") => true,
            Some("off") => false,
            Some(v) => return Err(bad_value(s, "rate_control", v, "on or off")),
        };
        let routing = match s.params.get("routing").map(String::as_str) {
            None | Some("alg2") => Routing::Alg2,
            Some("queue") => Routing::Queue,
            Some("color") => Routing::Color,
            Some("static") => Routing::Static,
            Some(v) => {
                return Err(bad_value(s, "routing", v, "alg2, queue, color or static"));
            }
        };
        let slowest = my_ports
            .values()
            .map(|(_, p)| p.rate_bps)
            .filter(|&r| r > 0)
            .min()
            .unwrap_or(1_000_000_000);
        let delta = get(
            "delta",
            ((dctcp_k(slowest) as f64) / 3.0).round().max(1.0) as u64,
        )?;
        let design = match s.params.get("meter_values").map(String::as_str) {
            None | Some("experiment") => false,
            Some("design") => true,
            Some(v) => return Err(bad_value(s, "meter_values", v, "experiment or design")),
        };
        let offered = match s.params.get("link_meter").map(String::as_str) {
            None | Some("egress") => false,
            Some("offered") => true,
            Some(v) => return Err(bad_value(s, "link_meter", v, "egress or offered")),
        };
        let (cir_pct, pir_pct) = if design {
            (get("cir_pct", 75)?, get("pir_pct", 95)?)
        } else {
            (get("cir_pct", 90)?, get("pir_pct", 100)?)
        };
        let burst_us = get("meter_burst_us", if design { 50_000 } else { 1000 })?;
        let hold_us = get("color_hold_us", burst_us)?;
        let (short_pct, large_pct) = (get("short_pct", 90)?, get("large_pct", 10)?);
        let buffer_ms = get("buffer_ms", 200)?;
        let ecn = get("ecn", 0)? != 0;
        let ecn_k = param(s, "ecn_k")?;
        let rtt_us = get("rtt_us", rtt_default)?;
        let gap_us = get("flowlet_gap_us", rtt_us * 40 / 70)?;
        // B from the RTT the gap stands for (the gap is 40/70 of an RTT): a gap derived from
        // the loaded RTT (the runner's calibration, E5's sweep) gives B of that RTT, not of
        // the idle one.
        let b_rtt_us = rtt_us.max(gap_us.saturating_mul(70) / 40);
        let rc_bytes = get("rc_bytes", b_rtt_us.saturating_mul(host_rate) / 8_000_000)?;
        let mut plan = SwitchPlan {
            tm: tm_lines(t, me),
            ..SwitchPlan::default()
        };
        let mut r = Vec::new();
        let bytes_per_s = |rate: u64, pct: u64| rate / 8 * pct / 100;
        let burst = |rate: u64| (rate / 8 * burst_us / 1_000_000).max(2 * FRAME);
        for (&p, (other, props)) in &my_ports {
            let rate = props.rate_bps;
            // buffer_ms=0: the topology's queue depths, as every other scheme gets.
            if rate > 0 && buffer_ms > 0 {
                let packets = (rate / 8 * buffer_ms / 1000 / FRAME).clamp(4, 1024);
                plan.tm.push(format!("set_queue_depth {packets} {p}"));
            }
            if matches!(other, End::Host(_)) {
                r.push(format!("register_write edge_port {p} 1"));
            }
            if ecn {
                let k = ecn_k.unwrap_or_else(|| dctcp_k(rate));
                r.push(format!("register_write ecn_threshold {p} {k}"));
            }
            if rate > 0 {
                r.push(format!("table_add link_util_rate NoAction {p} =>"));
                let link = format!(
                    "{} {} {} {}",
                    bytes_per_s(rate, cir_pct),
                    burst(rate),
                    bytes_per_s(rate, pir_pct),
                    burst(rate)
                );
                r.push(format!("meter_set_direct link_util_rate {p} => {link}"));
                r.push(format!("meter_set offered_rate {p} {link}"));
                for (class, pct) in [(0usize, short_pct), (1, large_pct)] {
                    let safe = bytes_per_s(rate, pct);
                    r.push(format!(
                        "meter_set class_rate {} {safe} {} {safe} {}",
                        class * 512 + usize::from(p),
                        burst(rate),
                        burst(rate)
                    ));
                }
            }
        }
        for (p, dmac) in neighbour_macs(t, me) {
            r.push(format!(
                "table_add port_mac set_macs {p} => {} {my_mac}",
                mac_text(dmac)
            ));
        }
        // Down: hosts with one next hop. Up: the rest, which must all share one set of ports.
        let mut up: Option<BTreeSet<u16>> = None;
        for (hi, next) in hops.get(me).map(Vec::as_slice).unwrap_or_default() {
            let h = &t.hosts[*hi];
            if next.len() == 1 {
                let port = next.first().copied().unwrap_or(0);
                r.push(format!(
                    "table_add down_v4 set_port {}/32 => {port}",
                    h.ipv4
                ));
                r.push(format!(
                    "table_add down_v6 set_port {}/128 => {port}",
                    h.ipv6
                ));
            } else {
                match &up {
                    None => up = Some(next.clone()),
                    Some(u) if u == next => {}
                    Some(u) => {
                        return Err(PlanError::UpPortsDiffer {
                            program: "p4te",
                            switch: me.to_string(),
                            first: u.clone(),
                            other: next.clone(),
                        });
                    }
                }
            }
        }
        if let Some(up) = up {
            let members: Vec<String> = up.iter().map(u16::to_string).collect();
            for p in &up {
                r.push(format!(
                    "act_prof_create_member up_selector {p} set_port {p}"
                ));
            }
            // Every up port starts in the highest-priority group of each metric; the other
            // groups exist, empty, with no table entry [P Fig. 5a].
            for (base, levels) in [(QUEUE_GROUPS, 4), (UTIL_GROUPS, 3)] {
                for level in 1..=levels {
                    let m = if level == 1 {
                        members.join(" ")
                    } else {
                        String::new()
                    };
                    r.push(format!(
                        "act_prof_create_group up_selector {} {m}",
                        base + level
                    ));
                }
            }
            r.push(format!(
                "act_prof_create_group up_selector {ECMP_GROUP} {}",
                members.join(" ")
            ));
            // The agent writes P4Runtime priorities; commands take BMv2's.
            let any = "0&&&0";
            r.push(format!(
                "table_indirect_add_with_group queue_depth_up {any} => {} {}",
                QUEUE_GROUPS + 1,
                bmv2_priority(priority(1))
            ));
            r.push(format!(
                "table_indirect_add_with_group link_util_up {any} => {} {}",
                UTIL_GROUPS + 1,
                bmv2_priority(priority(1))
            ));
            r.push(format!(
                "table_indirect_add_with_group ecmp_up {any} => {ECMP_GROUP} {}",
                bmv2_priority(priority(1))
            ));
        }
        for mask in 1..=7u32 {
            let mut reps = Vec::new();
            if mask & 1 != 0 {
                reps.push(format!(
                    "{}:{}",
                    pipeline::runtime::Config::default().cpu_port,
                    super::RID_FEEDBACK
                ));
            }
            if mask & 2 != 0 {
                reps.push(format!(
                    "{}:{}",
                    pipeline::runtime::Config::default().recirc_port,
                    super::RID_UTIL
                ));
            }
            if mask & 4 != 0 {
                reps.push(format!(
                    "{}:{}",
                    pipeline::runtime::Config::default().recirc_port,
                    super::RID_FACK
                ));
            }
            // Class of service 1: the feedback class of the CPU port (not punts' class 0).
            r.push(format!(
                "mirroring_add_replicas {} {} cos=1",
                super::SESSION_BASE + mask,
                reps.join(" ")
            ));
        }
        r.push(format!("register_write qdepth_delta 0 {delta}"));
        r.push(format!(
            "register_write flowlet_gap_ns 0 {}",
            gap_us.saturating_mul(1000)
        ));
        r.push(format!("register_write rc_bytes 0 {rc_bytes}"));
        r.push(format!(
            "register_write meter_offered 0 {}",
            u8::from(offered)
        ));
        r.push(format!(
            "register_write color_hold_ns 0 {}",
            hold_us.saturating_mul(1000)
        ));
        r.push(format!(
            "register_write rate_control 0 {}",
            u8::from(rate_control)
        ));
        r.push(format!("register_write routing 0 {}", routing as u8));
        plan.routes = r;
        out.insert(s.name.clone(), plan);
    }
    Ok(out)
}
