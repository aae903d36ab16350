//! P4TE (docs/p4te.md), deterministically: the program on the in-memory switch and on bare egress
//! runs, and whole fabrics in `pisa-sim`. Tests are named after the paper's sections.

use std::sync::Arc;

use etherparse::{
    EtherType, Ethernet2Header, IpNumber, Ipv4Dscp, Ipv4Header, Ipv6FlowLabel, Ipv6Header,
    PacketBuilder, TcpHeader, TcpOptionElement,
};
use hosts::json::Json;
use pipeline::agent::{Agent, AgentCx};
use pipeline::commands::{Command, bmv2_priority, parse_line};
use pipeline::control::{Atomicity, Control};
use pipeline::externs::Color;
use pipeline::frame::OwnedFrame;
use pipeline::metadata::{InstanceType, StdMeta};
use pipeline::runtime::{Config, EgressVerdict, Pipeline, Worker};
use programs::p4te::agent::{priority, queue_level};
use programs::p4te::fack::{self, Action};
use programs::p4te::{self, Feedback, SESSION_BASE, rate_decision};
use sim::SimSwitch;
use sim::fabric::{Options, Sim};
use sim::flow::FlowSpec;
use topo::{LinkProps, Topology, leaf_spine};

mod common;
use common::{drops, num, reg};

const RATE: u64 = 100_000_000;

/// A 2x2 leaf-spine at 100 Mb/s everywhere: leaf1 has h1 (port 1), h2 (port 2) and uplinks 3
/// (spine1) and 4 (spine2).
fn fabric(program: &str, params: &[(&str, &str)]) -> Topology {
    let host = LinkProps {
        rate_bps: RATE,
        delay_us: 10,
        buffer: 64,
    };
    let mut t = leaf_spine(2, 2, 2, 1.0, host);
    for s in &mut t.switches {
        s.program = program.into();
        for (k, v) in params {
            s.params.insert((*k).into(), (*v).into());
        }
    }
    t
}

fn apply(c: &Control, line: &str) {
    match parse_line(c.schema(), line).unwrap_or_else(|e| panic!("{line}: {e}")) {
        Command::Write(u) => {
            for r in c.write(&u, Atomicity::ContinueOnError) {
                r.unwrap_or_else(|e| panic!("{line}: {e}"));
            }
        }
        Command::Nothing => {}
        Command::Other(..) => panic!("{line}"),
    }
}

/// A switch running `p4te`, programmed as the plan programs `name` of `t`.
fn switch(t: &Topology, name: &str) -> Arc<Pipeline> {
    let pipe = Pipeline::new(p4te::build(), 1, Config::default());
    let plans = programs::fabric_plan(t).unwrap();
    for line in &plans[name].routes {
        apply(&pipe.control, line);
    }
    pipe
}

/// An IPv4 TCP segment from h1 (10.0.1.1:40000) to h3 (10.0.2.1:5001) with ToS `tos`.
fn tcp_v4(
    tos: u8,
    seq: u32,
    ack: u32,
    window: u16,
    ts: Option<(u32, u32)>,
    payload: &[u8],
) -> Vec<u8> {
    tcp_v4_to([10, 0, 2, 1], tos, seq, ack, window, ts, payload)
}

/// The same, to `dst`.
fn tcp_v4_to(
    dst: [u8; 4],
    tos: u8,
    seq: u32,
    ack: u32,
    window: u16,
    ts: Option<(u32, u32)>,
    payload: &[u8],
) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0xee, 0, 0, 0, 0], [2, 0x5e, 0, 0, 0, 2])
        .ipv4([10, 0, 1, 1], dst, 64)
        .tcp(40000, 5001, seq, window)
        .ack(ack);
    let b = match ts {
        Some((v, e)) => b
            .options(&[
                TcpOptionElement::Noop,
                TcpOptionElement::Noop,
                TcpOptionElement::Timestamp(v, e),
            ])
            .unwrap(),
        None => b,
    };
    let mut out = Vec::new();
    b.write(&mut out, payload).unwrap();
    set_tos(&mut out, tos);
    out
}

fn set_tos(f: &mut [u8], tos: u8) {
    f[15] = tos;
    f[24] = 0;
    f[25] = 0;
    let h = etherparse::Ipv4HeaderSlice::from_slice(&f[14..])
        .unwrap()
        .to_header();
    f[24..26].copy_from_slice(&h.calc_header_checksum().to_be_bytes());
}

/// An ACK from h3 back to h1 (the reverse of [`tcp_v4`]).
fn ack_v4(ack: u32, window: u16, ts: (u32, u32)) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ethernet2([2, 0xee, 0, 0, 0, 2], [2, 0x5e, 0, 0, 0, 2])
        .ipv4([10, 0, 2, 1], [10, 0, 1, 1], 64)
        .tcp(5001, 40000, 7000, window)
        .ack(ack)
        .options(&[
            TcpOptionElement::Noop,
            TcpOptionElement::Noop,
            TcpOptionElement::Timestamp(ts.0, ts.1),
        ])
        .unwrap()
        .write(&mut out, &[])
        .unwrap();
    out
}

