//! PINT path tracing (docs/pint.md) in `pisa-sim`: `pint` switches encode
//! their switch IDs hop by hop (§4.2), the sinks export records, and the simulator's collector
//! decodes every flow's path. Tests are named after the paper's sections; every run is
//! deterministic for its seed.

use std::net::Ipv4Addr;

use analysis::pint::{Budget, PathTracing, hops_from_ttl, packet_id};
use hosts::json::Json;
use pipeline::wire::{Ipv4Packet, UdpPacket};
use programs::pint::{DEFAULT_SEED, fabric_config, per_packet};
use proptest::prelude::*;
use sim::flow::{Addrs, Proto, TcpFields, write_frame};
use topo::{End, GenProps, LinkProps, Topology, fat_tree};

mod common;
use common::{num, planned, sim_run as run};

/// splitmix64, for random switch IDs.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `n` distinct random nonzero 32-bit switch IDs from `seed`.
fn random_ids(seed: u64, n: usize) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut s = seed;
    while ids.len() < n {
        s = mix(s);
        let id = s as u32;
        if id != 0 && !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// A chain s1 – s2 – … – sN with host h1 on s1 and h2 on sN, the switches carrying `ids`.
fn chain(ids: &[u32], params: &str) -> Topology {
    let mut t = String::from("defaults rate=100M delay=5us buffer=64\n");
    for (i, id) in ids.iter().enumerate() {
        t += &format!("switch s{} program=pint switch_id={id} {params}\n", i + 1);
    }
    t += "host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\nhost h2 ipv4=10.0.2.1 ipv6=fd00::2:1\n";
    t += "link s1:1 h1\n";
    for i in 1..ids.len() {
        t += &format!("link s{i}:2 s{}:1\n", i + 1);
    }
    t += &format!("link s{}:2 h2\n", ids.len());
    Topology::parse(&t).unwrap()
}

/// The report's `pint.flows`.
fn pint_flows(r: &Json) -> &[Json] {
    match r.get("pint").and_then(|p| p.get("flows")) {
        Some(Json::A(f)) => f,
        _ => panic!("no pint.flows in the report"),
    }
}

/// A flow's decoded path.
fn decoded(f: &Json) -> Vec<u32> {
    match f.get("decoded_path") {
        Some(Json::A(p)) => p.iter().map(|x| x.as_u64().unwrap() as u32).collect(),
        _ => panic!("no decoded_path"),
    }
}

/// A flow's field as a string.
fn text<'a>(f: &'a Json, key: &str) -> &'a str {
    match f.get(key) {
        Some(Json::S(s)) => s,
        _ => panic!("no {key}"),
    }
}

/// E[R]/instances of docs/pint.md: constraints a hop needs before only the true switch among
/// `n` candidates agrees with all of them, per packet.
fn constraints_per_packet(n: usize, budget: Budget) -> f64 {
    let wrong = (n - 1) as f64;
    let r: f64 = (0..64)
        .map(|c| 1.0 - (1.0 - 2f64.powi(-i32::from(budget.bits()) * c)).powf(wrong))
        .sum();
    r / f64::from(budget.instances())
}

/// docs/pint.md's bound on the median packets to decode a `k`-hop path among `n` switches:
/// 1.5 · k · log₂(log*₂ k) · E[R] / instances.
fn median_bound(k: usize, n: usize, budget: Budget) -> f64 {
    let mut log_star = 0;
    let mut x = k as f64;
    while x > 1.0 {
        x = x.log2();
        log_star += 1;
    }
    1.5 * k as f64 * f64::from(log_star).log2() * constraints_per_packet(n, budget)
}

/// docs/pint.md's bound for a single flow: 3.5 times the median bound.
const SINGLE_FLOW_FACTOR: f64 = 3.5;

/// Packets the flow of [`one_chain`] sends: 10 000 packets/s for 300 ms.
const PACKETS: u64 = 3000;

