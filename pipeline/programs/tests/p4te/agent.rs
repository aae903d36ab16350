//! Alg. 3: the local control plane.

use super::*;

// ----- Alg. 3: the local control plane --------------------------------------------------------

#[test]
fn alg3_maps_depths_to_four_ranges_and_colours_to_three_groups() {
    // Δ = 2: [0-2], [3-4], [5-6], [7-rest] [P §7].
    let levels: Vec<u32> = (0..10).map(|d| queue_level(d, 2)).collect();
    assert_eq!(levels, [1, 1, 1, 2, 2, 3, 3, 4, 4, 4]);
    let fb = Feedback {
        qd_event: p4te::Event::Increase,
        util_event: p4te::Event::Decrease,
        color: Color::Yellow,
        port: 300,
        depth: 123_456,
    };
    let mut frame = vec![0u8; 14];
    frame[12..14].copy_from_slice(&p4te::FEEDBACK_ETHERTYPE.to_be_bytes());
    frame.extend(fb.encode());
    assert_eq!(Feedback::decode(&frame), Some(fb));
}

#[test]
fn alg3_the_agent_skips_reports_of_ports_in_no_group_before_any_read() {
    use programs::p4te::agent::P4teAgent;
    let t = fabric("p4te", &[]);
    let pipe = switch(&t, "leaf1");
    let mut agent = P4teAgent::new(pipe.control.schema()).unwrap();
    let report = |port: u16| {
        let fb = Feedback {
            qd_event: p4te::Event::None,
            util_event: p4te::Event::Increase,
            color: Color::Yellow,
            port,
            depth: 0,
        };
        let mut frame = vec![0u8; 2 + 14];
        frame[14..16].copy_from_slice(&p4te::FEEDBACK_ETHERTYPE.to_be_bytes());
        frame.extend(fb.encode());
        frame
    };
    let mut cx = AgentCx::new(&pipe.control);
    // Before the first tick the agent knows no up ports and looks at every report: port 1
    // (h1's) is in no group, so nothing moves.
    agent.packet_in(0, &report(1), &mut cx);
    assert_eq!((agent.skipped, agent.moves), (0, 0));
    // After a tick it knows leaf1's uplinks (3, 4): a host port's report is skipped, an
    // uplink's moves it.
    agent.tick(1_000_000_000, &mut cx);
    agent.packet_in(0, &report(1), &mut cx);
    agent.packet_in(0, &report(2), &mut cx);
    agent.packet_in(0, &report(3), &mut cx);
    assert_eq!((agent.feedback, agent.skipped, agent.moves), (4, 2, 1));
    // A reset forgets the up ports.
    agent.reset();
    agent.packet_in(0, &report(1), &mut cx);
    assert_eq!(agent.skipped, 2);
}

#[test]
fn a_failed_link_leaves_every_group_once_and_only_a_failed_port_comes_back() {
    use pipeline::control::TableAction;
    use programs::p4te::agent::{ECMP_GROUP, P4teAgent, QUEUE_GROUPS, UTIL_GROUPS};
    let t = fabric("p4te", &[]);
    let pipe = switch(&t, "leaf1");
    let c = &pipe.control;
    let mut agent = P4teAgent::new(c.schema()).unwrap();
    let mut cx = AgentCx::new(c);
    // How many groups hold ports 3 and 4 (leaf1's uplinks) and 1 (h1's); and, per level table,
    // that it has an entry for exactly its non-empty groups (A-P4TE-7): returns their count.
    let state = || {
        let groups = c.read_groups(None).unwrap();
        let holding = |p: u32| {
            groups
                .iter()
                .filter(|(_, _, m)| m.iter().any(|(x, _)| *x == p))
                .count()
        };
        let mut entries = 0;
        for (name, ids) in [
            (
                "ingress.queue_depth_up",
                QUEUE_GROUPS + 1..=QUEUE_GROUPS + 4,
            ),
            ("ingress.link_util_up", UTIL_GROUPS + 1..=UTIL_GROUPS + 3),
        ] {
            let s = c.schema();
            let id = s.tables[s.table_by_name(name).unwrap()].id;
            let mut pointed: Vec<u32> = c
                .read_entries(Some(id), false, false)
                .unwrap()
                .iter()
                .filter_map(|e| match e.action {
                    Some(TableAction::Group(g)) => Some(g),
                    _ => None,
                })
                .collect();
            pointed.sort();
            let nonempty: Vec<u32> = groups
                .iter()
                .filter(|(_, g, m)| ids.contains(g) && !m.is_empty())
                .map(|(_, g, _)| *g)
                .collect();
            assert_eq!(pointed, nonempty, "{name}");
            entries += pointed.len();
        }
        (holding(3), holding(4), holding(1), entries)
    };
    // Each uplink is in level 1 of both metrics and in the ECMP group.
    assert_eq!(state(), (3, 3, 0, 2));
    agent.port_status(0, 3, false, &mut cx);
    assert_eq!(state(), (0, 3, 0, 2));
    // Down again, and a host port's link: nothing to do.
    agent.port_status(0, 3, false, &mut cx);
    agent.port_status(0, 1, false, &mut cx);
    agent.port_status(0, 1, true, &mut cx);
    assert_eq!((state(), agent.link_changes), ((0, 3, 0, 2), 1));
    // Back, once however often it is said.
    agent.port_status(0, 3, true, &mut cx);
    agent.port_status(0, 3, true, &mut cx);
    assert_eq!((state(), agent.link_changes), ((3, 3, 0, 2), 2));
    // Every uplink down: no level has an entry; one back: its levels have one each.
    agent.port_status(0, 3, false, &mut cx);
    agent.port_status(0, 4, false, &mut cx);
    assert_eq!(state(), (0, 0, 0, 0));
    agent.port_status(0, 4, true, &mut cx);
    assert_eq!(state(), (0, 3, 0, 2));
    let ecmp = c.read_groups(None).unwrap();
    assert!(
        ecmp.iter()
            .any(|(_, g, m)| *g == ECMP_GROUP && m == &vec![(4, 1)])
    );
}