/// Runs egress alone on `port` with `enq_qdepth` = each of `depths`; returns the clone
/// session asked for on each packet.
fn egress_sessions(
    pipe: &Arc<Pipeline>,
    port: u16,
    depths: &[u32],
    gap_ns: u64,
) -> Vec<Option<u32>> {
    let mut w = Worker::new(pipe.clone(), 0, 1);
    let frame = tcp_v4(0, 1, 1, 1000, None, &[0; 1000]);
    let mut out = Vec::new();
    for (i, &d) in depths.iter().enumerate() {
        w.begin_batch();
        let mut f = OwnedFrame::from_bytes(&frame);
        let mut md = StdMeta::new(1, frame.len(), 0);
        md.egress_port = port;
        md.enq_qdepth = d;
        let now = 1_000_000 + i as u64 * gap_ns;
        let v = f.with_frame(|f| w.egress(now, f, &mut md));
        let (EgressVerdict::Emit { clone }
        | EgressVerdict::Recirculate { clone }
        | EgressVerdict::Drop { clone, .. }) = v;
        out.push(clone);
        w.end_batch();
    }
    out
}

// ----- Alg. 1: egress monitoring -------------------------------------------------------------

#[test]
fn alg1_one_feedback_per_delta_sized_move_of_depth() {
    let t = fabric("p4te", &[("delta", "2")]);
    let pipe = switch(&t, "leaf1");
    // Up by one packet at a time to 10, then down to 0: a report at every second step.
    let depths: Vec<u32> = (0..=10).chain((0..10).rev()).collect();
    // Packets 1 ms apart at 1,000 bytes: far under CIR, so no colour changes.
    let s = egress_sessions(&pipe, 3, &depths, 1_000_000);
    let reported: Vec<u32> = depths
        .iter()
        .zip(&s)
        .filter(|(_, s)| s.is_some())
        .map(|(d, _)| *d)
        .collect();
    assert_eq!(reported, [2, 4, 6, 8, 10, 8, 6, 4, 2, 0]);
    assert!(
        s.iter().flatten().all(|&s| s == SESSION_BASE + 1),
        "CPU only: {s:?}"
    );
    // Signed comparisons: at depth 0 and 1 nothing wraps into a report.
    let s = egress_sessions(&pipe, 4, &[0, 1, 0, 1, 0, 1], 1_000_000);
    assert!(s.iter().all(Option::is_none), "{s:?}");
}

#[test]
fn alg1_one_feedback_at_the_start_and_one_at_the_end_of_a_microburst() {
    let t = fabric("p4te", &[("delta", "2")]);
    let pipe = switch(&t, "leaf1");
    let burst = [0, 0, 1, 2, 3, 3, 2, 1, 0, 0];
    let s = egress_sessions(&pipe, 3, &burst, 1_000_000);
    let at: Vec<usize> = s
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_some())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        at,
        [3, 8],
        "one as it builds past Δ, one when it is gone: {s:?}"
    );
}

#[test]
fn alg1_one_recirculated_copy_per_colour_change() {
    // CIR 90%, PIR 100% of 100 Mb/s with 3,000-byte bursts; 1,054-byte frames.
    let t = fabric("p4te", &[("delta", "0"), ("meter_burst_us", "0")]);
    let pipe = switch(&t, "leaf1");
    let frame = tcp_v4(0, 1, 1, 1000, None, &[0; 1000]);
    let len = frame.len() as u64;
    let gap_at = |pct: u64| len * 8 * 1_000_000_000 / (RATE * pct / 100);
    // The rate sweeps up through CIR and PIR and back: 50%, 95%, 120%, 95%, 50%.
    let mut sw = SimSwitch::new(pipe.clone());
    let mut now = 1_000_000u64;
    let up = sw.inject(1, &frame, now)[0].port;
    let mut phases = Vec::new();
    let mut changes = 0;
    let mut last = 0;
    for pct in [50, 95, 120, 95, 50] {
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..400 {
            now += gap_at(pct);
            sw.inject(1, &frame, now);
            let c = reg(&pipe.control, "ingress.port_utilizations", usize::from(up));
            changes += u64::from(c != last);
            last = c;
            seen.insert(c);
        }
        phases.push(seen.into_iter().collect::<Vec<_>>());
    }
    eprintln!("colours per phase {phases:?}, {changes} changes");
    // Below CIR only GREEN; between CIR and PIR the excess is YELLOW; above PIR RED appears.
    assert_eq!(phases[0], [0]);
    assert!(
        phases[1].contains(&1) && !phases[1].contains(&2),
        "{phases:?}"
    );
    assert!(phases[2].contains(&2), "{phases:?}");
    assert_eq!(phases[4].last(), Some(&0));
    // One recirculated copy per change of the port's colour, each consumed at ingress.
    assert!(changes >= 4);
    assert_eq!(drops(&pipe.control, "p4te_util_feedback"), changes);
    // Counted apart from queue-depth events (none: Δ = 0).
    let events = |name: &str| {
        let s = pipe.control.schema();
        let i = s.counters.iter().position(|c| c.name == name).unwrap();
        pipe.control.externs().counters[i]
            .read(usize::from(up))
            .unwrap()
            .packets
    };
    assert_eq!(events("egress.color_events"), changes);
    assert_eq!(events("egress.qdepth_events"), 0);
    assert_eq!(events("egress.feedback"), changes);
}

