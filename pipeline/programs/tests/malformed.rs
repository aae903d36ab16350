//! Malformed frames are dropped with a reason and counted; nothing panics and state survives.

mod common;

use common::*;
use proptest::prelude::*;
use sim::SimSwitch;

fn malformed(c: &pipeline::control::Control) -> u64 {
    drops(c, "malformed")
}

#[test]
fn truncated_at_every_offset_is_dropped_not_panicking() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe.clone());
    let frames = [
        tcp4(
            (HOST1, ROUTER),
            [10, 0, 1, 1],
            [10, 0, 3, 7],
            1,
            2,
            64,
            b"hello",
        ),
        udp6(HOST1, ROUTER, "2001:db8:1::1", "2001:db8:2::9", 1, 2, 64),
    ];
    for f in &frames {
        let before = malformed(&pipe.control);
        // Cuts inside the Ethernet, IP and L4 headers are malformed. Cuts in the payload are too
        // (the IP length field then exceeds the frame).
        for cut in 0..f.len() {
            let out = sw.inject(1, &f[..cut], 1);
            assert!(out.is_empty(), "cut at {cut} forwarded");
        }
        assert_eq!(malformed(&pipe.control) - before, f.len() as u64);
        assert_eq!(sw.inject(1, f, 1).len(), 1, "the whole frame still routes");
    }
}

#[test]
fn bad_lengths_ihl_and_versions_are_dropped() {
    let pipe = basic();
    let mut sw = SimSwitch::new(pipe.clone());
    let good = tcp4(
        (HOST1, ROUTER),
        [10, 0, 1, 1],
        [10, 0, 3, 7],
        1,
        2,
        64,
        b"hello",
    );
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut f = good.clone();
    f[14] = 0x44; // IHL 4
    cases.push(("ihl < 5", f));
    let mut f = good.clone();
    f[14] = 0x4f; // IHL 15 = 60 bytes > packet
    cases.push(("ihl beyond packet", f));
    let mut f = good.clone();
    f[14] = 0x65; // version 6 in an IPv4 ethertype
    cases.push(("version 6 in ipv4", f));
    let mut f = good.clone();
    f[16..18].copy_from_slice(&10u16.to_be_bytes()); // total length < header
    cases.push(("total length < ihl", f));
    let mut f = good.clone();
    f[16..18].copy_from_slice(&1500u16.to_be_bytes()); // total length > frame
    cases.push(("total length > frame", f));
    let mut f = good.clone();
    f[46] = 0x20; // TCP data offset 2
    cases.push(("tcp data offset < 5", f));
    let mut f = good.clone();
    f[46] = 0xf0; // TCP data offset 15 > segment
    cases.push(("tcp data offset beyond", f));
    let v6 = udp6(HOST1, ROUTER, "2001:db8:1::1", "2001:db8:2::9", 1, 2, 64);
    let mut f = v6.clone();
    f[14] = 0x45; // version 4 in an IPv6 ethertype
    cases.push(("version 4 in ipv6", f));
    let mut f = v6.clone();
    f[18..20].copy_from_slice(&900u16.to_be_bytes());
    cases.push(("ipv6 payload length beyond frame", f));
    let mut f = v6.clone();
    f[58..60].copy_from_slice(&3u16.to_be_bytes()); // UDP length < 8
    cases.push(("udp length < 8", f));
    let mut f = vec![0u8; 14];
    f[12..14].copy_from_slice(&0x8808u16.to_be_bytes()); // MAC control without an opcode
    cases.push(("mac control too short", f));
    for (name, f) in &cases {
        let before = malformed(&pipe.control);
        assert!(sw.inject(1, f, 1).is_empty(), "{name} forwarded");
        assert_eq!(
            malformed(&pipe.control),
            before + 1,
            "{name} not counted as malformed"
        );
    }
    // State survived: a good frame still routes.
    assert_eq!(sw.inject(1, &good, 1).len(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Arbitrary bytes on any port, including the CPU port, never panic; every frame is either
    /// forwarded or counted as a drop.
    #[test]
    fn arbitrary_frames_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), port in prop_oneof![Just(1u16), Just(CPU)]) {
        let pipe = basic();
        let mut sw = SimSwitch::new(pipe.clone());
        let out = sw.inject(port, &bytes, 1);
        let dropped: u64 = pipe.control.drop_counts().iter().map(|(_, d)| d.packets).sum();
        prop_assert!(!out.is_empty() || dropped >= 1);
    }

    /// Random bit flips of a valid frame never panic.
    #[test]
    fn mutated_frames_never_panic(flips in proptest::collection::vec((0usize..59, any::<u8>()), 1..6)) {
        let pipe = basic();
        let mut sw = SimSwitch::new(pipe);
        let mut f = tcp4((HOST1, ROUTER), [10, 0, 1, 1], [10, 0, 3, 7], 1, 2, 64, b"hello");
        for (i, x) in flips {
            f[i] ^= x;
        }
        let _ = sw.inject(1, &f, 1);
    }
}
