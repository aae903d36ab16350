//! P4TE's routing with TCP on an oversubscribed fabric, in namespaces (issue 32, first point):
//! on a 2x2 leaf-spine with 100 Mb/s hosts and 50 Mb/s uplinks, two large-class (ToS 0x10)
//! kernel TCP flows from leaf1's two hosts, each paced at 95% of an uplink, the second half a
//! second after the first, spread over both uplinks. The same case runs in `pisa-sim`
//! (`programs/tests/p4te/routing.rs`) with constant-rate flows, where it is deterministic and fails
//! with each packet's own colour (`color_hold_us=0`, Alg. 1 as written); here real TCP pauses
//! and re-routes at flowlet boundaries, and the difference was not shown (docs/p4te.md).
//! Needs root, iproute2, iperf3 and the workspace binaries.

use std::time::Duration;

use pisa_fabric::fabric::{Fabric, Options};
use topo::{LinkProps, leaf_spine};

mod common;
use common::cell;

/// iperf3's JSON report: the sender's retransmissions and bytes.
fn sent(json: &str) -> (u64, u64) {
    let v: serde_json::Value = serde_json::from_str(json).expect("iperf3 JSON");
    let s = &v["end"]["sum_sent"];
    (
        s["retransmits"].as_u64().unwrap_or(0),
        s["bytes"].as_u64().unwrap_or(0),
    )
}

#[test]
fn two_large_tcp_flows_take_one_uplink_each() {
    let host = LinkProps {
        rate_bps: 100_000_000,
        delay_us: 0,
        buffer: 64,
    };
    // A flowlet gap of 5 ms, above the ~1 ms between the bursts of a TCP sender paced at this
    // rate (TSO autosizing sends ~4 segments per burst): with the plan's default (40/70 of a
    // ~0.9 ms RTT estimate) every burst is a new flowlet and the flows re-route continually,
    // which tests flowlet switching, not the groups.
    let t = leaf_spine(2, 2, 2, 2.0, host).with_program("p4te", &[("flowlet_gap_us", "5000")]);
    let f = Fabric::up(&t, &Options::for_test('r'), |m| eprintln!("{m}")).expect("bring-up");
    eprint!("{}", f.program().expect("programming over P4Runtime"));
    for h in ["h3", "h4"] {
        let server = f.ns(h);
        let _ = server.exec("sh", &["-c", "iperf3 -s -1 -D"]);
        server
            .wait_listening(5201, Duration::from_secs(30))
            .expect("iperf3 server listening");
    }
    // leaf1 is the third switch.
    let ctl = |args: &[&str]| common::ctl(&f, 2, args);
    let tx0 = ctl(&["counters", "port_tx"]);
    // 95% of a 50 Mb/s uplink, paced by the kernel (iperf3's --fq-rate sets SO_MAX_PACING_RATE;
    // TCP paces by itself without the fq qdisc).
    let flow = |from: &str, to: &str, delay_ms: u64| {
        std::thread::sleep(Duration::from_millis(delay_ms));
        f.ns(from)
            .exec(
                "iperf3",
                &[
                    "-c",
                    to,
                    "-t",
                    "3",
                    "-S",
                    "16",
                    "-C",
                    "cubic",
                    "--fq-rate",
                    "47.5M",
                    "-J",
                ],
            )
            .expect("iperf3")
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| flow("h1", "10.0.2.1", 0));
        let b = s.spawn(|| flow("h2", "10.0.2.2", 500));
        (a.join().expect("flow 1"), b.join().expect("flow 2"))
    });
    let tx1 = ctl(&["counters", "port_tx"]);
    for o in [&a, &b] {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let ((ra, ba), (rb, bb)) = (
        sent(&String::from_utf8_lossy(&a.stdout)),
        sent(&String::from_utf8_lossy(&b.stdout)),
    );
    let up = |p| cell(&tx1, "port_tx", p) - cell(&tx0, "port_tx", p);
    let (p3, p4) = (up(3), up(4));
    eprintln!(
        "leaf1 uplinks: port 3 {p3}, port 4 {p4} packets; flow 1 {ba} B, {ra} retransmits; \
         flow 2 {bb} B, {rb} retransmits\nfeedback:\n{}\nlink_util_up:\n{}",
        ctl(&["counters", "feedback"]),
        ctl(&["read", "link_util_up"])
    );
    // Two flows' worth over two uplinks: each uplink carries at least a quarter of leaf1's
    // upward packets (both flows on one uplink for most of the run would leave the other
    // nearly idle), and the flows delivered most of their paced demand (2 x 47.5 Mb/s x 3 s,
    // 35.6 MB). Both flows may still share an uplink for a while: once both uplinks are YELLOW
    // they are in one group, and a flowlet may take either (docs/p4te.md).
    let share = p3.min(p4) as f64 / (p3 + p4).max(1) as f64;
    assert!(share > 0.25, "one uplink each: {p3} / {p4}");
    assert!(ba + bb > 25_000_000, "delivered {ba} + {bb} bytes");
}
