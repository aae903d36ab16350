//! The fabric plan, and the optional ECN marking it sets.

use super::*;

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
