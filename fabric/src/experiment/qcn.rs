//! P4QCN's experiments in namespaces (issue 14, E10): `pisa-host` senders, sinks and background
//! traffic on a fabric that is up and programmed, and what they and the switches report.
//!
//! One [`run`] starts a `pisa-host sink` on every receiving host (every host when there is
//! background traffic, all on one port), waits for them to listen, starts every `rp-send` and
//! every host's `background` at once, waits for all, and returns one JSON object:
//! - `senders`: each sender's report (sent, refused, feedback packets taken, its RP's state) with
//!   the sink's view of the same flow (received, lost, reordered and how far, latency
//!   p50/p99/max) merged in;
//! - `background`: totals over every background flow (sent, received, lost);
//! - `switches`: per switch, the PFC frames each port sent and received (`show_ports`) and the
//!   bytes each port sent during the run (`egress.port_tx`);
//! - `utilisation`: per receiving host, the data its flows delivered within the senders' time
//!   (`received_in_window`: stamped datagrams, so no PFC or feedback frame) as frames, over the
//!   link's capacity for that time; `port_tx_bytes`: the bytes its switch port sent over the
//!   whole run, every frame included.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use serde_json::Value;

use super::port_tx_bytes;
use crate::fabric::Fabric;
use crate::host::FRAME_OVERHEAD;
use crate::workspace_bin;
use topo::End;

/// One `rp-send` flow.
#[derive(Clone, Debug)]
pub struct Sender {
    /// Sending host.
    pub src: String,
    /// Receiving host.
    pub dst: String,
    /// The application's rate (frame bits per second).
    pub rate_bps: u64,
}

/// The background traffic of a run.
#[derive(Clone, Debug)]
pub struct Background {
    /// Rates each flow draws from.
    pub rates: Vec<u64>,
    /// Mean flow size, frame bytes.
    pub mean_bytes: u64,
    /// Schedule seed.
    pub seed: u64,
}

/// What one run does.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The measured flows.
    pub senders: Vec<Sender>,
    /// Background from every host, if any.
    pub background: Option<Background>,
    /// How long the senders send.
    pub seconds: f64,
    /// UDP payload bytes.
    pub size: usize,
    /// The host link rate the RPs' R_AI and byte counter scale with.
    pub link_bps: u64,
    /// Senders pace by QCN's RP (false: plain UDP at their rate).
    pub rp: bool,
    /// Sinks act as the three-point baseline's NP.
    pub np: bool,
    /// At most one NP answer per flow per this many µs (0: every CE-marked packet).
    pub np_interval_us: u64,
}

/// The sinks' port.
pub const PORT: u16 = 9000;

/// About how long spawning the hosts' tools takes after `run` starts (a margin for the
/// measurement window's start, which the window's end follows).
const SPAWN_NS: u64 = 20_000_000;

fn parse(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}", path.display()))
}

