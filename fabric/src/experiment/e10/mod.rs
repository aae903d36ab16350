//! E10 (P4QCN §4, issue 14): P4QCN's six configurations on the paper's topology, in `pisa-sim`
//! and in namespaces, with every rate scaled from the paper's 7 Mb/s links.
//!
//! The topology is `pisa-fabric gen p4qcn` with two hosts per ToR (2 spines, 4 leaves, 4 ToRs).
//! A UDP flow of 4/7 of the link rate goes from host11 to host41 (the paper's 4 Mb/s at 7 Mb/s),
//! and every host sends the paper's random background (`sim::traffic::background`) at one
//! level, 2, 3, 4 or 5 Mb/s scaled the same way, to the other hosts. Thresholds are the paper's:
//! Q_P4QCN = Q_min = Q_max = 11 packets and Q_PFC = 14 packets, at every rate (they are queue
//! occupancies).
//!
//! The configurations differ only in each switch's program (one binary, one `p4qcn` program:
//! `p4qcn-off`, `p4qcn`, `p4qcn-pfc`, `pfc`, `p4qcn-3pt`) and in the hosts: RP-paced senders where
//! the configuration has feedback (background included: every host runs the RP), the NP at the
//! receivers for three-point, and a kernel TCP flow (iperf3, cubic) instead of the UDP one for
//! `tcp`, which only namespaces run (`pisa-sim` has no TCP congestion control).

use std::path::Path;

use anyhow::Context as _;
use serde_json::Value;
use sim::fabric::{Options as SimOptions, Sim};
use sim::flow::FlowSpec;
use topo::{self, GenProps, LinkProps, Topology};

use super::qcn::{self, Background, Plan, Sender, f64_at, u};
use crate::fabric::{Fabric, Options};

pub mod sweep;

/// One of the six configurations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Its name in tables and on the command line.
    pub name: &'static str,
    /// Every switch's program.
    pub program: &'static str,
    /// Whether the switches send PFC (Q_PFC set).
    pub pfc: bool,
    /// Whether senders pace by QCN's RP.
    pub rp: bool,
    /// Whether receivers are the three-point NP.
    pub np: bool,
    /// Whether the measured flow is kernel TCP.
    pub tcp: bool,
}

const fn config(name: &'static str, program: &'static str, pfc: bool, rp: bool) -> Config {
    Config {
        name,
        program,
        pfc,
        rp,
        np: false,
        tcp: false,
    }
}

/// The six configurations, in the paper's order.
pub const CONFIGS: [Config; 6] = [
    config("udp", "p4qcn-off", false, false),
    Config {
        tcp: true,
        ..config("tcp", "p4qcn-off", false, false)
    },
    config("p4qcn", "p4qcn", false, true),
    config("p4qcn+pfc", "p4qcn-pfc", true, true),
    config("pfc", "pfc", true, false),
    Config {
        np: true,
        ..config("three-point", "p4qcn-3pt", false, true)
    },
];

/// A configuration by name.
pub fn config_named(name: &str) -> Option<Config> {
    CONFIGS.iter().copied().find(|c| c.name == name)
}

/// The paper's link rate, from which every rate is scaled.
pub const PAPER_LINK_BPS: u64 = 7_000_000;
/// The measured flow's rate at the paper's link rate.
pub const PAPER_FLOW_BPS: u64 = 4_000_000;
/// How long pisa-sim drains after the senders stop.
pub const DRAIN_NS: u64 = 30_000_000_000;
/// The measured flow.
pub const MAIN: (&str, &str) = ("host11", "host41");

/// The parameters of a run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Every link's rate.
    pub link_bps: u64,
    /// Every link's propagation delay (pisa-sim; the namespaces' veth have none).
    pub delay_us: u64,
    /// Egress buffer per port, packets.
    pub buffer: u32,
    /// Q_P4QCN (= Q_min = Q_max), packets.
    pub q_p4qcn: u32,
    /// Q_PFC, packets.
    pub q_pfc: u32,
    /// How long the senders send.
    pub seconds: f64,
    /// UDP payload bytes.
    pub size: usize,
    /// Mean background flow size, frame bytes (A-QCN-8 in docs/p4qcn.md: the paper leaves it open).
    pub mean_bytes: u64,
    /// Seed of the background schedule and the simulation.
    pub seed: u64,
}

