//! P4QCN (docs/p4qcn.md) in `pisa-sim`: the congestion point's feedback packets (§3.1.1)
//! driving `cc=qcn-rp` reaction points (§3.1.2), PFC (§3.2), the three-point baseline (§2.4),
//! the thresholds of §3.2.2, and the paper's topology (§4.1). Tests are named after the paper's
//! sections; every run is deterministic for its seed.

use hosts::json::Json;
use programs::p4qcn::thresholds;
use topo::{GenProps, LinkProps, Topology};

mod common;
use common::{num, sim_flows as flows, sim_run as run};

/// Two senders and one receiver on one switch, every link at 100 Mb/s with a 64-packet buffer:
/// h1 and h2 sending at line rate to h3 offer twice the bottleneck (s1 port 3).
fn incast(program: &str, params: &str) -> Topology {
    incast_at("100M", 10, program, params)
}

/// The same incast at link rate `rate` with `delay_us` links.
fn incast_at(rate: &str, delay_us: u32, program: &str, params: &str) -> Topology {
    Topology::parse(&format!(
        "defaults rate={rate} delay={delay_us}us buffer=64\n\
         switch s1 program={program} {params}\n\
         host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\n\
         host h2 ipv4=10.0.1.2 ipv6=fd00::1:2\n\
         host h3 ipv4=10.0.1.3 ipv6=fd00::1:3\n\
         link s1:1 h1\nlink s1:2 h2\nlink s1:3 h3\n"
    ))
    .unwrap()
}

const TWO_RPS: [&str; 2] = [
    "h1>h3 rate=100M size=1000 cc=qcn-rp",
    "h2>h3 rate=100M size=1000 cc=qcn-rp",
];

fn loss(r: &Json) -> f64 {
    let (sent, lost) = flows(r).iter().fold((0, 0), |(s, l), f| {
        (s + num(f, &["sent"]), l + num(f, &["lost"]))
    });
    lost as f64 / sent as f64
}

fn pauses_sent(r: &Json, sw: &str, ports: &[u16]) -> u64 {
    ports
        .iter()
        .map(|p| {
            num(
                r,
                &["switches", sw, "ports", &p.to_string(), "pfc_pauses_sent"],
            )
        })
        .sum()
}

#[test]
fn s3_1_two_point_feedback_keeps_loss_low_where_plain_udp_loses_half() {
    let udp = run(&incast("p4qcn-off", ""), 200, 1, &TWO_RPS);
    let qcn = run(&incast("p4qcn", "q_min=11 q_max=11"), 200, 1, &TWO_RPS);
    let (l_udp, l_qcn) = (loss(&udp), loss(&qcn));
    assert!((0.4..0.6).contains(&l_udp), "plain UDP loses {l_udp}");
    assert!(l_qcn < 0.05, "P4QCN loses {l_qcn}");
    // The reaction points were cut.
    for f in flows(&qcn) {
        assert!(num(f, &["qcn_rp", "feedbacks"]) > 10);
    }
    // The FBPs reached the sources with ECN = 11; the receiver saw none.
    assert!(num(&qcn, &["hosts", "h1", "rx_ecn_ce"]) > 10);
    assert!(num(&qcn, &["hosts", "h2", "rx_ecn_ce"]) > 10);
    assert_eq!(num(&qcn, &["hosts", "h3", "rx_ecn_ce"]), 0);
    assert_eq!(num(&udp, &["hosts", "h1", "rx_ecn_ce"]), 0);
}

#[test]
fn s3_2_with_pfc_as_well_nothing_is_lost_and_pauses_are_counted() {
    let r = run(
        &incast("p4qcn-pfc", "q_min=11 q_max=11 q_pfc=14"),
        200,
        1,
        &TWO_RPS,
    );
    for f in flows(&r) {
        assert_eq!(num(f, &["lost"]), 0, "{f:?}");
        assert!(num(f, &["received"]) > 10);
    }
    assert!(pauses_sent(&r, "s1", &[1, 2]) > 0);
    let received: u64 = ["h1", "h2"]
        .iter()
        .map(|h| num(&r, &["hosts", h, "pfc_pauses_received"]))
        .sum();
    assert!(received > 0);
    // PFC alone is lossless too, with no feedback.
    let r = run(&incast("pfc", "q_pfc=14"), 200, 1, &TWO_RPS);
    for f in flows(&r) {
        assert_eq!(num(f, &["lost"]), 0);
        assert_eq!(num(f, &["qcn_rp", "feedbacks"]), 0);
    }
    assert!(pauses_sent(&r, "s1", &[1, 2]) > 0);
}

