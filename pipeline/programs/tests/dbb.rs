//! DBB (docs/dbb.md, whose "Open questions" lists the A-DBB ids) as a program: `pisa-sim` fabrics
//! whose links carry exactly the compiler's `N_ij` packets per dispatching cycle, the shared and
//! independent counters of §III-E on one switch, the reverse direction (A-DBB-6), malformed frames
//! and the plan's errors. Tests are named after the paper's sections.

use std::collections::BTreeMap;

use analysis::dbb::{Input, compile, compile_unbalanced};
use hosts::json::Json;
use programs::PlanError;
use programs::dbb::compiler_links;
use topo::{GenProps, LinkProps, Topology, dbb as dbb_topology, fat_tree, leaf_spine};

mod common;
use common::{drops, num, planned, reg, write_line};

fn with_program(mut t: Topology, program: &str) -> Topology {
    for s in &mut t.switches {
        s.program = program.into();
    }
    t
}

fn run(t: &Topology, ms: u64, flows: &[&str]) -> Json {
    common::sim_run(t, ms, 7, flows)
}

use common::sim_flows as flows;

/// Packets each switch port sent, for every switch-to-switch link (`switch:port`).
fn link_tx(t: &Topology, r: &Json) -> BTreeMap<String, u64> {
    compiler_links(t)
        .0
        .iter()
        .map(|l| {
            let id = l.id.clone().unwrap();
            let (sw, port) = id.split_once(':').unwrap();
            let n = num(r, &["switches", sw, "ports", port, "tx_packets"]);
            (id, n)
        })
        .collect()
}

/// What the compiler says each link carries when pair (src, dst) sends `cycles` whole cycles.
fn expected(t: &Topology, pairs: &[(&str, &str, u64)]) -> BTreeMap<String, u64> {
    let (links, _) = compiler_links(t);
    let mut want: BTreeMap<String, u64> =
        links.iter().map(|l| (l.id.clone().unwrap(), 0)).collect();
    for &(src, dst, packets) in pairs {
        let out = compile(&Input {
            source: src.into(),
            sink: dst.into(),
            links: links.clone(),
        })
        .unwrap();
        assert_eq!(
            packets % out.n,
            0,
            "{src}>{dst}: {packets} is not whole cycles of {}",
            out.n
        );
        for lp in &out.link_packets {
            *want.get_mut(links[lp.link].id.as_ref().unwrap()).unwrap() +=
                lp.packets * (packets / out.n);
        }
    }
    want
}

/// A 3x3 leaf-spine whose spine1 links run at twice the others' rate, so that every pair splits
/// 2:1:1 over the spines (N = 4). Leaf l has h(2l-1), h(2l); its uplinks are ports 3, 4, 5.
fn uneven_leaf_spine(program: &str) -> Topology {
    let host = LinkProps {
        rate_bps: 100_000_000,
        delay_us: 10,
        buffer: 64,
    };
    let mut t = leaf_spine(3, 3, 2, 1.0, host);
    for l in &mut t.links {
        if [&l.a, &l.b]
            .iter()
            .any(|e| matches!(e, topo::End::Switch(n, _) if n == "spine1"))
        {
            l.props.rate_bps *= 2;
        }
    }
    with_program(t, program)
}

#[test]
fn sec_iii_c_link_counts_over_whole_cycles_equal_n_ij_on_a_leaf_spine() {
    for program in ["dbb-shared", "dbb-independent"] {
        let t = uneven_leaf_spine(program);
        // Three pairs at once, 40 packets each (10 cycles of N = 4), one of them from leaf2.
        let r = run(
            &t,
            50,
            &[
                "h1>h3 rate=1000pps size=500 stop_ms=40",
                "h2>h5 rate=1000pps size=700 stop_ms=40",
                "h4>h1 rate=1000pps size=500 stop_ms=40",
            ],
        );
        for f in flows(&r) {
            assert_eq!(num(f, &["sent"]), 40);
            assert_eq!(num(f, &["received"]), 40);
        }
        let got = link_tx(&t, &r);
        let want = expected(
            &t,
            &[
                ("leaf1", "leaf2", 40),
                ("leaf1", "leaf3", 40),
                ("leaf2", "leaf1", 40),
            ],
        );
        assert_eq!(got, want, "{program}");
        // The 2:1:1 split: leaf1's uplink to spine1 carries half of both of its pairs.
        assert_eq!(got["leaf1:3"], 40);
        assert_eq!((got["leaf1:4"], got["leaf1:5"]), (20, 20));
        // Into leaf2 only leaf1 > leaf2 (half of it); into leaf1 only leaf2 > leaf1.
        assert_eq!(
            (got["spine1:2"], got["spine1:1"], got["spine2:1"]),
            (20, 20, 10)
        );
    }
}