impl Setup {
    /// The paper's parameters at `link_bps`: thresholds 11 and 14, 1000-byte payloads, a 64-packet
    /// buffer, 50 µs links, background flows of 1 s at the link rate on average.
    pub fn paper(link_bps: u64, seconds: f64) -> Setup {
        Setup {
            link_bps,
            delay_us: 50,
            buffer: 64,
            q_p4qcn: 11,
            q_pfc: 14,
            seconds,
            size: 1000,
            mean_bytes: (link_bps / 8).max(10_000),
            seed: 1,
        }
    }

    /// A rate of the paper's, scaled to this link rate.
    pub fn scale(&self, paper_bps: u64) -> u64 {
        u64::try_from(u128::from(paper_bps) * u128::from(self.link_bps) / 7_000_000)
            .unwrap_or(u64::MAX)
    }
}

/// The paper's topology with every switch running `c`'s program and thresholds.
pub fn topology(s: &Setup, c: &Config) -> Topology {
    let props = LinkProps {
        rate_bps: s.link_bps,
        delay_us: s.delay_us,
        buffer: s.buffer,
    };
    let mut t = topo::p4qcn(
        2,
        GenProps {
            host: props,
            fabric: props,
        },
    );
    for sw in &mut t.switches {
        sw.program = c.program.into();
        for k in ["q_min", "q_max"] {
            sw.params.insert(k.into(), s.q_p4qcn.to_string());
        }
        if c.pfc {
            sw.params.insert("q_pfc".into(), s.q_pfc.to_string());
        }
    }
    t
}

/// One row of E10's table. `None`: not measured in this configuration.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Configuration.
    pub config: String,
    /// Background level (frame bits per second per host).
    pub bg_bps: u64,
    /// Packets of the measured flow sent.
    pub sent: u64,
    /// Its loss (for TCP: retransmitted segments over segments sent).
    pub loss: f64,
    /// One-way latency p50 and p99, µs (for TCP: the sender's mean RTT as p50).
    pub latency_us: (Option<f64>, Option<f64>),
    /// Its goodput, bits per second: the frames that arrived within the senders' time over
    /// that time (TCP: iperf3's receiver rate).
    pub goodput_bps: f64,
    /// What it offered, bits per second (its rate: a reaction point sends less and drops the
    /// rest of the demand, so goodput is to be read against this).
    #[serde(default)]
    pub offered_bps: f64,
    /// Feedback packets its sender took.
    pub feedbacks: u64,
    /// PFC frames sent by all switches.
    pub pauses_sent: u64,
    /// PFC frames received by switches and (pisa-sim) hosts.
    pub pauses_received: u64,
    /// Utilisation of host41's link by data: the frames of every flow to host41 that arrived
    /// within the senders' time, over the link's capacity for that time (no PFC or feedback
    /// frame; before 2026-11-27 the port's bytes over the run's end, which a PFC run's drain
    /// stretched, with its control frames counted).
    pub utilisation: f64,
    /// Loss of the background traffic.
    pub bg_loss: f64,
    /// The background's offered and delivered (within the senders' time) rates, bits per
    /// second, summed over every host.
    #[serde(default)]
    pub bg_offered_bps: f64,
    /// See `bg_offered_bps`.
    #[serde(default)]
    pub bg_delivered_bps: f64,
    /// Time the switches' and hosts' ports spent paused by received PFC, summed, ms (pisa-sim;
    /// namespaces: the switches' ports only).
    #[serde(default)]
    pub paused_ms: f64,
    /// The run's fidelity verdict (docs/experiments.md, "Fidelity"): `ok` or `degraded: ...`
    /// in namespaces; `-` in pisa-sim, whose virtual time no CPU can make late (and in rows
    /// recorded before the verdict existed).
    #[serde(default = "crate::experiment::fidelity::no_verdict")]
    pub fidelity: String,
}

