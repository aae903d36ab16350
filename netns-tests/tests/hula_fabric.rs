//! A fabric of `hula` switches in namespaces (issue 11 §3): `pisa-fabric` starts each switch with
//! the plan's packet-generator settings and programs it over P4Runtime; probes from both leaves'
//! generators arrive at every switch, every host pair reaches every other, and while a TCP flow
//! loads one of leaf1's uplinks, leaf1's best hop towards leaf2 is the other one. Needs root,
//! iproute2, iputils-ping, iperf3 and the workspace binaries.

use std::time::{Duration, Instant};

use pisa_fabric::fabric::{Fabric, Options};

mod common;
use common::{cell, two_by_two};

#[test]
fn a_hula_fabric_sends_probes_routes_and_steers_around_a_loaded_uplink() {
    let mut t = two_by_two("hula");
    for s in &mut t.switches {
        // One TCP flow must stay one flowlet despite the namespaces' scheduling jitter, and a
        // busy machine's stalls of a sender (hundreds of ms): a 1 s gap.
        s.params.insert("flowlet_gap_us".into(), "1000000".into());
    }
    let opts = Options::for_test('u');
    let f = Fabric::up(&t, &opts, |m| eprintln!("{m}")).expect("bring-up");
    eprint!("{}", f.program().expect("programming over P4Runtime"));
    for v6 in [false, true] {
        let (ok, total, failed) = f.all_pairs(v6);
        assert_eq!((ok, total), (12, 12), "v6={v6}: unreachable: {failed:?}");
    }
    // leaf1 is the third switch (spines come first), spine1 the first.
    let ctl = |switch: usize, args: &[&str]| common::ctl(&f, switch, args);
    // Probes (Tp = 1 ms) arrive on both of leaf1's uplinks and on both of spine1's downlinks.
    // The window: from the end of the first read to the start of the second (each read is a
    // process of its own, whose start-up a busy machine lengthens).
    let before = ctl(2, &["counters", "hula_probes_rx"]);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(2000));
    let ms = t0.elapsed().as_millis() as u64;
    let after = ctl(2, &["counters", "hula_probes_rx"]);
    eprintln!("leaf1 probes:\n{after}");
    for port in [3, 4] {
        let n = cell(&after, "hula_probes_rx", port) - cell(&before, "hula_probes_rx", port);
        // One probe per ms from leaf2, through each spine, over the ~2 s between the reads; the
        // switch processes share two cores, so allow a wide margin (the generator skips ticks
        // it is late for).
        assert!(n > ms * 3 / 10, "leaf1 port {port}: {n} probes in {ms} ms");
    }
    let spine = ctl(0, &["counters", "hula_probes_rx"]);
    assert!(cell(&spine, "hula_probes_rx", 1) > 0 && cell(&spine, "hula_probes_rx", 2) > 0);
    // A TCP flow from h1 to h3 at the link rate for 4 s; in its middle, read where it goes and
    // where leaf1's best hop to leaf2 (ToR 2) points.
    let server = f.ns("h3");
    let _ = server.exec("sh", &["-c", "iperf3 -s -1 -D"]);
    server
        .wait_listening(5201, Duration::from_secs(30))
        .expect("iperf3 server listening");
    let (out, tx0, tx1, samples, util) = std::thread::scope(|s| {
        let flow = s.spawn(|| {
            f.ns("h1")
                .exec("iperf3", &["-c", "10.0.2.1", "-t", "4", "-C", "cubic"])
                .expect("iperf3")
        });
        std::thread::sleep(Duration::from_millis(1500));
        let tx0 = ctl(2, &["counters", "port_tx"]);
        // The best hop, ten times over a second: one reading could catch the flow in a stall
        // (loss recovery) or the switch just after a descheduled stretch longer than the
        // keep-alive, when any probe wins.
        let samples: Vec<u64> = (0..10)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(100));
                cell(
                    &ctl(2, &["registers", "hula_best_hop", "2"]),
                    "hula_best_hop",
                    2,
                )
            })
            .collect();
        let tx1 = ctl(2, &["counters", "port_tx"]);
        let util = ctl(2, &["registers", "hula_util"]);
        (flow.join().expect("iperf3 thread"), tx0, tx1, samples, util)
    });
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = |p| cell(&tx1, "port_tx", p) - cell(&tx0, "port_tx", p);
    let (a, b) = (sent(3), sent(4));
    let (loaded, other) = if a > b { (3, 4) } else { (4, 3) };
    let away = samples.iter().filter(|&&b| b == other).count();
    eprintln!(
        "leaf1 uplinks over 1 s: port 3 {a}, port 4 {b} packets; best hop to leaf2 over that \
         second: {samples:?}; leaf1's estimators now:\n{util}"
    );
    assert!(a.max(b) > 2000, "the flow ran: {a} / {b}");
    assert!(
        away > samples.len() / 2,
        "the best hop should mostly avoid the loaded uplink {loaded} ({a} / {b} packets in 1 s): \
         {samples:?}"
    );
}
