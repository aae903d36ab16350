//! One point of the FCT comparison in `pisa-sim` (`--where sim`, issue 31 §2): the point's
//! schedule (the same flows, sizes, start times and tags as in namespaces, [`schedule`]) as TCP
//! flows of the simulator's Linux-like hosts ([`sim::tcp`]), on the same topology with the
//! scheme's programs and plan parameters, in virtual time; the same files out (`flows.csv`,
//! `summary.csv`, `uplinks.csv`), plus the simulator's report (`report.json`).
//!
//! What differs from a namespace point, by construction: no CPU can make a simulated switch
//! late, so the fidelity columns say `-`; a switch processes a packet in no time and a lone
//! frame leaves a shaped port at once (as in the emulator's token bucket), so the base RTT is
//! the links' propagation delays and `--sim-hop-us` per switch traversal; flows start exactly on schedule (start lag 0); queues
//! are sampled as each port's largest enqueue depth, not once a second.

use super::*;
use crate::traffic::FlowRecord;
use dataplane::sockopt::{TCPI_OPT_ECN, TcpInfo};
use hosts::json::Json;
use sim::fabric::{Options, Sim};
use sim::flow::{Cc, FlowSpec, Pattern as SendPattern, Proto, Rate};

/// The link MTU of the simulated hosts (the namespaces' veth default).
const MTU: u16 = 1500;

fn get<'a>(j: &'a Json, path: &[&str]) -> Option<&'a Json> {
    path.iter().try_fold(j, |j, k| j.get(k))
}

fn num(j: &Json, path: &[&str]) -> u64 {
    get(j, path).and_then(Json::as_u64).unwrap_or(0)
}

/// The point's flows as the simulator's TCP flows.
fn specs(
    t: &Transport,
    topo: &Topology,
    flows: &[Flow],
    ipv6: bool,
) -> anyhow::Result<Vec<FlowSpec>> {
    let kind: sim::tcp::Kind = t.cc.parse().map_err(anyhow::Error::msg)?;
    Ok(flows
        .iter()
        .enumerate()
        .map(|(i, f)| FlowSpec {
            src: topo.hosts[f.src].name.clone(),
            dst: topo.hosts[f.dst].name.clone(),
            rate: Rate::Bps(u64::MAX),
            size: MTU,
            start_ns: f.start_ns,
            stop_ns: None,
            proto: Proto::Tcp,
            // One port per flow, as the hosts' ephemeral ports are.
            sport: 10_000 + (i % 50_000) as u16,
            dport: PORT,
            tos: f.tos,
            pattern: SendPattern::Constant,
            cc: Cc::Tcp {
                kind,
                ecn: t.ecn == 1 || (t.ecn == 2 && kind == sim::tcp::Kind::Dctcp),
                rto_min_ns: 200_000_000,
                ipv6,
            },
            np: false,
            np_interval_ns: 0,
            bytes: Some(f.size),
        })
        .collect())
}

