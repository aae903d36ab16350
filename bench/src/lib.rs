//! Shared fixtures of the benchmarks: the `basic` workload of the pipeline benchmark and packet
//! builders. Deterministic: every random choice comes from a seeded generator.
#![forbid(unsafe_code)]

pub mod harness;
pub mod latency;
pub mod trace;

use std::sync::Arc;

use etherparse::PacketBuilder;
use pipeline::control::{
    ActionSpec, Atomicity, Control, Entity, TableAction, TableEntry, Update, UpdateKind,
};
use pipeline::externs::Rng;
use pipeline::runtime::{Config, Pipeline};
use pipeline::table::FieldMatch;

/// The MAC the switch routes for.
pub const ROUTER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xfe];

/// Sizes of the `basic` workload (issue 2: 100k IPv4 routes, 10k IPv6 routes, 1k ACL entries
/// over 20 masks, 64-member ECMP groups).
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// IPv4 routes.
    pub v4_routes: usize,
    /// IPv6 routes.
    pub v6_routes: usize,
    /// ACL entries.
    pub acl_entries: usize,
    /// Distinct ACL masks.
    pub acl_masks: usize,
    /// Members per ECMP group.
    pub ecmp_members: usize,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            v4_routes: 100_000,
            v6_routes: 10_000,
            acl_entries: 1_000,
            acl_masks: 20,
            ecmp_members: 64,
        }
    }
}

fn mac(b: [u8; 6]) -> u128 {
    b.iter().fold(0u128, |a, &x| (a << 8) | u128::from(x))
}

/// Writes `ups` in batches of 1000, panicking on any failure (fixtures must be valid).
pub fn write_all(c: &Control, ups: Vec<Update>) {
    for chunk in ups.chunks(1000) {
        for r in c.write(chunk, Atomicity::ContinueOnError) {
            r.expect("fixture write");
        }
    }
}

