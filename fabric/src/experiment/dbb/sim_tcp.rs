//! E8 and E9's TCP scenarios in `pisa-sim` (`pisa-fabric dbb --where sim-tcp`): the namespace
//! runner's flows ([`super::flows`]: paced connections, `pisa-traffic`'s paced flow) on the same
//! fabric, with the simulator's Linux-like TCP hosts in virtual time, where no CPU can make the
//! emulator late. The point's report has the namespace report's shape, so the tables are the
//! same; what the simulator does not model is absent and its columns read "-".
//!
//! Differences from the namespace run, by construction:
//! - every host's TCP is the simulator's (docs/sim.md, "TCP hosts"): RACK, SACK, D-SACK undo,
//!   delayed ACKs; SACK reordering events, spurious RTOs and the receivers' OFO queue are not
//!   counted; `tcp_reordering` and other `--sysctl` settings do not apply;
//! - a paced flow's cap is its only pacing ([`sim::flow`]: `rate=`);
//! - the receivers' data segments are the senders' data segments out (what was lost is
//!   counted once more than in the kernel's `rcv_segs`).

use anyhow::{Result, anyhow, bail};
use serde_json::{Value, json};
use sim::fabric::{Options, Sim};
use sim::flow::FlowSpec;
use topo::Topology;

use super::sim::u;
use super::{Paced, Which, expected_shares, pairs, window};

/// How the simulated fabric's frames take time besides queueing and the links' delays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimLinks {
    /// Each switch traversal, µs.
    pub hop_us: u64,
    /// Serialisation time added at every link, as on a wire.
    pub store_and_forward: bool,
}

/// The simulated report of the paced `flows` on `t` (every switch already running the
/// scheme), with `cc` (`reno`, `cubic`, `dctcp`) and `ecn` as the hosts' `tcp_ecn`, in the
/// namespace runner's shape ([`super::run_point`]'s report.json), and `pisa-sim`'s own.
pub fn run(
    w: Which,
    t: &Topology,
    flows: &[Paced],
    (cc, ecn): (&str, u8),
    links: SimLinks,
    seed: u64,
) -> Result<(Value, Value)> {
    if !matches!(cc, "reno" | "cubic" | "dctcp") {
        bail!("--cc {cc}: pisa-sim's TCP hosts have reno, cubic and dctcp");
    }
    let (capacity, expected) = expected_shares(t, w).map_err(anyhow::Error::msg)?;
    let (win_a, win_b) = window(flows).ok_or_else(|| anyhow!("no all-active window"))?;
    let pairs = pairs(w);
    let end = flows
        .iter()
        .map(|p| p.start_ns + p.duration_ns)
        .max()
        .unwrap_or(0);
    let mut opts = Options::new(end, seed);
    opts.drain_ns = 30_000_000_000;
    opts.hop_latency_ns = links.hop_us * 1000;
    opts.store_and_forward = links.store_and_forward;
    opts.samples_ns = vec![win_a, win_b];
    for (i, p) in flows.iter().enumerate() {
        let (src, dst) = pairs[p.pair];
        // The MTU of a requested MSS (D's packet sizes), as TCP_MAXSEG clamps it.
        let mtu = if p.mss == 0 { 1500 } else { p.mss + 40 };
        let ecn = match (cc, ecn) {
            ("dctcp", _) | (_, 1) => "on",
            _ => "off",
        };
        let spec = format!(
            "{src}>{dst} cc={cc} ecn={ecn} rate={} start_ms={} stop_ms={} size={mtu} sport={} \
             dport=5201",
            p.rate_bps,
            p.start_ns as f64 / 1e6,
            (p.start_ns + p.duration_ns) as f64 / 1e6,
            20_000 + i
        );
        opts.flows
            .push(FlowSpec::parse(&spec, i).map_err(|e| anyhow!("flow {spec}: {e}"))?);
    }
    let wall = std::time::Instant::now();
    let mut sim = Sim::new(t, opts).map_err(anyhow::Error::msg)?;
    let r = sim.run();
    let speed = json!({"packet_hops": sim.hops(), "simulated_s": sim.now() as f64 / 1e9,
        "wall_s": wall.elapsed().as_secs_f64()});
    let r: Value = serde_json::from_str(&r.pretty())?;
    let mut out = to_namespace_shape(w, &r, flows, capacity, &expected, (win_a, win_b));
    out["sim"] = speed;
    Ok((out, r))
}

