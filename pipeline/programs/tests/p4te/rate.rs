//! §4.3: rate adaptation (the decision, FACKs, B) and the link meter it reads.

use super::*;

/// leaf1's (DEC, INC) rate decisions with one large TCP-shaped flow at 700 Mb/s into a 500 Mb/s
/// uplink, for `ms` ms, on the oversubscribed fabric with `params`.
fn decisions(params: &[(&str, &str)], ms: u64) -> (u64, u64) {
    let t = oversubscribed(params);
    let (_, sim) = run(
        &t,
        ms,
        &["h1>h3 rate=700M size=1500 proto=tcp tos=0x10"],
        false,
    );
    let c = sim.control("leaf1").unwrap();
    let s = c.schema();
    let i = s
        .counters
        .iter()
        .position(|x| x.name == "egress.facks")
        .unwrap();
    let facks = &c.externs().counters[i];
    (
        facks.read(0).unwrap().packets,
        facks.read(1).unwrap().packets,
    )
}

#[test]
fn rate_control_decreases_where_the_meter_can_see_the_excess() {
    // The experiment values (CIR 90%, PIR 100%) on what the port sends: the shaper holds the
    // uplink to 100% of its rate, so the link is never RED and no DEC is ever decided.
    let (dec, _) = decisions(&[], 200);
    assert_eq!(dec, 0);
    // Metering offered load: 140% of the uplink is RED.
    let (dec_offered, _) = decisions(&[("link_meter", "offered")], 200);
    // The paper's design values: PIR 95%, so the shaped 100% is RED too, once the peak bucket
    // (5% of a second of the link, 3.1 MB) has drained at the 5% excess: after about 1 s.
    let (dec_design_early, _) = decisions(&[("meter_values", "design")], 900);
    let (dec_design, _) = decisions(&[("meter_values", "design")], 1500);
    eprintln!(
        "DEC: experiment values {dec}, offered load {dec_offered}, design values \
         {dec_design_early} in 0.9 s, {dec_design} in 1.5 s"
    );
    // The flow sends ~11,700 segments in 200 ms; most are candidates (flag (a) only marks
    // the B bytes after a FACK passes the source leaf, and none does: no real ACK to patch).
    assert!(dec_offered > 5_000, "{dec_offered}");
    assert_eq!(dec_design_early, 0);
    assert!(dec_design > 5_000, "{dec_design}");
}

#[test]
fn b_comes_from_the_rtt_the_flowlet_gap_stands_for() {
    // 100 Mb/s hosts. With the plan's gap (40/70 of rtt_us), B = rtt_us x the host rate.
    let b = |params: &[(&str, &str)]| {
        let t = fabric("p4te", params);
        reg(&switch(&t, "leaf1").control, "ingress.rc_bytes", 0)
    };
    assert_eq!(b(&[("rtt_us", "382")]), 382 * 100 / 8);
    // A 30 ms gap (E5's optimum under load) stands for a 52.5 ms RTT: B of that RTT, not of
    // the idle one.
    assert_eq!(
        b(&[("rtt_us", "382"), ("flowlet_gap_us", "30000")]),
        52_500 * 100 / 8
    );
    // An explicit B wins.
    assert_eq!(
        b(&[("flowlet_gap_us", "30000"), ("rc_bytes", "9000")]),
        9000
    );
}

// ----- §4.3: rate adaptation -------------------------------------------------------------------

#[test]
fn rate_decision_table() {
    use Color::*;
    assert_eq!(rate_decision(Yellow, Red), Some(Action::Decrease));
    assert_eq!(rate_decision(Yellow, Green), Some(Action::Increase));
    assert_eq!(rate_decision(Green, Red), None);
    assert_eq!(rate_decision(Green, Green), None);
    assert_eq!(rate_decision(Yellow, Yellow), None);
    assert_eq!(rate_decision(Red, Yellow), None);
    assert_eq!(fack::resized(1000, Action::Decrease), 500);
    assert_eq!(fack::resized(1000, Action::Increase), 1250);
    assert_eq!(fack::resized(60000, Action::Increase), 65535);
    assert_eq!(fack::resized(1, Action::Decrease), 0);
}