/// One `pisa-sim` run of a `k`-switch chain with random switch IDs and a random hash seed (both
/// from `seed`), one UDP flow of [`PACKETS`] packets from h1 to h2: (true path, packets used).
fn one_chain(k: usize, bits: &str, seed: u64) -> (Vec<u32>, u64) {
    let ids = random_ids(seed ^ ((k as u64) << 32), k);
    let t = chain(&ids, &format!("pint_bits={bits} pint_seed={}", mix(seed)));
    let r = run(&t, 300, seed, &["h1>h2 rate=10000pps size=500"]);
    let flows = pint_flows(&r);
    assert_eq!(flows.len(), 1);
    let f = &flows[0];
    assert_eq!((text(f, "src"), text(f, "dst")), ("h1", "h2"));
    assert_eq!(text(f, "status"), "decoded", "{f:?}");
    assert_eq!(decoded(f), ids, "k={k} bits={bits} seed={seed}");
    assert_eq!(num(f, &["hops"]), k as u64);
    assert_eq!(
        num(f, &["records"]),
        PACKETS,
        "the sink exports every packet"
    );
    assert_eq!(num(f, &["ignored"]), 0);
    (ids, num(f, &["packets_used"]))
}

/// §4.2 on a `k`-hop chain: every run decodes the true path; the median packets used over 11
/// runs is within docs/pint.md's bound and every run within the single-flow bound.
fn chain_within_bound(k: usize) {
    for (bits, budget) in [("8", Budget::SINGLE_8), ("2x4", Budget::SPLIT_2X4)] {
        let mut used: Vec<u64> = (0..11).map(|seed| one_chain(k, bits, seed).1).collect();
        used.sort_unstable();
        let median = used[used.len() / 2];
        let bound = median_bound(k, k, budget);
        println!("k={k} bits={bits}: packets used {used:?}, median {median}, bound {bound:.1}");
        assert!(
            median as f64 <= bound,
            "k={k} {bits}: median {median} > {bound:.1}"
        );
        let worst = used[used.len() - 1];
        assert!(
            worst as f64 <= SINGLE_FLOW_FACTOR * bound,
            "k={k} {bits}: {worst} > {SINGLE_FLOW_FACTOR} x {bound:.1}"
        );
    }
}

/// The single-flow bound of docs/pint.md, sans-IO over many trials (the simulator runs too few
/// to see the tail): for k = 5 among 5 or 20 switches and k = 16 among 16, both budgets, every
/// one of 5000 trials (own seed, switch IDs and packet IDs) decodes its path within
/// [`SINGLE_FLOW_FACTOR`] times the median bound, and the median stays within the bound.
#[test]
fn s4_2_single_flow_bound_holds_over_many_trials() {
    use analysis::pint::{Record, decode};
    for (k, n) in [(5usize, 5usize), (5, 20), (16, 16)] {
        for budget in [Budget::SINGLE_8, Budget::SPLIT_2X4] {
            let mut used: Vec<usize> = (0..5000u64)
                .map(|trial| {
                    let cfg = PathTracing::new(mix(trial ^ 0x77), budget, k as u32);
                    let ids = random_ids(trial, n);
                    let path = &ids[..k];
                    let records = (0..100_000u64).map(|i| {
                        let id = mix(i ^ (trial << 20));
                        let digest = path
                            .iter()
                            .enumerate()
                            .fold(0, |d, (h, &s)| cfg.encode_hop(id, h as u32 + 1, s, d));
                        Record {
                            packet_id: id,
                            hops: k as u32,
                            digest,
                        }
                    });
                    let r = decode(&cfg, &ids, records);
                    assert_eq!(r.path.as_deref(), Some(path));
                    r.packets_used
                })
                .collect();
            used.sort_unstable();
            let bound = median_bound(k, n, budget);
            let (median, worst) = (used[used.len() / 2], used[used.len() - 1]);
            println!(
                "k={k} n={n} {budget:?}: median {median}, p99 {}, max {worst}; bound {bound:.1}",
                used[used.len() * 99 / 100]
            );
            assert!(median as f64 <= bound);
            assert!(
                worst as f64 <= SINGLE_FLOW_FACTOR * bound,
                "{worst} vs {bound:.1}"
            );
        }
    }
}

#[test]
fn s4_2_path_tracing_decodes_a_5_hop_chain_within_the_bound() {
    chain_within_bound(5);
}

#[test]
fn s4_2_path_tracing_decodes_a_16_hop_chain_within_the_bound() {
    chain_within_bound(16);
}

