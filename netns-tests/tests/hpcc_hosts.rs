//! HPCC with the real host tools in namespaces (issue 15; docs/pint.md "HPCC hosts in
//! namespaces"): `pisa-host hpcc-send` and `hpcc-recv` across two `pisa-switch`es running `pint`
//! with the HPCC query. h1 and h2 on s1 send to h3 on s2; every link is 100 Mb/s, so s1's port
//! to s2 is the one bottleneck of two flows.
//! - One PINT flow completes, and its ACKs bring back nonzero utilisation digests written by the
//!   switches (the sender's own traffic loads the links).
//! - Two flows of equal size started together into the bottleneck share it: their goodputs are
//!   within 25% of each other, and together at least [`MIN_USE`] of the line, for PINT and for
//!   INT. (Not η = 0.95: the switches are userspace processes on a shared machine, and together
//!   the flows measured 57–78 Mb/s on 2026-11-26 with the machine's load average at 12–17; see
//!   docs/pint.md.) Every INT datagram arrives with two records, one per switch.
//!
//! Needs root, iproute2 and the workspace binaries.

use pisa_fabric::experiment::hpcc::{self, HostFlow, Plan};
use pisa_fabric::fabric::{Fabric, Options};
use serde_json::Value;
use topo::Topology;

const RATE: u64 = 100_000_000;
/// Each flow of the fairness runs: 12 MB, 1 s at line rate, about 2 s shared: long enough that
/// one stall of a userspace sender on a busy machine (up to 0.7 s seen) does not decide the
/// shares.
const SHARED_BYTES: u64 = 12_000_000;
/// How far apart the two flows' goodputs may be (the larger over the smaller, minus 1).
const FAIR_TOLERANCE: f64 = 0.25;

/// T, the base RTT of the switches' EWMA and the senders' controller [X]. The default from the
/// topology (`pint_hpcc::base_rtt_ns`: 3 links both ways, one 1514-byte frame each at 100 Mb/s)
/// is 727 µs, a BDP of 9 packets; with so few, two flows were far from fair (one cut to W_min at
/// start-up, as in `pisa-sim`'s scale finding, docs/pint.md). 4 ms is 50 packets, still an upper
/// bound of the RTT (the measured smoothed RTT is 0.1–0.6 ms), so HPCC paces at W/T rather than
/// being limited by the window.
const T_US: u64 = 4000;

/// The least fraction of the line the two flows must get together. On a quiet machine they get
/// 0.7 (below η: see docs/pint.md); a busy one stalled the userspace switches for up to 0.7 s in
/// one run (2026-11-26, load average 17) and they got 0.3 together, still sharing equally.
const MIN_USE: f64 = 0.2;

/// One fabric at a time: the runs compare rates, which a concurrent run's load would skew.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn topology() -> Topology {
    Topology::parse(&format!(
        "defaults rate={RATE} delay=0us buffer=500\n\
         switch s1 program=pint switch_id=11 pint_hpcc_sample=1 pint_pfc_xoff=300 \
         pint_hpcc_rtt_us={T_US}\n\
         switch s2 program=pint switch_id=22 pint_pfc_xoff=300\n\
         host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\n\
         host h2 ipv4=10.0.1.2 ipv6=fd00::1:2\n\
         host h3 ipv4=10.0.2.3 ipv6=fd00::2:3\n\
         link s1:1 h1\nlink s1:2 h2\nlink s1:3 s2:3\nlink s2:1 h3\n"
    ))
    .unwrap()
}