/// `pisa-sim`'s report `r` as the namespace runner's.
fn to_namespace_shape(
    w: Which,
    r: &Value,
    flows: &[Paced],
    capacity: u64,
    expected: &[(String, usize, f64)],
    (win_a, win_b): (u64, u64),
) -> Value {
    let sim_flows = r["flows"].as_array().cloned().unwrap_or_default();
    let tcp = |i: usize| sim_flows.get(i).map(|f| &f["tcp"]).unwrap_or(&Value::Null);
    let pairs = pairs(w);
    let secs = (win_b - win_a) as f64 / 1e9;
    let window: Vec<Value> = (0..pairs.len())
        .map(|pair| {
            let mine: Vec<usize> = (0..flows.len())
                .filter(|&i| flows[i].pair == pair)
                .collect();
            let bytes: u64 = mine
                .iter()
                .map(|&i| {
                    let at = |k: usize| tcp(i)["received_at"][k].as_u64().unwrap_or(0);
                    at(1).saturating_sub(at(0))
                })
                .sum();
            let (src, dst) = pairs[pair];
            json!({"pair": format!("{src}>{dst}"), "connections_start": mine.len(),
                "connections_end": mine.len(), "bytes": bytes, "seconds": secs,
                "goodput_bps": bytes as f64 * 8.0 / secs})
        })
        .collect();
    let rows: Vec<Value> = flows
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let t = tcp(i);
            let span = u(t, &["last_rx_ns"]).saturating_sub(u(t, &["first_rx_ns"]));
            let received = u(t, &["received"]);
            json!({"id": i, "src": pairs[p.pair].0, "dst": pairs[p.pair].1,
                "start_ns": p.start_ns, "rate_bps": p.rate_bps,
                "finished": u(t, &["completed"]) == 1, "bytes": received,
                "goodput_bps": if span > 0 { received as f64 * 8e9 / span as f64 } else { 0.0 },
                "retransmits": u(t, &["retransmits"]), "reord_seen": u(t, &["reord_seen"]),
                "reordering": u(t, &["reordering"]), "rcv_ooopack": u(t, &["rcv_ooopack"]),
                "rcv_segs": u(t, &["data_segs_out"])})
        })
        .collect();
    let links: Vec<Value> = expected
        .iter()
        .map(|(id, stage, share)| {
            let (sw, port) = id.split_once(':').unwrap_or((id, "0"));
            let p = &r["switches"][sw]["ports"][port];
            json!({"link": id, "stage": stage, "expected_share": share,
                "packets": u(p, &["tx_packets"]), "qdelay_us": p["qdelay_us"]})
        })
        .collect();
    let sum = |k: &str| (0..flows.len()).map(|i| u(tcp(i), &[k])).sum::<u64>();
    let tm_drops: u64 = r["switches"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .flat_map(|s| s["ports"].as_object().into_iter().flat_map(|m| m.values()))
        .map(|p| u(p, &["drops"]))
        .sum();
    let mut out = super::report_head(w, capacity, flows, (win_a, win_b));
    for (k, v) in [
        ("where", json!("sim")),
        ("window", json!(window)),
        ("flows", json!(rows)),
        ("links", json!(links)),
        (
            "sender_counters",
            json!({"Tcp.RetransSegs": sum("retransmits"), "Tcp.OutSegs": sum("segs_out"),
                "TcpExt.TCPDSACKRecv": sum("dsacks")}),
        ),
        ("receiver_counters", json!({})),
        ("tm_drops", json!(tm_drops)),
    ] {
        out[k] = v;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::dbb::{Scenario, report, topology};

    #[test]
    fn e8_in_the_simulator_carries_the_offer_and_spreads_by_the_compiler() {
        // A50 on E8's fabric at 25 Mb/s links (100 Mb/s a stage), a 0.3 s step: four paced
        // connections of 12.5 Mb/s, all active for 0.9 s.
        let mut t = topology(Which::E8, 25_000_000, 100_000_000, 64);
        for s in &mut t.switches {
            s.program = "dbb-shared".into();
        }
        let a50: Scenario = "A50".parse().unwrap();
        let flows = super::super::flows(&a50, 100_000_000, 0.3);
        let (r, raw) = run(Which::E8, &t, &flows, ("cubic", 0), SimLinks::default(), 1).unwrap();
        let v = report::summarise(&r);
        let get = |k: &str| v[report::COLUMNS.iter().position(|c| *c == k).unwrap()];
        // Goodput is the offer: the cap paces payload, as Linux's does.
        let payload = 50.0;
        assert!(
            (get("goodput_mbps") - payload).abs() < 0.02 * payload,
            "{} Mb/s",
            get("goodput_mbps")
        );
        assert_eq!(get("unfinished"), 0.0);
        // DBB's shared counters spread each stage's packets as N_ij / N within a few packets.
        assert!(get("max_share_dev") < 0.01, "{}", get("max_share_dev"));
        assert!(get("qdelay_p99_max_us").is_finite());
        // The kernel's counters the simulator lacks are "-", not 0; D-SACKs it counts.
        assert!(get("spurious_rtos").is_nan() && get("dsack_recv").is_finite());
        // One seed, one report.
        let (again, _) = run(Which::E8, &t, &flows, ("cubic", 0), SimLinks::default(), 1).unwrap();
        let strip = |mut r: Value| {
            r["sim"] = Value::Null;
            r
        };
        assert_eq!(strip(r), strip(again));
        assert!(raw["switches"].is_object());
        assert!(run(Which::E8, &t, &flows, ("bbr", 0), SimLinks::default(), 1).is_err());
    }
}