// ----- Fig. 6 and Alg. 2: path selection ------------------------------------------------------

/// The uplink a flow's first packet takes.
fn first_hop(sw: &mut SimSwitch, frame: &[u8]) -> u16 {
    let out = sw.inject(1, frame, 1_000_000_000);
    let data: Vec<_> = out
        .iter()
        .filter(|o| o.instance_type == InstanceType::Normal)
        .collect();
    assert_eq!(data.len(), 1, "{out:?}");
    data[0].port
}

#[test]
fn fig6_a_large_flow_takes_the_queue_group_port_when_its_utilisation_port_is_red() {
    let t = fabric("p4te", &[]);
    let pipe = switch(&t, "leaf1");
    let c = &pipe.control;
    // Fig. 6: port 3 is RED in portUtilizations but still the port of the highest utilisation
    // group present (priority 2); port 4 is the port of the highest queue group present.
    // The agent's P4Runtime priorities of levels 1 and 2, in the commands' BMv2 form.
    let (l1, l2) = (bmv2_priority(priority(1)), bmv2_priority(priority(2)));
    for line in [
        "register_write port_utilizations 3 2".to_string(),
        // Utilisation groups: level 2 = {3}, level 1 holds nothing (its entry removed).
        "act_prof_create_group up_selector 99 3".into(),
        format!("table_delete link_util_up 0&&&0 {l1}"),
        format!("table_indirect_add_with_group link_util_up 0&&&0 => 99 {l2}"),
        // Queue groups: level 2 = {4}.
        "act_prof_create_group up_selector 98 4".into(),
        format!("table_delete queue_depth_up 0&&&0 {l1}"),
        format!("table_indirect_add_with_group queue_depth_up 0&&&0 => 98 {l2}"),
    ] {
        apply(c, &line);
    }
    let mut sw = SimSwitch::new(pipe.clone());
    let large = tcp_v4(0x10, 1, 1, 1000, None, b"data");
    assert_eq!(
        first_hop(&mut sw, &large),
        4,
        "lowUtilPort 3 is RED: lowQueueDepthPort"
    );
    // A short flow prefers lowQueueDepthPort (4, GREEN) anyway.
    let mut short = tcp_v4(0x08, 1, 1, 1000, None, b"data");
    short[34..36].copy_from_slice(&40001u16.to_be_bytes());
    fix_tcp(&mut short);
    assert_eq!(first_hop(&mut sw, &short), 4);
    // Once port 4 is RED too, a short flow takes lowUtilPort.
    apply(c, "register_write port_utilizations 4 2");
    short[34..36].copy_from_slice(&40002u16.to_be_bytes());
    fix_tcp(&mut short);
    assert_eq!(first_hop(&mut sw, &short), 3);
}

fn fix_tcp(f: &mut [u8]) {
    let s = etherparse::SlicedPacket::from_ethernet(f).unwrap();
    let Some(etherparse::NetSlice::Ipv4(ip)) = &s.net else {
        panic!()
    };
    let ip = ip.header().to_header();
    let Some(etherparse::TransportSlice::Tcp(tcp)) = &s.transport else {
        panic!()
    };
    let payload = tcp.payload().to_vec();
    let sum = tcp.to_header().calc_checksum_ipv4(&ip, &payload).unwrap();
    f[50..52].copy_from_slice(&sum.to_be_bytes());
}

fn run(t: &Topology, ms: u64, flows: &[&str], quiet_agents: bool) -> (Json, Sim) {
    let mut opts = Options::new(ms * 1_000_000, 3);
    for (i, f) in flows.iter().enumerate() {
        opts.flows.push(FlowSpec::parse(f, i).unwrap());
    }
    let mut sim = Sim::new(t, opts).unwrap();
    if quiet_agents {
        for s in &t.switches {
            sim.attach_agent(&s.name, Box::new(Silent)).unwrap();
        }
    }
    (sim.run(), sim)
}

