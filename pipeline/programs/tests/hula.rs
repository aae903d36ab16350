//! HULA (Katta et al., SOSR 2016; docs/hula.md), deterministically: the program on one
//! in-memory switch, and whole fabrics in `pisa-sim` whose ToRs' packet generators send the probes.
//! Tests are named after the paper's sections.

use std::sync::Arc;

use hosts::json::Json;
use pipeline::commands::{Command, parse_line};
use pipeline::control::{Atomicity, Control};
use pipeline::runtime::{Config, Pipeline};
use programs::hula::{self, ETHERTYPE};
use sim::SimSwitch;
use sim::fabric::{Options, Sim};
use sim::flow::FlowSpec;
use topo::{GenProps, LinkProps, Topology, fat_tree, leaf_spine};

mod common;
use common::{drops, num, reg};

const RATE: u64 = 100_000_000;

fn host_link() -> LinkProps {
    LinkProps {
        rate_bps: RATE,
        delay_us: 10,
        buffer: 64,
    }
}

/// A 2x2 leaf-spine at 100 Mb/s: leaf1 has h1 (port 1), h2 (port 2) and uplinks 3 (spine1) and
/// 4 (spine2); leaf2 has h3, h4. ToR ids: leaf1 1, leaf2 2.
fn two_by_two() -> Topology {
    let mut t = leaf_spine(2, 2, 2, 1.0, host_link());
    for s in &mut t.switches {
        s.program = "hula".into();
    }
    t
}

fn run(t: &Topology, ms: u64, flows: &[&str]) -> (Json, Sim) {
    let mut opts = Options::new(ms * 1_000_000, 7);
    opts.drain_ns = 5_000_000;
    for (i, f) in flows.iter().enumerate() {
        opts.flows.push(FlowSpec::parse(f, i).unwrap());
    }
    let mut sim = Sim::new(t, opts).unwrap();
    (sim.run(), sim)
}

/// The ToR id the plan gives each switch with hosts, in topology order.
fn tor_ids(t: &Topology) -> Vec<(String, usize)> {
    t.switches
        .iter()
        .filter(|s| {
            t.hosts
                .iter()
                .any(|h| t.host_attachment(&h.name).map(|a| a.0) == Some(s.name.as_str()))
        })
        .enumerate()
        .map(|(i, s)| (s.name.clone(), i + 1))
        .collect()
}

#[test]
fn s3_probes_from_every_tor_reach_every_switch_in_a_leaf_spine() {
    let t = two_by_two();
    let (r, sim) = run(&t, 20, &[]);
    // Tp = 1 ms: each leaf's generator ticked about 20 times, the spines' never.
    for leaf in ["leaf1", "leaf2"] {
        let g = num(&r, &["switches", leaf, "generated"]);
        assert!((19..=21).contains(&g), "{leaf} generated {g}");
    }
    assert_eq!(num(&r, &["switches", "spine1", "generated"]), 0);
    // Every probe reached both spines and the other leaf, where it ended.
    let leaf1 = sim.control("leaf1").unwrap();
    let spine1 = sim.control("spine1").unwrap();
    let probes_rx = |c: &Control, port: usize| {
        let i = c
            .schema()
            .counters
            .iter()
            .position(|x| x.name == "ingress.hula_probes_rx")
            .unwrap();
        c.externs().counters[i].read(port).unwrap().packets
    };
    for port in [3, 4] {
        let n = probes_rx(leaf1, port);
        assert!((19..=21).contains(&n), "leaf1 port {port}: {n} probes");
    }
    for port in [1, 2] {
        let n = probes_rx(spine1, port);
        assert!((19..=21).contains(&n), "spine1 port {port}: {n} probes");
    }
    assert!(
        drops(leaf1, "hula_probe_end") >= 38,
        "probes end at the far ToR"
    );
    // Idle links: every path has utilisation 0; the best hops are the only possible ones at the
    // spines, one of the two uplinks at the leaves.
    assert!([3, 4].contains(&reg(leaf1, "ingress.hula_best_hop", 2)));
    assert_eq!(reg(leaf1, "ingress.hula_path_util", 2), 0);
    assert_eq!(reg(spine1, "ingress.hula_best_hop", 1), 1);
    assert_eq!(reg(spine1, "ingress.hula_best_hop", 2), 2);
    assert_eq!(
        reg(leaf1, "ingress.hula_update_time", 1),
        0,
        "a ToR keeps no entry for itself"
    );
}