/// What the background offers, bits per second over the senders' time (frame bits; both worlds
/// draw the same flows from the seed).
fn bg_offered_bps(s: &Setup, hosts: usize, bg_bps: u64) -> f64 {
    let until = (s.seconds * 1e9) as u64;
    let bits: f64 = sim::traffic::background(hosts, &[bg_bps], s.mean_bytes, until, s.seed)
        .iter()
        .map(|f| f.rate_bps as f64 * f.stop_ns.min(until).saturating_sub(f.start_ns) as f64 / 1e9)
        .sum();
    bits / s.seconds
}

/// The background flows of a run as pisa-sim flow specs (`size` is the IP length).
fn sim_specs(s: &Setup, c: &Config, t: &Topology, bg_bps: u64) -> Vec<String> {
    let opts = |spec: String| -> String {
        let mut spec = format!("{spec} size={} tos=2", s.size + 28);
        if c.rp {
            spec += " cc=qcn-rp";
        }
        if c.np {
            // The NP paced as the two-point congestion point paces its feedback (its `pace_us`
            // default), so that the two are compared at the same feedback rate.
            spec += &format!(" np=on np_us={}", programs::p4qcn::base_rtt_us(t));
        }
        spec
    };
    let mut specs = vec![opts(format!(
        "{}>{} rate={}",
        MAIN.0,
        MAIN.1,
        s.scale(PAPER_FLOW_BPS)
    ))];
    let until = (s.seconds * 1e9) as u64;
    for f in sim::traffic::background(t.hosts.len(), &[bg_bps], s.mean_bytes, until, s.seed) {
        specs.push(opts(format!(
            "{}>{} rate={} start_ms={} stop_ms={}",
            t.hosts[f.src].name,
            t.hosts[f.dst].name,
            f.rate_bps,
            f.start_ns as f64 / 1e6,
            f.stop_ns as f64 / 1e6
        )));
    }
    specs
}

/// E10 at one point in `pisa-sim`: the row and pisa-sim's report (the measured flow is
/// `flows[0]`; its RP trace is `qcn_rp.trace_t_us_rc_rt_state`).
pub fn sim(s: &Setup, c: &Config, bg_bps: u64) -> Result<(Row, Value), String> {
    if c.tcp {
        return Err("pisa-sim has no TCP congestion control: tcp runs in namespaces only".into());
    }
    let t = topology(s, c);
    let mut opts = SimOptions::new((s.seconds * 1e9) as u64, s.seed);
    // Loss is what never arrives: let paused queues drain (PFC's congestion spreading holds
    // packets for seconds at 7 Mb/s) rather than count what is still queued as lost.
    opts.drain_ns = DRAIN_NS;
    for (i, spec) in sim_specs(s, c, &t, bg_bps).iter().enumerate() {
        opts.flows.push(FlowSpec::parse(spec, i)?);
    }
    let r = Sim::new(&t, opts)?.run();
    let r: Value =
        serde_json::from_str(&r.pretty()).map_err(|e| format!("the simulator's report: {e}"))?;
    let flows = r["flows"].as_array().cloned().unwrap_or_default();
    let main = flows.first().cloned().unwrap_or(Value::Null);
    let (mut bg_sent, mut bg_lost) = (0, 0);
    for f in flows.iter().skip(1) {
        bg_sent += u(f, &["sent"]);
        bg_lost += u(f, &["lost"]);
    }
    let (mut sent_pfc, mut rx_pfc, mut paused_us) = (0, 0, 0);
    for sw in r["switches"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        for p in sw["ports"].as_object().into_iter().flat_map(|m| m.values()) {
            sent_pfc += u(p, &["pfc_pauses_sent"]);
            rx_pfc += u(p, &["pfc_pauses_received"]);
            paused_us += u(p, &["pfc_paused_us"]);
        }
    }
    for h in r["hosts"].as_object().into_iter().flat_map(|m| m.values()) {
        rx_pfc += u(h, &["pfc_pauses_received"]);
        paused_us += u(h, &["pfc_paused_us"]);
    }
    // Over the senders' time: what arrived by its end (a PFC run drains for seconds after it,
    // and its pause frames and the feedback are no data).
    let frame_bits = ((s.size + 42) * 8) as f64;
    let in_window = |f: &Value| u(f, &["received_in_window"]) as f64 * frame_bits / s.seconds;
    let util = flows
        .iter()
        .filter(|f| f["dst"] == MAIN.1)
        .map(in_window)
        .sum::<f64>()
        / s.link_bps as f64;
    let row = Row {
        config: c.name.into(),
        bg_bps,
        sent: u(&main, &["sent"]),
        loss: u(&main, &["lost"]) as f64 / u(&main, &["sent"]).max(1) as f64,
        latency_us: (
            f64_at(&main, &["latency_us", "p50"]),
            f64_at(&main, &["latency_us", "p99"]),
        ),
        goodput_bps: in_window(&main),
        offered_bps: s.scale(PAPER_FLOW_BPS) as f64,
        feedbacks: u(&main, &["qcn_rp", "feedbacks"]),
        pauses_sent: sent_pfc,
        pauses_received: rx_pfc,
        utilisation: util,
        bg_loss: bg_lost as f64 / bg_sent.max(1) as f64,
        bg_offered_bps: bg_offered_bps(s, t.hosts.len(), bg_bps),
        bg_delivered_bps: flows.iter().skip(1).map(in_window).sum(),
        paused_ms: paused_us as f64 / 1000.0,
        fidelity: crate::experiment::fidelity::no_verdict(),
    };
    Ok((row, r))
}

