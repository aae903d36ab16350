//! Fabrics of `spray-counter` (veth links) and `dbb-shared` (shared-memory links) switches in
//! namespaces, programmed by their plans over P4Runtime: every host pair reaches each other over
//! IPv4 and IPv6, and one TCP flow across the spines is split per packet over leaf1's two
//! uplinks (ECMP would put it on one). Needs root, iproute2, iputils-ping, iperf3 and the
//! workspace binaries.

use pisa_fabric::experiment::port_tx_packets;
use pisa_fabric::fabric::{Fabric, Links, Options};

mod common;
use common::two_by_two;

fn one_flow_is_split_over_both_uplinks(program: &str, links: Links, tag: char) {
    let t = two_by_two(program);
    let opts = Options {
        links,
        ..Options::for_test(tag)
    };
    let f = Fabric::up(&t, &opts, |m| eprintln!("{m}")).expect("bring-up");
    eprint!("{}", f.program().expect("programming over P4Runtime"));
    for v6 in [false, true] {
        let (ok, total, failed) = f.all_pairs(v6);
        assert_eq!((ok, total), (12, 12), "{program} v6={v6}: {failed:?}");
    }
    // 5 MB from h1 (leaf1) to h3 (leaf2): data leaves leaf1 on ports 3 and 4.
    let (src, dst) = (&t.hosts[0], &t.hosts[2]);
    let before = port_tx_packets(&f).expect("counters");
    let out = common::iperf3(&f, &opts.dir, src, dst, &["-n", "5M"]);
    assert!(out.status.success(), "{out:?}");
    let after = port_tx_packets(&f).expect("counters");
    let sent = |port: u16| {
        let k = ("leaf1".to_string(), port);
        after.get(&k).copied().unwrap_or(0) - before.get(&k).copied().unwrap_or(0)
    };
    let (a, b) = (sent(3), sent(4));
    let share = a as f64 / (a + b).max(1) as f64;
    eprintln!("{program}: leaf1 uplinks sent {a} and {b} packets ({share:.3})");
    assert!(
        a + b > 3000,
        "{a} + {b}: the flow did not cross the uplinks"
    );
    assert!(
        (0.4..=0.6).contains(&share),
        "{program}: {a} / {b} is not a per-packet split"
    );
    // Dropping the fabric removes everything, the link files included.
    let name = opts.name.clone();
    drop(f);
    let left: Vec<String> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("pisa-{name}-")))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_spray_counter_fabric_splits_one_flow_per_packet() {
    one_flow_is_split_over_both_uplinks("spray-counter", Links::Veth, 'y');
}

#[test]
fn a_dbb_fabric_over_shared_memory_splits_one_flow_per_packet() {
    one_flow_is_split_over_both_uplinks("dbb-shared", Links::Shm, 'd');
}