/// An agent that does nothing: the switch without its local control plane.
#[derive(Debug)]
struct Silent;
impl Agent for Silent {
    fn packet_in(&mut self, _: u64, _: &[u8], _: &mut AgentCx<'_>) {}
}

fn flow(r: &Json, i: usize) -> &Json {
    match r.get("flows") {
        Some(Json::A(f)) => &f[i],
        _ => panic!("no flows"),
    }
}

#[test]
fn alg2_a_large_flow_avoids_a_yellow_uplink() {
    let t = fabric("p4te", &[]);
    // Flow 1 (large) at 95% of an uplink; flow 2 (large), 50 ms later from h2. Flow 2's ports
    // are chosen so that, with every uplink GREEN, its hash would put it on flow 1's uplink.
    let f1 = "h1>h3 rate=95M size=1000 tos=16";
    let base = |sport: u16| format!("h2>h4 rate=95M size=1000 tos=16 start_ms=50 sport={sport}");
    let up = |r: &Json| {
        (
            num(r, &["switches", "leaf1", "ports", "3", "tx_packets"]),
            num(r, &["switches", "leaf1", "ports", "4", "tx_packets"]),
        )
    };
    let sport = (20000..20100)
        .find(|&sport| {
            let (r, _) = run(&t, 120, &[f1, &base(sport)], true);
            let (a, b) = up(&r);
            a == 0 || b == 0
        })
        .expect("some source port hashes flow 2 onto flow 1's uplink");
    // With the local agent: flow 1 turns its uplink YELLOW, the agent moves it to the YELLOW
    // group, and flow 2 takes the other uplink.
    let (r, sim) = run(&t, 120, &[f1, &base(sport)], false);
    let (a, b) = up(&r);
    assert!(a > 0 && b > 0, "one uplink each: {a} {b}");
    assert_eq!(num(flow(&r, 0), &["lost"]), 0);
    assert_eq!(num(flow(&r, 1), &["lost"]), 0);
    assert!(sim.agent_writes("leaf1").unwrap() > 0);
    eprintln!("leaf1 agent writes: {}", sim.agent_writes("leaf1").unwrap());
}

/// The 2x2 leaf-spine of `pisa-fabric gen leaf-spine --leaves 2 --spines 2 --hosts-per-leaf 2`
/// (1 Gb/s hosts, 500 Mb/s uplinks) running `p4te` with `params`.
fn oversubscribed(params: &[(&str, &str)]) -> Topology {
    let host = LinkProps {
        rate_bps: 1_000_000_000,
        delay_us: 0,
        buffer: 256,
    };
    let mut t = leaf_spine(2, 2, 2, 2.0, host);
    for s in &mut t.switches {
        s.program = "p4te".into();
        for (k, v) in params {
            s.params.insert((*k).into(), (*v).into());
        }
    }
    t
}

/// Issue 32's case: on the 2x2 leaf-spine that `pisa-fabric gen leaf-spine --leaves 2 --spines 2
/// --hosts-per-leaf 2` writes (1 Gb/s hosts, 500 Mb/s uplinks), two large TCP-shaped flows at
/// 95% of an uplink from leaf1's two hosts, the second 50 ms after the first, over six pairs of
/// source ports. Each pair's uplinks `(port 3, port 4)` of leaf1 and the flows' losses.
fn oversubscribed_pairs(hold: Option<&str>) -> Vec<((u64, u64), u64)> {
    let params: Vec<(&str, &str)> = hold.map(|h| ("color_hold_us", h)).into_iter().collect();
    let t = oversubscribed(&params);
    (0..6u16)
        .map(|i| {
            let f1 = format!(
                "h1>h3 rate=475M size=1500 proto=tcp tos=0x10 sport={}",
                10_000 + i
            );
            let f2 = format!(
                "h2>h4 rate=475M size=1500 proto=tcp tos=0x10 start_ms=50 sport={}",
                20_000 + i
            );
            let (r, _) = run(&t, 300, &[&f1, &f2], false);
            let ports = (
                num(&r, &["switches", "leaf1", "ports", "3", "tx_packets"]),
                num(&r, &["switches", "leaf1", "ports", "4", "tx_packets"]),
            );
            let lost = num(flow(&r, 0), &["lost"]) + num(flow(&r, 1), &["lost"]);
            (ports, lost)
        })
        .collect()
}

#[test]
fn alg2_two_large_tcp_flows_take_one_uplink_each_on_an_oversubscribed_fabric() {
    // Alg. 1 as written (each packet's own colour): the loaded uplink is GREEN for all but the
    // ~5% of packets beyond CIR, so the second flow's first packet mostly finds both uplinks in
    // the first group and the hash may put it beside the first flow, for good.
    let literal = oversubscribed_pairs(Some("0"));
    eprintln!("per-packet colours: {literal:?}");
    assert!(
        literal
            .iter()
            .any(|&((a, b), lost)| (a == 0 || b == 0) && lost > 0),
        "some pair shares one uplink and loses: {literal:?}"
    );
    // With the colour held for the meter's burst time (the default), the loaded uplink stays
    // YELLOW and every second flow takes the other one, losing nothing.
    let held = oversubscribed_pairs(None);
    eprintln!("held colours: {held:?}");
    for &((a, b), lost) in &held {
        assert!(a > 5_000 && b > 5_000, "one uplink each: {held:?}");
        assert_eq!(lost, 0, "{held:?}");
    }
}

#[test]
fn an_uplink_that_falls_idle_returns_to_the_first_groups() {
    // A large flow at 95% of an uplink for 100 ms turns it YELLOW (held); then nothing leaves
    // it, so no packet can report it GREEN again. The agent's idle check must bring it back to
    // level 1 of both metrics, or every later flowlet would treat an idle uplink as loaded.
    let t = fabric("p4te", &[]);
    let f1 = "h1>h3 rate=95M size=1000 tos=16 stop_ms=100";
    let (_, sim) = run(&t, 150, &[f1], false);
    let c = sim.control("leaf1").unwrap();
    let groups = c.read_groups(None).unwrap();
    let members = |g: u32| -> Vec<u32> {
        let mut m: Vec<u32> = groups
            .iter()
            .filter(|(_, id, _)| *id == g)
            .flat_map(|(_, _, m)| m.iter().map(|(p, _)| *p))
            .collect();
        m.sort_unstable();
        m
    };
    // Utilisation level 1 is group 11, queue level 1 group 1.
    assert_eq!(members(11), [3, 4], "{groups:?}");
    assert_eq!(members(1), [3, 4], "{groups:?}");
    for g in [2, 3, 4, 12, 13] {
        assert!(members(g).is_empty(), "{groups:?}");
    }
    // It was YELLOW while the flow ran: the agent moved it there and back.
    assert!(sim.agent_writes("leaf1").unwrap() >= 2);
}

/// leaf1's (DEC, INC) rate decisions with one large TCP-shaped flow at 700 Mb/s into a 500 Mb/s
/// uplink, for `ms` ms, on the oversubscribed fabric with `params`.
fn decisions(params: &[(&str, &str)], ms: u64) -> (u64, u64) {
    let t = oversubscribed(params);
    let (_, sim) = run(
        &t,
        ms,
        &["h1>h3 rate=700M size=1500 proto=tcp tos=0x10"],
        false,
    );
    let c = sim.control("leaf1").unwrap();
    let s = c.schema();
    let i = s
        .counters
        .iter()
        .position(|x| x.name == "egress.facks")
        .unwrap();
    let facks = &c.externs().counters[i];
    (
        facks.read(0).unwrap().packets,
        facks.read(1).unwrap().packets,
    )
}

#[test]
fn rate_control_decreases_where_the_meter_can_see_the_excess() {
    // The experiment values (CIR 90%, PIR 100%) on what the port sends: the shaper holds the
    // uplink to 100% of its rate, so the link is never RED and no DEC is ever decided.
    let (dec, _) = decisions(&[], 200);
    assert_eq!(dec, 0);
    // Metering offered load: 140% of the uplink is RED.
    let (dec_offered, _) = decisions(&[("link_meter", "offered")], 200);
    // The paper's design values: PIR 95%, so the shaped 100% is RED too, once the peak bucket
    // (5% of a second of the link, 3.1 MB) has drained at the 5% excess: after about 1 s.
    let (dec_design_early, _) = decisions(&[("meter_values", "design")], 900);
    let (dec_design, _) = decisions(&[("meter_values", "design")], 1500);
    eprintln!(
        "DEC: experiment values {dec}, offered load {dec_offered}, design values \
         {dec_design_early} in 0.9 s, {dec_design} in 1.5 s"
    );
    // The flow sends ~11,700 segments in 200 ms; most are candidates (flag (a) only marks
    // the B bytes after a FACK passes the source leaf, and none does: no real ACK to patch).
    assert!(dec_offered > 5_000, "{dec_offered}");
    assert_eq!(dec_design_early, 0);
    assert!(dec_design > 5_000, "{dec_design}");
}

#[test]
fn b_comes_from_the_rtt_the_flowlet_gap_stands_for() {
    // 100 Mb/s hosts. With the plan's gap (40/70 of rtt_us), B = rtt_us x the host rate.
    let b = |params: &[(&str, &str)]| {
        let t = fabric("p4te", params);
        reg(&switch(&t, "leaf1").control, "ingress.rc_bytes", 0)
    };
    assert_eq!(b(&[("rtt_us", "382")]), 382 * 100 / 8);
    // A 30 ms gap (E5's optimum under load) stands for a 52.5 ms RTT: B of that RTT, not of
    // the idle one.
    assert_eq!(
        b(&[("rtt_us", "382"), ("flowlet_gap_us", "30000")]),
        52_500 * 100 / 8
    );
    // An explicit B wins.
    assert_eq!(
        b(&[("flowlet_gap_us", "30000"), ("rc_bytes", "9000")]),
        9000
    );
}

// ----- Alg. 3: the local control plane --------------------------------------------------------

#[test]
fn alg3_maps_depths_to_four_ranges_and_colours_to_three_groups() {
    // Δ = 2: [0-2], [3-4], [5-6], [7-rest] [P §7].
    let levels: Vec<u32> = (0..10).map(|d| queue_level(d, 2)).collect();
    assert_eq!(levels, [1, 1, 1, 2, 2, 3, 3, 4, 4, 4]);
    let fb = Feedback {
        qd_event: p4te::Event::Increase,
        util_event: p4te::Event::Decrease,
        color: Color::Yellow,
        port: 300,
        depth: 123_456,
    };
    let mut frame = vec![0u8; 14];
    frame[12..14].copy_from_slice(&p4te::FEEDBACK_ETHERTYPE.to_be_bytes());
    frame.extend(fb.encode());
    assert_eq!(Feedback::decode(&frame), Some(fb));
}

#[test]
fn alg3_the_agent_skips_reports_of_ports_in_no_group_before_any_read() {
    use programs::p4te::agent::P4teAgent;
    let t = fabric("p4te", &[]);
    let pipe = switch(&t, "leaf1");
    let mut agent = P4teAgent::new(pipe.control.schema()).unwrap();
    let report = |port: u16| {
        let fb = Feedback {
            qd_event: p4te::Event::None,
            util_event: p4te::Event::Increase,
            color: Color::Yellow,
            port,
            depth: 0,
        };
        let mut frame = vec![0u8; 2 + 14];
        frame[14..16].copy_from_slice(&p4te::FEEDBACK_ETHERTYPE.to_be_bytes());
        frame.extend(fb.encode());
        frame
    };
    let mut cx = AgentCx::new(&pipe.control);
    // Before the first tick the agent knows no up ports and looks at every report: port 1
    // (h1's) is in no group, so nothing moves.
    agent.packet_in(0, &report(1), &mut cx);
    assert_eq!((agent.skipped, agent.moves), (0, 0));
    // After a tick it knows leaf1's uplinks (3, 4): a host port's report is skipped, an
    // uplink's moves it.
    agent.tick(1_000_000_000, &mut cx);
    agent.packet_in(0, &report(1), &mut cx);
    agent.packet_in(0, &report(2), &mut cx);
    agent.packet_in(0, &report(3), &mut cx);
    assert_eq!((agent.feedback, agent.skipped, agent.moves), (4, 2, 1));
    // A reset forgets the up ports.
    agent.reset();
    agent.packet_in(0, &report(1), &mut cx);
    assert_eq!(agent.skipped, 2);
}

// ----- §4.3: rate adaptation -------------------------------------------------------------------

#[test]
fn rate_decision_table() {
    use Color::*;
    assert_eq!(rate_decision(Yellow, Red), Some(Action::Decrease));
    assert_eq!(rate_decision(Yellow, Green), Some(Action::Increase));
    assert_eq!(rate_decision(Green, Red), None);
    assert_eq!(rate_decision(Green, Green), None);
    assert_eq!(rate_decision(Yellow, Yellow), None);
    assert_eq!(rate_decision(Red, Yellow), None);
    assert_eq!(fack::resized(1000, Action::Decrease), 500);
    assert_eq!(fack::resized(1000, Action::Increase), 1250);
    assert_eq!(fack::resized(60000, Action::Increase), 65535);
    assert_eq!(fack::resized(1, Action::Decrease), 0);
}

/// The FACK of [`tcp_v4`]'s data, built independently with etherparse.
fn expected_fack_v4(mark: u8, seq: u32, ack: u32, window: u16, ts: (u32, u32)) -> Vec<u8> {
    let mut tcp = TcpHeader::new(5001, 40000, seq, window);
    tcp.ack = true;
    tcp.acknowledgment_number = ack;
    tcp.set_options(&[
        TcpOptionElement::Noop,
        TcpOptionElement::Noop,
        TcpOptionElement::Timestamp(ts.0, ts.1),
    ])
    .unwrap();
    let mut ip = Ipv4Header::new(
        tcp.header_len() as u16,
        64,
        IpNumber::TCP,
        [10, 0, 2, 1],
        [10, 0, 1, 1],
    )
    .unwrap();
    ip.dont_fragment = true;
    ip.dscp = Ipv4Dscp::try_new(mark >> 2).unwrap();
    ip.header_checksum = ip.calc_header_checksum();
    tcp.checksum = tcp.calc_checksum_ipv4(&ip, &[]).unwrap();
    let mut out = Vec::new();
    Ethernet2Header {
        source: [2, 0x5e, 0, 0, 0, 2],
        destination: [2, 0xee, 0, 0, 0, 0],
        ether_type: EtherType::IPV4,
    }
    .write(&mut out)
    .unwrap();
    ip.write(&mut out).unwrap();
    tcp.write(&mut out).unwrap();
    out
}

#[test]
fn fack_byte_for_byte_ipv4() {
    let data = tcp_v4(
        0x10,
        1_000_000,
        77_000,
        501,
        Some((111, 222)),
        &[0xab; 1400],
    );
    let p = p4te::parse::parse(&data).unwrap();
    let t = p.tcp_data().unwrap();
    for (action, mark) in [(Action::Decrease, 0x60), (Action::Increase, 0xe0)] {
        let mut f = data.clone();
        let n = fack::build(&mut f, &p, &t, action);
        f.truncate(n);
        // seq = the data's ack; ack = the data's seq (until the source leaf patches it);
        // TSval/TSecr swapped.
        assert_eq!(
            f,
            expected_fack_v4(mark, 77_000, 1_000_000, 501, (222, 111)),
            "{action:?}"
        );
        // The source leaf's patch: the last real ACK's number, window and timestamps.
        let q = p4te::parse::parse(&f).unwrap();
        let last = fack::LastAck {
            ack: 999_000,
            window: 1000,
            ts: Some((333, 444)),
        };
        fack::patch(&mut f, &q, &last);
        let want = fack::resized(1000, action);
        assert_eq!(f, expected_fack_v4(0, 77_000, 999_000, want, (333, 444)));
    }
}

#[test]
fn fack_byte_for_byte_ipv6() {
    let mut data = Vec::new();
    PacketBuilder::ethernet2([2, 0xee, 0, 0, 0, 0], [2, 0x5e, 0, 0, 0, 2])
        .ipv6(
            [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1],
            [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1],
            64,
        )
        .tcp(40000, 5001, 5, 300)
        .ack(9)
        .write(&mut data, &[1; 100])
        .unwrap();
    let p = p4te::parse::parse(&data).unwrap();
    let mut f = data.clone();
    let n = fack::build(&mut f, &p, &p.tcp_data().unwrap(), Action::Decrease);
    f.truncate(n);
    let mut tcp = TcpHeader::new(5001, 40000, 9, 300);
    tcp.ack = true;
    tcp.acknowledgment_number = 5;
    let ip = Ipv6Header {
        traffic_class: 0x60,
        flow_label: Ipv6FlowLabel::ZERO,
        payload_length: 20,
        next_header: IpNumber::TCP,
        hop_limit: 64,
        source: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1],
        destination: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1],
    };
    tcp.checksum = tcp.calc_checksum_ipv6(&ip, &[]).unwrap();
    let mut want = Vec::new();
    Ethernet2Header {
        source: [2, 0x5e, 0, 0, 0, 2],
        destination: [2, 0xee, 0, 0, 0, 0],
        ether_type: EtherType::IPV6,
    }
    .write(&mut want)
    .unwrap();
    ip.write(&mut want).unwrap();
    tcp.write(&mut want).unwrap();
    assert_eq!(f, want);
}

