//! Byte-for-byte tests of the `basic` program on the in-memory switch.

mod common;

use common::*;
use etherparse::{Ipv4HeaderSlice, SlicedPacket};
use pipeline::control::{Entity, TableEntry, Update, UpdateKind};
use pipeline::metadata::InstanceType;
use pipeline::table::FieldMatch;
use sim::SimSwitch;

/// The expected routed frame: MACs rewritten, TTL decremented, checksum recomputed from scratch.
fn routed_v4(frame: &[u8], dmac: [u8; 6]) -> Vec<u8> {
    let mut out = frame.to_vec();
    out[0..6].copy_from_slice(&dmac);
    out[6..12].copy_from_slice(&ROUTER);
    out[22] -= 1;
    out[24] = 0;
    out[25] = 0;
    let ihl = usize::from(out[14] & 0x0f) * 4;
    let mut sum = 0u32;
    for w in out[14..14 + ihl].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    out[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    out
}

#[test]
fn routes_ipv4_byte_for_byte() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe.clone());
    let f = tcp4(
        (HOST1, ROUTER),
        [10, 0, 1, 1],
        [10, 0, 3, 7],
        1234,
        80,
        64,
        b"hello",
    );
    let out = sw.inject(1, &f, 1000);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 3);
    assert_eq!(out[0].bytes, routed_v4(&f, NH3));
    let ip = Ipv4HeaderSlice::from_slice(&out[0].bytes[14..]).unwrap();
    assert_eq!(ip.ttl(), 63);
    assert_eq!(ip.to_header().calc_header_checksum(), ip.header_checksum());
}

#[test]
fn routes_ipv4_with_options_and_keeps_padding() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe);
    // IPv4 with a 4-byte option (router alert), and Ethernet padding after the IP packet.
    let mut f = tcp4((HOST1, ROUTER), [10, 0, 1, 1], [10, 0, 3, 7], 1, 2, 9, b"");
    let mut ip: Vec<u8> = f[14..34].to_vec();
    ip[0] = 0x46;
    let total = u16::from_be_bytes([ip[2], ip[3]]) + 4;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let mut frame = f[..14].to_vec();
    frame.extend_from_slice(&ip);
    frame.extend_from_slice(&[0x94, 0x04, 0, 0]);
    frame.extend_from_slice(&f[34..]);
    frame.extend_from_slice(&[0u8; 6]);
    // A correct header checksum for the new header.
    frame[24] = 0;
    frame[25] = 0;
    let ck = etherparse::Ipv4HeaderSlice::from_slice(&frame[14..])
        .unwrap()
        .to_header()
        .calc_header_checksum();
    frame[24..26].copy_from_slice(&ck.to_be_bytes());
    f = frame;
    let out = sw.inject(1, &f, 1000);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes, routed_v4(&f, NH3));
}

#[test]
fn routes_ipv6_and_decrements_hop_limit() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe);
    let f = udp6(HOST1, ROUTER, "2001:db8:1::1", "2001:db8:2::9", 5000, 53, 7);
    let out = sw.inject(1, &f, 1000);
    assert_eq!(out.len(), 1);
    assert!(out[0].port == 3 || out[0].port == 4);
    let mut want = f.clone();
    want[0..6].copy_from_slice(if out[0].port == 3 { &NH3 } else { &NH4 });
    want[6..12].copy_from_slice(&ROUTER);
    want[21] = 6;
    assert_eq!(out[0].bytes, want);
}

#[test]
fn ttl_expiry_drops_and_counts() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe.clone());
    for ttl in [0u8, 1] {
        let f = tcp4(
            (HOST1, ROUTER),
            [10, 0, 1, 1],
            [10, 0, 3, 7],
            1,
            2,
            ttl,
            b"",
        );
        assert!(sw.inject(1, &f, 1).is_empty());
    }
    let f = udp6(HOST1, ROUTER, "2001:db8:1::1", "2001:db8:2::9", 1, 2, 1);
    assert!(sw.inject(1, &f, 1).is_empty());
    assert_eq!(drops(&pipe.control, "ttl_expired"), 3);
    // TTL 2 still goes through, with TTL 1.
    let f = tcp4((HOST1, ROUTER), [10, 0, 1, 1], [10, 0, 3, 7], 1, 2, 2, b"");
    let out = sw.inject(1, &f, 1);
    assert_eq!(out[0].bytes[22], 1);
}

