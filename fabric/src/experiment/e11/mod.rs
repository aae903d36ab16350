//! E11 in namespaces at a small scale (issue 15; docs/pint.md "E11 in namespaces"): HPCC(INT)
//! against HPCC(PINT, 8 bits) at p = 1, 1/16 and 1/256 with `pisa-host hpcc-send` on a
//! leaf-spine of `pint` switches.
//!
//! - **Topology**: `topo::leaf_spine(2, 2, H, 1.0, host link)`: 2 leaves, 2 spines, H hosts per
//!   leaf, uplinks at H × host rate / 2 (`oversubscription` r: / 2r); every switch `pint` with the HPCC
//!   query, `pint_hpcc_rtt_us=T` and PFC at `pfc_xoff` packets.
//! - **Flows**: web search sizes (`pipeline/sim/workloads/`) times `scale` (so a run takes minutes at
//!   100 Mb/s), Poisson arrivals per host at `load` of its link, destinations uniform over the
//!   other hosts, seeded; every scheme runs the same flows.
//! - **Slowdown** = FCT / ideal FCT, the ideal being every frame of the flow (with its scheme's
//!   shim, as `pisa-sim` counts it) serialised at the host rate plus the fabric's idle RTT between
//!   leaves (the median of 20 pings before the run): the namespaces have no link delays, and the
//!   switches' processing time is in the ping. A flow not done when the senders stop counts with
//!   the lower bound (stop − start)/ideal. Buckets are by the **workload's** (unscaled) size.
//!
//! [`sim`] runs E11 in `pisa-sim` instead, on a k = 4 fat-tree at 1 and 4 Gb/s.

use std::fmt::Write as _;
use std::path::Path;

use ::sim::workload::Cdf;
use anyhow::{Context as _, anyhow, bail};
use pipeline::externs::Rng;
use programs::pint_hpcc::Shim;
use programs::pint_hpcc::{KIND_INT, KIND_PINT};
use serde_json::Value;
use topo::{self, LinkProps, Topology};

use super::hpcc::{self, HostFlow, Plan, switch_total};
use super::ping_times_us;
use crate::fabric::{Fabric, Options};

pub mod sim;
pub mod sweep;

/// One scheme of E11.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheme {
    /// Its name in tables.
    pub name: &'static str,
    /// INT (true) or PINT.
    pub int: bool,
    /// p = 1/sample.
    pub sample: u32,
    /// PINT with its shim padded to INT's length (`cc=hpcc-pint-pad`): PINT's signal at INT's
    /// overhead. `pisa-sim` only.
    pub pad: bool,
}

impl Scheme {
    /// Its senders' congestion control, as `pisa-sim`'s `cc=` names it.
    pub fn cc(&self) -> &'static str {
        match (self.int, self.pad) {
            (true, _) => "hpcc-int",
            (false, false) => "hpcc-pint",
            (false, true) => "hpcc-pint-pad",
        }
    }
}

/// The schemes of E11 in namespaces, in `pisa-sim`'s E11 order ([`sim::SIM_SCHEMES`] adds one).
pub const SCHEMES: [Scheme; 4] = [
    Scheme {
        name: "INT",
        int: true,
        sample: 1,
        pad: false,
    },
    Scheme {
        name: "PINT p=1",
        int: false,
        sample: 1,
        pad: false,
    },
    Scheme {
        name: "PINT p=1/16",
        int: false,
        sample: 16,
        pad: false,
    },
    Scheme {
        name: "PINT p=1/256",
        int: false,
        sample: 256,
        pad: false,
    },
];

/// Flow-size buckets (workload bytes), in `pisa-sim` and in namespaces.
pub const BUCKETS: [(f64, f64, &str); 5] = [
    (0.0, 10e3, "<10K"),
    (10e3, 100e3, "10K-100K"),
    (100e3, 1e6, "100K-1M"),
    (1e6, 10e6, "1M-10M"),
    (10e6, f64::INFINITY, ">=10M"),
];
/// "The largest flows": workload size at least this.
pub const LARGE: f64 = 10e6;

