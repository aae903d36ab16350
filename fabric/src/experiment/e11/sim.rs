//! PINT's E11 in `pisa-sim` (issue 15; docs/pint.md, "E11"): HPCC(INT) against HPCC(PINT, 8
//! bits) at p = 1, 1/16 and 1/256, and PINT with an INT-sized shim, on a k = 4 fat-tree of
//! `pint` switches with PFC on (HPCC assumes a lossless fabric).
//!
//! - **Topology** ([`sim_topology`]): `topo::fat_tree`, the scale \[X\]: 16 hosts on 1 Gb/s links,
//!   4 Gb/s between switches (the paper's 1:4 of 100 and 400 Gb/s), 50 µs per link, so the base
//!   RTT over the longest path (6 links) is 745 µs and the BDP 93 KB, about 93 packets of 1000
//!   bytes (the paper: 12 µs, 150 packets); 1000-packet buffers per port, PFC at 500.
//! - **Flows** ([`sim_flows`]): `sim::traffic::poisson`, the experiments' one Poisson generator:
//!   per host, arrivals at `load` of its link over the window, sizes from the workload's CDF,
//!   destinations uniform over the other hosts, seeded; every scheme runs the same flows.
//! - **Slowdown**: `pisa-sim`'s, FCT over the ideal FCT (every frame with its scheme's shim at the
//!   host rate, plus the base RTT of the flow's path). A flow not complete when the run ends
//!   (after at most one second of drain) counts with the lower bound (end − start)/ideal: it is
//!   among the slowest, never left out. Buckets ([`super::BUCKETS`]) are by the flow's size.
//!
//! The run is deterministic: one setup gives the same row and report.

use hosts::json::Json;
use serde_json::Value;
use sim::fabric::{Options, Sim};
use sim::flow::FlowSpec;
use sim::traffic::{Flow, Layout, Pattern, PoissonSpec, Tagging, poisson};
use sim::workload::Cdf;
use topo::{GenProps, LinkProps, Topology};

use super::{BUCKETS, LARGE, Row, SCHEMES, Scheme, decile_edges, decile_of, p95_per};

/// The schemes of E11 in `pisa-sim`: [`SCHEMES`], then PINT at p = 1 with its shim padded to
/// INT's length (PINT's signal at INT's overhead, to separate the two).
pub const SIM_SCHEMES: [Scheme; 5] = [
    SCHEMES[0],
    SCHEMES[1],
    SCHEMES[2],
    SCHEMES[3],
    Scheme {
        name: "PINT p=1, INT-sized shim",
        int: false,
        sample: 1,
        pad: true,
    },
];

/// A scheme of [`SIM_SCHEMES`] by its table name.
pub fn sim_scheme(name: &str) -> Option<Scheme> {
    SIM_SCHEMES.iter().copied().find(|s| s.name == name)
}

/// The parameters of one E11 run in `pisa-sim`.
#[derive(Clone, Debug, PartialEq)]
pub struct SimSetup {
    /// Flow sizes: a workload of `sim::workload` (`websearch`, `hadoop`, ...).
    pub workload: String,
    /// Offered load, a fraction of each host's link.
    pub load: f64,
    /// Flows arrive in `[0, window_ns)`; the run is as long, then drains for up to 1 s.
    pub window_ns: u64,
    /// Seed of the flows and of the simulation.
    pub seed: u64,
    /// The fat-tree's k (k³/4 hosts).
    pub k: usize,
    /// Host links.
    pub host: LinkProps,
    /// Links between switches.
    pub fabric: LinkProps,
    /// Links between aggregation and core switches, where they differ from `fabric` (slower: an
    /// oversubscribed core, so that a path's bottleneck can be a core link and PINT's path
    /// maximum is exercised).
    pub core: Option<LinkProps>,
    /// PFC XOFF, packets.
    pub pfc_xoff: u32,
    /// IPv4 length of a full packet, bytes.
    pub ip_len: u16,
}

impl SimSetup {
    /// E11's scale: a k = 4 fat-tree, 1 and 4 Gb/s links of 50 µs, 1000-packet buffers, PFC at
    /// 500, 1000-byte packets.
    pub fn scaled(workload: &str, load: f64, window_ms: f64, seed: u64) -> SimSetup {
        let link = |rate_bps| LinkProps {
            rate_bps,
            delay_us: 50,
            buffer: 1000,
        };
        SimSetup {
            workload: workload.into(),
            load,
            window_ns: (window_ms * 1e6) as u64,
            seed,
            k: 4,
            host: link(1_000_000_000),
            fabric: link(4_000_000_000),
            core: None,
            pfc_xoff: 500,
            ip_len: 1000,
        }
    }
}