fn run(tag: char, int: bool, flows: &[(&str, u64)]) -> Value {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let t = topology();
    let hp = programs::pint_hpcc::fabric_of(&t)
        .unwrap()
        .expect("pint switches");
    let opts = Options::for_test(tag);
    let f = Fabric::up(&t, &opts, |m| eprintln!("{m}")).expect("bring-up");
    f.program().expect("programming over P4Runtime");
    let plan = Plan {
        flows: flows
            .iter()
            .map(|&(src, bytes)| HostFlow {
                src: src.into(),
                dst: "h3".into(),
                start_us: 0,
                bytes,
            })
            .collect(),
        int,
        line_bps: RATE,
        rtt_us: hp.base_rtt_ns.div_ceil(1000),
        slots: 2,
        ip_len: 1000,
        max_seconds: 15.0,
        port: hp.udp_port,
    };
    let r = hpcc::run(&f, &plan, &opts.dir.join("hpcc")).expect("the run");
    eprintln!("{}: {r:#}", if int { "INT" } else { "PINT" });
    r
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

fn completed(r: &Value) -> &Vec<Value> {
    let flows = r["flows"].as_array().unwrap();
    for f in flows {
        assert_eq!(u(f, "completed"), 1, "incomplete: {f}");
        assert_eq!(u(f, "acked_bytes"), u(f, "bytes"));
        assert_eq!(u(f, "bad_acks"), 0);
    }
    for (h, rx) in r["receivers"].as_object().unwrap() {
        assert_eq!(u(rx, "malformed"), 0, "{h}");
    }
    flows
}

#[test]
fn s4_5_one_pint_flow_completes_and_its_acks_carry_the_switches_digests() {
    // 8 MB, 0.7 s at line rate: longer than one stall of a busy machine.
    let r = run('c', false, &[("h1", 8_000_000)]);
    let f = &completed(&r)[0];
    // Every packet was sampled (p = 1) and the loaded path made the digest nonzero on most.
    let (acks, tele) = (u(f, "acks"), u(f, "telemetry_acks"));
    assert!(acks >= u(f, "packets"), "{f}");
    assert!(
        tele * 2 > acks,
        "{tele} of {acks} ACKs with a nonzero digest"
    );
    assert_eq!(u(f, "feedback_acks"), acks);
    let umax = f["max_util"].as_f64().unwrap();
    assert!(umax > 0.3 && umax < 16.0, "U {umax}");
    // Alone on the path it ran at a fair fraction of the line (85 Mb/s on a quiet machine; the
    // bound leaves room for the stalls of a shared one).
    assert!(u(f, "goodput_bps") > RATE / 5, "{f}");
    let rx = &r["receivers"]["h3"]["flows"][0];
    assert_eq!(u(rx, "with_telemetry"), u(rx, "received"));
    assert!(u(rx, "digest_max") > 0);
}

/// How many fairness runs; the median of their goodput ratios is judged. One run on a shared
/// 2-core machine can be decided by a stall of one sender (a ratio of 1.37 was seen once,
/// with the runs before and after it within tolerance).
const FAIR_RUNS: usize = 3;

fn fair(tag: char, int: bool) {
    let mut ratios: Vec<f64> = (0..FAIR_RUNS).map(|_| fair_run(tag, int)).collect();
    ratios.sort_by(f64::total_cmp);
    let median = ratios[FAIR_RUNS / 2];
    assert!(
        median <= 1.0 + FAIR_TOLERANCE,
        "goodput ratios {ratios:?}: the median is not within {FAIR_TOLERANCE}"
    );
}

/// One fairness run: its checks, and the larger goodput over the smaller.
fn fair_run(tag: char, int: bool) -> f64 {
    let r = run(tag, int, &[("h1", SHARED_BYTES), ("h2", SHARED_BYTES)]);
    let flows = completed(&r);
    let g: Vec<f64> = flows.iter().map(|f| u(f, "goodput_bps") as f64).collect();
    for (f, g) in flows.iter().zip(&g) {
        eprintln!(
            "{}: {:.1} Mb/s, {} retransmissions ({} of them spurious: duplicate ACKs)",
            f["src"],
            g / 1e6,
            u(f, "retransmissions"),
            u(f, "dup_acks")
        );
        assert!(u(f, "feedback_acks") > 0);
        assert!(u(f, "telemetry_acks") * 2 > u(f, "acks"), "{f}");
    }
    for rx in r["receivers"]["h3"]["flows"].as_array().unwrap() {
        if int {
            // A record from each of the two switches on every datagram.
            assert_eq!(u(rx, "int_records"), 2 * u(rx, "received"), "{rx}");
        } else {
            assert!(u(rx, "digest_max") > 0, "{rx}");
        }
    }
    // Equal sizes started together: a fair share makes them finish together; an unfair one
    // finishes the favoured flow early, and its goodput over its own FCT is the larger.
    let (lo, hi) = (g[0].min(g[1]), g[0].max(g[1]));
    assert!(
        lo + hi >= MIN_USE * RATE as f64,
        "together {} b/s: the bottleneck was not used",
        lo + hi
    );
    eprintln!("goodput ratio {:.3}", hi / lo);
    hi / lo
}

#[test]
fn s6_1_two_pint_flows_share_one_bottleneck_fairly() {
    fair('p', false);
}

#[test]
fn s6_1_two_int_flows_share_one_bottleneck_fairly() {
    fair('n', true);
}