/// The nine sizes that cut a workload into deciles of its flows (the CDF's 10th to 90th
/// percentiles), as the x-axis of PINT's Fig. 7: decile k holds the sizes in
/// `(edges[k-1], edges[k]]`, the first from 0 and the last to the largest.
pub fn decile_edges(cdf: &Cdf) -> Vec<f64> {
    (1..10).map(|k| cdf.quantile(k as f64 / 10.0)).collect()
}

/// The decile of a flow of `bytes` under `edges` ([`decile_edges`]), 0 to 9.
pub fn decile_of(edges: &[f64], bytes: f64) -> usize {
    edges.partition_point(|&e| e < bytes)
}

/// A decile's column name: the largest size it holds (`<=6.7K`, ..., `>5.0M` for the last).
pub fn decile_label(edges: &[f64], k: usize) -> String {
    let size = |b: f64| match b {
        b if b >= 1e6 => format!("{:.1}M", b / 1e6),
        b if b >= 1e3 => format!("{:.1}K", b / 1e3),
        b => format!("{b:.0}"),
    };
    match edges.get(k) {
        Some(&e) => format!("<={}", size(e)),
        None => format!(">{}", size(edges.last().copied().unwrap_or(0.0))),
    }
}

/// Per group of slowdowns: the p95 (nearest rank, none for an empty group) and how many.
pub fn p95_per(groups: Vec<Vec<f64>>) -> Vec<(Option<f64>, usize)> {
    groups
        .into_iter()
        .map(|v| {
            let q = (!v.is_empty()).then(|| ::sim::traffic::quantile_nearest_rank(&v, 0.95));
            (q, v.len())
        })
        .collect()
}

/// The parameters of a run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Hosts per leaf.
    pub hosts_per_leaf: usize,
    /// Host link rate.
    pub host_bps: u64,
    /// T, µs.
    pub rtt_us: u64,
    /// Flow sizes are the workload's times this.
    pub scale: f64,
    /// Offered load, a fraction of each host's link.
    pub load: f64,
    /// Seconds of arrivals.
    pub seconds: f64,
    /// Seconds the senders go on after the last arrival before they stop.
    pub drain: f64,
    /// Seed of the flows.
    pub seed: u64,
    /// Egress buffer per port, packets.
    pub buffer: u32,
    /// PFC XOFF, packets (the switches pause their upstream switch; hosts ignore PAUSE).
    pub pfc_xoff: u32,
    /// IPv4 length of a full datagram.
    pub ip_len: usize,
    /// The uplinks' oversubscription r: each runs at hosts per leaf × host rate / (2 r), so at
    /// r > 1 the leaf-spine hops, not the last, are the bottleneck between leaves.
    pub oversubscription: f64,
}

/// The leaf-spine with every switch running `pint` for `sc`.
pub fn topology(s: &Setup, sc: &Scheme) -> Topology {
    let host = LinkProps {
        rate_bps: s.host_bps,
        delay_us: 0,
        buffer: s.buffer,
    };
    let mut t = topo::leaf_spine(2, 2, s.hosts_per_leaf, s.oversubscription, host);
    for sw in &mut t.switches {
        sw.program = "pint".into();
        for (k, v) in [
            ("pint_hpcc_sample", sc.sample.to_string()),
            ("pint_hpcc_rtt_us", s.rtt_us.to_string()),
            ("pint_pfc_xoff", s.pfc_xoff.to_string()),
        ] {
            sw.params.insert(k.into(), v);
        }
    }
    t
}

/// A flow of the run with its workload (unscaled) size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct E11Flow {
    /// The flow as sent.
    pub flow: HostFlow,
    /// The workload's size, bytes (the bucket).
    pub workload_bytes: u64,
}