/// leaf1 as the source leaf of h1's flow to h3, with its class meter saying YELLOW for every
/// large packet from h1 and its uplinks GREEN: every data packet is a candidate for INC.
fn source_leaf(rc_bytes: u64) -> (Arc<Pipeline>, SimSwitch) {
    let t = fabric("p4te", &[("rc_bytes", &rc_bytes.to_string())]);
    let pipe = switch(&t, "leaf1");
    apply(&pipe.control, "meter_set class_rate 513 1 1 1 1");
    let sw = SimSwitch::new(pipe.clone());
    (pipe, sw)
}

#[test]
fn fack_one_per_b_bytes_per_flow_and_patched_at_the_source_leaf() {
    let (pipe, mut sw) = source_leaf(10_000);
    let c = &pipe.control;
    let mut now = 1_000_000_000u64;
    // The receiver's real ACK passes down to h1 first: the leaf remembers it.
    now += 1000;
    let out = sw.inject(3, &ack_v4(1_000_000, 2000, (555, 666)), now);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 1);
    let mut facks = Vec::new();
    let mut flagged = 0;
    for k in 0..20u32 {
        now += 1_000_000;
        let seq = 1_000_000 + k * 1400;
        let out = sw.inject(
            1,
            &tcp_v4(0x10, seq, 7000, 500, Some((10 + k, 555)), &[0; 1400]),
            now,
        );
        for o in &out {
            if o.port == 1 {
                facks.push((seq, o.bytes.clone()));
            } else {
                assert!(o.port == 3 || o.port == 4, "{o:?}");
                if o.bytes[15] & 0x60 != 0 {
                    flagged += 1;
                }
            }
        }
    }
    // One FACK per B = 10,000 bytes of the flow: at seq 1,000,000, then at the first segment
    // 10,000 bytes later (1,011,200), and so on; each of those segments carries flag (b) up.
    let at: Vec<u32> = facks.iter().map(|(s, _)| *s).collect();
    assert_eq!(at, [1_000_000, 1_011_200, 1_022_400]);
    assert_eq!(
        flagged, 20,
        "every other segment carries flag (a), these flag (b)"
    );
    // Each FACK reached h1 patched: ack and timestamps of the last real ACK, its window × 1.25,
    // no marks, valid checksums.
    for (seq, f) in &facks {
        let s = etherparse::SlicedPacket::from_ethernet(f).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = &s.net else {
            panic!()
        };
        assert_eq!(ip.header().dcp().value(), 0);
        assert_eq!(
            ip.header().to_header().calc_header_checksum(),
            ip.header().header_checksum()
        );
        let Some(etherparse::TransportSlice::Tcp(tcp)) = &s.transport else {
            panic!()
        };
        assert_eq!(tcp.sequence_number(), 7000);
        assert_eq!(tcp.acknowledgment_number(), 1_000_000);
        assert_eq!(tcp.window_size(), 2500);
        assert!(tcp.ack() && !tcp.syn() && !tcp.fin() && tcp.payload().is_empty());
        let want = tcp
            .to_header()
            .calc_checksum_ipv4(&ip.header().to_header(), &[])
            .unwrap();
        assert_eq!(tcp.checksum(), want, "FACK for {seq}");
        let ts: Vec<_> = tcp.options_iterator().collect();
        assert!(
            ts.contains(&Ok(TcpOptionElement::Timestamp(555, 666))),
            "{ts:?}"
        );
    }
    assert_eq!(reg(c, "ingress.rc_seq", rc_cell(&pipe)), 1_022_400);
}