/// The paper's Fig. 5, its SIRs 1:4 (stage 1), 1:1:3:5 (stage 2), 2:3 (stage 3) as rates.
fn fig5(program: &str) -> Topology {
    let t = Topology::parse(
        "defaults delay=10us buffer=64\n\
         switch s1\nswitch s2\nswitch s3\nswitch s4\nswitch s5\nswitch s6\n\
         host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\nhost h2 ipv4=10.0.1.2 ipv6=fd00::1:2\n\
         host h6 ipv4=10.0.6.1 ipv6=fd00::6:1\nhost h7 ipv4=10.0.6.2 ipv6=fd00::6:2\n\
         link s1:1 h1 rate=1G\nlink s1:4 h2 rate=1G\n\
         link s1:2 s2:1 rate=50M\nlink s1:3 s3:1 rate=200M\n\
         link s2:2 s4:1 rate=25M\nlink s2:3 s5:1 rate=25M\n\
         link s3:2 s4:2 rate=75M\nlink s3:3 s5:2 rate=125M\n\
         link s4:3 s6:1 rate=100M\nlink s5:3 s6:2 rate=150M\n\
         link s6:3 h6 rate=1G\nlink s6:4 h7 rate=1G\n",
    )
    .unwrap();
    with_program(t, program)
}

#[test]
fn sec_iii_d_fig5_unequal_bandwidth_links_carry_table_iv_exactly() {
    for program in ["dbb-shared", "dbb-independent"] {
        let t = fig5(program);
        // 10 cycles of N = 10 in one flow; with independent counters a second flow of the pair
        // keeps its own cycle, so it too must send whole cycles (5 here).
        let r = run(
            &t,
            120,
            &[
                "h1>h6 rate=1000pps size=500 stop_ms=100",
                "h2>h7 rate=500pps size=300 stop_ms=100",
            ],
        );
        assert_eq!(num(&flows(&r)[0], &["received"]), 100);
        assert_eq!(num(&flows(&r)[1], &["received"]), 50);
        let got = link_tx(&t, &r);
        // Table IV: per cycle S1-S2 2, S1-S3 8, S2-S4 1, S2-S5 1, S3-S4 3, S3-S5 5, S4-S6 4,
        // S5-S6 6; 15 cycles in all.
        let table_iv = [
            ("s1:2", 2),
            ("s1:3", 8),
            ("s2:2", 1),
            ("s2:3", 1),
            ("s3:2", 3),
            ("s3:3", 5),
            ("s4:3", 4),
            ("s5:3", 6),
        ];
        for (link, per_cycle) in table_iv {
            assert_eq!(got[link], 15 * per_cycle, "{program} {link}");
        }
        // Nothing goes back toward s1 (UDP: no ACKs).
        for back in [
            "s2:1", "s3:1", "s4:1", "s4:2", "s5:1", "s5:2", "s6:1", "s6:2",
        ] {
            assert_eq!(got[back], 0, "{program} {back}");
        }
        assert_eq!(got, expected(&t, &[("s1", "s6", 150)]));
    }
}

fn e8(program: &str) -> Topology {
    let link = LinkProps {
        rate_bps: 100_000_000,
        delay_us: 10,
        buffer: 64,
    };
    with_program(
        dbb_topology(GenProps {
            host: link,
            fabric: link,
        }),
        program,
    )
}