#[test]
fn s2_4_three_point_marks_and_the_receiver_answers() {
    let specs = [
        "h1>h3 rate=100M size=1000 cc=qcn-rp tos=2 np=on",
        "h2>h3 rate=100M size=1000 cc=qcn-rp tos=2 np=on",
    ];
    let r = run(&incast("p4qcn-3pt", "q_min=11 q_max=11"), 200, 1, &specs);
    assert!(num(&r, &["hosts", "h3", "rx_ecn_ce"]) > 10, "the CP marks");
    for f in flows(&r) {
        let sent = num(f, &["np_feedbacks_sent"]);
        assert!(sent > 10);
        // Every feedback packet the NP sent reached its RP (the reverse path is idle).
        assert_eq!(num(f, &["qcn_rp", "feedbacks"]), sent);
    }
    assert!(loss(&r) < 0.1, "three-point loses {}", loss(&r));
}

#[test]
fn s3_1_1_feedback_pacing_limits_fbps_per_flow() {
    // One flow at twice a 50 Mb/s bottleneck, FBPs at most every 1 ms: in 100 ms at most ~100.
    let t = Topology::parse(
        "defaults rate=100M delay=10us buffer=64\n\
         switch s1 program=p4qcn q_min=5 q_max=20 pace_us=1000\n\
         host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\n\
         host h2 ipv4=10.0.1.2 ipv6=fd00::1:2\n\
         link s1:1 h1\nlink s1:2 h2 rate=50M\n",
    )
    .unwrap();
    let r = run(&t, 100, 3, &["h1>h2 rate=100M cc=qcn-rp"]);
    let fb = num(&flows(&r)[0], &["qcn_rp", "feedbacks"]);
    assert!((5..=101).contains(&fb), "{fb} feedbacks");
}

/// Two flows between the same two hosts (two sockets, two reaction points) are paced apart:
/// with a pacing interval longer than the run, each gets its one feedback packet. Keyed by the
/// address pair, the second flow's congestion found the first's slot taken and got none
/// (issue 33).
#[test]
fn s3_1_1_feedback_pacing_is_per_flow_not_per_host_pair() {
    let t = Topology::parse(
        "defaults rate=100M delay=10us buffer=64\n\
         switch s1 program=p4qcn q_min=5 q_max=20 pace_us=1000000\n\
         host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\n\
         host h2 ipv4=10.0.1.2 ipv6=fd00::1:2\n\
         link s1:1 h1\nlink s1:2 h2 rate=50M\n",
    )
    .unwrap();
    let r = run(
        &t,
        100,
        3,
        &["h1>h2 rate=100M cc=qcn-rp", "h1>h2 rate=100M cc=qcn-rp"],
    );
    let fb: Vec<u64> = flows(&r)
        .iter()
        .map(|f| num(f, &["qcn_rp", "feedbacks"]))
        .collect();
    assert_eq!(fb, [1, 1], "feedback packets per flow");
}

#[test]
fn s3_2_2_thresholds_follow_the_buffer_and_the_bdp() {
    // 4 ports of 64 packets, BDP 1 packet: Q_PFC = (256 - 32)/32 = 7, Q_P4QCN = 6.
    let t = thresholds(256, 4, 1);
    assert_eq!((t.q_pfc, t.q_min, t.q_max), (7, 6, 6));
    // A buffer too small for the rule still gives thresholds of 1.
    assert_eq!(thresholds(10, 4, 2).q_pfc, 1);
    assert_eq!(thresholds(10, 4, 2).q_min, 1);
}

