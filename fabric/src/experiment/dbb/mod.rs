//! DBB's experiments E8 and E9 (issue 13, DBB §IV) in namespaces with kernel TCP: long-lived
//! paced flows from `pisa-traffic` between four host pairs, the paper's scenarios A-D
//! (DBB §IV) with every rate scaled to the stage capacity, on
//! - **E8:** `topo::dbb`, four equal parallel paths per stage (our reading of the paper's Fig. 6);
//! - **E9:** the paper's Fig. 5, its link capacities (5, 20, 2.5, 2.5, 7.5, 12.5, 10, 15 Gb/s) in
//!   the same proportions at `unit` bits/s per paper Gb/s, four hosts at either end.
//!
//! A point is one (scheme, scenario, rep) on a fresh fabric. It measures
//! - goodput over the all-active window, from the receivers' `bytes_received` of every connection
//!   (`ss -ti` in the receiver namespaces at the window's two ends), per pair and in total;
//! - each flow's goodput over its own life and its out-of-order packets and segments (the
//!   receiver's `TCP_INFO`), its retransmissions, DSACKs and reordering events (the sender's);
//! - the namespaces' TCP counters (`/proc/net/snmp` and `/proc/net/netstat`) of senders and
//!   receivers over the run;
//! - the packets each forward link sent (`egress.port_tx` over P4Runtime), as shares of its
//!   stage against the compiler's `N_ij / N`;
//! - the kernel's reordering settings, read in a sender namespace.
//!
//! [`sim`] runs E9 in `pisa-sim` instead, with two UDP flows on the same Fig. 5.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use analysis::dbb::compile;
use anyhow::{Context as _, anyhow, bail};
use programs::dbb::compiler_links;
use serde_json::{Value, json};
use topo::{self, End, GenProps, LinkProps, Topology};

use super::{admin, port_queues, port_tx_packets, start_servers};
use crate::fabric::{Fabric, Options};
use crate::traffic::{Job, PORT, Transport, unix_now_ns};
use crate::{Netns, Process, workspace_bin};

pub mod report;
pub mod sim;
pub mod sim_tcp;
pub mod sweep;

/// Which experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Four equal parallel paths per stage.
    E8,
    /// The paper's Fig. 5, unequal bandwidths.
    E9,
}

impl std::str::FromStr for Which {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "e8" | "E8" => Ok(Which::E8),
            "e9" | "E9" => Ok(Which::E9),
            _ => Err(format!("{s}: e8 or e9")),
        }
    }
}

impl Which {
    /// Its name in files and tables.
    pub fn name(self) -> &'static str {
        match self {
            Which::E8 => "e8",
            Which::E9 => "e9",
        }
    }
}

/// Fig. 5's forward links in tenths of a paper Gb/s (5, 20, 2.5, 2.5, 7.5, 12.5, 10, 15 Gb/s;
/// `docs/dbb/fig5.json`), with our ports.
const FIG5: [(&str, u16, &str, u16, u64); 8] = [
    ("s1", 1, "s2", 1, 50),
    ("s1", 2, "s3", 1, 200),
    ("s2", 2, "s4", 1, 25),
    ("s2", 3, "s5", 1, 25),
    ("s3", 2, "s4", 2, 75),
    ("s3", 3, "s5", 2, 125),
    ("s4", 3, "s6", 1, 100),
    ("s5", 3, "s6", 2, 150),
];

/// The experiment's fabric, before the scheme is set. E8: every fabric link at `rate_bps`; E9:
/// Fig. 5 at `rate_bps` per paper Gb/s (so 25 of them from source to sink). Hosts at
/// `host_bps`, every link `buffer` packets, no delay (the namespaces' veth pairs have none).
pub fn topology(w: Which, rate_bps: u64, host_bps: u64, buffer: u32) -> Topology {
    topology_with(
        w,
        &Links {
            rate_bps,
            host_bps,
            buffer,
            delay_us: 0,
        },
    )
}