#[test]
fn no_route_drops_as_table_miss() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe.clone());
    let f = tcp4(
        (HOST1, ROUTER),
        [10, 0, 1, 1],
        [192, 0, 2, 1],
        1,
        2,
        64,
        b"",
    );
    assert!(sw.inject(1, &f, 1).is_empty());
    assert_eq!(drops(&pipe.control, "table_miss"), 1);
}

#[test]
fn l2_switches_unchanged_and_learns_source() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe.clone());
    let f = tcp4((HOST1, HOST2), [10, 0, 1, 1], [10, 0, 1, 2], 1, 2, 64, b"x");
    let out = sw.inject(1, &f, 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    assert_eq!(out[0].bytes, f);
    let d = pipe
        .control
        .externs()
        .digests
        .pop()
        .expect("mac_learn digest");
    assert_eq!(d.values(), &[mac(HOST1), 1]);
}

#[test]
fn multicast_replicates_to_each_port_with_rid() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe);
    let f = tcp4(
        (HOST1, [0x01, 0, 0x5e, 0, 0, 1]),
        [10, 0, 1, 1],
        [224, 0, 0, 1],
        1,
        2,
        64,
        b"m",
    );
    let out = sw.inject(1, &f, 1);
    let got: Vec<(u16, u16)> = out.iter().map(|o| (o.port, o.rid)).collect();
    assert_eq!(got, vec![(1, 1), (2, 2), (3, 3)]);
    assert!(
        out.iter()
            .all(|o| o.bytes == f && o.instance_type == InstanceType::Replicated)
    );
}

#[test]
fn acl_drop_punt_and_clone() {
    let pipe = basic();
    let c = &pipe.control;
    write_ok(
        c,
        &[
            acl(
                c,
                vec![
                    (
                        6,
                        FieldMatch::Ternary {
                            value: 6,
                            mask: 0xff,
                        },
                    ),
                    (
                        8,
                        FieldMatch::Ternary {
                            value: 23,
                            mask: 0xffff,
                        },
                    ),
                ],
                10,
                "ingress.drop",
                vec![],
            ),
            acl(
                c,
                vec![(
                    8,
                    FieldMatch::Ternary {
                        value: 179,
                        mask: 0xffff,
                    },
                )],
                20,
                "punt_to_cpu",
                vec![],
            ),
            acl(
                c,
                vec![(
                    8,
                    FieldMatch::Ternary {
                        value: 443,
                        mask: 0xffff,
                    },
                )],
                30,
                "clone_to_session",
                vec![(1, 7)],
            ),
            // Overlaps the telnet drop with a higher priority: permit telnet from 10.0.1.9.
            acl(
                c,
                vec![
                    (
                        4,
                        FieldMatch::Ternary {
                            value: 0x0a000109,
                            mask: 0xffff_ffff,
                        },
                    ),
                    (
                        8,
                        FieldMatch::Ternary {
                            value: 23,
                            mask: 0xffff,
                        },
                    ),
                ],
                40,
                "NoAction",
                vec![],
            ),
        ],
    );
    let mut sw = SimSwitch::new(pipe.clone());
    let telnet = tcp4(
        (HOST1, ROUTER),
        [10, 0, 1, 1],
        [10, 0, 3, 7],
        999,
        23,
        64,
        b"",
    );
    assert!(sw.inject(1, &telnet, 1).is_empty());
    assert_eq!(drops(c, "program"), 1);
    let allowed = tcp4(
        (HOST1, ROUTER),
        [10, 0, 1, 9],
        [10, 0, 3, 7],
        999,
        23,
        64,
        b"",
    );
    assert_eq!(sw.inject(1, &allowed, 1).len(), 1);

    // Punt: the frame reaches the CPU port routed, with a packet_in header (ingress port 1).
    let bgp = tcp4(
        (HOST1, ROUTER),
        [10, 0, 1, 1],
        [10, 0, 3, 7],
        999,
        179,
        64,
        b"open",
    );
    let out = sw.inject(1, &bgp, 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, CPU);
    assert_eq!(&out[0].bytes[..2], &[0x00, 0x80]);
    assert_eq!(out[0].bytes[2..], routed_v4(&bgp, NH3)[..]);

    // Clone: the original goes to port 3, a copy truncated to 64 bytes to session 7's port 9.
    let https = tcp4(
        (HOST1, ROUTER),
        [10, 0, 1, 1],
        [10, 0, 3, 7],
        999,
        443,
        64,
        &[7u8; 100],
    );
    let out = sw.inject(1, &https, 1);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].port, 3);
    assert_eq!(out[0].bytes, routed_v4(&https, NH3));
    assert_eq!(out[1].port, 9);
    assert_eq!(out[1].instance_type, InstanceType::IngressClone);
    assert_eq!(out[1].bytes, out[0].bytes[..64].to_vec());

    // Direct counters moved for the entries that matched.
    let entries = c.read_entries(Some(ids(c, "acl")), true, false).unwrap();
    let hits: u64 = entries
        .iter()
        .map(|e| e.counter_data.unwrap().packets)
        .sum();
    assert_eq!(hits, 4);
}