fn rc_cell(pipe: &Arc<Pipeline>) -> usize {
    // The cell that holds the flow's rate-control state: the one non-zero rc_seq cell.
    let c = &pipe.control;
    (0..p4te::FLOW_CELLS)
        .find(|&i| reg(c, "ingress.rc_seq", i) != 0)
        .unwrap()
}

#[test]
fn fack_without_a_real_ack_to_patch_from_is_dropped_and_counted() {
    let (pipe, mut sw) = source_leaf(10_000);
    let out = sw.inject(
        1,
        &tcp_v4(0x10, 1_000_000, 7, 500, None, &[0; 100]),
        1_000_000_000,
    );
    assert_eq!(out.iter().filter(|o| o.port == 1).count(), 0, "{out:?}");
    assert_eq!(drops(&pipe.control, "p4te_fack_without_ack"), 1);
}

#[test]
fn rate_adaptation_off_makes_no_facks() {
    let t = fabric("p4te-nra", &[]);
    let pipe = switch(&t, "leaf1");
    apply(&pipe.control, "meter_set class_rate 513 1 1 1 1");
    let mut sw = SimSwitch::new(pipe.clone());
    sw.inject(3, &ack_v4(1, 2000, (1, 1)), 1_000_000_000);
    let out = sw.inject(
        1,
        &tcp_v4(0x10, 1_000_000, 7, 500, None, &[0; 100]),
        1_001_000_000,
    );
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].bytes[15], 0x10, "no flags");
}