/// The links of an E8 or E9 fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Links {
    /// E8: every fabric link's rate. E9: the rate of one paper Gb/s.
    pub rate_bps: u64,
    /// Every host link's rate.
    pub host_bps: u64,
    /// Every link's egress queue, packets.
    pub buffer: u32,
    /// Every link's propagation delay (`pisa-sim`; namespaces ignore it).
    pub delay_us: u64,
}

/// [`topology`] with every link's properties given, the delay included (E9 in `pisa-sim`).
pub fn topology_with(w: Which, l: &Links) -> Topology {
    let (rate_bps, host_bps) = (l.rate_bps, l.host_bps);
    let lp = |rate_bps| LinkProps {
        rate_bps,
        delay_us: l.delay_us,
        buffer: l.buffer,
    };
    match w {
        Which::E8 => topo::dbb(GenProps {
            host: lp(host_bps),
            fabric: lp(rate_bps),
        }),
        Which::E9 => {
            let mut text = String::new();
            for s in 1..=6 {
                text += &format!("switch s{s}\n");
            }
            for (i, (sw, subnet)) in [("s1", 1), ("s1", 1), ("s1", 1), ("s1", 1)]
                .iter()
                .chain(&[("s6", 6), ("s6", 6), ("s6", 6), ("s6", 6)])
                .enumerate()
            {
                let k = i % 4 + 1;
                text += &format!(
                    "host h{} ipv4=10.0.{subnet}.{k} ipv6=fd00::{subnet}:{k}\n\
                     link {sw}:{} h{}\n",
                    i + 1,
                    10 + k,
                    i + 1
                );
            }
            for (a, pa, b, pb, _) in FIG5 {
                text += &format!("link {a}:{pa} {b}:{pb}\n");
            }
            let mut t = Topology::parse(&text).unwrap_or_default();
            for l in &mut t.links {
                let rate = match (&l.a, &l.b) {
                    (End::Switch(a, pa), End::Switch(..)) => FIG5
                        .iter()
                        .find(|f| f.0 == a && f.1 == *pa)
                        .map_or(rate_bps, |f| rate_bps * f.4 / 10),
                    _ => host_bps,
                };
                l.props = lp(rate);
            }
            t
        }
    }
}

/// The four (source, destination) host pairs: the paper's for E8, the four hosts at either end of
/// Fig. 5 for E9.
pub fn pairs(w: Which) -> [(&'static str, &'static str); 4] {
    match w {
        Which::E8 => [("h1", "h9"), ("h3", "h10"), ("h6", "h11"), ("h8", "h12")],
        Which::E9 => [("h1", "h5"), ("h2", "h6"), ("h3", "h7"), ("h4", "h8")],
    }
}

/// Source and sink ToR of the pairs.
pub fn tors(w: Which) -> (&'static str, &'static str) {
    match w {
        Which::E8 => ("s1", "s8"),
        Which::E9 => ("s1", "s6"),
    }
}

/// Scenario C's rate ratios and D's packet size ratios, by connection index mod 10 (§IV-C, D).
pub const BW_RATIO: [f64; 10] = [0.5, 0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.4, 0.6, 0.5];
/// Scenario D's packet size ratios.
pub const PKT_SIZE_RATIO: [f64; 10] = [1.0, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.95];
/// IPv4 (20) + TCP (20) + timestamp option (12) bytes: a packet of `1500 r` bytes has an MSS of
/// `1500 r - 52`.
pub const HEADERS: u32 = 52;

/// One of the paper's scenarios, named as in the tables: `A50`, `A100` (load in % of the stage
/// capacity, one connection per pair, staggered), `B40`, `B400`, `C40`, `C400`, `D40`, `D400`
/// (that many connections in all). Other counts divisible by 4 are allowed (e.g. `B8`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// `A`..`D`.
    pub kind: char,
    /// A: load in percent; B-D: connections in all.
    pub n: u32,
}

impl std::str::FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut c = s.chars();
        let kind = c.next().map(|k| k.to_ascii_uppercase());
        let n: Option<u32> = c.as_str().parse().ok();
        match (kind, n) {
            (Some('A'), Some(1..=200)) => {}
            (Some('B' | 'C' | 'D'), Some(n @ 4..=800)) if n % 4 == 0 => {}
            _ => {
                return Err(format!(
                    "scenario {s}: A<load %> (1-200) or B/C/D<connections> (4-800, divisible \
                     by 4), e.g. A100, B40, C400"
                ));
            }
        }
        Ok(Scenario {
            name: s.to_ascii_uppercase(),
            kind: kind.unwrap_or('A'),
            n: n.unwrap_or(0),
        })
    }
}

