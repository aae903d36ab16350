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

/// Two stamped UDP flows (`pisa-host rp-send --no-rp` to `pisa-host sink`), h1 to h3 and h2 to
/// h4 at 30 Mb/s each for 2 s, across the 2x2 fabric running `program` (`ecmp` per flow, without
/// flowlets): the sinks' reports.
fn two_stamped_flows(program: &str, tag: char) -> Vec<serde_json::Value> {
    use pisa_fabric::experiment::qcn::{self, Plan, Sender};
    let mut t = two_by_two(program);
    if program == "ecmp" {
        for s in &mut t.switches {
            // ECMP per flow, not per flowlet: a flow keeps one path whatever its gaps.
            s.params.insert("flowlet_gap_us".into(), "0".into());
        }
    }
    let opts = Options::for_test(tag);
    let f = Fabric::up(&t, &opts, |m| eprintln!("{m}")).expect("bring-up");
    f.program().expect("programming over P4Runtime");
    let plan = Plan {
        senders: [("h1", "h3"), ("h2", "h4")]
            .map(|(s, d)| Sender {
                src: s.into(),
                dst: d.into(),
                rate_bps: 30_000_000,
            })
            .to_vec(),
        background: None,
        seconds: 2.0,
        size: 1000,
        link_bps: 100_000_000,
        rp: false,
        np: false,
        np_interval_us: 0,
    };
    let r = qcn::run(&f, &plan, &opts.dir.join("stamped")).expect("the run");
    r["senders"].as_array().cloned().unwrap_or_default()
}

/// The emulator's own path jitter and reordering with nothing sprayed (issue 33): under per-flow
/// `ecmp` each flow keeps one path, so the only reordering could come from the emulator itself
/// (its workers, veths and the kernel between them), and there must be none. (With flowlets,
/// `ecmp`'s default, a flow does change path after a gap, and on a busy machine a stalled sender
/// makes such gaps while a stalled spine holds the old path's packets: that reorders, and it is
/// the mechanism's doing, not the emulator's.) The same flows sprayed per packet by `spray-rr`
/// are printed beside it: how far they are reordered (RFC 4737's extent) and their one-way
/// latency, with the unsprayed run's latency spread as the emulator's own path jitter.
#[test]
fn one_path_is_never_reordered_by_the_emulator_and_spraying_is_measured_beside_it() {
    let show = |name: &str, flows: &[serde_json::Value]| {
        for f in flows {
            eprintln!(
                "{name}: received {} reordered {} extent {} latency_us {}",
                f["received"], f["reordered"], f["reorder_extent"], f["latency_us"]
            );
        }
    };
    let ecmp = two_stamped_flows("ecmp", 'j');
    show("ecmp", &ecmp);
    assert_eq!(ecmp.len(), 2);
    for f in &ecmp {
        // 2 s at 30 Mb/s in 1042-byte frames: about 7,200 datagrams each, fewer where a busy
        // machine slows the senders.
        assert!(f["received"].as_u64().unwrap_or(0) > 1_000, "{f}");
        assert_eq!(f["reordered"], 0, "the emulator reordered one path: {f}");
        assert_eq!(f["reorder_extent"]["max"], 0, "{f}");
    }
    let spray = two_stamped_flows("spray-rr", 'k');
    show("spray-rr", &spray);
    for f in &spray {
        assert!(f["received"].as_u64().unwrap_or(0) > 1_000, "{f}");
        // Extents are only ever counted for reordered packets.
        let beyond = f["reorder_extent"]["beyond_dupthresh"].as_u64().unwrap();
        assert!(beyond <= f["reordered"].as_u64().unwrap(), "{f}");
    }
}