/// E10 at one point in namespaces: brings the fabric up with `opts`, programs it, runs the hosts'
/// tools (files in `dir`), and tears it down. Returns the row and the runner's report.
pub fn netns(
    s: &Setup,
    c: &Config,
    bg_bps: u64,
    opts: &Options,
    dir: &Path,
    progress: impl FnMut(&str),
) -> anyhow::Result<(Row, Value)> {
    let t = topology(s, c);
    let f = crate::sweep::bring_up(&t, opts, progress)?;
    f.program()?;
    let plan = Plan {
        senders: if c.tcp {
            Vec::new()
        } else {
            vec![Sender {
                src: MAIN.0.into(),
                dst: MAIN.1.into(),
                rate_bps: s.scale(PAPER_FLOW_BPS),
            }]
        },
        background: Some(Background {
            rates: vec![bg_bps],
            mean_bytes: s.mean_bytes,
            seed: s.seed,
        }),
        seconds: s.seconds,
        size: s.size,
        link_bps: s.link_bps,
        rp: c.rp,
        np: c.np,
        // Paced as the two-point congestion point paces its feedback (see `sim_specs`).
        np_interval_us: programs::p4qcn::base_rtt_us(&t),
    };
    let (r, tcp) = std::thread::scope(|sc| {
        let tcp = c.tcp.then(|| sc.spawn(|| iperf3(&f, s, dir)));
        let r = qcn::run(&f, &plan, dir);
        (r, tcp.map(|j| j.join()))
    });
    let r = r?;
    let tcp = match tcp {
        Some(Ok(v)) => Some(v?),
        Some(Err(_)) => anyhow::bail!("the iperf3 thread panicked"),
        None => None,
    };
    let (mut sent_pfc, mut rx_pfc) = (0, 0);
    for sw in r["switches"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        for p in sw.as_object().into_iter().flat_map(|m| m.values()) {
            sent_pfc += u(p, &["pfc_tx"]);
            rx_pfc += u(p, &["pfc_rx"]);
        }
    }
    let util = f64_at(&r, &["utilisation", MAIN.1]).unwrap_or(0.0);
    let bg_loss = f64_at(&r, &["background", "loss"]).unwrap_or(0.0);
    let frame_bits = ((s.size + 42) * 8) as f64;
    let bg_offered = bg_offered_bps(s, t.hosts.len(), bg_bps);
    let bg_delivered = u(&r, &["background", "received_in_window"]) as f64 * frame_bits / s.seconds;
    let paused_ms = u(&r, &["pfc_paused_us"]) as f64 / 1000.0;
    let fidelity = crate::experiment::fidelity::verdict_of(&r);
    let row = match &tcp {
        Some(j) => {
            let snd = &j["end"]["streams"][0]["sender"];
            let segs = u(snd, &["bytes"]) / 1448;
            Row {
                config: c.name.into(),
                bg_bps,
                sent: segs,
                loss: u(snd, &["retransmits"]) as f64 / segs.max(1) as f64,
                latency_us: (f64_at(snd, &["mean_rtt"]), None),
                goodput_bps: f64_at(&j["end"]["sum_received"], &["bits_per_second"]).unwrap_or(0.0),
                offered_bps: s.scale(PAPER_FLOW_BPS) as f64,
                feedbacks: 0,
                pauses_sent: sent_pfc,
                pauses_received: rx_pfc,
                utilisation: util,
                bg_loss,
                bg_offered_bps: bg_offered,
                bg_delivered_bps: bg_delivered,
                paused_ms,
                fidelity: fidelity.clone(),
            }
        }
        None => {
            let m = &r["senders"][0];
            Row {
                config: c.name.into(),
                bg_bps,
                sent: u(m, &["sent"]),
                loss: f64_at(m, &["loss"]).unwrap_or(0.0),
                latency_us: (
                    f64_at(m, &["latency_us", "p50"]),
                    f64_at(m, &["latency_us", "p99"]),
                ),
                goodput_bps: u(m, &["received_in_window"]) as f64 * frame_bits / s.seconds,
                offered_bps: s.scale(PAPER_FLOW_BPS) as f64,
                feedbacks: u(m, &["feedbacks_received"]),
                pauses_sent: sent_pfc,
                pauses_received: rx_pfc,
                utilisation: util,
                bg_loss,
                bg_offered_bps: bg_offered,
                bg_delivered_bps: bg_delivered,
                paused_ms,
                fidelity: fidelity.clone(),
            }
        }
    };
    let mut report = r;
    if let Some(j) = tcp {
        report["tcp"] = j;
    }
    Ok((row, report))
}