/// One long-lived paced flow.
#[derive(Clone, Debug, PartialEq)]
pub struct Paced {
    /// Index into [`pairs`].
    pub pair: usize,
    /// Start after the epoch.
    pub start_ns: u64,
    /// How long it sends.
    pub duration_ns: u64,
    /// Its pacing cap.
    pub rate_bps: u64,
    /// Its MSS (0: the kernel's).
    pub mss: u32,
}

/// The flows of a scenario, with `capacity_bps` the stage capacity (the paper's 40 Gb/s) and
/// `step_s` the paper's 10 s. A: pair `i` starts at `i` steps and sends for 6 steps at `n`% of a
/// quarter of the capacity. B-D: every connection from 0 for 6 steps (the paper's 90 s are
/// shortened to the A scenarios' 60); connection `i` belongs to pair `i mod 4`; B at capacity /
/// `n` each, C at `2 capacity / n x BW_RATIO[i mod 10]`, D at `2 capacity / n` with packets of
/// `1500 PKT_SIZE_RATIO[i mod 10]` bytes (as the paper: D offers twice the capacity).
pub fn flows(s: &Scenario, capacity_bps: u64, step_s: f64) -> Vec<Paced> {
    let step = (step_s * 1e9) as u64;
    let cap = capacity_bps as f64;
    match s.kind {
        'A' => (0..4)
            .map(|i| Paced {
                pair: i,
                start_ns: i as u64 * step,
                duration_ns: 6 * step,
                rate_bps: (cap * f64::from(s.n) / 100.0 / 4.0) as u64,
                mss: 0,
            })
            .collect(),
        kind => (0..s.n as usize)
            .map(|i| {
                let base = cap / f64::from(s.n);
                let (rate, mss) = match kind {
                    'B' => (base, 0),
                    'C' => (2.0 * base * BW_RATIO[i % 10], 0),
                    _ => (
                        2.0 * base,
                        (1500.0 * PKT_SIZE_RATIO[i % 10]).round() as u32 - HEADERS,
                    ),
                };
                Paced {
                    pair: i % 4,
                    start_ns: 0,
                    duration_ns: 6 * step,
                    rate_bps: rate as u64,
                    mss,
                }
            })
            .collect(),
    }
}

/// Moves every flow's start later by a uniform draw in `[0, spread_ns)` from `seed`'s sequence
/// (in flow order), so that connections the paper starts together do not start at one instant:
/// `--start-spread`, the test of whether phase-locked senders decide a result. The window
/// follows ([`window`]: it opens after the last start).
pub fn spread_starts(flows: &mut [Paced], spread_ns: u64, seed: u64) {
    if spread_ns == 0 {
        return;
    }
    let mut rng = pipeline::externs::Rng::new(seed);
    for f in flows {
        f.start_ns += rng.range(0, spread_ns - 1);
    }
}

/// Settling time after the last start before the window opens.
pub const WARM_NS: u64 = 500_000_000;
/// Margin before the first end.
pub const MARGIN_NS: u64 = 250_000_000;

/// The all-active window: from the last start plus [`WARM_NS`] to the first end minus
/// [`MARGIN_NS`]; `None` if that is empty.
pub fn window(f: &[Paced]) -> Option<(u64, u64)> {
    let a = f.iter().map(|p| p.start_ns).max()? + WARM_NS;
    let b = f
        .iter()
        .map(|p| p.start_ns + p.duration_ns)
        .min()?
        .checked_sub(MARGIN_NS)?;
    (b > a).then_some((a, b))
}

