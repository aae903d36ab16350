//! Shared fixtures of the integration tests: a `basic` switch with a small, known configuration.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::net::Ipv4Addr;
use std::sync::Arc;

use etherparse::PacketBuilder;
use pipeline::control::{
    ActionSpec, Atomicity, Control, Entity, TableAction, TableEntry, Update, UpdateKind,
};
use pipeline::pre::{CloneSession, Replica};
use pipeline::runtime::{Config, Pipeline};
use pipeline::table::FieldMatch;

pub(crate) const HOST1: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
pub(crate) const HOST2: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub(crate) const ROUTER: [u8; 6] = [0x02, 0, 0, 0, 0, 0xfe];
pub(crate) const NH3: [u8; 6] = [0x02, 0, 0, 0, 1, 0x03];
pub(crate) const NH4: [u8; 6] = [0x02, 0, 0, 0, 1, 0x04];
pub(crate) const CPU: u16 = 510;

pub(crate) fn mac(b: [u8; 6]) -> u128 {
    b.iter().fold(0u128, |a, &x| (a << 8) | u128::from(x))
}

pub(crate) fn ids(c: &Control, table: &str) -> u32 {
    let s = c.schema();
    s.tables[s.table_by_name(table).expect(table)].id
}

pub(crate) fn action(c: &Control, name: &str) -> u32 {
    let s = c.schema();
    s.actions[s.action_by_name(name).expect(name)].id
}

pub(crate) fn insert(entity: Entity) -> Update {
    Update {
        kind: UpdateKind::Insert,
        entity,
    }
}

pub(crate) fn write_ok(c: &Control, ups: &[Update]) {
    for (i, r) in c
        .write(ups, Atomicity::ContinueOnError)
        .into_iter()
        .enumerate()
    {
        r.unwrap_or_else(|e| panic!("update {i}: {e}"));
    }
}

pub(crate) fn nhop(c: &Control, dmac: [u8; 6], port: u16) -> ActionSpec {
    ActionSpec {
        action_id: action(c, "set_nhop"),
        params: vec![(1, mac(dmac)), (2, mac(ROUTER)), (3, u128::from(port))],
    }
}

pub(crate) fn route(c: &Control, table: &str, value: u128, len: u8, a: TableAction) -> Update {
    insert(Entity::TableEntry(TableEntry {
        table_id: ids(c, table),
        matches: vec![(
            1,
            FieldMatch::Lpm {
                value,
                prefix_len: len,
            },
        )],
        action: Some(a),
        ..TableEntry::default()
    }))
}

pub(crate) fn acl(
    c: &Control,
    matches: Vec<(u32, FieldMatch)>,
    priority: u32,
    action_name: &str,
    params: Vec<(u32, u128)>,
) -> Update {
    insert(Entity::TableEntry(TableEntry {
        table_id: ids(c, "acl"),
        matches,
        priority,
        action: Some(TableAction::Action(ActionSpec {
            action_id: action(c, action_name),
            params,
        })),
        ..TableEntry::default()
    }))
}

/// basic with: member 1 -> NH3 on port 3, member 2 -> NH4 on port 4, member 3 -> HOST1 on port 1,
/// group 1 = {1, 2}; 10.0.2.0/24 and 2001:db8:2::/48 -> group 1, 10.0.1.0/24 -> member 3,
/// 10.0.3.0/24 -> member 1; HOST2 switched at L2 to port 2; multicast group 5 = ports 1, 2, 3.
pub(crate) fn basic() -> Arc<Pipeline> {
    let pipe = Pipeline::new(
        programs::by_name("basic").expect("basic"),
        1,
        Config {
            cpu_port: CPU,
            ..Config::default()
        },
    );
    let c = &pipe.control;
    let profile = c.schema().action_profiles[0].id;
    let v6: std::net::Ipv6Addr = "2001:db8:2::".parse().unwrap();
    let ups = vec![
        insert(Entity::Member {
            profile_id: profile,
            member_id: 1,
            action: Some(nhop(c, NH3, 3)),
        }),
        insert(Entity::Member {
            profile_id: profile,
            member_id: 2,
            action: Some(nhop(c, NH4, 4)),
        }),
        insert(Entity::Member {
            profile_id: profile,
            member_id: 3,
            action: Some(nhop(c, HOST1, 1)),
        }),
        insert(Entity::Group {
            profile_id: profile,
            group_id: 1,
            members: vec![(1, 1), (2, 1)],
            max_size: 0,
        }),
        route(
            c,
            "ipv4_lpm",
            u128::from(u32::from(Ipv4Addr::new(10, 0, 2, 0))),
            24,
            TableAction::Group(1),
        ),
        route(
            c,
            "ipv4_lpm",
            u128::from(u32::from(Ipv4Addr::new(10, 0, 1, 0))),
            24,
            TableAction::Member(3),
        ),
        route(
            c,
            "ipv4_lpm",
            u128::from(u32::from(Ipv4Addr::new(10, 0, 3, 0))),
            24,
            TableAction::Member(1),
        ),
        route(c, "ipv6_lpm", u128::from(v6), 48, TableAction::Group(1)),
        insert(Entity::TableEntry(TableEntry {
            table_id: ids(c, "l2_exact"),
            matches: vec![(1, FieldMatch::Exact(mac(HOST2)))],
            action: Some(TableAction::Action(ActionSpec {
                action_id: action(c, "l2_forward"),
                params: vec![(1, 2)],
            })),
            ..TableEntry::default()
        })),
        insert(Entity::TableEntry(TableEntry {
            table_id: ids(c, "l2_exact"),
            matches: vec![(1, FieldMatch::Exact(mac([0x01, 0, 0x5e, 0, 0, 1])))],
            action: Some(TableAction::Action(ActionSpec {
                action_id: action(c, "l2_multicast"),
                params: vec![(1, 5)],
            })),
            ..TableEntry::default()
        })),
        insert(Entity::MulticastGroup {
            group_id: 5,
            replicas: vec![
                Replica { port: 1, rid: 1 },
                Replica { port: 2, rid: 2 },
                Replica { port: 3, rid: 3 },
            ],
            metadata: vec![],
        }),
        insert(Entity::CloneSession {
            session_id: 7,
            session: CloneSession {
                replicas: vec![Replica { port: 9, rid: 0 }],
                class_of_service: 0,
                truncate: 64,
            },
        }),
    ];
    write_ok(c, &ups);
    pipe
}

