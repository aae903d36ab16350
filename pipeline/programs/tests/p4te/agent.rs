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