/// The TCP configuration's flow: iperf3 (cubic) from host11 to host41 at the flow's rate, its
/// JSON report.
fn iperf3(f: &Fabric, s: &Setup, dir: &Path) -> anyhow::Result<Value> {
    let dst = f
        .topo
        .hosts
        .iter()
        .find(|h| h.name == MAIN.1)
        .ok_or_else(|| anyhow::anyhow!("no host41"))?
        .ipv4
        .to_string();
    let log = dir.join("iperf3-server.log");
    let _server = crate::Process::spawn(f.ns(MAIN.1), "iperf3", &["-s", "-1", "-B", &dst], &log)
        .with_context(|| format!("iperf3 server on host {}", MAIN.1))?;
    f.ns(MAIN.1)
        .wait_listening(5201, std::time::Duration::from_secs(30))
        .with_context(|| format!("iperf3 server on host {}", MAIN.1))?;
    let out = f
        .ns(MAIN.0)
        .exec(
            "iperf3",
            &[
                "-c",
                &dst,
                "-J",
                "-C",
                "cubic",
                "-t",
                &format!("{}", s.seconds.ceil() as u64),
                "-b",
                &s.scale(PAPER_FLOW_BPS).to_string(),
            ],
        )
        .with_context(|| format!("iperf3 client on host {}", MAIN.0))?;
    serde_json::from_slice(&out.stdout).context("iperf3 -J")
}

fn opt(v: Option<f64>) -> String {
    v.map_or("—".into(), |x| format!("{x:.0}"))
}