/// The stage capacity of the fabric between the pairs' ToRs: the compiler's max-flow, in bits/s.
/// Also each forward link's `N_ij / N`, keyed `switch:port`, and its stage.
/// In the compiler's link order (the topology's).
pub fn expected_shares(t: &Topology, w: Which) -> Result<(u64, Vec<Share>), String> {
    let (src, dst) = tors(w);
    let (links, _) = compiler_links(t);
    let input = analysis::dbb::Input {
        source: src.into(),
        sink: dst.into(),
        links,
    };
    let out = compile(&input).map_err(|e| format!("{src} -> {dst}: {e:?}"))?;
    let mut m = Vec::new();
    for lp in &out.link_packets {
        let id = input.links[lp.link].hop_label().to_string();
        m.push((id, lp.stage, lp.packets as f64 / out.n as f64));
    }
    let cap = out.max_flow.numer() as f64 / out.max_flow.denom() as f64;
    Ok((cap as u64, m))
}

/// A forward link (`switch:port`), its stage and its `N_ij / N`.
pub type Share = (String, usize, f64);

/// What the hosts run: the transport, and sysctls set in every sender and receiver namespace
/// before the flows start (after the servers listen).
#[derive(Clone, Debug)]
pub struct HostSetup {
    /// Congestion control and ECN.
    pub transport: Transport,
    /// `(key, value)`, e.g. `("net.ipv4.tcp_min_tso_segs", "1")`.
    pub sysctls: Vec<(String, String)>,
}

/// The kernel settings recorded with every run.
pub const SYSCTLS: [&str; 7] = [
    "net.ipv4.tcp_reordering",
    "net.ipv4.tcp_min_tso_segs",
    "net.ipv4.tcp_max_reordering",
    "net.ipv4.tcp_recovery",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_dsack",
    "net.ipv4.tcp_congestion_control",
];

/// `SYSCTLS` as a namespace sees them.
pub fn sysctls(ns: &Netns) -> BTreeMap<String, String> {
    crate::traffic::sysctls_of(ns, &SYSCTLS)
}

/// The TCP counters of a namespace (`Tcp:` of `/proc/net/snmp`, `TcpExt:` of
/// `/proc/net/netstat`), as `Tcp.RetransSegs`, `TcpExt.TCPSACKReorder`, ...
pub fn tcp_counters(ns: &Netns) -> BTreeMap<String, u64> {
    let text = ns
        .exec("cat", &["/proc/net/snmp", "/proc/net/netstat"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    parse_counters(&text)
}

/// Parses `/proc/net/snmp`-style text: pairs of lines `Group: names...` and `Group: values...`.
/// Lines that do not pair up are skipped; only the `Tcp` and `TcpExt` groups are kept.
pub fn parse_counters(text: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for w in lines.windows(2) {
        let (Some((g1, names)), Some((g2, vals))) = (w[0].split_once(':'), w[1].split_once(':'))
        else {
            continue;
        };
        if g1 != g2 || !matches!(g1, "Tcp" | "TcpExt") {
            continue;
        }
        let vals: Vec<&str> = vals.split_whitespace().collect();
        if vals.iter().any(|v| v.parse::<i64>().is_err()) {
            continue; // this is the names line of the next pair
        }
        for (n, v) in names.split_whitespace().zip(vals) {
            m.insert(
                format!("{g1}.{n}"),
                v.parse::<i64>().unwrap_or(0).max(0) as u64,
            );
        }
    }
    m
}

/// `bytes_received` of every established connection to `port`, by peer `addr:port`, from
/// `ss -tinH` output.
pub fn parse_ss(text: &str, port: u16) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let mut peer: Option<String> = None;
    let local_suffix = format!(":{port}");
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if !l.starts_with([' ', '\t']) {
            // [State] Recv-Q Send-Q Local Peer (a state filter leaves the state out)
            peer = w
                .iter()
                .position(|x| x.ends_with(&local_suffix))
                .and_then(|i| w.get(i + 1))
                .map(|p| p.to_string());
            continue;
        }
        if let Some(p) = &peer
            && let Some(b) = w.iter().find_map(|x| x.strip_prefix("bytes_received:"))
        {
            m.insert(p.clone(), b.parse().unwrap_or(0));
            peer = None;
        }
    }
    m
}