/// The seeded flows of a run: Poisson arrivals per host at `load` of its link (of the scaled
/// sizes' mean), destinations uniform over the other hosts.
pub fn flows(s: &Setup, t: &Topology) -> Result<Vec<E11Flow>, String> {
    let cdf = Cdf::named("websearch")?;
    let mean = cdf.mean() * s.scale;
    let lambda = s.load * s.host_bps as f64 / (8.0 * mean.max(1.0));
    let hosts: Vec<&str> = t.hosts.iter().map(|h| h.name.as_str()).collect();
    if hosts.len() < 2 || lambda <= 0.0 {
        return Err("E11 needs two hosts and a positive load".into());
    }
    let mut rng = Rng::new(s.seed);
    let mut out = Vec::new();
    let unit = |rng: &mut Rng| ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    for (i, src) in hosts.iter().enumerate() {
        let mut at = 0.0f64;
        loop {
            at += -unit(&mut rng).ln() / lambda;
            if at >= s.seconds {
                break;
            }
            let size = cdf.sample(&mut rng);
            let mut j = rng.range(0, hosts.len() as u64 - 2) as usize; // inclusive
            if j >= i {
                j += 1;
            }
            out.push(E11Flow {
                flow: HostFlow {
                    src: src.to_string(),
                    dst: hosts[j].to_string(),
                    start_us: (at * 1e6) as u64,
                    bytes: ((size as f64 * s.scale).round() as u64).max(1),
                },
                workload_bytes: size,
            });
        }
    }
    out.sort_by_key(|f| f.flow.start_us);
    Ok(out)
}

/// The ideal FCT of `bytes` for a scheme, ns: every frame (shim included) serialised at the
/// host rate, plus the idle RTT.
pub fn ideal_ns(s: &Setup, int: bool, slots: u8, bytes: u64, idle_rtt_ns: u64) -> u64 {
    let shim = Shim::len_of(
        if int { KIND_INT } else { KIND_PINT },
        if int { slots } else { 0 },
    );
    let per = (s.ip_len - 28 - shim) as u64;
    let packets = bytes.max(1).div_ceil(per);
    let last = bytes.max(1) - (packets - 1) * per;
    let frame = |app: u64| 14 + 28 + shim as u64 + app.max(24);
    let wire = (packets - 1) * frame(per) + frame(last);
    wire * 8 * 1_000_000_000 / s.host_bps.max(1) + idle_rtt_ns
}

/// One scheme's results.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The scheme.
    pub scheme: String,
    /// Per bucket: p95 slowdown (nearest rank) and flows.
    pub p95: Vec<(Option<f64>, usize)>,
    /// The same per decile of the workload's flow sizes ([`decile_edges`]); empty in rows
    /// recorded before deciles existed.
    #[serde(default)]
    pub p95_deciles: Vec<(Option<f64>, usize)>,
    /// Mean goodput of the largest flows, bits/s, and how many: a finished flow's size over its
    /// FCT, an unfinished one's acknowledged bytes over the time it had until the stop.
    pub goodput_large: (Option<f64>, usize),
    /// Flows not done when the senders stopped.
    pub incomplete: usize,
    /// Retransmitted datagrams, of all datagrams sent.
    pub retransmissions: (u64, u64),
    /// PFC frames the switches sent.
    pub pauses: u64,
    /// Packets the switches' traffic managers dropped.
    pub drops: u64,
    /// The run's fidelity verdict (docs/experiments.md, "Fidelity"): `ok` or `degraded: ...`
    /// in namespaces; `-` in pisa-sim, whose virtual time no CPU can make late (and in rows
    /// recorded before the verdict existed).
    #[serde(default = "crate::experiment::fidelity::no_verdict")]
    pub fidelity: String,
}