/// The fat-tree with every switch running `pint` for `sc`: PFC at the setup's XOFF and the HPCC
/// query sampled at p = 1/`sc.sample`.
pub fn sim_topology(s: &SimSetup, sc: &Scheme) -> Topology {
    let mut t = topo::fat_tree(
        s.k,
        GenProps {
            host: s.host,
            fabric: s.fabric,
        },
    );
    if let Some(core) = s.core {
        let is_core = |e: &topo::End| matches!(e, topo::End::Switch(n, _) if n.starts_with("core"));
        for l in t
            .links
            .iter_mut()
            .filter(|l| is_core(&l.a) || is_core(&l.b))
        {
            l.props = core;
        }
    }
    for sw in &mut t.switches {
        sw.program = "pint".into();
        sw.params
            .insert("pint_pfc_xoff".into(), s.pfc_xoff.to_string());
        sw.params
            .insert("pint_hpcc_sample".into(), sc.sample.to_string());
    }
    t
}

/// The run's flows (hosts are indices into `sim_topology(..).hosts`), sorted by start.
pub fn sim_flows(s: &SimSetup) -> Result<Vec<Flow>, String> {
    let cdf = Cdf::named(&s.workload)?;
    let half = s.k / 2;
    let layout = Layout {
        groups: s.k * half,
        per_group: half,
    };
    let spec = PoissonSpec {
        cdf: &cdf,
        load: s.load,
        capacity_bps: s.host.rate_bps as f64,
        window_ns: s.window_ns,
        pattern: Pattern::Random,
        tagging: Tagging::for_workload(&cdf),
        seed: s.seed,
    };
    poisson(&layout, &spec)
}

/// One scheme at one point: the setup's flows through `pisa-sim`. Returns the row and
/// `pisa-sim`'s report, each flow with its `start_ns` added (what [`sim_row`] needs).
pub fn sim_point(s: &SimSetup, sc: &Scheme) -> Result<(Row, Value), String> {
    sim_run(s, sc, &sim_flows(s)?)
}

/// One scheme on given flows (as [`sim_flows`] gives them): the row and the report.
pub fn sim_run(s: &SimSetup, sc: &Scheme, flows: &[Flow]) -> Result<(Row, Value), String> {
    let t = sim_topology(s, sc);
    let mut opts = Options::new(s.window_ns, s.seed);
    for (i, f) in flows.iter().enumerate() {
        let (src, dst) = match (t.hosts.get(f.src), t.hosts.get(f.dst)) {
            (Some(a), Some(b)) => (&a.name, &b.name),
            _ => return Err(format!("flow {i}: no host {} or {}", f.src, f.dst)),
        };
        let spec = format!(
            "{src}>{dst} bytes={} size={} cc={}",
            f.size,
            s.ip_len,
            sc.cc()
        );
        let mut spec = FlowSpec::parse(&spec, i)?;
        spec.start_ns = f.start_ns;
        opts.flows.push(spec);
    }
    let r = Sim::new(&t, opts)?.run();
    let mut r: Value =
        serde_json::from_str(&r.pretty()).map_err(|e| format!("the simulator's report: {e}"))?;
    let reported = r["flows"].as_array_mut().ok_or("the report has no flows")?;
    if reported.len() != flows.len() {
        return Err(format!(
            "{} flows run, {} reported",
            flows.len(),
            reported.len()
        ));
    }
    for (rep, f) in reported.iter_mut().zip(flows) {
        rep["start_ns"] = f.start_ns.into();
    }
    let edges = decile_edges(&Cdf::named(&s.workload)?);
    Ok((sim_row(sc, &r, &edges)?, r))
}