#[test]
fn s3_every_switch_of_a_fat_tree_learns_a_best_hop_to_every_other_tor() {
    let mut t = fat_tree(
        4,
        GenProps {
            host: host_link(),
            fabric: host_link(),
        },
    );
    for s in &mut t.switches {
        s.program = "hula".into();
    }
    let tors = tor_ids(&t);
    assert_eq!(tors.len(), 8);
    let (_, sim) = run(&t, 10, &[]);
    for s in &t.switches {
        let c = sim.control(&s.name).unwrap();
        for (tor, id) in &tors {
            let known = reg(c, "ingress.hula_update_time", *id) != 0;
            assert_eq!(known, *tor != s.name, "{} about {tor} (ToR {id})", s.name);
        }
    }
}

#[test]
fn s3_the_best_hop_moves_away_from_an_uplink_that_other_traffic_loads() {
    let t = two_by_two();
    // Flow 1 starts once probes have named a best hop and stays on it (one flowlet: a packet
    // every 100 us, the gap is 500 us). Flow 2 starts 20 ms later, from another host.
    let (r, sim) = run(
        &t,
        40,
        &[
            "h1>h3 rate=80M size=1000 start_ms=5",
            "h2>h4 rate=40M size=1000 start_ms=25 sport=40001",
        ],
    );
    let leaf1 = sim.control("leaf1").unwrap();
    let tx = |p: &str| num(&r, &["switches", "leaf1", "ports", p, "tx_packets"]);
    let (a, b) = (tx("3"), tx("4"));
    let (loaded, other) = if a > b { (3, 4) } else { (4, 3) };
    let best = reg(leaf1, "ingress.hula_best_hop", 2);
    assert_eq!(
        best, other,
        "leaf1's best hop to leaf2 left the loaded uplink {loaded} (tx {a} / {b})"
    );
    // Flow 2 took the other uplink: all it sent crossed it (besides leaf1's own probes, one per
    // uplink per tick).
    let Some(Json::A(flows)) = r.get("flows") else {
        panic!("no flows")
    };
    let probes = num(&r, &["switches", "leaf1", "generated"]);
    let flow2 = num(&flows[1], &["received"]);
    assert!(flow2 > 50, "flow 2 ran: {flow2}");
    assert_eq!(
        tx(&other.to_string()) - probes,
        flow2,
        "flow 2 on uplink {other} (tx {a} / {b}, {probes} probes)"
    );
    // The path utilisation recorded for the best hop is that of the lightly loaded path.
    assert!(reg(leaf1, "ingress.hula_path_util", 2) < 200);
    // Neither flow was reordered (each stayed one flowlet on one path).
    for (i, f) in flows.iter().enumerate() {
        assert_eq!(num(f, &["reordered"]), 0, "flow {}", i + 1);
        assert_eq!(num(f, &["lost"]), 0, "flow {}", i + 1);
    }
}

/// leaf1 of [`two_by_two`] on one in-memory switch, programmed by the plan.
fn leaf1() -> (Arc<Pipeline>, SimSwitch) {
    let t = two_by_two();
    let pipe = Pipeline::new(programs::by_name("hula").unwrap(), 1, Config::default());
    let plans = programs::fabric_plan(&t).unwrap();
    for line in &plans["leaf1"].routes {
        match parse_line(pipe.control.schema(), line).unwrap() {
            Command::Write(u) => {
                for r in pipe.control.write(&u, Atomicity::ContinueOnError) {
                    r.unwrap_or_else(|e| panic!("{line}: {e}"));
                }
            }
            _ => panic!("{line}"),
        }
    }
    let sw = SimSwitch::new(pipe.clone());
    (pipe, sw)
}

fn probe(tor: u32, util: u8) -> Vec<u8> {
    let mut f = hula::probe_frame(tor, [2, 0x5e, 0, 0, 0, 2]);
    f[17] = util;
    f
}