/// Summarises one run's report (`experiment::hpcc::run`'s) of `fl`.
pub fn row(s: &Setup, sc: &Scheme, slots: u8, fl: &[E11Flow], r: &Value, idle_rtt_ns: u64) -> Row {
    let stop_ns = ((s.seconds + s.drain) * 1e9) as u64;
    let edges = decile_edges(&Cdf::named("websearch").expect("a shipped workload"));
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); BUCKETS.len()];
    let mut deciles: Vec<Vec<f64>> = vec![Vec::new(); 10];
    let (mut large, mut n_large, mut incomplete) = (0.0, 0usize, 0usize);
    let (mut re, mut sent) = (0, 0);
    for (f, rep) in fl.iter().zip(r["flows"].as_array().into_iter().flatten()) {
        let ideal = ideal_ns(s, sc.int, slots, f.flow.bytes, idle_rtt_ns) as f64;
        re += rep["retransmissions"].as_u64().unwrap_or(0);
        sent += rep["sent"].as_u64().unwrap_or(0);
        let done = rep["completed"] == 1;
        // Every large flow's goodput: an unfinished one's bytes acknowledged by the stop over
        // the time it had (as in pisa-sim's rows).
        if f.workload_bytes as f64 >= LARGE {
            large += match rep["goodput_bps"].as_f64() {
                Some(g) if done => g,
                _ => {
                    let acked = rep["acked_bytes"].as_u64().unwrap_or(0);
                    let had = stop_ns.saturating_sub(f.flow.start_us * 1000).max(1);
                    acked as f64 * 8e9 / had as f64
                }
            };
            n_large += 1;
        }
        let slowdown = match rep["fct_ns"].as_u64() {
            Some(fct) if done => fct as f64 / ideal,
            _ => {
                incomplete += 1;
                stop_ns.saturating_sub(f.flow.start_us * 1000) as f64 / ideal
            }
        };
        let w = f.workload_bytes as f64;
        if let Some(b) = BUCKETS.iter().position(|&(lo, hi, _)| w >= lo && w < hi) {
            per[b].push(slowdown);
        }
        deciles[decile_of(&edges, w)].push(slowdown);
    }
    Row {
        scheme: sc.name.into(),
        p95: p95_per(per),
        p95_deciles: p95_per(deciles),
        goodput_large: ((n_large > 0).then(|| large / n_large as f64), n_large),
        incomplete,
        retransmissions: (re, sent),
        pauses: switch_total(r, "pfc_tx"),
        drops: switch_total(r, "drops"),
        fidelity: crate::experiment::fidelity::verdict_of(r),
    }
}

/// The p95 slowdown per decile of flow size (PINT's Fig. 7), one line per row: the columns
/// named by [`decile_label`] of `edges`, each cell `p95 (flows)`.
pub fn deciles_table(rows: &[Row], edges: &[f64]) -> String {
    let mut md = String::from("| scheme |");
    for k in 0..=edges.len() {
        let _ = write!(md, " {} |", decile_label(edges, k));
    }
    md += "\n|---|";
    md += &"---|".repeat(edges.len() + 1);
    md += "\n";
    for r in rows {
        let _ = write!(md, "| {} |", r.scheme);
        p95_cells(&mut md, &r.p95_deciles);
        md += "\n";
    }
    md
}

/// Appends one ` p95 (flows) |` cell per group (` - |` for an empty one).
fn p95_cells(md: &mut String, groups: &[(Option<f64>, usize)]) {
    for (q, n) in groups {
        match q {
            Some(q) => {
                let _ = write!(md, " {q:.2} ({n}) |");
            }
            None => *md += " - |",
        }
    }
}

/// The table of one load, in `pisa-sim` ([`sim`]) and in namespaces.
pub fn table(rows: &[Row]) -> String {
    let mut md = String::from("| scheme |");
    for b in BUCKETS {
        let _ = write!(md, " {} |", b.2);
    }
    md += " goodput >=10 MB (Mb/s) | incomplete | retransmitted | PFC pauses | drops | fidelity \
           |\n|---|";
    md += &"---|".repeat(BUCKETS.len() + 6);
    md += "\n";
    for r in rows {
        let _ = write!(md, "| {} |", r.scheme);
        p95_cells(&mut md, &r.p95);
        match r.goodput_large {
            (Some(g), n) => {
                let _ = write!(md, " {:.1} ({n}) |", g / 1e6);
            }
            _ => md += " - |",
        }
        let (re, sent) = r.retransmissions;
        let _ = writeln!(
            md,
            " {} | {re} of {sent} | {} | {} | {} |",
            r.incomplete, r.pauses, r.drops, r.fidelity
        );
    }
    md
}

/// The median of `ping` RTTs from `a` to `b`'s address, ns.
fn idle_rtt_ns(f: &Fabric, a: &str, b: &str) -> anyhow::Result<u64> {
    let ip = f
        .topo
        .hosts
        .iter()
        .find(|h| h.name == b)
        .map(|h| h.ipv4.to_string())
        .ok_or_else(|| anyhow!("no host {b}"))?;
    let out = f
        .ns(a)
        .exec("ping", &["-c", "20", "-i", "0.02", "-W", "1", &ip])
        .with_context(|| format!("ping {b} ({ip}) from host {a}"))?;
    let mut t = ping_times_us(&String::from_utf8_lossy(&out.stdout));
    if t.is_empty() {
        bail!("no ping answer from {b}");
    }
    t.sort_by(f64::total_cmp);
    Ok((t[t.len() / 2] * 1000.0) as u64)
}