#[test]
fn arp_and_ndp_are_punted_with_packet_in() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe);
    let f = arp_request(HOST1, [10, 0, 1, 1], [10, 0, 1, 254]);
    let out = sw.inject(5, &f, 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, CPU);
    assert_eq!(&out[0].bytes[..2], &[0x02, 0x80]); // ingress port 5 in 9 bits, then 7 pad bits
    assert_eq!(&out[0].bytes[2..], &f[..]);

    let ns = etherparse::PacketBuilder::ethernet2(HOST1, [0x33, 0x33, 0xff, 0, 0, 1])
        .ipv6(
            [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 1],
            255,
        )
        .icmpv6(etherparse::Icmpv6Type::Unknown {
            type_u8: 135,
            code_u8: 0,
            bytes5to8: [0; 4],
        });
    let mut f = Vec::new();
    ns.write(&mut f, &[0u8; 16]).unwrap();
    let out = sw.inject(5, &f, 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, CPU);
}

#[test]
fn packet_out_goes_to_its_port_unchanged() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe.clone());
    let inner = tcp4(
        (ROUTER, HOST2),
        [10, 0, 0, 1],
        [10, 0, 1, 2],
        1,
        2,
        64,
        b"from controller",
    );
    let mut f = vec![0x01, 0x80]; // egress_port 3
    f.extend_from_slice(&inner);
    let out = sw.inject(CPU, &f, 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 3);
    assert_eq!(out[0].bytes, inner);
    // A packet-out shorter than its header, or addressed to the CPU port, is dropped and counted.
    assert!(sw.inject(CPU, &[0x01], 1).is_empty());
    assert!(sw.inject(CPU, &[0xff, 0x00, 1, 2], 1).is_empty());
    assert_eq!(drops(&pipe.control, "bad_packet_out"), 2);
}

#[test]
fn ecmp_spreads_flows_within_ten_percent() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe);
    let mut per_port = [0u32; 2];
    for i in 0..10_000u32 {
        let sip = (0x0a00_0100 + (i % 200)).to_be_bytes();
        let f = tcp4(
            (HOST1, ROUTER),
            sip,
            [10, 0, 2, (i % 250) as u8 + 1],
            1024 + (i / 200) as u16,
            80,
            64,
            b"",
        );
        let out = sw.inject(1, &f, u64::from(i));
        assert_eq!(out.len(), 1);
        per_port[usize::from(out[0].port == 4)] += 1;
        // The same flow always takes the same port.
        if i % 1000 == 0 {
            assert_eq!(sw.inject(1, &f, 0)[0].port, out[0].port);
        }
    }
    let expected = 5_000.0;
    for n in per_port {
        assert!(
            (f64::from(n) - expected).abs() / expected < 0.10,
            "split {per_port:?}"
        );
    }
}