#[test]
fn s3_probe_processing_keeps_the_least_utilised_path_and_tracks_a_worse_best_hop() {
    let (pipe, mut sw) = leaf1();
    let c = &pipe.control;
    let ms = 1_000_000;
    // Port 3 first: the only path known.
    assert!(
        sw.inject(3, &probe(2, 100), ms).is_empty(),
        "probes end at a ToR"
    );
    assert_eq!(reg(c, "ingress.hula_best_hop", 2), 3);
    assert_eq!(reg(c, "ingress.hula_path_util", 2), 100);
    // A better path through port 4 wins.
    sw.inject(4, &probe(2, 40), ms + 10_000);
    assert_eq!(reg(c, "ingress.hula_best_hop", 2), 4);
    assert_eq!(reg(c, "ingress.hula_path_util", 2), 40);
    // A worse probe through another port changes nothing...
    sw.inject(3, &probe(2, 90), ms + 20_000);
    assert_eq!(reg(c, "ingress.hula_best_hop", 2), 4);
    assert_eq!(reg(c, "ingress.hula_path_util", 2), 40);
    // ...but the best hop's own path getting worse is tracked.
    sw.inject(4, &probe(2, 120), ms + 30_000);
    assert_eq!(reg(c, "ingress.hula_best_hop", 2), 4);
    assert_eq!(reg(c, "ingress.hula_path_util", 2), 120);
    // Once the entry is older than the keep-alive (3 Tp = 3 ms), any probe wins.
    sw.inject(3, &probe(2, 200), ms + 30_000 + 3_000_001);
    assert_eq!(reg(c, "ingress.hula_best_hop", 2), 3);
    assert_eq!(reg(c, "ingress.hula_path_util", 2), 200);
}

#[test]
fn s3_a_data_packet_takes_the_best_hop_at_a_new_flowlet_only() {
    let (pipe, mut sw) = leaf1();
    let c = &pipe.control;
    let ms = 1_000_000;
    let data = etherparse_udp();
    sw.inject(3, &probe(2, 10), ms);
    let first = sw.inject(1, &data, ms + 1000);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].port, 3, "the best hop");
    // Its MACs are those of the link to spine1.
    assert_eq!(&first[0].bytes[0..6], &[2, 0x5e, 0, 0, 0, 0]);
    // Port 4 becomes best; the flow keeps port 3 within the flowlet gap (500 us)...
    sw.inject(4, &probe(2, 0), ms + 2000);
    sw.inject(3, &probe(2, 50), ms + 2500);
    assert_eq!(reg(c, "ingress.hula_best_hop", 2), 4);
    assert_eq!(
        sw.inject(1, &data, ms + 300_000)[0].port,
        3,
        "299 us: the same flowlet"
    );
    let next = sw.inject(1, &data, ms + 900_000);
    assert_eq!(
        next[0].port, 4,
        "600 us later: a new flowlet, on the new best hop"
    );
    assert_eq!(&next[0].bytes[0..6], &[2, 0x5e, 0, 0, 0, 1], "spine2's MAC");
}

fn etherparse_udp() -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0xee, 0, 0, 0, 0], [2, 0x5e, 0, 0, 0, 0])
        .ipv4([10, 0, 1, 1], [10, 0, 2, 1], 64)
        .udp(40000, 5001);
    let mut out = Vec::new();
    b.write(&mut out, &[0u8; 100]).unwrap();
    out
}

#[test]
fn bad_probes_are_dropped_with_a_reason_and_touch_nothing() {
    let (pipe, mut sw) = leaf1();
    let c = &pipe.control;
    // From a host port: a host cannot pose as a path.
    assert!(sw.inject(1, &probe(2, 0), 1_000_000).is_empty());
    assert_eq!(drops(c, "hula_probe_from_host"), 1);
    assert_eq!(reg(c, "ingress.hula_update_time", 2), 0);
    // Our own id, an id out of range, and a truncated header.
    sw.inject(3, &probe(1, 0), 1_000_000);
    sw.inject(3, &probe(5000, 0), 1_000_000);
    sw.inject(3, &probe(0, 0), 1_000_000);
    assert_eq!(drops(c, "hula_own_probe"), 1);
    assert_eq!(drops(c, "hula_bad_tor"), 2);
    let mut short = vec![0u8; 16];
    short[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    sw.inject(3, &short, 1_000_000);
    let malformed: u64 = c
        .drop_counts()
        .iter()
        .filter(|(n, _)| n.starts_with("malformed"))
        .map(|(_, d)| d.packets)
        .sum();
    assert_eq!(malformed, 1);
    for tor in 0..4 {
        assert_eq!(reg(c, "ingress.hula_update_time", tor), 0);
    }
}