/// A `basic` pipeline loaded with `w`; returns it and the IPv4 prefixes installed (value, len).
pub fn basic_with(w: Workload, workers: usize) -> (Arc<Pipeline>, Vec<(u32, u8)>) {
    let program = programs::by_name("basic").expect("basic");
    let pipe = Pipeline::new(program, workers, Config::default());
    let c = &pipe.control;
    let s = c.schema().clone();
    let table = |n: &str| s.tables[s.table_by_name(n).expect("table")].id;
    let action = |n: &str| s.actions[s.action_by_name(n).expect("action")].id;
    let profile = s.action_profiles[0].id;
    let mut ups = Vec::new();
    let ins = |entity| Update {
        kind: UpdateKind::Insert,
        entity,
    };
    for m in 0..w.ecmp_members as u32 {
        let spec = ActionSpec {
            action_id: action("set_nhop"),
            params: vec![
                (1, mac([2, 0, 0, 1, 0, m as u8])),
                (2, mac(ROUTER_MAC)),
                (3, u128::from(m % 32 + 1)),
            ],
        };
        ups.push(ins(Entity::Member {
            profile_id: profile,
            member_id: m + 1,
            action: Some(spec),
        }));
    }
    let groups = 16u32;
    for g in 0..groups {
        let members = (0..w.ecmp_members as u32)
            .map(|m| ((m + g) % w.ecmp_members as u32 + 1, 1))
            .collect();
        ups.push(ins(Entity::Group {
            profile_id: profile,
            group_id: g + 1,
            members,
            max_size: 0,
        }));
    }
    let mut rng = Rng::new(42);
    let mut prefixes = Vec::with_capacity(w.v4_routes);
    let mut seen = std::collections::HashSet::new();
    while prefixes.len() < w.v4_routes {
        // A realistic mix: mostly /24, some /16-/23 and /25-/32.
        let len = match rng.range(0, 9) {
            0 => rng.range(8, 23) as u8,
            1 => rng.range(25, 32) as u8,
            _ => 24,
        };
        let v = (rng.next_u64() as u32) & (u32::MAX << (32 - u32::from(len)));
        if !seen.insert((v, len)) {
            continue;
        }
        prefixes.push((v, len));
        let a = TableAction::Group((prefixes.len() as u32 % groups) + 1);
        ups.push(ins(Entity::TableEntry(TableEntry {
            table_id: table("ipv4_lpm"),
            matches: vec![(
                1,
                FieldMatch::Lpm {
                    value: u128::from(v),
                    prefix_len: len,
                },
            )],
            action: Some(a),
            ..TableEntry::default()
        })));
    }
    let mut seen6 = std::collections::HashSet::new();
    while seen6.len() < w.v6_routes {
        let len = [32u8, 48, 56, 64][rng.range(0, 3) as usize];
        let v = (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64()))
            & (u128::MAX << (128 - u32::from(len)));
        if !seen6.insert((v, len)) {
            continue;
        }
        ups.push(ins(Entity::TableEntry(TableEntry {
            table_id: table("ipv6_lpm"),
            matches: vec![(
                1,
                FieldMatch::Lpm {
                    value: v,
                    prefix_len: len,
                },
            )],
            action: Some(TableAction::Group(seen6.len() as u32 % groups + 1)),
            ..TableEntry::default()
        })));
    }
    // ACL: `acl_masks` distinct masks over (src ip, dst ip, proto, dport); values chosen so that
    // the benchmark traffic mostly misses (the common case: permit by default).
    let masks: Vec<(u128, u128, u128, u128)> = (0..w.acl_masks)
        .map(|i| {
            let sl = 8 + (i % 5) as u32 * 4;
            let dl = 8 + (i / 5) as u32 * 6;
            let src = u128::from(u32::MAX << (32 - sl));
            let dst = u128::from(u32::MAX << (32 - dl));
            let proto = if i % 2 == 0 { 0xff } else { 0 };
            let dport = if i % 3 == 0 { 0xffff } else { 0 };
            (src, dst, proto, dport)
        })
        .collect();
    for e in 0..w.acl_entries {
        let (sm, dm, pm, portm) = masks[e % masks.len()];
        let src = u128::from(0xc000_0000u32 | rng.next_u64() as u32) & sm;
        let dst = u128::from(rng.next_u64() as u32) & dm;
        let mut matches = vec![
            (
                4,
                FieldMatch::Ternary {
                    value: src,
                    mask: sm,
                },
            ),
            (
                5,
                FieldMatch::Ternary {
                    value: dst,
                    mask: dm,
                },
            ),
        ];
        if pm != 0 {
            matches.push((6, FieldMatch::Ternary { value: 6, mask: pm }));
        }
        if portm != 0 {
            matches.push((
                8,
                FieldMatch::Ternary {
                    value: u128::from(rng.range(1, 1024) as u16),
                    mask: portm,
                },
            ));
        }
        ups.push(ins(Entity::TableEntry(TableEntry {
            table_id: table("acl"),
            matches,
            priority: e as u32 + 1,
            action: Some(TableAction::Action(ActionSpec {
                action_id: action("ingress.drop"),
                params: vec![],
            })),
            ..TableEntry::default()
        })));
    }
    write_all(c, ups);
    (pipe, prefixes)
}

/// An Ethernet/IPv4/TCP frame of `len` bytes (at least 54) to the router MAC.
pub fn ipv4_tcp_frame(src: u32, dst: u32, sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], ROUTER_MAC)
        .ipv4(src.to_be_bytes(), dst.to_be_bytes(), 64)
        .tcp(sport, dport, 1, 64240);
    let payload = vec![0u8; len.saturating_sub(54)];
    let mut out = Vec::with_capacity(len);
    b.write(&mut out, &payload).expect("frame");
    out
}

/// `n` frames of `len` bytes of distinct flows towards the installed prefixes.
pub fn traffic(prefixes: &[(u32, u8)], n: usize, len: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(7);
    (0..n)
        .map(|i| {
            let (v, l) = prefixes[rng.range(0, prefixes.len() as u64 - 1) as usize];
            let host = if l >= 32 {
                0
            } else {
                (rng.next_u64() as u32) & (u32::MAX >> l)
            };
            ipv4_tcp_frame(
                0x0a00_0001 + i as u32,
                v | host,
                1024 + (i % 50_000) as u16,
                80,
                len,
            )
        })
        .collect()
}
