//! Fig. 6 and Alg. 2: path selection, with and without the local agent, and idle uplinks.

use super::*;

// ----- Fig. 6 and Alg. 2: path selection ------------------------------------------------------

/// The uplink a flow's first packet takes.
fn first_hop(sw: &mut SimSwitch, frame: &[u8]) -> u16 {
    let out = sw.inject(1, frame, 1_000_000_000);
    let data: Vec<_> = out
        .iter()
        .filter(|o| o.instance_type == InstanceType::Normal)
        .collect();
    assert_eq!(data.len(), 1, "{out:?}");
    data[0].port
}

#[test]
fn fig6_a_large_flow_takes_the_queue_group_port_when_its_utilisation_port_is_red() {
    let t = fabric("p4te", &[]);
    let pipe = switch(&t, "leaf1");
    let c = &pipe.control;
    // Fig. 6: port 3 is RED in portUtilizations but still the port of the highest utilisation
    // group present (priority 2); port 4 is the port of the highest queue group present.
    // The agent's P4Runtime priorities of levels 1 and 2, in the commands' BMv2 form.
    let (l1, l2) = (bmv2_priority(priority(1)), bmv2_priority(priority(2)));
    for line in [
        "register_write port_utilizations 3 2".to_string(),
        // Utilisation groups: level 2 = {3}, level 1 holds nothing (its entry removed).
        "act_prof_create_group up_selector 99 3".into(),
        format!("table_delete link_util_up 0&&&0 {l1}"),
        format!("table_indirect_add_with_group link_util_up 0&&&0 => 99 {l2}"),
        // Queue groups: level 2 = {4}.
        "act_prof_create_group up_selector 98 4".into(),
        format!("table_delete queue_depth_up 0&&&0 {l1}"),
        format!("table_indirect_add_with_group queue_depth_up 0&&&0 => 98 {l2}"),
    ] {
        apply(c, &line);
    }
    let mut sw = SimSwitch::new(pipe.clone());
    let large = tcp_v4(0x10, 1, 1, 1000, None, b"data");
    assert_eq!(
        first_hop(&mut sw, &large),
        4,
        "lowUtilPort 3 is RED: lowQueueDepthPort"
    );
    // A short flow prefers lowQueueDepthPort (4, GREEN) anyway.
    let mut short = tcp_v4(0x08, 1, 1, 1000, None, b"data");
    short[34..36].copy_from_slice(&40001u16.to_be_bytes());
    fix_tcp(&mut short);
    assert_eq!(first_hop(&mut sw, &short), 4);
    // Once port 4 is RED too, a short flow takes lowUtilPort.
    apply(c, "register_write port_utilizations 4 2");
    short[34..36].copy_from_slice(&40002u16.to_be_bytes());
    fix_tcp(&mut short);
    assert_eq!(first_hop(&mut sw, &short), 3);
}

#[test]
fn the_routing_ablations_take_one_metrics_groups_or_none() {
    // Fig. 6's groups (utilisation level 2 = {3}, queue level 2 = {4}), every port GREEN, under
    // each `routing=` of the plan: (a large flow's first hop, a short flow's, the uplinks 64
    // large flows of other source ports take).
    let hops = |routing: &str| {
        let t = fabric("p4te", &[("routing", routing)]);
        let pipe = switch(&t, "leaf1");
        let (l1, l2) = (bmv2_priority(priority(1)), bmv2_priority(priority(2)));
        for line in [
            "act_prof_create_group up_selector 99 3".to_string(),
            format!("table_delete link_util_up 0&&&0 {l1}"),
            format!("table_indirect_add_with_group link_util_up 0&&&0 => 99 {l2}"),
            "act_prof_create_group up_selector 98 4".into(),
            format!("table_delete queue_depth_up 0&&&0 {l1}"),
            format!("table_indirect_add_with_group queue_depth_up 0&&&0 => 98 {l2}"),
        ] {
            apply(&pipe.control, &line);
        }
        let mut sw = SimSwitch::new(pipe.clone());
        let large = tcp_v4(0x10, 1, 1, 1000, None, b"data");
        // Another flowlet than the large flow's (its own source port).
        let mut short = tcp_v4(0x08, 1, 1, 1000, None, b"data");
        short[34..36].copy_from_slice(&40001u16.to_be_bytes());
        fix_tcp(&mut short);
        let (a, b) = (first_hop(&mut sw, &large), first_hop(&mut sw, &short));
        let spread: std::collections::BTreeSet<u16> = (0..64u16)
            .map(|i| {
                let mut f = large.clone();
                f[34..36].copy_from_slice(&(30000 + i).to_be_bytes());
                fix_tcp(&mut f);
                first_hop(&mut sw, &f)
            })
            .collect();
        (a, b, spread.into_iter().collect::<Vec<_>>())
    };
    // Alg. 2: a large flow by utilisation, a short one by queue depth.
    assert_eq!(hops("alg2"), (3, 4, vec![3]));
    assert_eq!(hops("queue"), (4, 4, vec![4]));
    assert_eq!(hops("color"), (3, 3, vec![3]));
    // Static: neither group, ECMP over both up ports.
    let (_, _, spread) = hops("static");
    assert_eq!(spread, vec![3, 4]);
}