/// The FACK of [`tcp_v4`]'s data, built independently with etherparse.
fn expected_fack_v4(mark: u8, seq: u32, ack: u32, window: u16, ts: (u32, u32)) -> Vec<u8> {
    let mut tcp = TcpHeader::new(5001, 40000, seq, window);
    tcp.ack = true;
    tcp.acknowledgment_number = ack;
    tcp.set_options(&[
        TcpOptionElement::Noop,
        TcpOptionElement::Noop,
        TcpOptionElement::Timestamp(ts.0, ts.1),
    ])
    .unwrap();
    let mut ip = Ipv4Header::new(
        tcp.header_len() as u16,
        64,
        IpNumber::TCP,
        [10, 0, 2, 1],
        [10, 0, 1, 1],
    )
    .unwrap();
    ip.dont_fragment = true;
    ip.dscp = Ipv4Dscp::try_new(mark >> 2).unwrap();
    ip.header_checksum = ip.calc_header_checksum();
    tcp.checksum = tcp.calc_checksum_ipv4(&ip, &[]).unwrap();
    let mut out = Vec::new();
    Ethernet2Header {
        source: [2, 0x5e, 0, 0, 0, 2],
        destination: [2, 0xee, 0, 0, 0, 0],
        ether_type: EtherType::IPV4,
    }
    .write(&mut out)
    .unwrap();
    ip.write(&mut out).unwrap();
    tcp.write(&mut out).unwrap();
    out
}

#[test]
fn fack_byte_for_byte_ipv4() {
    let data = tcp_v4(
        0x10,
        1_000_000,
        77_000,
        501,
        Some((111, 222)),
        &[0xab; 1400],
    );
    let p = p4te::parse::parse(&data).unwrap();
    let t = p.tcp_data().unwrap();
    for (action, mark) in [(Action::Decrease, 0x60), (Action::Increase, 0xe0)] {
        let mut f = data.clone();
        let n = fack::build(&mut f, &p, &t, action);
        f.truncate(n);
        // seq = the data's ack; ack = the data's seq (until the source leaf patches it);
        // TSval/TSecr swapped.
        assert_eq!(
            f,
            expected_fack_v4(mark, 77_000, 1_000_000, 501, (222, 111)),
            "{action:?}"
        );
        // The source leaf's patch: the last real ACK's number, window and timestamps.
        let q = p4te::parse::parse(&f).unwrap();
        let last = fack::LastAck {
            ack: 999_000,
            window: 1000,
            ts: Some((333, 444)),
        };
        fack::patch(&mut f, &q, &last);
        let want = fack::resized(1000, action);
        assert_eq!(f, expected_fack_v4(0, 77_000, 999_000, want, (333, 444)));
    }
}

#[test]
fn fack_byte_for_byte_ipv6() {
    let mut data = Vec::new();
    PacketBuilder::ethernet2([2, 0xee, 0, 0, 0, 0], [2, 0x5e, 0, 0, 0, 2])
        .ipv6(
            [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1],
            [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1],
            64,
        )
        .tcp(40000, 5001, 5, 300)
        .ack(9)
        .write(&mut data, &[1; 100])
        .unwrap();
    let p = p4te::parse::parse(&data).unwrap();
    let mut f = data.clone();
    let n = fack::build(&mut f, &p, &p.tcp_data().unwrap(), Action::Decrease);
    f.truncate(n);
    let mut tcp = TcpHeader::new(5001, 40000, 9, 300);
    tcp.ack = true;
    tcp.acknowledgment_number = 5;
    let ip = Ipv6Header {
        traffic_class: 0x60,
        flow_label: Ipv6FlowLabel::ZERO,
        payload_length: 20,
        next_header: IpNumber::TCP,
        hop_limit: 64,
        source: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1],
        destination: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1],
    };
    tcp.checksum = tcp.calc_checksum_ipv6(&ip, &[]).unwrap();
    let mut want = Vec::new();
    Ethernet2Header {
        source: [2, 0x5e, 0, 0, 0, 2],
        destination: [2, 0xee, 0, 0, 0, 0],
        ether_type: EtherType::IPV6,
    }
    .write(&mut want)
    .unwrap();
    ip.write(&mut want).unwrap();
    tcp.write(&mut want).unwrap();
    assert_eq!(f, want);
}