/// Runs point `p` of `e` in the simulator, writing its files into `dir`.
pub(super) fn run_point_sim(
    e: &Fct,
    transport: &Transport,
    p: &Point,
    dir: &Path,
) -> anyhow::Result<String> {
    let t0 = Instant::now();
    if is_kernel(scheme_program(&p.scheme)) {
        bail!("scheme kernel: Linux routers run in namespaces only (--where namespaces)");
    }
    let topo = point_topology(e, p);
    let flows = schedule(e, &topo, p).map_err(anyhow::Error::msg)?;
    let mut opts = Options::new((e.seconds * 1e9) as u64, point_seed(e, p));
    opts.drain_ns = (e.drain * 1e9) as u64;
    opts.hop_latency_ns = e.sim_hop_us * 1000;
    opts.store_and_forward = e.sim_store_and_forward;
    opts.stalls = e.sim_stalls;
    opts.flows = specs(transport, &topo, &flows, e.ipv6)?;
    let mut s = Sim::new(&topo, opts).map_err(anyhow::Error::msg)?;
    let report = s.run();
    let (hops, simulated_s) = (s.hops(), s.now() as f64 / 1e9);
    let path = dir.join("report.json");
    std::fs::write(&path, report.pretty())
        .with_context(|| format!("writing {}", path.display()))?;
    let Some(Json::A(reported)) = report.get("flows") else {
        bail!("the simulator's report has no flows");
    };
    // The flows' rows, as pisa-traffic writes them.
    let prefix = format!("{},{},{}", p.scheme, p.load, p.rep);
    let mut flows_csv = flows_header() + "\n";
    let mut rows = Vec::new();
    for (f, r) in flows.iter().zip(reported) {
        let tcp = r
            .get("tcp")
            .ok_or_else(|| anyhow!("flow {}: no tcp report", f.id))?;
        let finished = num(tcp, &["completed"]) == 1;
        let n32 = |k: &str| u32::try_from(num(tcp, &[k])).unwrap_or(u32::MAX);
        // The row pisa-traffic writes, from what a Linux sender's TCP_INFO would say.
        let rec = FlowRecord {
            id: f.id,
            src: topo.hosts[f.src].name.clone(),
            dst: topo.hosts[f.dst].name.clone(),
            start_ns: f.start_ns,
            size: f.size,
            class: f.class.name().to_string(),
            tos: f.tos,
            finished,
            fct_us: finished.then(|| num(tcp, &["fct_ns"]) as f64 / 1000.0),
            lag_us: 0.0,
            tx: TcpInfo {
                options: if num(tcp, &["ecn_negotiated"]) == 1 {
                    TCPI_OPT_ECN
                } else {
                    0
                },
                total_retrans: n32("retransmits"),
                reord_seen: n32("reord_seen"),
                reordering: n32("reordering"),
                // D-SACKs received: Linux's tcpi_dsack_dups counts the segments they report.
                dsack_dups: n32("dsacks"),
                delivered_ce: n32("delivered_ce"),
                rtt_us: u32::try_from(num(tcp, &["srtt_ns"]) / 1000).unwrap_or(u32::MAX),
                ..TcpInfo::default()
            },
            rcv_ooopack: n32("rcv_ooopack"),
            error: if finished {
                String::new()
            } else {
                "not finished in the window and drain".into()
            },
        };
        let _ = writeln!(flows_csv, "{prefix},{}", rec.csv(transport));
        let row = FlowRow {
            class: rec.class.clone(),
            finished,
            fct_us: rec.fct_us,
            retransmits: u64::from(rec.tx.total_retrans),
            delivered_ce: u64::from(rec.tx.delivered_ce),
            lag_us: 0.0,
        };
        rows.push(row);
    }
    let path = dir.join("flows.csv");
    std::fs::write(&path, flows_csv).with_context(|| format!("writing {}", path.display()))?;
    // The switches' side, from the report.
    let mut sw = SwitchStats {
        virtual_time: true,
        ..SwitchStats::default()
    };
    let consumed: Vec<&str> = programs::by_name(scheme_program(&p.scheme))
        .map(|prog| prog.schema().consumed.clone())
        .unwrap_or_default();
    let mut depths = Vec::new();
    if let Some(Json::O(switches)) = report.get("switches") {
        for (_, s) in switches {
            if let Some(Json::O(ports)) = s.get("ports") {
                for (_, port) in ports {
                    sw.tm_drops += num(port, &["drops"]);
                    depths.push(num(port, &["max_enq_qdepth"]));
                }
            }
            if let Some(Json::O(reasons)) = s.get("drops_by_reason") {
                for (reason, n) in reasons {
                    if !consumed.contains(&reason.as_str()) {
                        sw.program_drops += n.as_u64().unwrap_or(0);
                    }
                }
            }
        }
    }
    sw.queue_max = depths.iter().copied().max().unwrap_or(0);
    // The agents, in the words of a running switch's `show_agent` (no queue here: no drops,
    // backlog or reaction time).
    sw.agents.seconds = simulated_s;
    let mut shown = String::new();
    for name in topo.switches.iter().map(|s| s.name.as_str()) {
        if let Some(a) = s.agent(name) {
            let mut text = format!(
                "packet_ins {}\ndropped 0\nwrites {}\n",
                a.packet_ins, a.writes
            );
            for (k, v) in a.counters() {
                let _ = writeln!(text, "agent.{k} {v}");
            }
            sw.agents.add_shown(&text);
            let _ = write!(shown, "# {name}\n{text}");
        }
    }
    if !shown.is_empty() {
        let path = dir.join("agent.txt");
        std::fs::write(&path, shown).with_context(|| format!("writing {}", path.display()))?;
    }
    for (leaf, port, spine) in uplinks(&topo) {
        let n = num(
            &report,
            &["switches", &leaf, "ports", &port.to_string(), "tx_packets"],
        );
        sw.uplinks.push((leaf, port, spine, n));
    }
    if !e.counters.is_empty() {
        let cells = sim_counter_rows(&s, &topo, &e.counters, &prefix);
        let path = dir.join("counters.csv");
        std::fs::write(&path, format!("{}\n{cells}", counters::COUNTERS_HEADER))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let wall = t0.elapsed().as_secs_f64();
    write_point_tables(dir, e, transport, p, &rows, &sw, wall)?;
    let fin = rows.iter().filter(|r| r.finished).count();
    let short: Vec<f64> = rows
        .iter()
        .filter(|r| r.class == Class::Short.name() && r.finished)
        .filter_map(|r| r.fct_us)
        .collect();
    Ok(format!(
        "{fin}/{} flows finished, short-flow FCT avg {:.0} us, {} TM drops (pisa-sim: {:.2} M \
         packet-hops/s, {simulated_s:.3} s simulated, {:.3} s of wall time per simulated second)",
        rows.len(),
        Stats::of(&short).mean,
        sw.tm_drops,
        hops as f64 / wall.max(1e-9) / 1e6,
        wall / simulated_s.max(1e-9)
    ))
}

/// `counters.csv` rows (after `prefix`) of the counters `names` at the end of a simulated run:
/// every non-zero cell of each switch whose program has the counter, as
/// [`counters::counter_rows`] reads them from a running fabric.
fn sim_counter_rows(s: &Sim, topo: &Topology, names: &[String], prefix: &str) -> String {
    let mut text = String::new();
    for name in names {
        for sw in &topo.switches {
            let Some(c) = s.control(&sw.name) else {
                continue;
            };
            // Full or short names, as `pisa-fabric counters` takes them.
            let Some(k) = c
                .schema()
                .counter_by_name(name)
                .and_then(|def| c.schema().counters.iter().position(|x| x.id == def.id))
            else {
                continue;
            };
            let cells = &c.externs().counters[k];
            for i in 0..c.schema().counters[k].size {
                let v = cells.read(i).unwrap_or_default();
                if v.packets != 0 || v.bytes != 0 {
                    let _ = writeln!(
                        text,
                        "{prefix},{},{name},{i},{},{}",
                        sw.name, v.packets, v.bytes
                    );
                }
            }
        }
    }
    text
}