/// The switches a packet from `from` crosses, following ports that sent packets away from the
/// previous switch (one UDP flow in the fabric: only its path carries traffic).
fn walked_path(t: &Topology, r: &Json, from: &str) -> Vec<u32> {
    let ports = t.ports();
    let id = |name: &str| {
        t.switches
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .switch_id
    };
    let mut path = vec![id(from)];
    let (mut at, mut prev) = (from.to_string(), String::new());
    loop {
        let next = ports[at.as_str()].iter().find_map(|(p, (far, _))| {
            let sent = num(r, &["switches", &at, "ports", &p.to_string(), "tx_packets"]);
            match far {
                End::Switch(n, _) if sent > 0 && *n != prev => Some(n.clone()),
                _ => None,
            }
        });
        let Some(next) = next else { return path };
        path.push(id(&next));
        prev = std::mem::replace(&mut at, next);
    }
}

#[test]
fn s6_3_fat_tree_path_across_pods_is_decoded() {
    let link = LinkProps {
        rate_bps: 100_000_000,
        delay_us: 5,
        buffer: 64,
    };
    let mut t = fat_tree(
        4,
        GenProps {
            host: link,
            fabric: link,
        },
    );
    let ids = random_ids(0xfa7, t.switches.len());
    for (s, id) in t.switches.iter_mut().zip(ids) {
        s.program = "pint".into();
        s.switch_id = id;
    }
    t.switches[0]
        .params
        .insert("pint_bits".into(), "2x4".into());
    let r = run(&t, 300, 7, &["h1>h16 rate=10000pps size=500"]);
    let truth = walked_path(&t, &r, "p1e1");
    assert_eq!(truth.len(), 5, "edge, aggregation, core, aggregation, edge");
    let f = &pint_flows(&r)[0];
    assert_eq!((text(f, "src"), text(f, "dst")), ("h1", "h16"));
    assert_eq!(decoded(f), truth);
    let used = num(f, &["packets_used"]);
    let bound = median_bound(5, t.switches.len(), Budget::SPLIT_2X4);
    println!("fat-tree 5 hops among 20 switches, 2x4 bits: {used} packets, bound {bound:.1}");
    assert!(used as f64 <= SINGLE_FLOW_FACTOR * bound);
}

#[test]
fn s4_2_tcp_acks_trace_the_reverse_path() {
    let ids = random_ids(0xac4, 5);
    let t = chain(&ids, "");
    let r = run(&t, 100, 3, &["h1>h2 rate=10000pps size=500 proto=tcp"]);
    let flows = pint_flows(&r);
    assert_eq!(flows.len(), 2, "the data and its ACKs");
    let reversed: Vec<u32> = ids.iter().rev().copied().collect();
    for f in flows {
        let want = match (text(f, "src"), text(f, "dst")) {
            ("h1", "h2") => &ids,
            ("h2", "h1") => &reversed,
            other => panic!("{other:?}"),
        };
        assert_eq!(&decoded(f), want);
    }
    // Defaults: the plan's seed, one 8-bit hash, D = the longest path, TTL 64.
    let p = r.get("pint").unwrap();
    assert_eq!(text(p, "seed"), format!("{DEFAULT_SEED:#x}"));
    assert_eq!(text(p, "budget"), "1x8");
    assert_eq!(num(p, &["max_hops"]), 5);
    assert_eq!(num(p, &["initial_ttl"]), 64);
}

#[test]
fn s4_1_parameters_must_agree_across_the_fabric() {
    let ids = random_ids(1, 3);
    let mut t = chain(&ids, "");
    t.switches[0].params.insert("pint_seed".into(), "7".into());
    t.switches[2]
        .params
        .insert("pint_seed".into(), "0x7".into());
    t.switches[1]
        .params
        .insert("pint_max_hops".into(), "9".into());
    let c = fabric_config(&t).unwrap().unwrap();
    assert_eq!((c.seed, c.max_hops), (7, 9), "one line sets them for all");
    t.switches[2].params.insert("pint_seed".into(), "8".into());
    assert!(programs::fabric_plan(&t).is_err());
    let mut t = chain(&ids, "pint_bits=16");
    assert!(programs::fabric_plan(&t).is_err());
    // A fabric without `pint` has no collector and no `pint` in its report.
    for s in &mut t.switches {
        s.program = "basic".into();
        s.params.clear();
    }
    assert!(fabric_config(&t).unwrap().is_none());
    let r = run(&t, 10, 1, &["h1>h2 rate=1000pps"]);
    assert!(r.get("pint").is_none());
}

