//! HPCC's flows in namespaces (issue 15): `pisa-host hpcc-recv` on every receiving host,
//! `pisa-host hpcc-send` on every sending host with its part of the flows as a schedule, on a
//! fabric of `pint` switches that is up and programmed; what they and the switches report.
//!
//! One [`run`] returns one JSON object:
//! - `flows`: every flow's sender report (`pisa_fabric::host::hpcc`: bytes, completed, FCT,
//!   goodput, retransmissions, ACKs with feedback, windows) with its `src`, `dst`, `start_us`;
//! - `receivers`: each receiver's report (per-flow arrivals, datagrams that carried telemetry,
//!   malformed datagrams);
//! - `switches`: per switch and port, the PFC frames sent and received and the traffic manager's
//!   drops during the run.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::Value;

use super::qcn::{host_ipv4, pfc_frames, run_pisa_host};
use crate::fabric::Fabric;

/// One flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFlow {
    /// Sending host.
    pub src: String,
    /// Receiving host.
    pub dst: String,
    /// Start, µs after the senders start.
    pub start_us: u64,
    /// Application bytes.
    pub bytes: u64,
}

/// What one run does.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The flows (ids are their index + 1).
    pub flows: Vec<HostFlow>,
    /// INT (true) or PINT (false); PINT's sampling is the switches' `pint_hpcc_sample=`.
    pub int: bool,
    /// The hosts' line rate.
    pub line_bps: u64,
    /// T, µs (the switches' `pint_hpcc_rtt_us=`).
    pub rtt_us: u64,
    /// INT slots (the fabric's longest path in switches).
    pub slots: u8,
    /// IPv4 length of a full datagram.
    pub ip_len: usize,
    /// The senders stop flows not done by then; the receivers listen 2 s longer.
    pub max_seconds: f64,
    /// The HPCC port.
    pub port: u16,
}

fn parse(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}", path.display()))
}

/// (switch, port) -> packets the traffic manager dropped, from every switch's admin socket.
fn tm_drops(f: &Fabric) -> anyhow::Result<BTreeMap<(String, u16), u64>> {
    let mut out = BTreeMap::new();
    let ports = f.topo.ports();
    for s in &f.topo.switches {
        let sock = f.opts.dir.join(format!("{}.sock", s.name));
        for &p in ports
            .get(s.name.as_str())
            .into_iter()
            .flat_map(|m| m.keys())
        {
            out.insert((s.name.clone(), p), super::port_queues(&sock, p)?[1]);
        }
    }
    Ok(out)
}

/// Runs `plan` on `f` (up and programmed), files in `dir`.
pub fn run(f: &Fabric, plan: &Plan, dir: &Path) -> anyhow::Result<Value> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let ip = |h: &str| host_ipv4(f, h);
    let mut receivers: Vec<&str> = plan.flows.iter().map(|x| x.dst.as_str()).collect();
    receivers.sort_unstable();
    receivers.dedup();
    let mut schedules: BTreeMap<&str, String> = BTreeMap::new();
    for (k, x) in plan.flows.iter().enumerate() {
        let line = format!(
            "{} {}:{} {} {}\n",
            x.start_us,
            ip(&x.dst)?,
            plan.port,
            x.bytes,
            k + 1
        );
        schedules.entry(x.src.as_str()).or_default().push_str(&line);
    }
    let cc = if plan.int { "hpcc-int" } else { "hpcc-pint" };
    let pfc_before = pfc_frames(f)?;
    let drops_before = tm_drops(f)?;
    let mut servers: Vec<(String, Vec<String>)> = Vec::new();
    let mut clients: Vec<(String, Vec<String>)> = Vec::new();
    for h in &receivers {
        servers.push((
            h.to_string(),
            vec![
                "hpcc-recv".into(),
                "--listen".into(),
                format!("{}:{}", ip(h)?, plan.port),
                "--seconds".into(),
                format!("{}", plan.max_seconds + 2.0),
                "--out".into(),
                dir.join(format!("recv-{h}.json")).display().to_string(),
            ],
        ));
    }
    for (h, text) in &schedules {
        let file = dir.join(format!("schedule-{h}.txt"));
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
        clients.push((
            h.to_string(),
            [
                "hpcc-send",
                "--cc",
                cc,
                "--line",
                &plan.line_bps.to_string(),
                "--rtt-us",
                &plan.rtt_us.to_string(),
                "--schedule",
                &file.display().to_string(),
                "--slots",
                &plan.slots.to_string(),
                "--size",
                &plan.ip_len.to_string(),
                "--max-seconds",
                &plan.max_seconds.to_string(),
                "--out",
                &dir.join(format!("send-{h}.json")).display().to_string(),
            ]
            .iter()
            .map(|x| x.to_string())
            .collect(),
        ));
    }
    let watch = super::fidelity::Watch::start(f)?;
    run_pisa_host(f, servers, clients)?;
    let measured = watch.finish(f, Some(&dir.join("fidelity.txt")))?;
    let pfc_after = pfc_frames(f)?;
    let drops_after = tm_drops(f)?;
    let mut flows = vec![Value::Null; plan.flows.len()];
    for h in schedules.keys() {
        let j = parse(&dir.join(format!("send-{h}.json")))?;
        for fl in j["flows"].as_array().into_iter().flatten() {
            let id = fl["flow"].as_u64().unwrap_or(0) as usize;
            let Some(x) = id.checked_sub(1).and_then(|k| plan.flows.get(k)) else {
                bail!("{h}: a report of flow {id}, which is not planned");
            };
            let mut fl = fl.clone();
            fl["src"] = x.src.clone().into();
            fl["dst"] = x.dst.clone().into();
            fl["start_us"] = x.start_us.into();
            flows[id - 1] = fl;
        }
    }
    if let Some(k) = flows.iter().position(Value::is_null) {
        bail!("flow {} has no report", k + 1);
    }
    let mut recv = serde_json::Map::new();
    for h in &receivers {
        recv.insert(h.to_string(), parse(&dir.join(format!("recv-{h}.json")))?);
    }
    let mut switches = serde_json::Map::new();
    for ((sw, port), (rx1, tx1)) in &pfc_after {
        let (rx0, tx0) = pfc_before
            .get(&(sw.clone(), *port))
            .copied()
            .unwrap_or((0, 0));
        let key = (sw.clone(), *port);
        let drops = drops_after.get(&key).copied().unwrap_or(0)
            - drops_before.get(&key).copied().unwrap_or(0);
        let e = switches
            .entry(sw.clone())
            .or_insert_with(|| serde_json::json!({}));
        e[port.to_string()] = serde_json::json!({
            "pfc_rx": rx1 - rx0, "pfc_tx": tx1 - tx0, "drops": drops,
        });
    }
    Ok(serde_json::json!({
        "cc": cc,
        "flows": flows,
        "receivers": recv,
        "switches": switches,
        "fidelity": super::fidelity::to_json(&measured),
    }))
}

/// Sums `key` over every port of every switch in a [`run`]'s report.
pub fn switch_total(r: &Value, key: &str) -> u64 {
    r["switches"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .flat_map(|ports| ports.as_object().into_iter().flat_map(|m| m.values()))
        .map(|p| p[key].as_u64().unwrap_or(0))
        .sum()
}