#[test]
fn alg2_a_large_flow_avoids_a_yellow_uplink() {
    let t = fabric("p4te", &[]);
    // Flow 1 (large) at 95% of an uplink; flow 2 (large), 50 ms later from h2. Flow 2's ports
    // are chosen so that, with every uplink GREEN, its hash would put it on flow 1's uplink.
    let f1 = "h1>h3 rate=95M size=1000 tos=16";
    let base = |sport: u16| format!("h2>h4 rate=95M size=1000 tos=16 start_ms=50 sport={sport}");
    let up = |r: &Json| {
        (
            num(r, &["switches", "leaf1", "ports", "3", "tx_packets"]),
            num(r, &["switches", "leaf1", "ports", "4", "tx_packets"]),
        )
    };
    let sport = (20000..20100)
        .find(|&sport| {
            let (r, _) = run(&t, 120, &[f1, &base(sport)], true);
            let (a, b) = up(&r);
            a == 0 || b == 0
        })
        .expect("some source port hashes flow 2 onto flow 1's uplink");
    // With the local agent: flow 1 turns its uplink YELLOW, the agent moves it to the YELLOW
    // group, and flow 2 takes the other uplink.
    let (r, sim) = run(&t, 120, &[f1, &base(sport)], false);
    let (a, b) = up(&r);
    assert!(a > 0 && b > 0, "one uplink each: {a} {b}");
    assert_eq!(num(flow(&r, 0), &["lost"]), 0);
    assert_eq!(num(flow(&r, 1), &["lost"]), 0);
    assert!(sim.agent_writes("leaf1").unwrap() > 0);
    eprintln!("leaf1 agent writes: {}", sim.agent_writes("leaf1").unwrap());
}

/// Issue 32's case: on the 2x2 leaf-spine that `pisa-fabric gen leaf-spine --leaves 2 --spines 2
/// --hosts-per-leaf 2` writes (1 Gb/s hosts, 500 Mb/s uplinks), two large TCP-shaped flows at
/// 95% of an uplink from leaf1's two hosts, the second 50 ms after the first, over six pairs of
/// source ports. Each pair's uplinks `(port 3, port 4)` of leaf1 and the flows' losses.
fn oversubscribed_pairs(hold: Option<&str>) -> Vec<((u64, u64), u64)> {
    let params: Vec<(&str, &str)> = hold.map(|h| ("color_hold_us", h)).into_iter().collect();
    let t = oversubscribed(&params);
    (0..6u16)
        .map(|i| {
            let f1 = format!(
                "h1>h3 rate=475M size=1500 proto=tcp tos=0x10 sport={}",
                10_000 + i
            );
            let f2 = format!(
                "h2>h4 rate=475M size=1500 proto=tcp tos=0x10 start_ms=50 sport={}",
                20_000 + i
            );
            let (r, _) = run(&t, 300, &[&f1, &f2], false);
            let ports = (
                num(&r, &["switches", "leaf1", "ports", "3", "tx_packets"]),
                num(&r, &["switches", "leaf1", "ports", "4", "tx_packets"]),
            );
            let lost = num(flow(&r, 0), &["lost"]) + num(flow(&r, 1), &["lost"]);
            (ports, lost)
        })
        .collect()
}

#[test]
fn alg2_two_large_tcp_flows_take_one_uplink_each_on_an_oversubscribed_fabric() {
    // Alg. 1 as written (each packet's own colour): the loaded uplink is GREEN for all but the
    // ~5% of packets beyond CIR, so the second flow's first packet mostly finds both uplinks in
    // the first group and the hash may put it beside the first flow, for good.
    let literal = oversubscribed_pairs(Some("0"));
    eprintln!("per-packet colours: {literal:?}");
    assert!(
        literal
            .iter()
            .any(|&((a, b), lost)| (a == 0 || b == 0) && lost > 0),
        "some pair shares one uplink and loses: {literal:?}"
    );
    // With the colour held for the meter's burst time (the default), the loaded uplink stays
    // YELLOW and every second flow takes the other one, losing nothing.
    let held = oversubscribed_pairs(None);
    eprintln!("held colours: {held:?}");
    for &((a, b), lost) in &held {
        assert!(a > 5_000 && b > 5_000, "one uplink each: {held:?}");
        assert_eq!(lost, 0, "{held:?}");
    }
}

#[test]
fn an_uplink_that_falls_idle_returns_to_the_first_groups() {
    // A large flow at 95% of an uplink for 100 ms turns it YELLOW (held); then nothing leaves
    // it, so no packet can report it GREEN again. The agent's idle check must bring it back to
    // level 1 of both metrics, or every later flowlet would treat an idle uplink as loaded.
    let t = fabric("p4te", &[]);
    let f1 = "h1>h3 rate=95M size=1000 tos=16 stop_ms=100";
    let (_, sim) = run(&t, 150, &[f1], false);
    let c = sim.control("leaf1").unwrap();
    let groups = c.read_groups(None).unwrap();
    let members = |g: u32| -> Vec<u32> {
        let mut m: Vec<u32> = groups
            .iter()
            .filter(|(_, id, _)| *id == g)
            .flat_map(|(_, _, m)| m.iter().map(|(p, _)| *p))
            .collect();
        m.sort_unstable();
        m
    };
    // Utilisation level 1 is group 11, queue level 1 group 1.
    assert_eq!(members(11), [3, 4], "{groups:?}");
    assert_eq!(members(1), [3, 4], "{groups:?}");
    for g in [2, 3, 4, 12, 13] {
        assert!(members(g).is_empty(), "{groups:?}");
    }
    // It was YELLOW while the flow ran: the agent moved it there and back.
    assert!(sim.agent_writes("leaf1").unwrap() >= 2);
}