/// One scheme in namespaces: bring the fabric up, program it, measure the idle RTT, run the
/// flows; the row and the full report (files in `dir`).
pub fn netns(
    s: &Setup,
    sc: &Scheme,
    opts: &Options,
    dir: &Path,
    progress: impl FnMut(&str),
) -> anyhow::Result<(Row, Value)> {
    if sc.pad {
        bail!(
            "{}: a scheme of E11 in pisa-sim only (e11::sim::SIM_SCHEMES)",
            sc.name
        );
    }
    let t = topology(s, sc);
    let fl = flows(s, &t).map_err(anyhow::Error::msg)?;
    let hp = programs::pint_hpcc::fabric_of(&t)?.ok_or_else(|| anyhow!("no pint switches"))?;
    let slots = topo::plan::host_path_switches(&t).clamp(1, 255) as u8;
    let f = crate::sweep::bring_up(&t, opts, progress)?;
    f.program()?;
    let last = t.hosts.last().map_or("", |h| h.name.as_str());
    let idle = idle_rtt_ns(&f, &t.hosts[0].name, last)?;
    let plan = Plan {
        flows: fl.iter().map(|x| x.flow.clone()).collect(),
        int: sc.int,
        line_bps: s.host_bps,
        rtt_us: hp.base_rtt_ns.div_ceil(1000),
        slots,
        ip_len: s.ip_len,
        max_seconds: s.seconds + s.drain,
        port: hp.udp_port,
    };
    let mut r = hpcc::run(&f, &plan, dir)?;
    drop(f);
    let row = row(s, sc, slots, &fl, &r, idle);
    r["idle_rtt_ns"] = idle.into();
    for (x, rep) in fl
        .iter()
        .zip(r["flows"].as_array_mut().into_iter().flatten())
    {
        rep["workload_bytes"] = x.workload_bytes.into();
        rep["ideal_fct_ns"] = ideal_ns(s, sc.int, slots, x.flow.bytes, idle).into();
    }
    Ok((row, r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> Setup {
        Setup {
            hosts_per_leaf: 2,
            host_bps: 100_000_000,
            rtt_us: 4000,
            scale: 0.1,
            load: 0.5,
            seconds: 20.0,
            drain: 5.0,
            seed: 1,
            buffer: 1000,
            pfc_xoff: 500,
            ip_len: 1000,
            oversubscription: 1.0,
        }
    }

    /// With r > 1 the uplinks run at hosts per leaf x host rate / 2r: between leaves the
    /// leaf-spine hops are the bottleneck, the host links unchanged.
    #[test]
    fn oversubscription_slows_the_uplinks_only() {
        let rates = |r: f64| -> Vec<(bool, u64)> {
            let t = topology(
                &Setup {
                    oversubscription: r,
                    ..setup()
                },
                &SCHEMES[0],
            );
            t.links
                .iter()
                .map(|l| {
                    let to_host =
                        matches!(l.a, topo::End::Host(_)) || matches!(l.b, topo::End::Host(_));
                    (to_host, l.props.rate_bps)
                })
                .collect()
        };
        for (to_host, rate) in rates(1.0) {
            assert_eq!(rate, 100_000_000, "host link {to_host}");
        }
        for (to_host, rate) in rates(2.0) {
            let want = if to_host { 100_000_000 } else { 50_000_000 };
            assert_eq!(rate, want, "host link {to_host}");
        }
    }

    #[test]
    fn the_flows_offer_the_load_to_other_hosts_and_every_scheme_gets_the_same() {
        let s = setup();
        let t = topology(&s, &SCHEMES[0]);
        let a = flows(&s, &t).unwrap();
        assert_eq!(a, flows(&s, &topology(&s, &SCHEMES[3])).unwrap());
        assert!(a.iter().all(|f| f.flow.src != f.flow.dst));
        let bytes: u64 = a.iter().map(|f| f.flow.bytes).sum();
        let offered = bytes as f64 * 8.0 / (s.seconds * 4.0 * s.host_bps as f64);
        // Web search's heavy tail: 20 s of four hosts is a noisy estimate of the mean.
        assert!((0.3..0.8).contains(&offered), "{offered}");
        for f in &a {
            assert_eq!(
                f.flow.bytes,
                ((f.workload_bytes as f64 * 0.1).round() as u64).max(1)
            );
        }
        assert!(t.switches.iter().all(|s| s.program == "pint"));
    }

    #[test]
    fn the_ideal_counts_the_schemes_shim_and_the_idle_rtt() {
        let s = setup();
        // PINT: 960 bytes a packet, 1014-byte frames: 10 packets in 811.2 µs.
        assert_eq!(ideal_ns(&s, false, 3, 9600, 0), 811_200);
        assert_eq!(ideal_ns(&s, false, 3, 9600, 50_000), 861_200);
        // INT with 3 slots: 912 bytes a packet; 11 packets, the last of 480.
        assert_eq!(
            ideal_ns(&s, true, 3, 9600, 0),
            (10 * 1014 + (14 + 28 + 60 + 480)) * 80
        );
    }

    #[test]
    fn a_row_takes_the_p95_per_bucket_and_counts_incomplete_flows_at_their_lower_bound() {
        let s = setup();
        let f = |bytes: u64, w: u64| E11Flow {
            flow: HostFlow {
                src: "h1".into(),
                dst: "h2".into(),
                start_us: 0,
                bytes,
            },
            workload_bytes: w,
        };
        let fl = [f(960, 5_000), f(9600, 20_000_000)];
        let r = serde_json::json!({"flows": [
            {"completed": 1, "fct_ns": 162_240, "retransmissions": 1, "sent": 2},
            {"completed": 0, "retransmissions": 0, "sent": 10, "acked_bytes": 4_800},
        ], "switches": {"s1": {"1": {"pfc_tx": 3, "drops": 2}}}});
        let row = row(&s, &SCHEMES[1], 3, &fl, &r, 0);
        assert_eq!(row.p95[0], (Some(2.0), 1));
        let stop = 25e9 / 811_200.0;
        assert!((row.p95[4].0.unwrap() - stop).abs() < 1e-6);
        // The unfinished large flow: 4,800 bytes acknowledged in the 25 s it had.
        assert_eq!((row.incomplete, row.goodput_large), (1, (Some(1_536.0), 1)));
        assert_eq!(
            (row.retransmissions, row.pauses, row.drops),
            ((1, 12), 3, 2)
        );
        assert!(table(std::slice::from_ref(&row)).contains("| PINT p=1 | 2.00 (1) | - |"));
        // 5 KB is in web search's first decile (up to 6.7 KB), 20 MB in its last.
        let n: Vec<usize> = row.p95_deciles.iter().map(|d| d.1).collect();
        assert_eq!(n, [1, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let edges = decile_edges(&Cdf::named("websearch").unwrap());
        let md = deciles_table(&[row], &edges);
        assert!(md.contains("| PINT p=1 | 2.00 (1) | - |"), "{md}");
    }

    #[test]
    fn deciles_cut_the_workload_into_tenths_of_its_flows() {
        let cdf = Cdf::named("websearch").unwrap();
        let edges = decile_edges(&cdf);
        assert_eq!(edges.len(), 9);
        assert!(edges.windows(2).all(|w| w[0] < w[1]), "{edges:?}");
        let mut rng = Rng::new(7);
        let mut n = [0usize; 10];
        for _ in 0..20_000 {
            n[decile_of(&edges, cdf.sample(&mut rng) as f64)] += 1;
        }
        // Each decile holds a tenth of the sampled flows (within sampling and rounding).
        assert!(n.iter().all(|&k| (1_700..=2_300).contains(&k)), "{n:?}");
        assert_eq!(decile_of(&edges, 0.0), 0);
        assert_eq!(decile_of(&edges, edges[0]), 0);
        assert_eq!(decile_of(&edges, 1e12), 9);
        assert!(decile_label(&edges, 9).starts_with('>'));
    }
}