fn port_total(r: &Value, key: &str) -> u64 {
    r["switches"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .flat_map(|sw| sw["ports"].as_object().into_iter().flat_map(|m| m.values()))
        .map(|p| p[key].as_u64().unwrap_or(0))
        .sum()
}

/// The row of a report of [`sim_run`]'s. A flow not complete counts with (end − start)/ideal,
/// the end being the report's `now_us`, and, when large, with its acknowledged bytes over
/// (end − start) as its goodput. Deciles are cut at `edges` ([`decile_edges`] of the workload).
pub fn sim_row(sc: &Scheme, r: &Value, edges: &[f64]) -> Result<Row, String> {
    let end_ns = r["now_us"].as_u64().ok_or("the report has no now_us")? * 1000;
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); BUCKETS.len()];
    let mut deciles: Vec<Vec<f64>> = vec![Vec::new(); edges.len() + 1];
    let (mut large, mut n_large, mut incomplete, mut sent) = (0.0, 0usize, 0usize, 0u64);
    for (i, f) in r["flows"].as_array().into_iter().flatten().enumerate() {
        let h = &f["hpcc"];
        let (Some(bytes), Some(ideal)) = (h["bytes"].as_u64(), h["ideal_fct_ns"].as_u64()) else {
            return Err(format!("flow {i}: not an HPCC flow"));
        };
        sent += f["sent"].as_u64().unwrap_or(0);
        let start = f["start_ns"].as_u64().ok_or("a flow has no start_ns")?;
        let done = h["completed"] == 1;
        // Every large flow's goodput: a finished one's size over its FCT, an unfinished one's
        // bytes acknowledged by the end over the time it had (counting only the finished ones
        // favoured the scheme that leaves more of them unfinished).
        if bytes as f64 >= LARGE {
            large += match h["goodput_bps"].as_f64() {
                Some(g) if done => g,
                _ => {
                    let acked = h["acked_bytes"].as_u64().unwrap_or(0);
                    acked as f64 * 8e9 / end_ns.saturating_sub(start).max(1) as f64
                }
            };
            n_large += 1;
        }
        let slowdown = match h["slowdown"].as_f64() {
            Some(x) if done => x,
            _ => {
                incomplete += 1;
                end_ns.saturating_sub(start) as f64 / ideal.max(1) as f64
            }
        };
        let b = bytes as f64;
        if let Some(k) = BUCKETS.iter().position(|&(lo, hi, _)| b >= lo && b < hi) {
            per[k].push(slowdown);
        }
        deciles[decile_of(edges, b)].push(slowdown);
    }
    Ok(Row {
        scheme: sc.name.into(),
        p95: p95_per(per),
        p95_deciles: p95_per(deciles),
        goodput_large: ((n_large > 0).then(|| large / n_large as f64), n_large),
        incomplete,
        // pisa-sim's HPCC senders never retransmit (a lossless fabric).
        retransmissions: (0, sent),
        pauses: port_total(r, "pfc_pauses_sent"),
        drops: port_total(r, "drops"),
        fidelity: crate::experiment::fidelity::no_verdict(),
    })
}

/// The line above a point's table: workload, load, flows and window.
pub fn sim_heading(s: &SimSetup, flows: usize) -> String {
    format!(
        "### {}, load {:.0}%: {flows} flows in {} ms",
        s.workload,
        s.load * 100.0,
        s.window_ns as f64 / 1e6
    )
}