#[test]
fn sec_iv_parallel_links_of_the_e8_fabric_each_carry_their_share() {
    let t = e8("dbb");
    // The paper's host pairs; 4 x 40 packets of one pair s1 > s8 (N = 4).
    let pairs = ["h1>h9", "h3>h10", "h6>h11", "h8>h12"];
    let specs: Vec<String> = pairs
        .iter()
        .map(|p| format!("{p} rate=1000pps size=1000 stop_ms=40"))
        .collect();
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let r = run(&t, 60, &specs);
    let got = link_tx(&t, &r);
    assert_eq!(got, expected(&t, &[("s1", "s8", 160)]));
    // s6 and s7 reach s8 over two parallel links each; every one of the 12 forward links
    // carries 40.
    for link in [
        "s1:9", "s1:10", "s1:11", "s1:12", "s2:2", "s3:2", "s4:2", "s5:2", "s6:3", "s6:4", "s7:3",
        "s7:4",
    ] {
        assert_eq!(got[link], 40, "{link}");
    }
}

#[test]
fn a_dbb_6_acks_take_ecmp_unless_configured() {
    // One TCP flow of 40 segments: its 40 pure ACKs go back s8 > s1.
    let flow = ["h1>h9 rate=1000pps size=1000 stop_ms=40 proto=tcp"];
    let uplinks = |r: &Json| -> Vec<u64> {
        (5..=8)
            .map(|p| {
                num(
                    r,
                    &["switches", "s8", "ports", &p.to_string(), "tx_packets"],
                )
            })
            .collect()
    };
    let r = run(&e8("dbb"), 60, &flow);
    assert_eq!(num(&flows(&r)[0], &["received"]), 40);
    assert_eq!(
        num(&r, &["hosts", "h1", "rx_packets"]),
        40,
        "every ACK arrived"
    );
    let mut acks = uplinks(&r);
    acks.sort_unstable();
    assert_eq!(
        acks,
        vec![0, 0, 0, 40],
        "ECMP keeps the flow's ACKs on one path"
    );
    // The data went the DBB way: 10 per uplink of s1.
    for p in 9..=12 {
        assert_eq!(
            num(
                &r,
                &["switches", "s1", "ports", &p.to_string(), "tx_packets"]
            ),
            10
        );
    }
    // acks=dbb: the ACKs are a pair's packets like any other, 10 per cycle position.
    let mut t = e8("dbb");
    for s in &mut t.switches {
        s.params.insert("acks".into(), "dbb".into());
    }
    let r = run(&t, 60, &flow);
    assert_eq!(uplinks(&r), vec![10, 10, 10, 10]);
}

/// The ports a series of frames leaves by.
fn ports_of(sw: &mut sim::SimSwitch, frames: &[&Vec<u8>]) -> Vec<u16> {
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let out = sw.inject(1, f, 1_000_000 + i as u64 * 1000);
            assert_eq!(out.len(), 1, "frame {i}");
            out[0].port
        })
        .collect()
}

fn udp(src: [u8; 4], dst: [u8; 4], sport: u16) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0xee, 0, 0, 0, 0], [2, 0x5e, 0, 0, 0, 0])
        .ipv4(src, dst, 64)
        .udp(sport, 5001);
    let mut out = Vec::new();
    b.write(&mut out, &[0u8; 200]).unwrap();
    out
}