/// leaf1 as the source leaf of h1's flow to h3, with its class meter saying YELLOW for every
/// large packet from h1 and its uplinks GREEN: every data packet is a candidate for INC.
fn source_leaf(rc_bytes: u64) -> (Arc<Pipeline>, SimSwitch) {
    let t = fabric("p4te", &[("rc_bytes", &rc_bytes.to_string())]);
    let pipe = switch(&t, "leaf1");
    apply(&pipe.control, "meter_set class_rate 513 1 1 1 1");
    let sw = SimSwitch::new(pipe.clone());
    (pipe, sw)
}

#[test]
fn fack_one_per_b_bytes_per_flow_and_patched_at_the_source_leaf() {
    let (pipe, mut sw) = source_leaf(10_000);
    let c = &pipe.control;
    let mut now = 1_000_000_000u64;
    // The receiver's real ACK passes down to h1 first: the leaf remembers it.
    now += 1000;
    let out = sw.inject(3, &ack_v4(1_000_000, 2000, (555, 666)), now);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 1);
    let mut facks = Vec::new();
    let mut flagged = 0;
    for k in 0..20u32 {
        now += 1_000_000;
        let seq = 1_000_000 + k * 1400;
        let out = sw.inject(
            1,
            &tcp_v4(0x10, seq, 7000, 500, Some((10 + k, 555)), &[0; 1400]),
            now,
        );
        for o in &out {
            if o.port == 1 {
                facks.push((seq, o.bytes.clone()));
            } else {
                assert!(o.port == 3 || o.port == 4, "{o:?}");
                if o.bytes[15] & 0x60 != 0 {
                    flagged += 1;
                }
            }
        }
    }
    // One FACK per B = 10,000 bytes of the flow: at seq 1,000,000, then at the first segment
    // 10,000 bytes later (1,011,200), and so on; each of those segments carries flag (b) up.
    let at: Vec<u32> = facks.iter().map(|(s, _)| *s).collect();
    assert_eq!(at, [1_000_000, 1_011_200, 1_022_400]);
    assert_eq!(
        flagged, 20,
        "every other segment carries flag (a), these flag (b)"
    );
    // Each FACK reached h1 patched: ack and timestamps of the last real ACK, its window × 1.25,
    // no marks, valid checksums.
    for (seq, f) in &facks {
        let s = etherparse::SlicedPacket::from_ethernet(f).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = &s.net else {
            panic!()
        };
        assert_eq!(ip.header().dcp().value(), 0);
        assert_eq!(
            ip.header().to_header().calc_header_checksum(),
            ip.header().header_checksum()
        );
        let Some(etherparse::TransportSlice::Tcp(tcp)) = &s.transport else {
            panic!()
        };
        assert_eq!(tcp.sequence_number(), 7000);
        assert_eq!(tcp.acknowledgment_number(), 1_000_000);
        assert_eq!(tcp.window_size(), 2500);
        assert!(tcp.ack() && !tcp.syn() && !tcp.fin() && tcp.payload().is_empty());
        let want = tcp
            .to_header()
            .calc_checksum_ipv4(&ip.header().to_header(), &[])
            .unwrap();
        assert_eq!(tcp.checksum(), want, "FACK for {seq}");
        let ts: Vec<_> = tcp.options_iterator().collect();
        assert!(
            ts.contains(&Ok(TcpOptionElement::Timestamp(555, 666))),
            "{ts:?}"
        );
    }
    assert_eq!(reg(c, "ingress.rc_seq", rc_cell(&pipe)), 1_022_400);
}