/// The rows of runs, `(workload, load, row)`, as the JSON array `scripts/analysis pint-plot e11`
/// reads: per row `workload`, `load`, `scheme`, `flows`, `incomplete`, `buckets` (per bucket,
/// in [`BUCKETS`]' order, `n` and `p95_slowdown`), `deciles` (the same per decile of the
/// workload's sizes, named by their largest), `large_goodput_mbps`, `large_n`,
/// `pfc_pauses` and `drops`, keys in that order.
pub fn plot_json(runs: &[(&str, f64, &Row)]) -> String {
    // A missing value prints as null (a non-finite float does).
    let opt = |x: Option<f64>| Json::F(x.unwrap_or(f64::NAN));
    let rows: Vec<Json> = runs
        .iter()
        .map(|&(workload, load, r)| {
            let mut deciles = Json::object();
            if let Ok(cdf) = Cdf::named(workload) {
                let edges = decile_edges(&cdf);
                for (k, &(q, n)) in r.p95_deciles.iter().enumerate() {
                    deciles = deciles.with(
                        &super::decile_label(&edges, k),
                        Json::object()
                            .with("n", n as u64)
                            .with("p95_slowdown", opt(q)),
                    );
                }
            }
            let mut buckets = Json::object();
            for (b, &(q, n)) in BUCKETS.iter().zip(&r.p95) {
                buckets = buckets.with(
                    b.2,
                    Json::object()
                        .with("n", n as u64)
                        .with("p95_slowdown", opt(q)),
                );
            }
            Json::object()
                .with("workload", workload)
                .with("load", load)
                .with("scheme", r.scheme.as_str())
                .with("flows", r.p95.iter().map(|x| x.1 as u64).sum::<u64>())
                .with("incomplete", r.incomplete as u64)
                .with("buckets", buckets)
                .with("deciles", deciles)
                .with(
                    "large_goodput_mbps",
                    opt(r.goodput_large.0.map(|g| g / 1e6)),
                )
                .with("large_n", r.goodput_large.1 as u64)
                .with("pfc_pauses", r.pauses)
                .with("drops", r.drops)
        })
        .collect();
    Json::A(rows).pretty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fat_tree_differs_between_schemes_only_in_the_sampling() {
        let s = SimSetup::scaled("websearch", 0.5, 10.0, 1);
        let t: Vec<Topology> = SIM_SCHEMES.iter().map(|sc| sim_topology(&s, sc)).collect();
        // k = 4: 20 switches, 16 hosts, 1 Gb/s to hosts and 4 Gb/s between switches.
        assert_eq!((t[0].switches.len(), t[0].hosts.len()), (20, 16));
        assert!(t[0].check().is_ok());
        for (x, sc) in t.iter().zip(&SIM_SCHEMES) {
            assert_eq!(x.links, t[0].links);
            assert_eq!(x.hosts, t[0].hosts);
            for sw in &x.switches {
                assert_eq!(sw.program, "pint");
                assert_eq!(sw.params["pint_pfc_xoff"], "500");
                assert_eq!(sw.params["pint_hpcc_sample"], sc.sample.to_string());
            }
        }
        let rates: std::collections::BTreeSet<u64> =
            t[0].links.iter().map(|l| l.props.rate_bps).collect();
        assert_eq!(
            rates.into_iter().collect::<Vec<_>>(),
            [1_000_000_000, 4_000_000_000]
        );
        assert_eq!(
            SIM_SCHEMES.map(|s| s.cc()),
            [
                "hpcc-int",
                "hpcc-pint",
                "hpcc-pint",
                "hpcc-pint",
                "hpcc-pint-pad"
            ]
        );
        assert_eq!(sim_scheme("PINT p=1/16"), Some(SCHEMES[2]));
        assert!(sim_scheme("PINT").is_none());
        // An oversubscribed core: the 16 aggregation-core links at 500 Mb/s, the 16 edge-
        // aggregation links still at 4 Gb/s.
        let mut s = s;
        s.core = Some(LinkProps {
            rate_bps: 500_000_000,
            ..s.fabric
        });
        let t = sim_topology(&s, &SIM_SCHEMES[0]);
        let count = |rate: u64| t.links.iter().filter(|l| l.props.rate_bps == rate).count();
        assert_eq!(
            (
                count(500_000_000),
                count(4_000_000_000),
                count(1_000_000_000)
            ),
            (16, 16, 16)
        );
        for l in t.links.iter().filter(|l| l.props.rate_bps == 500_000_000) {
            assert!(
                [&l.a, &l.b]
                    .iter()
                    .any(|e| matches!(e, topo::End::Switch(n, _) if n.starts_with("core")))
            );
        }
    }

    #[test]
    fn the_flows_offer_the_load_to_other_hosts() {
        // Hadoop's tail (flows of up to 10 MB) makes a short window a noisy estimate of the mean.
        let s = SimSetup::scaled("hadoop", 0.5, 2000.0, 1);
        let f = sim_flows(&s).unwrap();
        assert_eq!(f, sim_flows(&s).unwrap());
        assert_ne!(
            f,
            sim_flows(&SimSetup {
                seed: 2,
                ..s.clone()
            })
            .unwrap()
        );
        assert!(f.iter().all(|x| x.src != x.dst && x.src < 16 && x.dst < 16));
        assert!(f.iter().all(|x| x.start_ns < s.window_ns));
        assert!(f.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));
        let bytes: u64 = f.iter().map(|x| x.size).sum();
        let offered = bytes as f64 * 8.0 / (2.0 * 16.0 * 1e9);
        assert!((0.4..0.6).contains(&offered), "{offered}");
        assert!(sim_flows(&SimSetup::scaled("nope", 0.5, 1.0, 1)).is_err());
    }

    #[test]
    fn a_short_run_gives_every_scheme_the_same_flows_and_every_bucket() {
        // 10 ms of web search: a handful of flows, all done within the drain.
        let s = SimSetup::scaled("websearch", 0.5, 10.0, 1);
        let flows = sim_flows(&s).unwrap();
        assert!(flows.len() >= 3, "{}", flows.len());
        let mut sent = Vec::new();
        for sc in &SIM_SCHEMES {
            let (row, r) = sim_point(&s, sc).unwrap();
            assert_eq!(row.scheme, sc.name);
            assert_eq!(row.p95.len(), BUCKETS.len());
            assert_eq!(row.p95.iter().map(|b| b.1).sum::<usize>(), flows.len());
            assert_eq!((row.incomplete, row.drops), (0, 0), "{row:?}");
            // Slowdowns are about 1 or more. (pisa-sim's ideal FCT is a little above the FCT
            // of some short INT flows: the script's tables had 0.98 too.)
            assert!(
                row.p95.iter().all(|b| b.0.is_none_or(|q| q > 0.95)),
                "{row:?}"
            );
            let rep = r["flows"].as_array().unwrap();
            for (x, f) in rep.iter().zip(&flows) {
                assert_eq!(x["src"], s_name(f.src));
                assert_eq!(x["dst"], s_name(f.dst));
                assert_eq!(x["hpcc"]["bytes"], f.size);
                assert_eq!(
                    x["hpcc"]["cc"],
                    if sc.int { "hpcc-int" } else { "hpcc-pint" }
                );
            }
            sent.push(row.retransmissions.1);
        }
        // The padded shim costs PINT as many packets as INT; PINT's own fewer.
        assert_eq!(sent[4], sent[0]);
        assert!(sent[1] < sent[0] && sent[1] == sent[2] && sent[2] == sent[3]);
    }

    fn s_name(i: usize) -> String {
        format!("h{}", i + 1)
    }

    #[test]
    fn a_row_takes_the_p95_per_bucket_and_counts_incomplete_flows_at_their_lower_bound() {
        let flow = |bytes: u64, start_ns: u64, done: Option<(f64, u64)>| {
            // An unfinished flow has a third of its bytes acknowledged.
            let acked = if done.is_some() { bytes } else { bytes / 3 };
            let mut h = serde_json::json!({"bytes": bytes, "ideal_fct_ns": 1_000_000,
                "completed": u64::from(done.is_some()), "acked_bytes": acked});
            if let Some((slowdown, goodput)) = done {
                h["slowdown"] = slowdown.into();
                h["goodput_bps"] = goodput.into();
            }
            serde_json::json!({"sent": 10, "start_ns": start_ns, "hpcc": h})
        };
        let ports = serde_json::json!({"1": {"pfc_pauses_sent": 2, "drops": 1},
            "2": {"pfc_pauses_sent": 3, "drops": 0}});
        let r = serde_json::json!({
            "now_us": 50_000,
            "switches": {"core1": {"ports": ports}, "p1e1": {"ports": ports}},
            "flows": [
                flow(5_000, 0, Some((2.0, 1_000))),
                flow(6_000, 0, Some((4.0, 1_000))),
                flow(20_000_000, 1_000_000, Some((3.0, 400_000_000))),
                flow(30_000_000, 10_000_000, None),
            ],
        });
        let row = sim_row(&SIM_SCHEMES[0], &r, &[]).unwrap();
        assert_eq!(row.p95[0], (Some(4.0), 2));
        assert_eq!(row.p95[1], (None, 0));
        // The incomplete flow: (50 ms - 10 ms) / 1 ms.
        assert_eq!(row.p95[4], (Some(40.0), 2));
        // Both large flows: 400 Mb/s, and 10 MB in the 40 ms the unfinished one had (2 Gb/s).
        assert_eq!(row.goodput_large, (Some(1_200e6), 2));
        assert_eq!((row.incomplete, row.retransmissions), (1, (0, 40)));
        assert_eq!((row.pauses, row.drops), (10, 2));
        assert!(sim_row(&SIM_SCHEMES[0], &serde_json::json!({}), &[]).is_err());

        let json: Value = serde_json::from_str(&plot_json(&[("websearch", 0.5, &row)])).unwrap();
        let j = &json[0];
        assert_eq!(
            (j["workload"].as_str(), j["load"].as_f64()),
            (Some("websearch"), Some(0.5))
        );
        assert_eq!(
            (j["flows"].as_u64(), j["large_n"].as_u64()),
            (Some(4), Some(2))
        );
        assert_eq!(j["large_goodput_mbps"].as_f64(), Some(1_200.0));
        assert_eq!(j["buckets"][">=10M"]["p95_slowdown"].as_f64(), Some(40.0));
        assert!(j["buckets"]["10K-100K"]["p95_slowdown"].is_null());
        assert_eq!(
            (j["pfc_pauses"].as_u64(), j["drops"].as_u64()),
            (Some(10), Some(2))
        );
        // pint-plot takes the buckets in the file's order: smallest first.
        let text = plot_json(&[("websearch", 0.5, &row)]);
        let at = |k: &str| text.find(&format!("\"{k}\"")).unwrap();
        assert!(at("<10K") < at("10K-100K") && at("1M-10M") < at(">=10M"));
        assert_eq!(
            sim_heading(&SimSetup::scaled("hadoop", 0.5, 1000.0, 1), 8349),
            "### hadoop, load 50%: 8349 flows in 1000 ms"
        );
    }
}
