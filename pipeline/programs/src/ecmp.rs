//! `ecmp`: the baseline the papers compare against ("ECMP (with ECN)" in P4TE): `basic`'s
//! routing with the ECMP choice made per flowlet, and DCTCP-style ECN marking.
//!
//! - **ECMP** on the 5-tuple (CRC-32), as in `basic`: routes name groups of
//!   `ingress.ecmp_selector`.
//! - **Flowlets** (FLARE/LetFlow semantics, docs/ecmp.md): the flow hash picks one of 8,192
//!   cells holding the flow's last packet time (`ingress.flowlet_time`, 48 bits) and flowlet number
//!   (`ingress.flowlet_id`, 16 bits). A packet that comes more than the gap after the last one
//!   (`ingress.flowlet_gap_ns[0]`, ns; 0 turns flowlets off) starts a new flowlet, whose group
//!   member is chosen by the hash of the 5-tuple and the flowlet number, so a flow moves between
//!   paths only across gaps that exceed the paths' delay difference.
//! - **ECN**: in egress, an ECT packet that joined a queue holding more than K packets
//!   (`egress.ecn_threshold[egress_port]`; 0 turns marking off) gets CE, the IPv4 checksum updated
//!   (RFC 3168's step marking, as DCTCP wants it).
//!
//! Both are registers, so a controller (or `pisa-fabric`'s plan) sets them over P4Runtime.
//!
//! The fabric plan: `basic`'s routes, then per switch the gap and per port K.
//! - K follows the kernel's DCTCP rule (`Documentation/networking/dctcp.rst`: 20 packets at
//!   1 Gb/s, 65 at 10 Gb/s) as the power law through those two points,
//!   `K = 20 × (rate / 1 Gb/s)^0.512`, at least 2 packets [I]: 6 packets at 100 Mb/s, 2 at 7 Mb/s.
//! - The gap is `flowlet_gap_us=` from the switch's topology line; else 40/70 of `rtt_us=` (the
//!   experiment runner sets the fabric's measured RTT), P4TE's rule, so that all schemes of an
//!   experiment share one gap; else 500 µs (CONGA's; LetFlow swept 50-500 µs) [I].
//! - `ecn_k=` on a switch's line overrides K on all its ports.

use std::collections::BTreeMap;

use crate::PlanError;
use crate::plan_error::number;
use topo::plan::SwitchPlan;
use topo::{End, LinkProps, Switch, Topology};

/// The default flowlet gap, µs.
pub const DEFAULT_GAP_US: u64 = 500;

/// K in packets for a link of `rate_bps`, by the DCTCP rule (see the module documentation).
pub fn dctcp_k(rate_bps: u64) -> u64 {
    let exponent = (65.0f64 / 20.0).ln() / 10.0f64.ln();
    let k = 20.0 * (rate_bps as f64 / 1e9).powf(exponent);
    (k.round() as u64).max(2)
}

fn param(s: &Switch, key: &str) -> Result<Option<u64>, PlanError> {
    number(s, key)
}

/// The fabric plan of `ecmp`.
pub fn plan(t: &Topology, only: &[&Switch]) -> Result<BTreeMap<String, SwitchPlan>, PlanError> {
    let mut plans = topo::plan::routed(t, only);
    let ports = t.ports();
    for s in only {
        let Some(plan) = plans.get_mut(&s.name) else {
            continue;
        };
        // The same gap as P4TE's plan where the RTT is known, so that every scheme of an
        // experiment has one (P4TE §7: "All use flowlets"; App. A.1: 40 ms at a 70 ms RTT).
        let gap_us = match (param(s, "flowlet_gap_us")?, param(s, "rtt_us")?) {
            (Some(gap), _) => gap,
            (None, Some(rtt)) => (rtt * 40 / 70).max(1),
            (None, None) => DEFAULT_GAP_US,
        };
        let gap_ns = gap_us
            .checked_mul(1000)
            .ok_or_else(|| PlanError::OutOfRange {
                switch: s.name.clone(),
                key: "flowlet_gap_us".into(),
                value: gap_us,
                range: "too large: at most 18446744073709551, the gap in ns fits 64 bits",
            })?;
        plan.routes
            .push(format!("register_write flowlet_gap_ns 0 {gap_ns}"));
        plan.routes.extend(ecn_thresholds(&ports, s)?);
    }
    Ok(plans)
}

/// The ECN threshold K of every port of switch `s` (`ecn_k=` on its line, else by
/// [`dctcp_k`]), as register writes; `ports` is [`Topology::ports`]. For programs with `ecmp`'s
/// ECN marking.
pub(crate) fn ecn_thresholds(
    ports: &BTreeMap<&str, BTreeMap<u16, (&End, &LinkProps)>>,
    s: &Switch,
) -> Result<Vec<String>, PlanError> {
    let k_all = param(s, "ecn_k")?;
    Ok(ports
        .get(s.name.as_str())
        .into_iter()
        .flatten()
        .map(|(port, (_, props))| {
            let k = k_all.unwrap_or_else(|| dctcp_k(props.rate_bps));
            format!("register_write ecn_threshold {port} {k}")
        })
        .collect())
}