/// A UDP frame from h1 to h2 as `pisa-sim`'s hosts send it (DF set, TTL 64, ID 0).
fn udp_frame(ident: u16, df: bool) -> Vec<u8> {
    let a = Addrs {
        dmac: [2, 0, 0, 0, 0, 0xfe],
        smac: [2, 0, 0, 0, 0, 1],
        src: Ipv4Addr::new(10, 0, 1, 1),
        dst: Ipv4Addr::new(10, 0, 2, 1),
    };
    let mut f = Vec::new();
    write_frame(
        &mut f,
        a,
        Proto::Udp,
        0,
        (4000, 5000),
        TcpFields::default(),
        100,
        b"payload",
    );
    let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
    ip.set_ident(ident);
    ip.set_dont_frag(df);
    ip.fill_checksum();
    f
}

#[test]
fn s5_transit_writes_the_ip_id_and_the_sink_exports_and_restores_it() {
    let ids = [0xdead_beef, 0x0bad_cafe];
    let t = chain(&ids, "pint_seed=42");
    let (_, mut s1) = planned(&t, "s1");
    let (p2, mut s2) = planned(&t, "s2");
    let cfg = PathTracing::new(42, Budget::SINGLE_8, 2);
    // The host's ID high byte is overwritten at hop 1; its low byte is kept and hashed.
    let sent = udp_frame(0x5a3c, true);
    let out = s1.inject(1, &sent, 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    let hop1 = out[0].bytes.clone();
    let ip = Ipv4Packet::new_checked(&hop1[14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(hops_from_ttl(64, ip.ttl()), Some(1));
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    let word = per_packet(0x5a3c, 17, ip.payload());
    let (src, dst) = (ip.src_addr().to_bits(), ip.dst_addr().to_bits());
    let pid = packet_id(src, dst, 17, udp.src_port(), udp.dst_port(), word);
    let d1 = cfg.encode_hop(pid, 1, ids[0], 0);
    assert_eq!(ip.ident(), ((d1 as u16) << 8) | 0x3c);
    // The sink: hop 2, exports the record and restores the ID.
    let out = s2.inject(1, &hop1, 2);
    assert_eq!(out.len(), 1);
    let ip = Ipv4Packet::new_checked(&out[0].bytes[14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.ident(), 0x003c);
    let m = p2.control.externs().digests.pop().expect("a record");
    let d2 = cfg.encode_hop(pid, 2, ids[1], d1);
    let want = [
        u128::from(pid),
        2,
        u128::from(d2),
        u128::from(src),
        u128::from(dst),
        17,
        4000,
        5000,
    ];
    assert_eq!(m.values(), want);
    // The rest of the packet is as the host sent it, but for the TTL and the checksum.
    let mut expect = sent.clone();
    {
        let mut ip = Ipv4Packet::new_unchecked(&mut expect[14..]);
        ip.set_ttl(62);
        ip.set_ident(0x003c);
        ip.fill_checksum();
    }
    assert_eq!(out[0].bytes[12..], expect[12..]);
    // A datagram that may be fragmented (DF clear) is forwarded untouched, and not recorded.
    let frag = udp_frame(0x5a3c, false);
    let out = s1.inject(1, &frag, 3);
    assert_eq!(
        Ipv4Packet::new_checked(&out[0].bytes[14..])
            .unwrap()
            .ident(),
        0x5a3c
    );
    s2.inject(1, &out[0].bytes, 4);
    assert!(p2.control.externs().digests.pop().is_none());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// Arbitrary bytes, and valid frames with random bytes changed, on transit and sink
    /// switches: nothing panics, and whatever leaves has a valid IPv4 checksum if it had one.
    #[test]
    fn s5_malformed_frames_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..160),
        flips in proptest::collection::vec((0usize..60, any::<u8>()), 1..6),
        cut in 0usize..130,
    ) {
        let ids = [11, 22];
        let t = chain(&ids, "pint_bits=2x4");
        for name in ["s1", "s2"] {
            let (_, mut sw) = planned(&t, name);
            sw.inject(1, &bytes, 1);
            let mut f = udp_frame(0x1234, true);
            for &(i, x) in &flips {
                f[i] ^= x;
            }
            let valid = Ipv4Packet::new_checked(&f[14..]).is_ok_and(|ip| ip.verify_checksum());
            for out in sw.inject(1, &f, 2) {
                if valid && let Ok(ip) = Ipv4Packet::new_checked(&out.bytes[14..]) {
                    prop_assert!(ip.verify_checksum());
                }
            }
            sw.inject(1, &f[..cut.min(f.len())], 3);
        }
    }
}