pub(crate) fn tcp4(
    (src, dst): ([u8; 6], [u8; 6]),
    sip: [u8; 4],
    dip: [u8; 4],
    sport: u16,
    dport: u16,
    ttl: u8,
    payload: &[u8],
) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(src, dst)
        .ipv4(sip, dip, ttl)
        .tcp(sport, dport, 1000, 64240);
    let mut out = Vec::new();
    b.write(&mut out, payload).unwrap();
    out
}

pub(crate) fn udp6(
    src: [u8; 6],
    dst: [u8; 6],
    sip: &str,
    dip: &str,
    sport: u16,
    dport: u16,
    hop: u8,
) -> Vec<u8> {
    let s: std::net::Ipv6Addr = sip.parse().unwrap();
    let d: std::net::Ipv6Addr = dip.parse().unwrap();
    let b = PacketBuilder::ethernet2(src, dst)
        .ipv6(s.octets(), d.octets(), hop)
        .udp(sport, dport);
    let mut out = Vec::new();
    b.write(&mut out, b"payload").unwrap();
    out
}

/// Cell `index` of register `name` (its full name, e.g. `ingress.hula_best_hop`).
pub(crate) fn reg(c: &Control, name: &str, index: usize) -> u64 {
    let i = c
        .schema()
        .registers
        .iter()
        .position(|r| r.name == name)
        .unwrap_or_else(|| panic!("no register {name}"));
    c.externs().registers[i].read(index).unwrap()
}

/// The number at `path` in a `pisa-sim` report.
pub(crate) fn num(j: &hosts::json::Json, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(j, |j, k| j.get(k))
        .and_then(hosts::json::Json::as_u64)
        .unwrap_or_else(|| panic!("no {path:?}"))
}

pub(crate) fn drops(c: &Control, reason: &str) -> u64 {
    c.drop_counts()
        .into_iter()
        .find(|(n, _)| *n == reason)
        .map_or(0, |(_, d)| d.packets)
}

/// An Ethernet/ARP request (42 bytes), built by hand: etherparse 0.16 has no ARP builder.
pub(crate) fn arp_request(sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&sha);
    f.extend_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01]);
    f.extend_from_slice(&sha);
    f.extend_from_slice(&spa);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&tpa);
    f
}

/// Writes one line of the command language to `c`, panicking on any error.
pub(crate) fn write_line(c: &Control, line: &str) {
    use pipeline::commands::{Command, parse_line};
    match parse_line(c.schema(), line).unwrap_or_else(|e| panic!("{line}: {e}")) {
        Command::Write(u) => {
            for r in c.write(&u, Atomicity::ContinueOnError) {
                r.unwrap_or_else(|e| panic!("{line}: {e}"));
            }
        }
        // A comment (a plan's `# warning:` lines).
        Command::Nothing => {}
        _ => panic!("{line}: not a write"),
    }
}

/// Switch `name` of `t` on one in-memory switch, running its program and programmed by the
/// fabric plan (its table writes; its ports unshaped).
pub(crate) fn planned(t: &topo::Topology, name: &str) -> (Arc<Pipeline>, sim::SimSwitch) {
    let s = t.switches.iter().find(|s| s.name == name).expect(name);
    let pipe = Pipeline::new(
        programs::by_name(&s.program).expect("program"),
        1,
        Config::default(),
    );
    let plans = programs::fabric_plan(t).unwrap();
    for line in &plans[name].routes {
        write_line(&pipe.control, line);
    }
    let sw = sim::SimSwitch::new(pipe.clone());
    (pipe, sw)
}

/// Runs `pisa-sim` on `t` for `ms` milliseconds of virtual time with seed `seed` and the flows
/// of `specs` (the `FlowSpec` text of `pisa-sim --flow`); its JSON report.
pub(crate) fn sim_run(t: &topo::Topology, ms: u64, seed: u64, specs: &[&str]) -> hosts::json::Json {
    let mut opts = sim::fabric::Options::new(ms * 1_000_000, seed);
    for (i, f) in specs.iter().enumerate() {
        opts.flows.push(sim::flow::FlowSpec::parse(f, i).unwrap());
    }
    sim::fabric::Sim::new(t, opts).unwrap().run()
}

/// The `flows` array of a `pisa-sim` report.
pub(crate) fn sim_flows(r: &hosts::json::Json) -> &[hosts::json::Json] {
    match r.get("flows") {
        Some(hosts::json::Json::A(f)) => f,
        _ => panic!("no flows in the report"),
    }
}