#[test]
fn s4_1_the_papers_topology_at_7_mbps_feedback_crosses_the_fabric_and_the_rate_recovers() {
    let link = LinkProps {
        rate_bps: 7_000_000,
        delay_us: 50,
        buffer: 64,
    };
    let mut t = topo::p4qcn(
        2,
        GenProps {
            host: link,
            fabric: link,
        },
    );
    for s in &mut t.switches {
        s.program = "p4qcn".into();
        s.params.insert("q_min".into(), "11".into());
        s.params.insert("q_max".into(), "11".into());
    }
    // host11 at 4 Mb/s and host21, host31 at 3 Mb/s into host41's 7 Mb/s link.
    let specs = [
        "host11>host41 rate=4M cc=qcn-rp",
        "host21>host41 rate=3M cc=qcn-rp",
        "host31>host41 rate=3M cc=qcn-rp",
    ];
    let r = run(&t, 2000, 5, &specs);
    for f in flows(&r) {
        assert!(num(f, &["qcn_rp", "feedbacks"]) > 0, "{f:?}");
    }
    assert!(loss(&r) < 0.05, "loss {}", loss(&r));
    // §3.1.2 (Fig. 12): host11's rate is cut, recovers in five fast-recovery cycles (the fifth
    // ends it) and then increases actively.
    let Some(Json::A(trace)) = flows(&r)[0]
        .get("qcn_rp")
        .and_then(|q| q.get("trace_t_us_rc_rt_state"))
    else {
        panic!("no trace");
    };
    let states: Vec<&str> = trace
        .iter()
        .map(|row| match row {
            Json::A(v) => match &v[3] {
                Json::S(s) => s.as_str(),
                other => panic!("state {other:?}"),
            },
            _ => panic!("row {row:?}"),
        })
        .collect();
    let found = states.windows(6).any(|w| {
        w[0] == "reduction"
            && w[1..5].iter().all(|s| *s == "fast_recovery")
            && w[5] == "active_increase"
    });
    assert!(found, "{states:?}");
    // Plain UDP on the same fabric loses what does not fit into host41's link.
    for s in &mut t.switches {
        s.program = "p4qcn-off".into();
    }
    let udp = run(&t, 2000, 5, &specs);
    assert!(loss(&udp) > 0.2, "plain UDP loses {}", loss(&udp));
}

#[test]
fn s3_2_an_xon_resumes_a_paused_host_at_once_not_when_its_pause_would_end() {
    // At 7 Mb/s a PAUSE of 65535 quanta lasts 4.8 s: a host that waited for it to run out
    // (rather than for the switch's XON) would hold its packets for seconds.
    let t = incast_at("7M", 50, "pfc", "q_pfc=14");
    let r = run(
        &t,
        2000,
        1,
        &["h1>h3 rate=5M size=1000", "h2>h3 rate=5M size=1000"],
    );
    assert!(pauses_sent(&r, "s1", &[1, 2]) > 10);
    for f in flows(&r) {
        assert_eq!(num(f, &["lost"]), 0, "{f:?}");
        let max = f
            .get("latency_us")
            .and_then(|l| l.get("max"))
            .and_then(|m| match m {
                Json::F(x) => Some(*x),
                Json::U(x) => Some(*x as f64),
                _ => None,
            })
            .unwrap();
        // 10 Mb/s offered to 7 Mb/s for 2 s: the backlog is 0.86 s of the link at the end.
        assert!(max < 1_500_000.0, "a packet waited {max} us");
    }
}

#[test]
fn s3_2_paused_sources_resume_in_time_order_so_pfc_holds_packets_for_milliseconds() {
    // Two hosts at 500 Mb/s into one 700 Mb/s link with PFC: the hosts are paused and their
    // sources block; a blocked source's missed send times must become "now", not times in the
    // past (which once ran the simulator's clock backwards: p99 78 ms, 40x slower).
    let t = incast_at("700M", 50, "pfc", "q_pfc=14");
    let r = run(
        &t,
        100,
        1,
        &["h1>h3 rate=500M size=1028", "h2>h3 rate=500M size=1028"],
    );
    assert!(pauses_sent(&r, "s1", &[1, 2]) > 10);
    for f in flows(&r) {
        assert_eq!(num(f, &["lost"]), 0, "{f:?}");
        let p99 = match f.get("latency_us").and_then(|l| l.get("p99")) {
            Some(Json::F(x)) => *x,
            other => panic!("{other:?}"),
        };
        assert!(p99 < 10_000.0, "p99 {p99} us");
    }
}