#[test]
fn hosts_cannot_forge_flags_and_the_destination_leaf_clears_them() {
    let t = fabric("p4te", &[]);
    let pipe = switch(&t, "leaf1");
    let mut sw = SimSwitch::new(pipe.clone());
    // From h1 with both marks: cleared on the way in (untagged ACK-like traffic; no FACK).
    let out = sw.inject(1, &tcp_v4(0x60, 5, 7, 500, None, &[0; 10]), 1_000_000_000);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes[15], 0);
    // From a spine toward h1 with flag (b): cleared before delivery.
    let mut down = ack_v4(1, 2000, (1, 1));
    set_tos(&mut down, 0x40 | 0x08);
    let out = sw.inject(3, &down, 1_001_000_000);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 1);
    assert_eq!(out[0].bytes[15], 0x08);
}

#[test]
fn the_plan_programs_leaf_spine_and_fat_tree() {
    use topo::{GenProps, fat_tree};
    let t = fabric("p4te", &[]);
    // Δ = round(K / 3), K = 6 at 100 Mb/s: Δ = 2, as the paper's.
    let plans = programs::fabric_plan(&t).unwrap();
    assert!(
        plans["leaf1"]
            .routes
            .contains(&"register_write qdepth_delta 0 2".to_string())
    );
    let l = LinkProps {
        rate_bps: RATE,
        delay_us: 10,
        buffer: 64,
    };
    let mut ft = fat_tree(4, GenProps { host: l, fabric: l });
    for s in &mut ft.switches {
        s.program = "p4te".into();
    }
    let mut sim = Sim::new(&ft, Options::new(10_000_000, 1)).unwrap();
    sim.run();
}

