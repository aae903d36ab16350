//! The `ecmp` baseline (docs/ecmp.md) in `pisa-sim`: flowlets keep a flow on one path while
//! it sends and move it only across gaps; ECN marks ECT packets in queues longer than K; the plan
//! sets K by the DCTCP rule.

use hosts::json::Json;
use programs::ecmp::{DEFAULT_GAP_US, dctcp_k};
use topo::{LinkProps, Topology, leaf_spine};

mod common;

fn fabric(gap_us: Option<u64>) -> Topology {
    let host = LinkProps {
        rate_bps: 100_000_000,
        delay_us: 10,
        buffer: 64,
    };
    // 2 leaves x 2 spines, 2 hosts per leaf, uplinks at 100 Mb/s: leaf1's uplinks are ports 3, 4.
    let mut t = leaf_spine(2, 2, 2, 1.0, host);
    for s in &mut t.switches {
        s.program = "ecmp".into();
        if let Some(g) = gap_us {
            s.params.insert("flowlet_gap_us".into(), g.to_string());
        }
    }
    t
}

fn run(t: &Topology, duration_ms: u64, flows: &[&str]) -> Json {
    common::sim_run(t, duration_ms, 7, flows)
}

fn num(j: &Json, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(j, |j, k| j.get(k))
        .and_then(Json::as_u64)
        .unwrap_or_else(|| panic!("no {path:?}"))
}

fn uplinks(r: &Json) -> (u64, u64) {
    (
        num(r, &["switches", "leaf1", "ports", "3", "tx_packets"]),
        num(r, &["switches", "leaf1", "ports", "4", "tx_packets"]),
    )
}

fn flow(r: &Json, i: usize) -> &Json {
    match r.get("flows") {
        Some(Json::A(f)) => &f[i],
        _ => panic!("no flows"),
    }
}

#[test]
fn baseline_a_flowlets_move_a_flow_only_across_gaps() {
    // On for 10 ms, off for 10 ms: every burst is a new flowlet (gap 500 us).
    let onoff = ["h1>h3 rate=20M size=500 pattern=onoff"];
    let r = run(&fabric(None), 1000, &onoff);
    let (a, b) = uplinks(&r);
    assert!(a > 0 && b > 0, "bursts spread over both uplinks: {a} {b}");
    assert_eq!(a + b, num(flow(&r, 0), &["sent"]));
    assert_eq!(
        num(flow(&r, 0), &["reordered"]),
        0,
        "gaps exceed the delay difference"
    );
    // Within a flowlet nothing moves: a constant flow has no gap and stays on one uplink.
    let r = run(&fabric(None), 1000, &["h1>h3 rate=20M size=500"]);
    let (a, b) = uplinks(&r);
    assert!(a == 0 || b == 0, "one path for one flowlet: {a} {b}");
    // Flowlets off (gap 0): per-flow ECMP, the bursty flow stays on one uplink too.
    let r = run(&fabric(Some(0)), 1000, &onoff);
    let (a, b) = uplinks(&r);
    assert!(a == 0 || b == 0, "per-flow ECMP: {a} {b}");
}

#[test]
fn baseline_a_ecn_marks_ect_packets_beyond_k() {
    // h3's downlink (100 Mb/s, K = 6) offered 125 Mb/s.
    let ect = ["h4>h3 rate=62.5M tos=2", "h1>h3 rate=62.5M tos=2"];
    let r = run(&fabric(None), 200, &ect);
    let ce = num(&r, &["hosts", "h3", "rx_ecn_ce"]);
    let received = num(flow(&r, 0), &["received"]) + num(flow(&r, 1), &["received"]);
    assert!(
        ce > received / 2,
        "a standing queue marks most packets: {ce} of {received}"
    );
    // Not ECN-capable: never marked.
    let r = run(
        &fabric(None),
        200,
        &["h4>h3 rate=62.5M", "h1>h3 rate=62.5M"],
    );
    assert_eq!(num(&r, &["hosts", "h3", "rx_ecn_ce"]), 0);
    // A lightly loaded path: the queue stays under K, nothing is marked.
    let r = run(&fabric(None), 200, &["h1>h3 rate=20M tos=1"]);
    assert_eq!(num(&r, &["hosts", "h3", "rx_ecn_ce"]), 0);
}

#[test]
fn baseline_a_plan_sets_k_by_the_dctcp_rule_and_the_gap() {
    assert_eq!(dctcp_k(1_000_000_000), 20);
    assert_eq!(dctcp_k(10_000_000_000), 65);
    assert_eq!(dctcp_k(100_000_000), 6);
    assert_eq!(dctcp_k(7_000_000), 2);
    let t = fabric(None);
    let plans = programs::fabric_plan(&t).unwrap();
    let leaf1 = &plans["leaf1"].routes;
    assert!(leaf1.contains(&format!(
        "register_write flowlet_gap_ns 0 {}",
        DEFAULT_GAP_US * 1000
    )));
    assert!(leaf1.contains(&"register_write ecn_threshold 1 6".to_string()));
    let mut t = fabric(Some(2000));
    t.switches[2].params.insert("ecn_k".into(), "30".into());
    let plans = programs::fabric_plan(&t).unwrap();
    let leaf1 = &plans["leaf1"].routes;
    assert!(leaf1.contains(&"register_write flowlet_gap_ns 0 2000000".to_string()));
    assert!(leaf1.contains(&"register_write ecn_threshold 3 30".to_string()));
    t.switches[2].params.insert("ecn_k".into(), "many".into());
    let e = programs::fabric_plan(&t).unwrap_err();
    assert!(
        matches!(&e, programs::PlanError::NotANumber { key, value, .. }
            if key == "ecn_k" && value == "many"),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "switch leaf1: ecn_k=many is not a number");
}