fn rc_cell(pipe: &Arc<Pipeline>) -> usize {
    // The cell that holds the flow's rate-control state: the one non-zero rc_seq cell.
    let c = &pipe.control;
    (0..p4te::FLOW_CELLS)
        .find(|&i| reg(c, "ingress.rc_seq", i) != 0)
        .unwrap()
}

#[test]
fn fack_without_a_real_ack_to_patch_from_is_dropped_and_counted() {
    let (pipe, mut sw) = source_leaf(10_000);
    let out = sw.inject(
        1,
        &tcp_v4(0x10, 1_000_000, 7, 500, None, &[0; 100]),
        1_000_000_000,
    );
    assert_eq!(out.iter().filter(|o| o.port == 1).count(), 0, "{out:?}");
    assert_eq!(drops(&pipe.control, "p4te_fack_without_ack"), 1);
}

#[test]
fn rate_adaptation_off_makes_no_facks() {
    let t = fabric("p4te-nra", &[]);
    let pipe = switch(&t, "leaf1");
    apply(&pipe.control, "meter_set class_rate 513 1 1 1 1");
    let mut sw = SimSwitch::new(pipe.clone());
    sw.inject(3, &ack_v4(1, 2000, (1, 1)), 1_000_000_000);
    let out = sw.inject(
        1,
        &tcp_v4(0x10, 1_000_000, 7, 500, None, &[0; 100]),
        1_001_000_000,
    );
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].bytes[15], 0x10, "no flags");
}

#[test]
fn hosts_cannot_forge_flags_and_the_destination_leaf_clears_them() {
    let t = fabric("p4te", &[]);
    let pipe = switch(&t, "leaf1");
    let mut sw = SimSwitch::new(pipe.clone());
    // From h1 with both marks: cleared on the way in (untagged ACK-like traffic; no FACK).
    let out = sw.inject(1, &tcp_v4(0x60, 5, 7, 500, None, &[0; 10]), 1_000_000_000);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes[15], 0);
    // From a spine toward h1 with flag (b): cleared before delivery.
    let mut down = ack_v4(1, 2000, (1, 1));
    set_tos(&mut down, 0x40 | 0x08);
    let out = sw.inject(3, &down, 1_001_000_000);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 1);
    assert_eq!(out[0].bytes[15], 0x08);
}

#[test]
fn fack_anti_repeat_holds_when_the_source_leaf_is_also_the_destination_leaf() {
    // h1 -> h2 under one leaf: the leaf sets flag (a) and is also the last hop. The flag must
    // survive to this leaf's own egress (a regression: clearing it in ingress made every
    // segment a FACK).
    let (pipe, mut sw) = source_leaf(10_000);
    let mut now = 1_000_000_000u64;
    // h2's real ACK to h1 (so FACKs can be patched).
    let mut ack = ack_v4(1_000_000, 2000, (555, 666));
    ack[26..30].copy_from_slice(&[10, 0, 1, 2]);
    set_tos(&mut ack, 0);
    fix_tcp(&mut ack);
    sw.inject(2, &ack, now);
    let mut facks = 0;
    for k in 0..20u32 {
        now += 1_000_000;
        let seq = 1_000_000 + k * 1400;
        let data = tcp_v4_to([10, 0, 1, 2], 0x10, seq, 7000, 500, None, &[0; 1400]);
        for o in sw.inject(1, &data, now) {
            if o.port == 1 {
                facks += 1;
            } else {
                assert_eq!(o.port, 2);
                assert_eq!(o.bytes[15], 0x10, "h2 gets its packet without flags");
            }
        }
    }
    assert_eq!(facks, 3, "one FACK per 10,000 bytes");
    assert_eq!(
        reg(&pipe.control, "ingress.rc_seq", rc_cell(&pipe)),
        1_022_400
    );
}
