//! Packet-level traffic splitting (Dixit et al., §III.A; docs/spray.md) as the `spray` program: its
//! random, counter, per-flow and per-prefix round-robin modes on one switch and in `pisa-sim`
//! fabrics, the counter's skew of the paper's Fig. 2, unique downward paths, malformed frames and
//! the plan's errors. Tests are named after the paper's sections.

use hosts::json::Json;
use programs::PlanError;
use programs::ecmp::dctcp_k;
use sim::SimSwitch;
use sim::fabric::{Options, Sim};
use sim::flow::FlowSpec;
use topo::{GenProps, LinkProps, Topology, fat_tree, leaf_spine};

mod common;
use common::{drops, num, planned, reg, write_line};

fn link() -> LinkProps {
    LinkProps {
        rate_bps: 100_000_000,
        delay_us: 10,
        buffer: 64,
    }
}

fn with_program(mut t: Topology, program: &str) -> Topology {
    for s in &mut t.switches {
        s.program = program.into();
    }
    t
}

/// A 2x4 leaf-spine at 100 Mb/s (uplinks 50 Mb/s): leaf1 has h1, h2 (ports 1, 2) and uplinks
/// 3-6 to spine1-4; leaf2 has h3, h4.
fn two_by_four(program: &str) -> Topology {
    with_program(leaf_spine(2, 4, 2, 1.0, link()), program)
}

fn fat_tree4(program: &str) -> Topology {
    with_program(
        fat_tree(
            4,
            GenProps {
                host: link(),
                fabric: link(),
            },
        ),
        program,
    )
}

use common::{sim_flows as flows, sim_run as run};

fn tx(r: &Json, sw: &str, port: u16, what: &str) -> u64 {
    num(r, &["switches", sw, "ports", &port.to_string(), what])
}

fn uplinks(r: &Json, what: &str) -> Vec<u64> {
    (3..=6).map(|p| tx(r, "leaf1", p, what)).collect()
}

fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, len: usize) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0xee, 0, 0, 0, 0], [2, 0x5e, 0, 0, 0, 2])
        .ipv4(src, dst, 64)
        .udp(sport, 5001);
    let mut out = Vec::new();
    b.write(&mut out, &vec![0u8; len]).unwrap();
    out
}

