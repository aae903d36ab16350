//! P4QCN (docs/p4qcn.md) with the real host tools in namespaces: `pisa-host rp-send` senders paced
//! by QCN's reaction point, `pisa-host sink` receivers, one `pisa-switch` running `p4qcn`. The same
//! incast as `pipeline/programs/tests/p4qcn.rs` in `pisa-sim`: h1 and h2 send at line rate into h3's link,
//! twice what it carries.
//! - §3.1: plain UDP loses about half; with the CP's feedback packets (ECN = 11, which the
//!   senders read with IP_RECVTOS) the RPs cut their rates and the loss stays small.
//! - §3.2: with PFC as well the switch sends PAUSE frames towards the senders. Linux hosts ignore
//!   PAUSE, so the first hop's loss is reported as it is, not asserted to be 0 (pisa-sim, whose
//!   hosts obey PAUSE, checks the lossless claim).
//! - §2.4: the three-point baseline: the CP marks CE and the sink, as the NP, answers.
//!
//! Needs root, iproute2 and the workspace binaries.

use pisa_fabric::experiment::qcn::{self, Plan, Sender};
use pisa_fabric::fabric::{Fabric, Options};
use serde_json::Value;
use topo::Topology;

/// Every link's rate. The switch's traffic manager shapes h3's port to it.
const RATE: u64 = 200_000_000;
const SECONDS: f64 = 3.0;

/// One fabric at a time: the runs compare loss, which a concurrent run's load would skew.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn incast(program: &str, params: &str) -> Topology {
    Topology::parse(&format!(
        "defaults rate={RATE} delay=0us buffer=64\n\
         switch s1 program={program} {params}\n\
         host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\n\
         host h2 ipv4=10.0.1.2 ipv6=fd00::1:2\n\
         host h3 ipv4=10.0.1.3 ipv6=fd00::1:3\n\
         link s1:1 h1\nlink s1:2 h2\nlink s1:3 h3\n"
    ))
    .unwrap()
}

/// Runs the incast on `program` and returns the runner's report.
fn run(tag: char, program: &str, params: &str, rp: bool, np: bool) -> Value {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let t = incast(program, params);
    let opts = Options::for_test(tag);
    let f = Fabric::up(&t, &opts, |m| eprintln!("{m}")).expect("bring-up");
    f.program().expect("programming over P4Runtime");
    let plan = Plan {
        senders: ["h1", "h2"]
            .map(|s| Sender {
                src: s.into(),
                dst: "h3".into(),
                rate_bps: RATE,
            })
            .to_vec(),
        background: None,
        seconds: SECONDS,
        size: 1000,
        link_bps: RATE,
        rp,
        np,
        np_interval_us: 0,
    };
    let r = qcn::run(&f, &plan, &opts.dir.join("qcn")).expect("the run");
    eprintln!("{program} {params}: {r:#}");
    r
}

fn loss(r: &Value) -> f64 {
    let (sent, lost) = r["senders"]
        .as_array()
        .unwrap()
        .iter()
        .fold((0, 0), |(s, l), f| {
            (
                s + f["sent"].as_u64().unwrap(),
                l + f["lost"].as_u64().unwrap(),
            )
        });
    lost as f64 / sent.max(1) as f64
}