/// The integer at `path` in `v`, 0 if there is none.
pub(super) fn u(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// The number at `path` in `v`.
pub(super) fn f64_at(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_f64()
}

/// (switch, port) -> (PFC frames received, sent).
pub type Pfc = BTreeMap<(String, u16), (u64, u64)>;
type Tx = BTreeMap<(String, u16), u64>;

/// Every port's PFC frames, from every switch's admin socket (`show_ports`).
pub fn pfc_frames(f: &Fabric) -> anyhow::Result<Pfc> {
    Ok(super::counters::show_ports(f)?
        .into_iter()
        .map(|(k, c)| {
            let n = |name: &str| c.get(name).copied().unwrap_or(0.0) as u64;
            (k, (n("pfc_rx"), n("pfc_tx")))
        })
        .collect())
}

/// The time every switch port has spent paused by received PFC, summed, µs (`show_ports`).
pub fn pfc_paused_us(f: &Fabric) -> anyhow::Result<u64> {
    Ok(super::counters::show_ports(f)?
        .values()
        .map(|c| c.get("pfc_paused_us").copied().unwrap_or(0.0) as u64)
        .sum())
}

/// The switch port and link rate facing host `h`.
fn host_port(f: &Fabric, h: &str) -> Option<(String, u16, u64)> {
    f.topo.links.iter().find_map(|l| match (&l.a, &l.b) {
        (End::Switch(s, p), End::Host(x)) | (End::Host(x), End::Switch(s, p)) if x == h => {
            Some((s.clone(), *p, l.props.rate_bps))
        }
        _ => None,
    })
}

/// Runs `plan` on `f` (up and programmed), files in `dir`.
pub fn run(f: &Fabric, plan: &Plan, dir: &Path) -> anyhow::Result<Value> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let ip = |h: &str| host_ipv4(f, h);
    let mut sinks: Vec<String> = if plan.background.is_some() {
        f.topo.hosts.iter().map(|h| h.name.clone()).collect()
    } else {
        plan.senders.iter().map(|s| s.dst.clone()).collect()
    };
    sinks.sort();
    sinks.dedup();
    let all: Vec<String> = f.topo.hosts.iter().map(|h| h.ipv4.to_string()).collect();
    let sink_secs = format!("{}", plan.seconds + 2.0);
    let secs = format!("{}", plan.seconds);
    let size = plan.size.to_string();
    let link = plan.link_bps.to_string();
    let pfc_before = pfc_frames(f)?;
    let paused_before = pfc_paused_us(f)?;
    let tx_before = port_tx_bytes(f)?;
    // The measurement window: the senders' time, from when they start (the servers' half
    // second of lead, `run_pisa_host`, and the time to spawn them, ms, after now).
    let window_end_ns =
        crate::host::now_ns() + 500_000_000 + (plan.seconds * 1e9) as u64 + SPAWN_NS;
    let mut servers: Vec<(String, Vec<String>)> = Vec::new();
    let mut clients: Vec<(String, Vec<String>)> = Vec::new();
    for h in &sinks {
        let mut a = vec![
            "sink".to_string(),
            "--listen".into(),
            format!("{}:{PORT}", ip(h)?),
            "--seconds".into(),
            sink_secs.clone(),
            "--out".into(),
            dir.join(format!("sink-{h}.json")).display().to_string(),
        ];
        if plan.np {
            a.push("--np".into());
            a.extend(["--np-interval-us".into(), plan.np_interval_us.to_string()]);
        }
        a.extend(["--window-end-ns".into(), window_end_ns.to_string()]);
        servers.push((h.clone(), a));
    }
    for (k, s) in plan.senders.iter().enumerate() {
        let mut a: Vec<String> = [
            "rp-send",
            "--to",
            &format!("{}:{PORT}", ip(&s.dst)?),
            "--rate",
            &s.rate_bps.to_string(),
            "--seconds",
            &secs,
            "--size",
            &size,
            "--link",
            &link,
            "--flow",
            &(k + 1).to_string(),
            "--out",
            &dir.join(format!("send-{k}.json")).display().to_string(),
            "--trace",
            &dir.join(format!("trace-{k}.csv")).display().to_string(),
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        if !plan.rp {
            a.push("--no-rp".into());
        }
        clients.push((s.src.clone(), a));
    }
    if let Some(b) = &plan.background {
        let rates: Vec<String> = b.rates.iter().map(u64::to_string).collect();
        for h in &f.topo.hosts {
            let mut a: Vec<String> = [
                "background",
                "--hosts",
                &all.join(","),
                "--self",
                &h.ipv4.to_string(),
                "--rates",
                &rates.join(","),
                "--seconds",
                &secs,
                "--mean-size",
                &b.mean_bytes.to_string(),
                "--seed",
                &b.seed.to_string(),
                "--port",
                &PORT.to_string(),
                "--size",
                &size,
                "--out",
                &dir.join(format!("bg-{}.json", h.name))
                    .display()
                    .to_string(),
            ]
            .iter()
            .map(|x| x.to_string())
            .collect();
            if plan.rp {
                a.extend(["--qcn-link".to_string(), link.clone()]);
            }
            clients.push((h.name.clone(), a));
        }
    }
    let watch = super::fidelity::Watch::start(f)?;
    run_pisa_host(f, servers, clients)?;
    let measured = watch.finish(f, Some(&dir.join("fidelity.txt")))?;
    let pfc_after = pfc_frames(f)?;
    let tx_after = port_tx_bytes(f)?;
    let mut v = summarise(
        f,
        plan,
        dir,
        &sinks,
        [&pfc_before, &pfc_after],
        [&tx_before, &tx_after],
    )?;
    v["fidelity"] = super::fidelity::to_json(&measured);
    v["pfc_paused_us"] = pfc_paused_us(f)?.saturating_sub(paused_before).into();
    Ok(v)
}

/// Host `h`'s IPv4 address in `f`'s topology.
pub(crate) fn host_ipv4(f: &Fabric, h: &str) -> anyhow::Result<String> {
    f.topo
        .hosts
        .iter()
        .find(|x| x.name == h)
        .map(|x| x.ipv4.to_string())
        .ok_or_else(|| anyhow!("no host {h}"))
}

/// Runs `pisa-host` in host namespaces, `(host, arguments)` each: every server first, then,
/// half a second later for them to bind (a margin on a loaded machine), every client. Returns
/// when all have exited, with the first failure.
pub(crate) fn run_pisa_host(
    f: &Fabric,
    servers: Vec<(String, Vec<String>)>,
    clients: Vec<(String, Vec<String>)>,
) -> anyhow::Result<()> {
    let bin = workspace_bin("pisa-host").display().to_string();
    std::thread::scope(|sc| {
        let spawn = |(ns, args): (String, Vec<String>)| {
            let bin = &bin;
            sc.spawn(move || {
                let a: Vec<&str> = args.iter().map(String::as_str).collect();
                f.ns(&ns)
                    .exec(bin, &a)
                    .map(|_| ())
                    .with_context(|| format!("pisa-host in host {ns}"))
            })
        };
        let mut jobs: Vec<_> = servers.into_iter().map(spawn).collect();
        std::thread::sleep(Duration::from_millis(500));
        jobs.extend(clients.into_iter().map(spawn));
        for j in jobs {
            j.join()
                .map_err(|_| anyhow!("a host tool thread panicked"))??;
        }
        Ok(())
    })
}

fn summarise(
    f: &Fabric,
    plan: &Plan,
    dir: &Path,
    sinks: &[String],
    pfc: [&Pfc; 2],
    tx: [&Tx; 2],
) -> anyhow::Result<Value> {
    let mut sink_flows: BTreeMap<(String, u64), Value> = BTreeMap::new();
    for h in sinks {
        let j = parse(&dir.join(format!("sink-{h}.json")))?;
        for fl in j["flows"].as_array().into_iter().flatten() {
            let src = fl["src"].as_str().unwrap_or("");
            let src_ip = src.split(':').next().unwrap_or("").to_string();
            sink_flows.insert((src_ip, u(fl, &["flow"])), fl.clone());
        }
    }
    let mut senders = Vec::new();
    for (k, s) in plan.senders.iter().enumerate() {
        let mut j = parse(&dir.join(format!("send-{k}.json")))?;
        let src_ip = f
            .topo
            .hosts
            .iter()
            .find(|h| h.name == s.src)
            .map(|h| h.ipv4.to_string())
            .unwrap_or_default();
        let rx = sink_flows.get(&(src_ip, k as u64 + 1));
        let received = rx.map_or(0, |r| u(r, &["received"]));
        j["received_in_window"] = rx.map_or(0, |r| u(r, &["received_in_window"])).into();
        let sent = u(&j, &["sent"]);
        j["src"] = s.src.clone().into();
        j["dst"] = s.dst.clone().into();
        j["received"] = received.into();
        j["lost"] = sent.saturating_sub(received).into();
        j["loss"] = (sent.saturating_sub(received) as f64 / sent.max(1) as f64).into();
        for key in [
            "reordered",
            "reorder_extent",
            "latency_us",
            "rx_ecn_ce",
            "np_feedbacks_sent",
        ] {
            if let Some(v) = rx.and_then(|r| r.get(key)) {
                j[key] = v.clone();
            }
        }
        senders.push(j);
    }
    let mut bg = serde_json::json!(null);
    if plan.background.is_some() {
        let (mut sent, mut received, mut in_window) = (0u64, 0u64, 0u64);
        for h in &f.topo.hosts {
            let j = parse(&dir.join(format!("bg-{}.json", h.name)))?;
            for fl in j["flows"].as_array().into_iter().flatten() {
                sent += u(fl, &["sent"]);
            }
        }
        for ((_, id), fl) in &sink_flows {
            if *id >= u64::from(crate::host::BACKGROUND_ID) {
                received += u(fl, &["received"]);
                in_window += u(fl, &["received_in_window"]);
            }
        }
        bg = serde_json::json!({
            "sent": sent,
            "received": received,
            "received_in_window": in_window,
            "lost": sent.saturating_sub(received),
            "loss": sent.saturating_sub(received) as f64 / sent.max(1) as f64,
        });
    }
    let mut switches = serde_json::Map::new();
    for ((sw, port), (rx1, tx1)) in pfc[1] {
        let (rx0, tx0) = pfc[0].get(&(sw.clone(), *port)).copied().unwrap_or((0, 0));
        let bytes = tx[1].get(&(sw.clone(), *port)).copied().unwrap_or(0)
            - tx[0].get(&(sw.clone(), *port)).copied().unwrap_or(0);
        let e = switches
            .entry(sw.clone())
            .or_insert_with(|| serde_json::json!({}));
        e[port.to_string()] = serde_json::json!({
            "pfc_rx": rx1 - rx0, "pfc_tx": tx1 - tx0, "tx_bytes": bytes,
        });
    }
    // Per sink: the data its flows delivered within the window (stamped datagrams, so no PFC
    // or feedback frame), as frames, over the link's capacity for the window; and the wire
    // bytes the switch port sent it over the whole run, every frame included.
    let frame_bits = ((plan.size + FRAME_OVERHEAD) * 8) as f64;
    let mut util = serde_json::Map::new();
    let mut wire = serde_json::Map::new();
    for h in sinks {
        if let Some((sw, port, rate)) = host_port(f, h) {
            let j = parse(&dir.join(format!("sink-{h}.json")))?;
            let data: u64 = j["flows"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|fl| u(fl, &["received_in_window"]))
                .sum();
            util.insert(
                h.clone(),
                (data as f64 * frame_bits / (rate as f64 * plan.seconds)).into(),
            );
            let bytes = tx[1].get(&(sw.clone(), port)).copied().unwrap_or(0)
                - tx[0].get(&(sw.clone(), port)).copied().unwrap_or(0);
            wire.insert(h.clone(), bytes.into());
        }
    }
    Ok(serde_json::json!({
        "senders": senders,
        "background": bg,
        "switches": switches,
        "utilisation": util,
        "port_tx_bytes": wire,
    }))
}