/// The port each frame leaves by.
fn ports_of(sw: &mut SimSwitch, frames: &[&Vec<u8>]) -> Vec<u16> {
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

#[test]
fn sec_iii_a1_random_is_roughly_uniform_and_independent_per_packet_with_a_fixed_seed() {
    let t = two_by_four("spray-random");
    let flow = ["h1>h3 rate=20000pps size=200 stop_ms=200"];
    let r = run(&t, 250, 7, &flow);
    assert_eq!(num(&flows(&r)[0], &["received"]), 4000);
    let counts = uplinks(&r, "tx_packets");
    assert_eq!(counts.iter().sum::<u64>(), 4000);
    // 1,000 expected per uplink, standard deviation 27.
    for (p, &n) in counts.iter().enumerate() {
        assert!((900..=1100).contains(&n), "uplink {}: {n} of 4000", p + 3);
    }
    // The seed decides: the same seed repeats the split exactly, another one changes it.
    assert_eq!(uplinks(&run(&t, 250, 7, &flow), "tx_packets"), counts);
    assert_ne!(uplinks(&run(&t, 250, 8, &flow), "tx_packets"), counts);
    // Each packet draws anew: one flow repeats its previous port about a quarter of the time
    // (round robin never would, a per-flow hash always).
    let (_, mut sw) = planned(&t, "leaf1");
    let f = udp([10, 0, 1, 1], [10, 0, 2, 1], 40000, 200);
    let ports = ports_of(&mut sw, &vec![&f; 400]);
    let repeats = ports.windows(2).filter(|w| w[0] == w[1]).count();
    assert!((60..=140).contains(&repeats), "{repeats} repeats of 399");
}

#[test]
fn sec_iii_a2_counter_balances_bytes_across_ports_within_one_packet() {
    // Three flows of three packet sizes, two of them Poisson, all from leaf1 to leaf2.
    let mixed = [
        "h1>h3 rate=8M size=200 pattern=poisson stop_ms=200",
        "h2>h4 rate=12M size=1400 pattern=poisson stop_ms=200",
        "h1>h4 rate=10M size=700 sport=50000 stop_ms=200",
    ];
    let largest = 1400 + 14;
    let t = two_by_four("spray-counter");
    let mut sim = Sim::new(&t, {
        let mut o = Options::new(250_000_000, 3);
        for (i, f) in mixed.iter().enumerate() {
            o.flows.push(FlowSpec::parse(f, i).unwrap());
        }
        o
    })
    .unwrap();
    let r = sim.run();
    let bytes = uplinks(&r, "tx_bytes");
    let total: u64 = bytes.iter().sum();
    let spread = bytes.iter().max().unwrap() - bytes.iter().min().unwrap();
    assert!(total > 700_000, "{total} bytes sprayed");
    assert!(
        spread <= largest,
        "bytes per uplink {bytes:?}: spread {spread}"
    );
    // The counters are the bytes each port was given.
    let leaf1 = sim.control("leaf1").unwrap();
    for (i, &b) in bytes.iter().enumerate() {
        assert_eq!(reg(leaf1, "ingress.spray_port_bytes", 3 + i), b);
    }
    // Random spraying of the same traffic is far from that balanced.
    let r = run(&two_by_four("spray-random"), 250, 3, &mixed);
    let bytes = uplinks(&r, "tx_bytes");
    let spread = bytes.iter().max().unwrap() - bytes.iter().min().unwrap();
    assert!(spread > 10 * largest, "random: {bytes:?}");
}

#[test]
fn sec_iii_a2_fig2_counter_skews_the_core_links_and_rr_does_not() {
    // Fig. 2 in pod 1 of a k=4 fat-tree: T1 = p1e1, T2 = p1e2, A1 = p1a1 (cores 1, 2 on ports
    // 3, 4), A2 = p1a2 (cores 3, 4). Equal flows A: T1 > pod 2, B: T1 > T2 (inside the pod),
    // C: T2 > pod 2; A and B perfectly interleaved at T1. 400 packets each.
    let flows = [
        "h1>h5 rate=2000pps size=1000 stop_ms=200",
        "h2>h3 rate=2000pps size=1000 stop_ms=200",
        "h4>h6 rate=2000pps size=1000 stop_ms=200",
    ];
    let core_links = |r: &Json| {
        [("p1a1", 3), ("p1a1", 4), ("p1a2", 3), ("p1a2", 4)].map(|(s, p)| tx(r, s, p, "tx_packets"))
    };
    let r = run(&fat_tree4("spray-counter"), 250, 1, &flows);
    // Counter: at T1 the ties go to the lowest port, so A takes A1 and B takes A2. A1-C1 and
    // A1-C2 carry half of A and a quarter of C each, the other two a quarter of C.
    assert_eq!(core_links(&r), [300, 300, 100, 100]);
    assert_eq!(
        (
            tx(&r, "p1e1", 3, "tx_packets"),
            tx(&r, "p1e1", 4, "tx_packets")
        ),
        (400, 400)
    );
    // Per-flow round robin: the ideal, a quarter of A and a quarter of C on every core link.
    let r = run(&fat_tree4("spray-rr"), 250, 1, &flows);
    assert_eq!(core_links(&r), [200, 200, 200, 200]);
    for f in self::flows(&r) {
        assert_eq!(num(f, &["received"]), 400);
    }
}

#[test]
fn sec_iii_a3_round_robin_cycles_each_flow_exactly_and_rr_prefix_each_destination() {
    // Three flows, two to leaf2's h3 / h4 (one prefix, 10.0.2.0/30), irregularly interleaved.
    let a = udp([10, 0, 1, 1], [10, 0, 2, 1], 40000, 100);
    let b = udp([10, 0, 1, 2], [10, 0, 2, 2], 40001, 300);
    let c = udp([10, 0, 1, 1], [10, 0, 2, 2], 40002, 500);
    let order = "AABACBBACCABBBAC";
    let frames: Vec<&Vec<u8>> = order
        .chars()
        .map(|x| match x {
            'A' => &a,
            'B' => &b,
            _ => &c,
        })
        .collect();
    let per_flow = |ports: &[u16], flow: char| -> Vec<u16> {
        order
            .chars()
            .zip(ports)
            .filter(|(x, _)| *x == flow)
            .map(|(_, &p)| p)
            .collect()
    };
    let cycle = |n: usize| -> Vec<u16> { (0..n).map(|k| 3 + (k % 4) as u16).collect() };
    // Per flow: each flow's k-th packet takes member k mod 4 (ports 3-6), whatever the others do.
    let (pipe, mut sw) = planned(&two_by_four("spray-rr"), "leaf1");
    let ports = ports_of(&mut sw, &frames);
    for flow in ['A', 'B', 'C'] {
        let mine = per_flow(&ports, flow);
        assert_eq!(mine, cycle(mine.len()), "flow {flow}");
    }
    assert_eq!(
        reg(&pipe.control, "ingress.spray_port_bytes", 3),
        0,
        "rr counts no bytes"
    );
    // Per prefix: one cycle for everything to leaf2, in arrival order.
    let (_, mut sw) = planned(&two_by_four("spray-rr-prefix"), "leaf1");
    let ports = ports_of(&mut sw, &frames);
    assert_eq!(ports, cycle(order.len()));
    assert_ne!(per_flow(&ports, 'A'), cycle(per_flow(&ports, 'A').len()));
}

#[test]
fn unique_downward_paths_stay_unique() {
    let t = fat_tree4("spray-rr");
    let plans = programs::fabric_plan(&t).unwrap();
    let routes = |sw: &str| {
        plans[sw]
            .routes
            .iter()
            .filter(|l| l.starts_with("table_add spray_v4"))
            .count()
    };
    // An edge sprays toward the 7 other edges; an aggregation switch toward the 6 edges of
    // other pods only (its own pod's are one hop down); a core toward nothing.
    assert_eq!((routes("p1e1"), routes("p1a1"), routes("core1")), (7, 6, 0));
    let r = run(
        &t,
        120,
        1,
        &[
            "h1>h5 rate=2000pps size=1000 stop_ms=100",
            "h3>h5 rate=2000pps size=1000 stop_ms=100",
        ],
    );
    for f in flows(&r) {
        assert_eq!(num(f, &["received"]), 200);
    }
    // Upward, every path is used; downward in pod 2, only the links to p2e1 (h5).
    assert!(tx(&r, "p1e1", 3, "tx_packets") > 0 && tx(&r, "p1e1", 4, "tx_packets") > 0);
    for agg in ["p2a1", "p2a2"] {
        assert_eq!(tx(&r, agg, 2, "tx_packets"), 0, "{agg} to p2e2");
        assert!(tx(&r, agg, 1, "tx_packets") > 0, "{agg} to p2e1");
    }
    for core in 1..=4 {
        let core = format!("core{core}");
        for pod in [1, 3, 4] {
            assert_eq!(tx(&r, &core, pod, "tx_packets"), 0, "{core} to pod {pod}");
        }
    }
    assert_eq!(tx(&r, "p2e1", 1, "tx_packets"), 400);
}

#[test]
fn malformed_and_short_frames_are_dropped_with_a_reason() {
    let (pipe, mut sw) = planned(&two_by_four("spray-counter"), "leaf1");
    let c = &pipe.control;
    let good = udp([10, 0, 1, 1], [10, 0, 2, 1], 40000, 100);
    for cut in 0..good.len() {
        assert!(sw.inject(1, &good[..cut], 1).is_empty(), "cut at {cut}");
    }
    assert_eq!(drops(c, "malformed"), good.len() as u64);
    for port in 3..=6 {
        assert_eq!(
            reg(c, "ingress.spray_port_bytes", port),
            0,
            "nothing counted"
        );
    }
    assert_eq!(sw.inject(1, &good, 1).len(), 1);
    // A route whose group has no members, and one of size 0.
    write_line(c, "table_add spray_v4 spray_rr 192.168.0.0/24 => 77 3");
    write_line(c, "table_add spray_v4 spray_counter 192.168.1.0/24 => 78 2");
    write_line(c, "table_add spray_v4 spray_random 192.168.2.0/24 => 1 0");
    for net in 0..3 {
        assert!(
            sw.inject(1, &udp([10, 0, 1, 1], [192, 168, net, 1], 1, 10), 1)
                .is_empty()
        );
    }
    assert_eq!(drops(c, "spray_no_member"), 3);
}

#[test]
fn plans_take_the_mode_from_the_scheme_or_mode_and_say_what_is_wrong() {
    let plans = programs::fabric_plan(&two_by_four("spray")).unwrap();
    let leaf1 = &plans["leaf1"].routes;
    assert!(leaf1.contains(&"table_add spray_v4 spray_random 10.0.2.0/30 => 1 4".to_string()));
    assert!(leaf1.contains(&"table_add spray_v6 spray_random fd00::2:0/126 => 1 4".to_string()));
    assert_eq!(
        leaf1.iter().filter(|l| l.contains("spray_members")).count(),
        4,
        "{leaf1:?}"
    );
    // Spines have one path to each leaf: no spray routes, and ECN thresholds like ecmp's.
    assert!(
        !plans["spine1"]
            .routes
            .iter()
            .any(|l| l.contains("spray_v4"))
    );
    assert!(plans["spine1"].routes.contains(&format!(
        "register_write ecn_threshold 1 {}",
        dctcp_k(50_000_000)
    )));
    let mut t = two_by_four("spray");
    t.switches.iter_mut().for_each(|s| {
        s.params.insert("mode".into(), "rr-prefix".into());
    });
    let plans = programs::fabric_plan(&t).unwrap();
    assert!(
        plans["leaf2"]
            .routes
            .contains(&"table_add spray_v4 spray_rr_prefix 10.0.1.0/30 => 1 4".to_string())
    );
    t.switches[4].params.insert("mode".into(), "fastest".into());
    let e = programs::fabric_plan(&t).unwrap_err();
    assert!(
        matches!(&e, PlanError::BadValue { key, .. } if key == "mode"),
        "{e:?}"
    );
    assert_eq!(e.switch(), Some("leaf1"));
    let e = e.to_string();
    assert!(
        e.contains("switch leaf1: mode=fastest: random, counter, rr or rr-prefix"),
        "{e}"
    );
    let mut t = two_by_four("spray-rr");
    t.switches[4].params.insert("mode".into(), "counter".into());
    let e = programs::fabric_plan(&t).unwrap_err();
    assert!(
        matches!(
            &e,
            PlanError::ContradictsPreset { switch, key: "mode", scheme: "spray-rr", .. }
                if switch == "leaf1"
        ),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(e.contains("contradicts the scheme spray-rr"), "{e}");
    // The scheme's own mode on the line is fine.
    t.switches[4].params.insert("mode".into(), "rr".into());
    assert!(programs::fabric_plan(&t).is_ok());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

    /// Bit flips anywhere in a frame never panic, whatever the mode: each frame leaves by one
    /// port or is counted as a drop.
    #[test]
    fn mutated_frames_never_panic(
        flips in proptest::collection::vec((0usize..60, proptest::prelude::any::<u8>()), 1..6),
        mode in 0usize..4,
    ) {
        let scheme = ["spray-random", "spray-counter", "spray-rr", "spray-rr-prefix"][mode];
        let (pipe, mut sw) = planned(&two_by_four(scheme), "leaf1");
        let mut f = udp([10, 0, 1, 1], [10, 0, 2, 1], 40000, 18);
        for (i, x) in flips {
            f[i] ^= x;
        }
        let out = sw.inject(1, &f, 1);
        let dropped: u64 = pipe.control.drop_counts().iter().map(|(_, d)| d.packets).sum();
        proptest::prop_assert!(out.len() == 1 || (out.is_empty() && dropped == 1));
    }
}