fn each_sender(r: &Value, key: &str) -> Vec<u64> {
    r["senders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f[key].as_u64().unwrap_or(0))
        .collect()
}

fn pfc_tx(r: &Value, ports: &[&str]) -> u64 {
    ports
        .iter()
        .map(|p| r["switches"]["s1"][p]["pfc_tx"].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn s3_1_feedback_packets_reach_real_senders_and_keep_loss_low_where_udp_loses_half() {
    // The pair is measured again, up to three times, while the fidelity monitors say either run
    // fell behind: QCN's reaction point recovers by its byte counter alone (no timer, as in the
    // paper), so a stall that sends it to its floor rate costs about half a second at 200 Mb/s
    // and a CI neighbour's burst shows up as low utilisation (one CI run: 0.09 of the link,
    // `degraded`, 2.4 frames late). The assertions below judge the last attempt whatever its
    // verdict, so a monitor that never says `ok` cannot make this pass.
    let kept_up = |r: &Value| r["fidelity"]["verdict"].as_str() == Some("ok");
    let (mut udp, mut qcn);
    let mut attempt = 1;
    loop {
        udp = run('u', "p4qcn-off", "", false, false);
        qcn = run('q', "p4qcn", "q_min=11 q_max=11", true, false);
        if (kept_up(&udp) && kept_up(&qcn)) || attempt == 3 {
            break;
        }
        attempt += 1;
        eprintln!("a run was degraded; attempt {attempt} of 3");
    }
    let (l_udp, l_qcn) = (loss(&udp), loss(&qcn));
    eprintln!("loss: UDP {l_udp:.3}, P4QCN {l_qcn:.3}");
    // Two senders offer twice the bottleneck's rate: about half is lost, less where a busy
    // machine slowed the userspace senders. P4QCN's loss is judged against that run, beside it.
    assert!((0.25..0.7).contains(&l_udp), "plain UDP loses {l_udp}");
    assert!(
        l_qcn < 0.2 * l_udp,
        "P4QCN loses {l_qcn}, plain UDP {l_udp}"
    );
    // The senders took feedback packets with ECN = 11 from h3's address and port.
    for n in each_sender(&qcn, "feedbacks_received") {
        assert!(n > 10, "{n} feedback packets");
    }
    assert_eq!(each_sender(&udp, "feedbacks_received"), [0, 0]);
    // Each run carries the fidelity monitors' verdict, from the switches' own counters.
    for r in [&udp, &qcn] {
        let v = r["fidelity"]["verdict"].as_str().unwrap_or_default();
        assert!(
            v == "ok" || v.starts_with("degraded: "),
            "{}",
            r["fidelity"]
        );
        assert!(
            r["fidelity"]["switch_input_drops"].is_u64(),
            "{}",
            r["fidelity"]
        );
    }
    // The RPs cut their rates, they did not stop: each sender delivered more than ten times what
    // its floor rate (link/1000) would carry for the whole run, so it climbed back from its cuts.
    // How much of the link the pair keeps is not asserted: without QCN's timer the byte counter
    // is the only way back, and link use follows the feedback loop's delay (docs/p4qcn.md:
    // pisa-sim's same incast keeps 0.02 of the link with 0 µs links and 0.41 with 100 µs;
    // namespace runs saw 0.23-0.52, the lowest on a busy CI machine).
    for f in qcn["senders"].as_array().unwrap() {
        let floor_bps = f["qcn_rp"]["min_rate_bps"].as_f64().unwrap();
        let frame_bits = 8.0 * (f["size"].as_f64().unwrap() + 42.0);
        let at_floor = floor_bps * SECONDS / frame_bits;
        let received = f["received"].as_f64().unwrap();
        assert!(
            received > 10.0 * at_floor,
            "{} delivered {received} frames; its floor rate carries {at_floor:.0} in {SECONDS} s",
            f["src"]
        );
    }
    eprintln!(
        "h3's link carried {} of its rate under P4QCN, {} under plain UDP",
        qcn["utilisation"]["h3"], udp["utilisation"]["h3"]
    );
}

#[test]
fn s3_2_with_pfc_the_switch_pauses_the_senders_ports() {
    let r = run('p', "p4qcn-pfc", "q_min=11 q_max=11 q_pfc=14", true, false);
    assert!(pfc_tx(&r, &["1", "2"]) > 0, "no PAUSE sent");
    for n in each_sender(&r, "feedbacks_received") {
        assert!(n > 10, "{n} feedback packets");
    }
    eprintln!("P4QCN+PFC, first-hop loss as it is: {:.4}", loss(&r));
}

#[test]
fn s2_4_three_point_the_sink_answers_ce_marks() {
    let r = run('t', "p4qcn-3pt", "q_min=11 q_max=11", true, true);
    for (ce, np) in each_sender(&r, "rx_ecn_ce")
        .into_iter()
        .zip(each_sender(&r, "np_feedbacks_sent"))
    {
        assert!(ce > 10, "{ce} CE marks");
        assert_eq!(np, ce, "the NP answers every CE mark");
    }
    for n in each_sender(&r, "feedbacks_received") {
        assert!(n > 10, "{n} NP answers taken");
    }
    // Unmanaged, the same offered load loses about half (s3_1's UDP run); a stalled switch
    // bursts into the 64-packet buffer, so the bound is half of that, not a few percent.
    assert!(loss(&r) < 0.25, "three-point loses {}", loss(&r));
}