/// The rows as a Markdown table. The TCP configuration's latency is iperf3's mean RTT (marked
/// "RTT"), the others' one-way latency of the measured flow; rates are offered against
/// delivered within the senders' time.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| config | background | sent | loss | latency p50 (µs) | p99 (µs) | offered / goodput \
         (Mb/s) | feedbacks | PFC sent | PFC received | paused (ms) | host41 link use (data) \
         | background offered / delivered (Mb/s) | background loss | fidelity |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        let p50 = match r.config.as_str() {
            "tcp" => format!("RTT {}", opt(r.latency_us.0)),
            _ => opt(r.latency_us.0),
        };
        s += &format!(
            "| {} | {:.1} Mb/s | {} | {:.4} | {p50} | {} | {:.2} / {:.2} | {} | {} | {} | {:.1} \
             | {:.3} | {:.2} / {:.2} | {:.4} | {} |\n",
            r.config,
            r.bg_bps as f64 / 1e6,
            r.sent,
            r.loss,
            opt(r.latency_us.1),
            r.offered_bps / 1e6,
            r.goodput_bps / 1e6,
            r.feedbacks,
            r.pauses_sent,
            r.pauses_received,
            r.paused_ms,
            r.utilisation,
            r.bg_offered_bps / 1e6,
            r.bg_delivered_bps / 1e6,
            r.bg_loss,
            r.fidelity
        );
    }
    s
}

/// The median of `v` and the 95% percentile-bootstrap interval of the median (2,000 resamples
/// from a fixed seed, so a table is the same every time; None for fewer than 2 values), as the
/// analysis scripts compute it (`scripts/pisa_analysis/stats.py`).
pub fn median_ci(v: &[f64]) -> Option<(f64, Option<(f64, f64)>)> {
    fn median(v: &mut [f64]) -> f64 {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    }
    if v.is_empty() {
        return None;
    }
    let m = median(&mut v.to_vec());
    if v.len() < 2 {
        return Some((m, None));
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    const RESAMPLES: usize = 2000;
    let mut meds: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let mut r: Vec<f64> = (0..v.len())
                .map(|_| v[(next() % v.len() as u64) as usize])
                .collect();
            median(&mut r)
        })
        .collect();
    meds.sort_by(f64::total_cmp);
    let at = |q: f64| meds[((q * RESAMPLES as f64) as usize).min(RESAMPLES - 1)];
    Some((m, Some((at(0.025), at(0.975)))))
}

/// `median [lo, hi]` of `v` with `digits` decimals (`—` for no value).
pub fn median_cell(v: &[f64], digits: usize) -> String {
    match median_ci(v) {
        None => "—".into(),
        Some((m, None)) => format!("{m:.digits$}"),
        Some((m, Some((lo, hi)))) => format!("{m:.digits$} [{lo:.digits$}, {hi:.digits$}]"),
    }
}