#[test]
fn port_counters_count_rx_and_tx() {
    let pipe = basic();
    let c = &pipe.control;
    let mut sw = SimSwitch::new(pipe.clone());
    let f = tcp4(
        (HOST1, ROUTER),
        [10, 0, 1, 1],
        [10, 0, 3, 7],
        1,
        2,
        64,
        b"abc",
    );
    for _ in 0..5 {
        sw.inject(1, &f, 1);
    }
    let s = c.schema();
    let rx = c.read_counters(Some(s.counters[0].id), Some(1)).unwrap()[0].value;
    let tx = c.read_counters(Some(s.counters[1].id), Some(3)).unwrap()[0].value;
    assert_eq!((rx.packets, rx.bytes), (5, 5 * f.len() as u64));
    assert_eq!((tx.packets, tx.bytes), (5, 5 * f.len() as u64));
}

#[test]
fn port_meter_red_drops() {
    let pipe = basic();
    let c = &pipe.control;
    let s = c.schema();
    let meter = s.meters[0].id;
    let cfg = pipeline::externs::MeterConfig {
        cir: 1000,
        cburst: 100,
        pir: 1000,
        pburst: 100,
    };
    let r = c.write(
        &[Update {
            kind: UpdateKind::Modify,
            entity: Entity::Meter {
                meter_id: meter,
                index: Some(1),
                config: Some(cfg),
            },
        }],
        Default::default(),
    );
    r[0].clone().unwrap();
    let mut sw = SimSwitch::new(pipe.clone());
    let f = tcp4((HOST1, ROUTER), [10, 0, 1, 1], [10, 0, 3, 7], 1, 2, 64, b""); // 54 bytes
    // Both buckets hold 100 bytes: the first frame is green, the second red (46 bytes left).
    assert_eq!(sw.inject(1, &f, 1).len(), 1);
    assert!(sw.inject(1, &f, 1).is_empty());
    assert_eq!(drops(c, "meter_red"), 1);
    // A second later both buckets are full again.
    assert_eq!(sw.inject(1, &f, 1_000_000_001).len(), 1);
    // Port 2 is unmetered.
    assert_eq!(sw.inject(2, &f, 1).len(), 1);
}

#[test]
fn trace_names_tables_and_verdicts() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe);
    sw.worker().set_tracing(true);
    let f = tcp4((HOST1, ROUTER), [10, 0, 1, 1], [10, 0, 3, 7], 1, 2, 64, b"");
    sw.inject(1, &f, 1);
    let lines = sw.take_trace();
    let text = lines.join("\n");
    assert!(
        text.contains("table=ingress.l2_exact hit=false action=NoAction"),
        "{text}"
    );
    assert!(text.contains("table=ingress.ipv4_lpm hit=true"), "{text}");
    assert!(text.contains("action=ingress.set_nhop"), "{text}");
    assert!(text.contains("stage=egress port=3 verdict=Emit"), "{text}");
}

#[test]
fn modify_and_delete_take_effect() {
    let pipe = basic();
    let c = &pipe.control;
    let mut sw = SimSwitch::new(pipe.clone());
    let f = tcp4((HOST1, ROUTER), [10, 0, 1, 1], [10, 0, 3, 7], 1, 2, 64, b"");
    assert_eq!(sw.inject(1, &f, 1)[0].port, 3);
    let key = vec![(
        1,
        FieldMatch::Lpm {
            value: 0x0a000300,
            prefix_len: 24,
        },
    )];
    let e = TableEntry {
        table_id: ids(c, "ipv4_lpm"),
        matches: key,
        action: Some(pipeline::control::TableAction::Member(2)),
        ..TableEntry::default()
    };
    write_ok(
        c,
        &[Update {
            kind: UpdateKind::Modify,
            entity: Entity::TableEntry(e.clone()),
        }],
    );
    assert_eq!(sw.inject(1, &f, 1)[0].port, 4);
    write_ok(
        c,
        &[Update {
            kind: UpdateKind::Delete,
            entity: Entity::TableEntry(e),
        }],
    );
    assert!(sw.inject(1, &f, 1).is_empty());
}