#[test]
fn sec_iii_e_shared_and_independent_counters_differ_for_two_flows_of_one_pair() {
    // s1 of the E8 fabric: the pair s1 > s8 cycles over the uplinks 9-12, in the order the
    // compiler lists them.
    let t = e8("dbb");
    let (links, ports) = compiler_links(&t);
    let out = compile(&Input {
        source: "s1".into(),
        sink: "s8".into(),
        links,
    })
    .unwrap();
    let cycle: Vec<u16> = out.lists[0].next_hops.iter().map(|id| ports[id]).collect();
    assert_eq!(out.lists[0].switch, "s1");
    let mut sorted = cycle.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec![9, 10, 11, 12]);
    // Two flows of the pair, perfectly interleaved.
    let (a, b) = (
        udp([10, 0, 1, 1], [10, 0, 8, 1], 40000),
        udp([10, 0, 1, 2], [10, 0, 8, 2], 40001),
    );
    let frames: Vec<&Vec<u8>> = (0..8).map(|i| if i % 2 == 0 { &a } else { &b }).collect();
    let split = |ports: Vec<u16>| -> (Vec<u16>, Vec<u16>) {
        (
            ports.iter().step_by(2).copied().collect(),
            ports.iter().skip(1).step_by(2).copied().collect(),
        )
    };
    // Shared: one counter for the pair, so flow A takes every other entry and never the rest.
    let (pipe, mut sw) = planned(&t, "s1");
    let (fa, fb) = split(ports_of(&mut sw, &frames));
    let c = cycle.clone();
    assert_eq!(fa, vec![c[0], c[2], c[0], c[2]]);
    assert_eq!(fb, vec![c[1], c[3], c[1], c[3]]);
    assert_eq!(
        reg(&pipe.control, "ingress.dbb_pair_count", 1),
        0,
        "8 packets: 2 cycles"
    );
    // Independent: each flow walks the whole cycle from its start.
    let (_, mut sw) = planned(&e8("dbb-independent"), "s1");
    let (fa, fb) = split(ports_of(&mut sw, &frames));
    assert_eq!(fa, c);
    assert_eq!(fb, c);
}

/// Independent counters are hash cells that nothing resets: a flow of another pair that lands in
/// a used cell shares (and continues) its counter, counted as a collision (issue 33).
#[test]
fn sec_iii_e_a_cell_shared_by_two_pairs_is_counted_as_a_collision() {
    // leaf1's hosts 10.0.1.x to leaf2 (10.0.2.x) and to leaf3 (10.0.3.x): two pairs.
    let t = uneven_leaf_spine("dbb-independent");
    let (pipe, mut sw) = planned(&t, "leaf1");
    let c = &pipe.control;
    let cell_of_pair = |pair: u64| -> Vec<usize> {
        (0..8192)
            .filter(|&i| reg(c, "ingress.dbb_flow_pair", i) == pair)
            .collect()
    };
    let a = udp([10, 0, 1, 1], [10, 0, 2, 1], 40000);
    ports_of(&mut sw, &[&a]);
    let pair_a = (1..=u64::from(u16::MAX))
        .find(|&p| !cell_of_pair(p).is_empty())
        .unwrap();
    let cell = cell_of_pair(pair_a)[0];
    assert_eq!(reg(c, "ingress.dbb_flow_count", cell), 1);
    assert_eq!(reg(c, "ingress.dbb_flow_collisions", 0), 0);
    // Flows of the other pair, one port at a time, until one lands in flow A's cell.
    let mut hit = None;
    for sport in 1000..60000u16 {
        let b = udp([10, 0, 1, 1], [10, 0, 3, 1], sport);
        ports_of(&mut sw, &[&b]);
        if reg(c, "ingress.dbb_flow_pair", cell) != pair_a {
            hit = Some(sport);
            break;
        }
    }
    assert!(
        hit.is_some(),
        "no port of the other pair shares flow A's cell"
    );
    assert_eq!(reg(c, "ingress.dbb_flow_collisions", 0), 1);
    // The other pair's flow continued A's counter (left at 1) rather than starting at 0: it took
    // index 1 and left 2 (its list is longer than two entries).
    assert_eq!(reg(c, "ingress.dbb_flow_count", cell), 2);
}