/// Samples `bytes_received` in every receiver namespace at once; each with the time it was read.
fn sample_receivers(f: &Fabric, rx: &[String]) -> Vec<(BTreeMap<String, u64>, Instant)> {
    std::thread::scope(|s| {
        let hs: Vec<_> = rx
            .iter()
            .map(|h| {
                s.spawn(move || {
                    let t0 = Instant::now();
                    let out = f
                        .ns(h)
                        .exec("ss", &["-tinH", "state", "established"])
                        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                        .unwrap_or_default();
                    let t = t0 + (Instant::now() - t0) / 2;
                    (parse_ss(&out, PORT), t)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| (BTreeMap::new(), Instant::now()))
            })
            .collect()
    })
}

fn sum_counters(f: &Fabric, hosts: &[String]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for h in hosts {
        for (k, v) in tcp_counters(f.ns(h)) {
            *m.entry(k).or_insert(0) += v;
        }
    }
    m
}

fn diff(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Value {
    Value::Object(
        b.iter()
            .map(|(k, v)| (k.clone(), json!(v.saturating_sub(*a.get(k).unwrap_or(&0)))))
            .collect(),
    )
}

/// One point: `t` has every switch's scheme set. Brings the fabric up with `up`, programs it,
/// runs `flows` between `pairs`, and tears it down; files in `dir`. Returns the report (the
/// `report` module reads it).
pub fn run_point(
    w: Which,
    t: &Topology,
    flows: &[Paced],
    hosts: &HostSetup,
    opts: &Options,
    dir: &Path,
    up: &dyn Fn(&Topology, &Options) -> anyhow::Result<Fabric>,
) -> anyhow::Result<Value> {
    let pairs = pairs(w);
    let (win_a, win_b) =
        window(flows).ok_or_else(|| anyhow!("the flows have no all-active window"))?;
    let (capacity, expected) = expected_shares(t, w).map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut f = up(t, opts)?;
    f.program()?;
    let host = |n: &str| {
        t.hosts
            .iter()
            .find(|h| h.name == n)
            .ok_or_else(|| anyhow!("no host {n}"))
    };
    let senders: Vec<String> = pairs.iter().map(|p| p.0.to_string()).collect();
    let receivers: Vec<String> = pairs.iter().map(|p| p.1.to_string()).collect();
    let bin = workspace_bin("pisa-traffic");
    let bin = bin.to_str().unwrap_or_default();
    let transport = &hosts.transport;
    let targs = transport.args();
    let targs: Vec<&str> = targs.iter().map(String::as_str).collect();
    let servers = start_servers(&f, &receivers, &targs, dir)?;
    for h in senders.iter().chain(&receivers) {
        for (k, v) in &hosts.sysctls {
            let o = f
                .ns(h)
                .exec("sysctl", &["-w", &format!("{k}={v}")])
                .with_context(|| format!("{h}: sysctl {k}={v}"))?;
            if !o.status.success() {
                bail!(
                    "{h}: sysctl {k}={v}: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
            }
        }
    }
    let mut settings = sysctls(f.ns(&senders[0]));
    let asked: Vec<&str> = hosts.sysctls.iter().map(|(k, _)| k.as_str()).collect();
    settings.extend(crate::traffic::sysctls_of(f.ns(&senders[0]), &asked));
    let snd0 = sum_counters(&f, &senders);
    let rcv0 = sum_counters(&f, &receivers);
    let tx0 = port_tx_packets(&f)?;
    let mut sched: BTreeMap<&str, String> = BTreeMap::new();
    for (i, p) in flows.iter().enumerate() {
        let (s, d) = pairs[p.pair];
        let job = Job::Paced {
            id: i as u64,
            dst: d.into(),
            addr: std::net::SocketAddr::from((host(d)?.ipv4, PORT)),
            start_ns: p.start_ns,
            duration_ns: p.duration_ns,
            rate_bps: p.rate_bps,
            mss: p.mss,
            tos: 0,
        };
        *sched.entry(s).or_default() += &(job.line() + "\n");
    }
    // The fidelity monitors, from before the clients start.
    let watch = super::fidelity::Watch::start(&f)?;
    let epoch = unix_now_ns() + 1_500_000_000;
    let epoch_at = Instant::now() + Duration::from_millis(1500);
    let epoch_s = epoch.to_string();
    let mut clients = Vec::new();
    for (h, text) in &sched {
        let file = dir.join(format!("{h}.sched"));
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
        let (out, paced) = (
            dir.join(format!("{h}.csv")),
            dir.join(format!("{h}-paced.csv")),
        );
        let args = [
            "client",
            "--schedule",
            file.to_str().unwrap_or_default(),
            "--src",
            h,
            "--out",
            out.to_str().unwrap_or_default(),
            "--paced-out",
            paced.to_str().unwrap_or_default(),
            "--epoch-ns",
            &epoch_s,
            "--drain",
            "20",
        ];
        let args = [&args[..], &targs[..]].concat();
        clients.push(
            Process::spawn(f.ns(h), bin, &args, &dir.join(format!("client-{h}.log")))
                .with_context(|| format!("pisa-traffic client on host {h}"))?,
        );
    }
    let wait_until = |at: Instant, f: &mut Fabric| -> anyhow::Result<()> {
        while Instant::now() < at {
            if opts.cancel.load(Ordering::Relaxed) {
                bail!("cancelled");
            }
            let dead = f.dead_switches();
            if !dead.is_empty() {
                bail!("switches exited during the run: {}", dead.join(", "));
            }
            std::thread::sleep(Duration::from_millis(20).min(at - Instant::now()));
        }
        Ok(())
    };
    wait_until(epoch_at + Duration::from_nanos(win_a), &mut f)?;
    let s_a = sample_receivers(&f, &receivers);
    let tx_a = port_tx_packets(&f)?;
    wait_until(epoch_at + Duration::from_nanos(win_b), &mut f)?;
    let s_b = sample_receivers(&f, &receivers);
    let tx_b = port_tx_packets(&f)?;
    let last = flows
        .iter()
        .map(|p| p.start_ns + p.duration_ns)
        .max()
        .unwrap_or(0);
    let limit = epoch_at + Duration::from_nanos(last) + Duration::from_secs(30);
    while clients.iter_mut().any(Process::running) {
        if Instant::now() > limit {
            bail!("the clients did not finish within 30 s of the last end");
        }
        wait_until(Instant::now() + Duration::from_millis(100), &mut f)?;
    }
    let measured = watch.finish(&f, Some(&dir.join("fidelity.txt")))?;
    let tx1 = port_tx_packets(&f)?;
    let ports = super::counters::show_ports(&f)?;
    let snd1 = sum_counters(&f, &senders);
    let rcv1 = sum_counters(&f, &receivers);
    let (mut tm_drops, mut program_drops) = (0u64, 0u64);
    for s in &t.switches {
        let sock = opts.dir.join(format!("{}.sock", s.name));
        for &port in t
            .ports()
            .get(s.name.as_str())
            .map(|m| m.keys().copied().collect::<Vec<_>>())
            .unwrap_or_default()
            .iter()
        {
            tm_drops += port_queues(&sock, port).map(|q| q[1]).unwrap_or(0);
        }
        for l in admin(&sock, "show_drops").unwrap_or_default() {
            program_drops += l
                .split_whitespace()
                .nth(1)
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    drop(servers);
    for c in &mut clients {
        c.wait(Duration::ZERO);
    }
    drop(clients);
    f.stop_switches();
    drop(f);
    // Per pair: bytes over the window and its seconds. A connection missing from the first
    // sample (its handshake was late, e.g. a lost SYN) received all its bytes within the window;
    // one missing from the second is counted in `connections_end` (its bytes are not known).
    let mut win = Vec::new();
    for (i, (a, b)) in s_a.iter().zip(&s_b).enumerate() {
        let bytes: u64 =
            b.0.iter()
                .map(|(peer, nb)| nb.saturating_sub(a.0.get(peer).copied().unwrap_or(0)))
                .sum();
        let secs = (b.1 - a.1).as_secs_f64();
        win.push(json!({"pair": format!("{}>{}", pairs[i].0, pairs[i].1),
            "connections_start": a.0.len(), "connections_end": b.0.len(), "bytes": bytes,
            "seconds": secs, "start": a.0, "end": b.0,
            "goodput_bps": if secs > 0.0 { bytes as f64 * 8.0 / secs } else { 0.0 }}));
    }
    let links: Vec<Value> = expected
        .iter()
        .map(|(id, stage, share)| {
            let (sw, port) = id.split_once(':').unwrap_or((id, "0"));
            let key = (sw.to_string(), port.parse().unwrap_or(0));
            let d = |a: &BTreeMap<(String, u16), u64>, b: &BTreeMap<(String, u16), u64>| {
                b.get(&key)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(a.get(&key).copied().unwrap_or(0))
            };
            let mut l = json!({"link": id, "stage": stage, "expected_share": share,
                "packets": d(&tx0, &tx1), "window_packets": d(&tx_a, &tx_b)});
            let q = |name: &str| ports.get(&key)?.get(name).copied();
            if let (Some(p50), Some(p99), Some(max)) =
                (q("qdelay_p50_us"), q("qdelay_p99_us"), q("qdelay_max_us"))
            {
                l["qdelay_us"] = json!({"p50": p50, "p99": p99, "max": max});
            }
            l
        })
        .collect();
    let mut paced_rows = Vec::new();
    for h in sched.keys() {
        let p = dir.join(format!("{h}-paced.csv"));
        let text = std::fs::read_to_string(&p).map_err(|e| {
            let log =
                std::fs::read_to_string(dir.join(format!("client-{h}.log"))).unwrap_or_default();
            anyhow!("{}: {e} (client log: {})", p.display(), log.trim())
        })?;
        paced_rows.extend(report::parse_paced(&text).map_err(|e| anyhow!("{}: {e}", p.display()))?);
    }
    if paced_rows.len() != flows.len() {
        bail!(
            "{} flows scheduled but {} recorded",
            flows.len(),
            paced_rows.len()
        );
    }
    let mut r = report_head(w, capacity, flows, (win_a, win_b));
    for (k, v) in [
        ("window", json!(win)),
        ("flows", json!(paced_rows)),
        ("links", json!(links)),
        ("sender_counters", diff(&snd0, &snd1)),
        ("receiver_counters", diff(&rcv0, &rcv1)),
        ("sysctl", json!(settings)),
        ("tm_drops", json!(tm_drops)),
        ("program_drops", json!(program_drops)),
        (
            "transport",
            json!({"cc": transport.cc, "ecn": transport.ecn}),
        ),
        ("fidelity", super::fidelity::to_json(&measured)),
    ] {
        r[k] = v;
    }
    Ok(r)
}

/// What every point's report begins with, in namespaces and in `pisa-sim` alike: the
/// experiment, the stage capacity, the offer and the all-active window, s.
pub(super) fn report_head(w: Which, capacity: u64, flows: &[Paced], (a, b): (u64, u64)) -> Value {
    json!({
        "experiment": w.name(),
        "capacity_bps": capacity,
        "offered_bps": flows.iter().map(|p| p.rate_bps).sum::<u64>(),
        "window_s": [a as f64 / 1e9, b as f64 / 1e9],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_parse_and_bad_names_are_errors() {
        let s: Scenario = "c400".parse().unwrap();
        assert_eq!((s.kind, s.n, s.name.as_str()), ('C', 400, "C400"));
        for bad in ["", "A", "A0", "B41", "E40", "B", "Bx", "A300", "D0"] {
            assert!(bad.parse::<Scenario>().is_err(), "{bad}");
        }
    }

    #[test]
    fn scenario_rates_follow_the_paper_scaled_to_the_capacity() {
        let cap = 100_000_000;
        let a = flows(&"A100".parse().unwrap(), cap, 2.0);
        assert_eq!(a.len(), 4);
        assert!(
            a.iter()
                .all(|p| p.rate_bps == 25_000_000 && p.duration_ns == 12_000_000_000)
        );
        assert_eq!(a[3].start_ns, 6_000_000_000);
        assert_eq!(window(&a), Some((6_500_000_000, 11_750_000_000)));
        let b = flows(&"B40".parse().unwrap(), cap, 2.0);
        assert_eq!(b.iter().map(|p| p.rate_bps).sum::<u64>(), cap);
        assert_eq!(b.iter().filter(|p| p.pair == 3).count(), 10);
        // C: mean ratio 0.5, so the same total as B.
        let c = flows(&"C40".parse().unwrap(), cap, 2.0);
        assert_eq!(c.iter().map(|p| p.rate_bps).sum::<u64>(), cap);
        assert_eq!(c[1].rate_bps, 500_000);
        let d = flows(&"D40".parse().unwrap(), cap, 2.0);
        assert_eq!(d.iter().map(|p| p.rate_bps).sum::<u64>(), 2 * cap);
        assert_eq!((d[0].mss, d[1].mss, d[9].mss), (1448, 698, 1373));
        assert_eq!(window(&[]), None);
    }

    #[test]
    fn a_start_spread_moves_starts_within_it_by_the_seed_alone() {
        let d = flows(&"D40".parse().unwrap(), 100_000_000, 2.0);
        let mut a = d.clone();
        spread_starts(&mut a, 0, 7);
        assert_eq!(a, d);
        spread_starts(&mut a, 5_000_000, 7);
        assert!(a.iter().all(|p| p.start_ns < 5_000_000));
        let mut distinct: Vec<u64> = a.iter().map(|p| p.start_ns).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 30, "{distinct:?}");
        let mut b = d.clone();
        spread_starts(&mut b, 5_000_000, 7);
        assert_eq!(a, b);
        spread_starts(&mut b, 5_000_000, 8);
        assert_ne!(a, b);
        // The window opens after the last start.
        assert!(window(&a).unwrap().0 > window(&d).unwrap().0);
    }

    #[test]
    fn fig5_and_the_e8_fabric_give_the_papers_shares() {
        let t = topology(Which::E9, 4_000_000, 200_000_000, 64);
        let (cap, m) = expected_shares(&t, Which::E9).unwrap();
        assert_eq!(cap, 100_000_000);
        let share = |id: &str| m.iter().find(|x| x.0 == id).unwrap().2;
        // Table IV / N = 10.
        assert_eq!((share("s1:1"), share("s1:2")), (0.2, 0.8));
        assert_eq!((share("s3:3"), share("s5:3")), (0.5, 0.6));
        assert_eq!(m.len(), 8);
        let t = topology(Which::E8, 25_000_000, 50_000_000, 64);
        let (cap, m) = expected_shares(&t, Which::E8).unwrap();
        assert_eq!(cap, 100_000_000);
        assert_eq!(m.len(), 12);
        assert!(m.iter().all(|(_, _, s)| *s == 0.25));
        assert_eq!(m[0].0, "s1:9");
        assert!(t.hosts.iter().any(|h| h.name == "h12"));
    }

    #[test]
    fn counters_and_ss_output_parse() {
        let c = parse_counters(
            "Ip: Forwarding\nIp: 1\nTcp: RtoAlgorithm RetransSegs\nTcp: 1 17\n\
             TcpExt: TCPSACKReorder TCPDSACKRecv\nTcpExt: 5 -1\nbad\n",
        );
        assert_eq!(c["Tcp.RetransSegs"], 17);
        assert_eq!(c["TcpExt.TCPSACKReorder"], 5);
        assert_eq!(c["TcpExt.TCPDSACKRecv"], 0);
        assert!(!c.contains_key("Ip.Forwarding"));
        let ss = parse_ss(
            "0 0 10.0.8.1:5201 10.0.1.1:40000\n\t cubic wscale:7,7 bytes_received:1234 \
             segs_in:9\nESTAB 0 0 10.0.8.1:22 10.0.1.1:40001\n\t bytes_received:99\n\
             ESTAB 0 0 [fd00::8:1]:5201 [fd00::1:1]:40002\n\t bytes_received:x\n",
            5201,
        );
        assert_eq!(ss.len(), 2);
        assert_eq!(ss["10.0.1.1:40000"], 1234);
        assert_eq!(ss["[fd00::1:1]:40002"], 0);
        assert!(parse_ss("garbage\n\n", 5201).is_empty());
    }
}