#[test]
fn etherparse_reads_what_the_switch_sends() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe);
    let f = tcp4(
        (HOST1, ROUTER),
        [10, 0, 1, 1],
        [10, 0, 3, 7],
        4321,
        80,
        64,
        b"data",
    );
    let out = sw.inject(1, &f, 1);
    let p = SlicedPacket::from_ethernet(&out[0].bytes).unwrap();
    match p.transport {
        Some(etherparse::TransportSlice::Tcp(t)) => {
            assert_eq!((t.source_port(), t.destination_port()), (4321, 80));
            assert_eq!(t.payload(), b"data");
        }
        other => panic!("{other:?}"),
    }
}

/// BMv2's CLI orders ternary entries by the smallest priority number; P4Runtime by the largest.
/// A `commands.txt` written for BMv2 must match here in BMv2's order (issue 34's silent
/// inversion), and an entry written over P4Runtime must sit in the same order.
#[test]
fn command_priorities_are_bmv2s_the_smallest_number_wins() {
    use pipeline::commands::{bmv2_priority, p4runtime_priority};
    let telnet = |sip: [u8; 4]| tcp4((HOST1, ROUTER), sip, [10, 0, 3, 7], 999, 23, 64, b"");
    let any = "0&&&0 0&&&0 0x800&&&0xffff";
    // Priority 1 (BMv2: the highest) permits telnet from 10.0.1.9; 100 drops all telnet.
    for order in [[0, 1], [1, 0]] {
        let pipe = basic();
        let c = &pipe.control;
        let lines = [
            format!(
                "table_add acl NoAction {any} 10.0.1.9&&&255.255.255.255 0&&&0 6&&&0xff 0&&&0 23&&&0xffff => 1"
            ),
            format!(
                "table_add acl ingress.drop {any} 0&&&0 0&&&0 6&&&0xff 0&&&0 23&&&0xffff => 100"
            ),
        ];
        for i in order {
            write_line(c, &lines[i]);
        }
        let mut sw = SimSwitch::new(pipe.clone());
        assert_eq!(
            sw.inject(1, &telnet([10, 0, 1, 9]), 1).len(),
            1,
            "order {order:?}"
        );
        assert!(sw.inject(1, &telnet([10, 0, 1, 1]), 1).is_empty());
        assert_eq!(drops(c, "program"), 1);

        // A P4Runtime write of BMv2's 50 sits between the two: it punts telnet from 10.0.1.1
        // (it wins over 100) and leaves 10.0.1.9's permit (1 wins over it).
        write_ok(
            c,
            &[acl(
                c,
                vec![
                    (
                        4,
                        FieldMatch::Ternary {
                            value: 0x0a00_0101,
                            mask: 0xffff_ffff,
                        },
                    ),
                    (
                        8,
                        FieldMatch::Ternary {
                            value: 23,
                            mask: 0xffff,
                        },
                    ),
                ],
                p4runtime_priority(50).unwrap(),
                "punt_to_cpu",
                vec![],
            )],
        );
        let out = sw.inject(1, &telnet([10, 0, 1, 1]), 1);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].port, CPU);
        assert_eq!(sw.inject(1, &telnet([10, 0, 1, 9]), 1)[0].port, 3);
    }
    assert_eq!(bmv2_priority(p4runtime_priority(7).unwrap()), 7);
    assert!(p4runtime_priority(i32::MAX as u32).is_err());
}