#[test]
fn malformed_and_short_frames_are_dropped_with_a_reason() {
    let t = e8("dbb");
    let (pipe, mut sw) = planned(&t, "s1");
    let c = &pipe.control;
    let good = udp([10, 0, 1, 1], [10, 0, 8, 1], 40000);
    for cut in 0..good.len() {
        assert!(sw.inject(1, &good[..cut], 1).is_empty(), "cut at {cut}");
    }
    assert_eq!(drops(c, "malformed"), good.len() as u64);
    assert_eq!(reg(c, "ingress.dbb_pair_count", 1), 0, "no counter moved");
    assert_eq!(sw.inject(1, &good, 1).len(), 1);
    // A pair whose list has no dispatch entry, and one of length 0.
    write_line(
        c,
        "table_add dbb_pair_v4 dbb_shared 192.168.0.0&&&255.255.0.0 10.0.8.0&&&255.255.255.0 0&&&0 => 999 3 1",
    );
    write_line(
        c,
        "table_add dbb_pair_v4 dbb_independent 192.168.1.0&&&255.255.255.0 10.0.8.0&&&255.255.255.0 0&&&0 => 998 0 1",
    );
    assert!(
        sw.inject(1, &udp([192, 168, 0, 1], [10, 0, 8, 1], 1), 1)
            .is_empty()
    );
    assert!(
        sw.inject(1, &udp([192, 168, 1, 1], [10, 0, 8, 1], 1), 1)
            .is_empty()
    );
    assert_eq!(drops(c, "dbb_no_hop"), 2);
    // A pure ACK of the pair takes ECMP: the same flow's ACKs always leave by one port.
    let b = etherparse::PacketBuilder::ethernet2([2, 0xee, 0, 0, 0, 0], [2, 0x5e, 0, 0, 0, 0])
        .ipv4([10, 0, 1, 1], [10, 0, 8, 1], 64)
        .tcp(5, 6, 1000, 64240)
        .ack(1);
    let mut ack = Vec::new();
    b.write(&mut ack, &[]).unwrap();
    let first = sw.inject(1, &ack, 1)[0].port;
    for _ in 0..4 {
        assert_eq!(sw.inject(1, &ack, 1)[0].port, first);
    }
}