/// E10's table over repetitions: one row per (configuration, background level) in the order
/// the points ran, each cell the median over the repetitions and its interval.
pub fn table_over_reps(rows: &[(&sweep::Point, Row)]) -> String {
    let mut s = String::from(
        "| config | background | reps | loss | latency p50 (µs) | p99 (µs) | offered (Mb/s) | \
         goodput (Mb/s) | PFC sent | paused (ms) | host41 link use (data) | background \
         offered (Mb/s) | background delivered (Mb/s) | fidelity ok |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut keys: Vec<(&str, u64)> = Vec::new();
    for (_, r) in rows {
        if !keys.contains(&(r.config.as_str(), r.bg_bps)) {
            keys.push((r.config.as_str(), r.bg_bps));
        }
    }
    for (config, bg) in keys {
        let of: Vec<&Row> = rows
            .iter()
            .map(|(_, r)| r)
            .filter(|r| r.config == config && r.bg_bps == bg)
            .collect();
        let col = |f: &dyn Fn(&Row) -> Option<f64>, digits: usize| {
            median_cell(&of.iter().filter_map(|r| f(r)).collect::<Vec<_>>(), digits)
        };
        let p50 = col(&|r| r.latency_us.0, 0);
        let ok = of
            .iter()
            .filter(|r| r.fidelity == "ok" || r.fidelity == "-")
            .count();
        s += &format!(
            "| {config} | {:.1} Mb/s | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {ok}/{} |\n",
            bg as f64 / 1e6,
            of.len(),
            col(&|r| Some(r.loss), 4),
            if config == "tcp" {
                format!("RTT {p50}")
            } else {
                p50
            },
            col(&|r| r.latency_us.1, 0),
            col(&|r| Some(r.offered_bps / 1e6), 2),
            col(&|r| Some(r.goodput_bps / 1e6), 2),
            col(&|r| Some(r.pauses_sent as f64), 0),
            col(&|r| Some(r.paused_ms), 1),
            col(&|r| Some(r.utilisation), 3),
            col(&|r| Some(r.bg_offered_bps / 1e6), 2),
            col(&|r| Some(r.bg_delivered_bps / 1e6), 2),
            of.len(),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_scale_with_the_link_and_configs_differ_only_in_programs() {
        let s = Setup::paper(700_000_000, 1.0);
        assert_eq!(s.scale(PAPER_FLOW_BPS), 400_000_000);
        assert_eq!(s.scale(5_000_000), 500_000_000);
        let t = topology(&s, &config_named("p4qcn+pfc").unwrap());
        assert_eq!(t.switches.len(), 10);
        assert_eq!(t.hosts.len(), 8);
        for sw in &t.switches {
            assert_eq!(sw.program, "p4qcn-pfc");
            assert_eq!(sw.params["q_pfc"], "14");
            assert_eq!(sw.params["q_min"], "11");
        }
        assert!(
            !topology(&s, &CONFIGS[0]).switches[0]
                .params
                .contains_key("q_pfc")
        );
    }

    #[test]
    fn the_sim_runs_at_the_papers_rate_and_p4qcn_loses_less_than_udp() {
        // Over 2 s one flow's loss is noisy (UDP's measured flow may be lucky); the claim is
        // about the traffic: the background, most of it, loses far less, and the measured flow
        // little.
        let s = Setup::paper(7_000_000, 2.0);
        let (udp, _) = sim(&s, &CONFIGS[0], 5_000_000).unwrap();
        let (qcn, r) = sim(&s, &config_named("p4qcn").unwrap(), 5_000_000).unwrap();
        let trace = &r["flows"][0]["qcn_rp"]["trace_t_us_rc_rt_state"];
        assert!(udp.sent > 500 && qcn.sent > 100, "{udp:?} {qcn:?}");
        assert!(qcn.feedbacks > 0, "{qcn:?}");
        assert!(qcn.bg_loss * 2.0 < udp.bg_loss, "{qcn:?} against {udp:?}");
        assert!(qcn.loss < 0.05, "{qcn:?}");
        assert!(trace.as_array().is_some_and(|t| !t.is_empty()));
        assert!(
            sim(&s, &CONFIGS[1], 5_000_000).is_err(),
            "tcp is namespaces only"
        );
    }

    /// TCP's latency is iperf3's mean RTT, the others' one-way latency: its cells say "RTT"
    /// in both tables, so that the two are never read as one measure.
    #[test]
    fn the_tcp_rows_latency_is_labelled_an_rtt() {
        let row = |config: &str| -> Row {
            serde_json::from_value(serde_json::json!({
                "config": config, "bg_bps": 2_000_000, "sent": 10, "loss": 0.0,
                "latency_us": [1500.0, 2500.0], "goodput_bps": 1e6, "offered_bps": 1e6,
                "feedbacks": 0, "pauses_sent": 0, "pauses_received": 0, "utilisation": 0.5,
                "bg_loss": 0.0, "bg_offered_bps": 2e6, "bg_delivered_bps": 2e6, "paused_ms": 0.0,
                "fidelity": "ok"
            }))
            .unwrap()
        };
        let one = table(&[row("tcp"), row("p4qcn")]);
        let lines: Vec<&str> = one.lines().skip(2).collect();
        assert!(lines[0].contains("| RTT 1500 |"), "{one}");
        assert!(!lines[1].contains("RTT"), "{one}");
        let point = |config: &str| sweep::Point {
            at: sweep::Where::Netns,
            config: config_named(config).unwrap(),
            bg: 2_000_000,
            threshold: None,
            rep: 1,
        };
        let (tcp, qcn) = (point("tcp"), point("p4qcn"));
        let reps = table_over_reps(&[(&tcp, row("tcp")), (&qcn, row("p4qcn"))]);
        let lines: Vec<&str> = reps.lines().skip(2).collect();
        assert!(lines[0].contains("| RTT 1500 |"), "{reps}");
        assert!(!lines[1].contains("RTT"), "{reps}");
    }

    #[test]
    fn the_median_and_its_interval_over_repetitions() {
        assert_eq!(median_ci(&[]), None);
        assert_eq!(median_ci(&[3.0]), Some((3.0, None)));
        let (m, ci) = median_ci(&[1.0, 2.0, 3.0, 4.0, 100.0]).unwrap();
        let (lo, hi) = ci.unwrap();
        assert_eq!(m, 3.0);
        assert!(lo >= 1.0 && lo <= m && hi >= m && hi <= 100.0, "{lo} {hi}");
        // Identical values: a point interval.
        assert_eq!(median_ci(&[2.0; 4]), Some((2.0, Some((2.0, 2.0)))));
        assert_eq!(median_cell(&[1.0, 1.0], 1), "1.0 [1.0, 1.0]");
        assert_eq!(median_cell(&[], 1), "—");
    }

    /// Issue 33: rates over the senders' time, data only, and the three-point NP paced as the
    /// two-point congestion point paces its feedback.
    #[test]
    fn rates_are_data_over_the_senders_time_and_the_notification_point_is_paced() {
        let s = Setup::paper(7_000_000, 2.0);
        let (pfc, r) = sim(&s, &config_named("pfc").unwrap(), 5_000_000).unwrap();
        // PFC holds packets past the senders' time; the run drains on.
        let ended = u(&r, &["now_us"]) as f64 / 1e6;
        assert!(ended > s.seconds, "ended at {ended} s");
        // Host41's link use is its flows' data that arrived within the 2 s, over the link's
        // capacity for them: no pause frame, no drain.
        let frame_bits = ((s.size + 42) * 8) as f64;
        let data: u64 = r["flows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["dst"] == MAIN.1)
            .map(|f| u(f, &["received_in_window"]))
            .sum();
        let want = data as f64 * frame_bits / (s.link_bps as f64 * s.seconds);
        assert!((pfc.utilisation - want).abs() < 1e-9, "{pfc:?}");
        // At most the link's capacity, give or take the last frame (counted as it starts to
        // arrive).
        let one_frame = frame_bits / (s.link_bps as f64 * s.seconds);
        assert!(
            pfc.utilisation > 0.0 && pfc.utilisation <= 1.0 + one_frame,
            "{pfc:?}"
        );
        assert!(pfc.paused_ms > 0.0, "{pfc:?}");
        assert!(pfc.bg_delivered_bps > 0.0 && pfc.bg_delivered_bps < pfc.bg_offered_bps);
        assert_eq!(pfc.offered_bps, s.scale(PAPER_FLOW_BPS) as f64);
        assert!(pfc.goodput_bps <= pfc.offered_bps * 1.01, "{pfc:?}");
        // Three-point: at most one NP answer per flow per pacing interval.
        let c = config_named("three-point").unwrap();
        let every_us = programs::p4qcn::base_rtt_us(&topology(&s, &c));
        let (_, r) = sim(&s, &c, 5_000_000).unwrap();
        let most = (ended * 1e6 / every_us as f64).ceil() as u64 + 1;
        let answers: Vec<u64> = r["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| u(f, &["np_feedbacks_sent"]))
            .collect();
        assert!(answers[0] > 0, "{answers:?}");
        assert!(
            answers.iter().all(|&n| n <= most),
            "{answers:?}, at most {most}"
        );
    }
}