#[test]
fn fack_anti_repeat_holds_when_the_source_leaf_is_also_the_destination_leaf() {
    // h1 -> h2 under one leaf: the leaf sets flag (a) and is also the last hop. The flag must
    // survive to this leaf's own egress (a regression: clearing it in ingress made every
    // segment a FACK).
    let (pipe, mut sw) = source_leaf(10_000);
    let mut now = 1_000_000_000u64;
    // h2's real ACK to h1 (so FACKs can be patched).
    let mut ack = ack_v4(1_000_000, 2000, (555, 666));
    ack[26..30].copy_from_slice(&[10, 0, 1, 2]);
    set_tos(&mut ack, 0);
    fix_tcp(&mut ack);
    sw.inject(2, &ack, now);
    let mut facks = 0;
    for k in 0..20u32 {
        now += 1_000_000;
        let seq = 1_000_000 + k * 1400;
        let data = tcp_v4_to([10, 0, 1, 2], 0x10, seq, 7000, 500, None, &[0; 1400]);
        for o in sw.inject(1, &data, now) {
            if o.port == 1 {
                facks += 1;
            } else {
                assert_eq!(o.port, 2);
                assert_eq!(o.bytes[15], 0x10, "h2 gets its packet without flags");
            }
        }
    }
    assert_eq!(facks, 3, "one FACK per 10,000 bytes");
    assert_eq!(
        reg(&pipe.control, "ingress.rc_seq", rc_cell(&pipe)),
        1_022_400
    );
}

#[test]
fn optional_ecn_marks_beyond_k_only_when_the_plan_asks() {
    // h3's downlink (100 Mb/s, K = 6) offered 125 Mb/s of ECT traffic.
    let ect = ["h4>h3 rate=62.5M tos=2", "h1>h3 rate=62.5M tos=2"];
    let ce = |params: &[(&str, &str)]| {
        let (r, _) = run(&fabric("p4te", params), 200, &ect, false);
        num(&r, &["hosts", "h3", "rx_ecn_ce"])
    };
    assert_eq!(ce(&[]), 0, "the paper's P4TE marks nothing");
    assert!(ce(&[("ecn", "1")]) > 1000);
}