#[test]
fn sec_ii_a_pair_outside_the_model_falls_back_to_ecmp_and_bad_settings_fail() {
    // t2 hangs off a by two parallel links but off b by one: stage 2 of t1 -> t2 has
    // out-degrees 2 and 1. That pair alone takes ECMP, with a warning in t1's plan; t2 -> t1 is
    // inside the model and keeps its lists (issue 33: the whole plan used to fail).
    let t = Topology::parse(
        "switch t1 program=dbb\nswitch a program=dbb\nswitch b program=dbb\nswitch t2 program=dbb\n\
         host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\nhost h2 ipv4=10.0.2.1 ipv6=fd00::2:1\n\
         link t1:1 h1\nlink t2:1 h2\nlink t1:2 a:1\nlink t1:3 b:1\nlink a:2 t2:2\nlink a:3 t2:3\n\
         link b:2 t2:4\n",
    )
    .unwrap();
    let plans = programs::fabric_plan(&t).unwrap();
    let t1 = &plans["t1"].routes;
    let warning = t1.iter().find(|l| l.starts_with("# warning:")).unwrap();
    assert!(
        warning.contains("dbb: ToR pair t1 -> t2")
            && warning.contains("outside the paper's model")
            && warning.ends_with("pair 1 uses ECMP"),
        "{warning}"
    );
    assert!(
        t1.iter()
            .any(|l| l.starts_with("table_add dbb_pair_v4 dbb_ecmp ") && l.ends_with("=> 1 1"))
    );
    assert!(
        !t1.iter()
            .any(|l| l.starts_with("table_add dbb_dispatch dbb_hop 1 "))
    );
    assert!(
        plans["t2"]
            .routes
            .iter()
            .any(|l| l.starts_with("table_add dbb_dispatch dbb_hop 2 "))
    );
    assert!(
        !plans["t2"]
            .routes
            .iter()
            .any(|l| l.starts_with("# warning:"))
    );
    // At t1, h1 -> h2 leaves by ECMP over both uplinks, counted as pair 1's fallback.
    let (pipe, mut sw) = planned(&t, "t1");
    let frames: Vec<Vec<u8>> = (0..16)
        .map(|i| udp([10, 0, 1, 1], [10, 0, 2, 1], 40000 + i))
        .collect();
    let out: Vec<u16> = ports_of(&mut sw, &frames.iter().collect::<Vec<_>>());
    assert!(out.iter().all(|p| [2, 3].contains(p)), "{out:?}");
    assert_eq!(reg(&pipe.control, "ingress.dbb_ecmp_count", 1), 16);
    assert_eq!(drops(&pipe.control, "dbb_no_hop"), 0);
    let mut t = e8("dbb");
    t.switches[0].params.insert("counter".into(), "both".into());
    let e = programs::fabric_plan(&t).unwrap_err();
    assert!(
        matches!(&e, PlanError::BadValue { switch, key, value, .. }
            if switch == "s1" && key == "counter" && value == "both"),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(
        e.contains("switch s1: counter=both: shared or independent"),
        "{e}"
    );
    let mut t = e8("dbb-shared");
    t.switches[0]
        .params
        .insert("counter".into(), "independent".into());
    let e = programs::fabric_plan(&t).unwrap_err().to_string();
    assert!(e.contains("contradicts the scheme dbb-shared"), "{e}");
    let mut t = e8("dbb");
    t.switches[0].params.insert("acks".into(), "spray".into());
    let e = programs::fabric_plan(&t).unwrap_err().to_string();
    assert!(e.contains("acks=spray: ecmp or dbb"), "{e}");
    // A good plan: the sink has no pair entry for s1 > s8, the source one per family.
    let plans = programs::fabric_plan(&e8("dbb")).unwrap();
    let count = |sw: &str, what: &str| plans[sw].routes.iter().filter(|l| l.contains(what)).count();
    assert_eq!(count("s1", "table_add dbb_pair_v4"), 1);
    assert_eq!(count("s1", "table_add dbb_pair_v6"), 1);
    assert_eq!(count("s8", "table_add dbb_pair_v4"), 1, "only s8 > s1");
    assert_eq!(count("s1", "dbb_dispatch"), 4);
}

/// A k=4 fat-tree with one failed link (p2a1 - core1): every ToR pair between pod 2 and another
/// pod is outside the model (uneven out-degrees in a stage) and takes ECMP, with a warning each;
/// the others keep DBB.
#[test]
fn sec_ii_a_failed_link_sends_only_the_pairs_it_touches_to_ecmp() {
    let link = LinkProps {
        rate_bps: 100_000_000,
        delay_us: 10,
        buffer: 64,
    };
    let mut t = with_program(
        fat_tree(
            4,
            GenProps {
                host: link,
                fabric: link,
            },
        ),
        "dbb",
    );
    let failed =
        |e: &topo::End| matches!(e, topo::End::Switch(s, _) if s == "p2a1" || s == "core1");
    let before = t.links.len();
    t.links.retain(|l| !(failed(&l.a) && failed(&l.b)));
    assert_eq!(t.links.len(), before - 1);
    let plans = programs::fabric_plan(&t).unwrap();
    let warnings: Vec<&String> = plans
        .values()
        .flat_map(|p| &p.routes)
        .filter(|l| l.starts_with("# warning:"))
        .collect();
    // Pod 2's two ToRs against the six other ToRs, both ways.
    assert_eq!(warnings.len(), 24, "{warnings:#?}");
    assert!(
        warnings
            .iter()
            .all(|w| w.contains("p2e1") || w.contains("p2e2")),
        "{warnings:#?}"
    );
    // At p1e1: h1 -> h5 (p2e1, 10.0.3.0/24) falls back, counted; h1 -> h9 (p3e1, 10.0.5.0/24)
    // still follows its list.
    let (pipe, mut sw) = planned(&t, "p1e1");
    let to_pod2 = udp([10, 0, 1, 1], [10, 0, 3, 1], 40000);
    let to_pod3 = udp([10, 0, 1, 1], [10, 0, 5, 1], 40000);
    ports_of(&mut sw, &[&to_pod2, &to_pod2, &to_pod2]);
    ports_of(&mut sw, &[&to_pod3]);
    let pair_of = |dst: &str| {
        plans["p1e1"]
            .routes
            .iter()
            .find(|l| l.starts_with("table_add dbb_pair_v4") && l.contains(dst))
            .and_then(|l| {
                l.split("=> ")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
            .unwrap()
    };
    assert_eq!(
        reg(&pipe.control, "ingress.dbb_ecmp_count", pair_of("10.0.3.")),
        3
    );
    assert_eq!(
        reg(&pipe.control, "ingress.dbb_ecmp_count", pair_of("10.0.5.")),
        0
    );
    // One packet of that pair: its list's counter moved one entry.
    assert_eq!(
        reg(&pipe.control, "ingress.dbb_pair_count", pair_of("10.0.5.")),
        1
    );
    assert_eq!(drops(&pipe.control, "dbb_no_hop"), 0);
}

#[test]
fn sec_iii_a_fat_tree_pairs_use_every_core_through_a_balanced_max_flow() {
    let link = LinkProps {
        rate_bps: 100_000_000,
        delay_us: 10,
        buffer: 64,
    };
    let t = with_program(
        fat_tree(
            4,
            GenProps {
                host: link,
                fabric: link,
            },
        ),
        "dbb",
    );
    let (links, _) = compiler_links(&t);
    let input = Input {
        source: "p1e1".into(),
        sink: "p2e1".into(),
        links,
    };
    // Edmonds-Karp fills one core per aggregation switch: two of the four paths.
    let plain = compile_unbalanced(&input).unwrap();
    let cores = |o: &analysis::dbb::Output| -> Vec<String> {
        let mut c: Vec<String> = o.paths.iter().map(|p| p[2].clone()).collect();
        c.sort();
        c.dedup();
        c
    };
    assert_eq!(
        (plain.n, cores(&plain)),
        (2, vec!["core1".into(), "core3".into()])
    );
    // The balanced max-flow has the same value and uses all four.
    let balanced = compile(&input).unwrap();
    assert_eq!(balanced.max_flow, plain.max_flow);
    assert_eq!(balanced.n, 4);
    assert_eq!(cores(&balanced), ["core1", "core2", "core3", "core4"]);
    // In pisa-sim: 40 packets h1 > h5 (p1e1 > p2e1) put 10 on each core's link into pod 2, and
    // 20 on each of p1e1's uplinks; h1 > h3 (p1e1 > p1e2, inside the pod) uses both aggregation
    // switches.
    let r = run(
        &t,
        60,
        &[
            "h1>h5 rate=1000pps size=500 stop_ms=40",
            "h2>h3 rate=1000pps size=500 stop_ms=40",
        ],
    );
    let got = link_tx(&t, &r);
    assert_eq!(
        got,
        expected(&t, &[("p1e1", "p2e1", 40), ("p1e1", "p1e2", 40)])
    );
    for core in 1..=4 {
        assert_eq!(got[&format!("core{core}:2")], 10, "core{core} into pod 2");
    }
    assert_eq!((got["p1e1:3"], got["p1e1:4"]), (40, 40));
    assert_eq!((got["p1a1:2"], got["p1a2:2"]), (20, 20), "down to p1e2");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

    /// Bit flips anywhere in a frame of the pair (a TCP pure ACK or a UDP datagram) never panic:
    /// each frame leaves by one port or is counted as a drop.
    #[test]
    fn mutated_frames_never_panic(
        flips in proptest::collection::vec((0usize..54, proptest::prelude::any::<u8>()), 1..6),
        tcp in proptest::prelude::any::<bool>(),
    ) {
        let (pipe, mut sw) = planned(&e8("dbb-independent"), "s1");
        let mut f = if tcp {
            let b = etherparse::PacketBuilder::ethernet2([2, 0xee, 0, 0, 0, 0], [2, 0x5e, 0, 0, 0, 0])
                .ipv4([10, 0, 1, 1], [10, 0, 8, 1], 64)
                .tcp(5, 6, 1000, 64240)
                .ack(1);
            let mut v = Vec::new();
            b.write(&mut v, &[]).unwrap();
            v
        } else {
            udp([10, 0, 1, 1], [10, 0, 8, 1], 40000)
        };
        for (i, x) in flips {
            f[i] ^= x;
        }
        let out = sw.inject(1, &f, 1);
        let dropped: u64 = pipe.control.drop_counts().iter().map(|(_, d)| d.packets).sum();
        proptest::prop_assert!(out.len() == 1 || (out.is_empty() && dropped == 1));
    }
}
