//! §5.1: a failed link leaves every routing group, and flows move at their next flowlet.

use super::*;
use sim::fabric::LinkEvent;

const FLOWS: u16 = 16;

/// Sixteen on-off UDP flows (10 ms at 4 Mb/s, 10 ms off; tagged large) from leaf1's hosts to
/// leaf2's, for 100 ms: at most 64 Mb/s on an uplink, under CIR, so every uplink stays GREEN and
/// in the first utilisation group, and each burst's new flowlet is hashed over both; leaf1's uplink 3 (to spine1) fails at 25 ms, mid burst, and comes back
/// at `up_ms` if given. `agents`: P4TE's agents (told of the failure), or silent ones.
fn fail_run(agents: bool, up_ms: Option<u64>) -> (Json, Sim) {
    // A 5 ms gap: longer than a flow's 2 ms between packets, shorter than the 10 ms off
    // period, so each burst is one flowlet.
    let t = fabric("p4te", &[("flowlet_gap_us", "5000")]);
    let mut opts = Options::new(100_000_000, 3);
    for i in 0..FLOWS {
        let (src, dst) = if i % 2 == 0 {
            ("h1", "h3")
        } else {
            ("h2", "h4")
        };
        let f = format!(
            "{src}>{dst} rate=4M size=1000 tos=16 pattern=onoff sport={}",
            20_000 + i
        );
        opts.flows
            .push(FlowSpec::parse(&f, usize::from(i)).unwrap());
    }
    opts.link_events
        .push(LinkEvent::parse("leaf1:3@25", false).unwrap());
    if let Some(ms) = up_ms {
        opts.link_events
            .push(LinkEvent::parse(&format!("spine1:1@{ms}"), true).unwrap());
    }
    let mut sim = Sim::new(&t, opts).unwrap();
    if !agents {
        for s in &t.switches {
            sim.attach_agent(&s.name, Box::new(Silent)).unwrap();
        }
    }
    (sim.run(), sim)
}

/// Whether port 3 is a member of any of leaf1's groups.
fn in_a_group(sim: &Sim) -> bool {
    let groups = sim.control("leaf1").unwrap().read_groups(None).unwrap();
    groups
        .iter()
        .any(|(_, _, members)| members.iter().any(|(p, _)| *p == 3))
}

#[test]
fn section_5_1_a_failed_link_leaves_every_group_and_flows_move_at_their_next_flowlet() {
    let link = |r: &Json, k: &str| num(r, &["switches", "leaf1", "ports", "3", k]);
    let lost = |r: &Json| {
        (0..usize::from(FLOWS))
            .map(|i| num(flow(r, i), &["lost"]))
            .sum::<u64>()
    };
    let (r, sim) = fail_run(true, None);
    assert!(!in_a_group(&sim), "the failed port left every group");
    // Lost: what the flowlets already on port 3 sent from the failure to the end of their burst
    // (5 ms of at most 16 flows at 500 packets/s: 40) and what was queued there (at most one
    // frame of each flow), and nothing after.
    let dropped = link(&r, "link_drops");
    assert!(dropped > 0 && dropped <= 56, "{dropped}");
    assert_eq!(lost(&r), dropped);
    // The switch without its agent is never told: the port stays in the groups, and every
    // later burst that hashes onto it is lost too.
    let (silent, silent_sim) = fail_run(false, None);
    assert!(in_a_group(&silent_sim));
    let silent_dropped = link(&silent, "link_drops");
    assert!(
        silent_dropped > 3 * dropped,
        "{silent_dropped} against {dropped}"
    );
    // Back up at 60 ms (told from the other end): port 3 rejoins the first groups and carries
    // its share of the two bursts after (16 flows x 5 packets each, hashed over two ports).
    let (back, back_sim) = fail_run(true, Some(60));
    assert!(in_a_group(&back_sim));
    // spine1's port to leaf1 is in no group (a spine routes down by prefix): its agent was told
    // of the same link and wrote nothing.
    assert_eq!(back_sim.agent_writes("spine1"), Some(0));
    assert_eq!(link(&back, "link_drops"), dropped);
    assert!(link(&back, "tx_packets") > link(&r, "tx_packets") + 40);
    eprintln!(
        "link drops: agent {dropped}, silent {silent_dropped}; port 3 sent {} (down for good) \
         against {} (back at 60 ms)",
        link(&r, "tx_packets"),
        link(&back, "tx_packets")
    );
}

#[test]
fn link_events_parse_and_name_a_switch_to_switch_link() {
    let e = LinkEvent::parse("leaf1:3@2.5", false).unwrap();
    assert_eq!(
        (e.switch.as_str(), e.port, e.at_ns, e.up),
        ("leaf1", 3, 2_500_000, false)
    );
    for bad in ["leaf1:3", "leaf1@3", ":3@1", "leaf1:x@1", "leaf1:3@-1"] {
        assert!(LinkEvent::parse(bad, true).is_err(), "{bad}");
    }
    let t = fabric("p4te", &[]);
    for (end, why) in [("leaf1:1@1", "a host's link"), ("leaf9:3@1", "no switch")] {
        let mut opts = Options::new(1_000_000, 1);
        opts.link_events.push(LinkEvent::parse(end, false).unwrap());
        assert!(Sim::new(&t, opts).is_err(), "{why}");
    }
}
