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

#[test]
fn the_plan_sets_the_routing_ablation_and_can_leave_the_topologys_buffers() {
    let routes = |params: &[(&str, &str)]| {
        programs::fabric_plan(&fabric("p4te", params)).map(|p| p["leaf1"].clone())
    };
    let has = |params: &[(&str, &str)], line: &str| {
        routes(params)
            .unwrap()
            .routes
            .iter()
            .chain(&routes(params).unwrap().tm)
            .any(|l| l == line)
    };
    assert!(has(&[], "register_write routing 0 0"));
    assert!(has(&[("routing", "static")], "register_write routing 0 3"));
    assert!(routes(&[("routing", "ecmp")]).is_err());
    // 200 ms of 100 Mb/s is 1,666 frames, capped at 1,024; buffer_ms=0 leaves the topology's 64.
    assert!(has(&[], "set_queue_depth 1024 3"));
    let tm = routes(&[("buffer_ms", "0")]).unwrap().tm;
    assert!(
        !tm.iter().any(|l| l.starts_with("set_queue_depth 1024")),
        "{tm:?}"
    );
    assert!(
        tm.iter().any(|l| l.starts_with("set_queue_depth 64")),
        "{tm:?}"
    );
}
