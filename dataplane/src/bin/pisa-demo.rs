//! `pisa-demo`: runs the `basic` program on in-memory ports and shows what it did.
//!
//! A switch with two host ports (1, 2) and two uplinks (3, 4) routes 10.0.2.0/24 and 2001:db8:2::/48
//! over an ECMP group of both uplinks, switches one MAC at L2, drops telnet with the ACL, punts
//! ARP to the CPU, and drops expired TTLs and malformed frames. It prints per-port counters,
//! drop reasons, the ECMP split and the time per packet; `--pcap DIR` writes what each port sent.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use dataplane::pcap::PcapWriter;
use etherparse::PacketBuilder;
use pipeline::control::{
    ActionSpec, Atomicity, Control, Entity, TableAction, TableEntry, Update, UpdateKind,
};
use pipeline::runtime::{Config, Pipeline};
use pipeline::table::FieldMatch;
use sim::SimSwitch;

#[derive(Parser, Debug)]
#[command(about = "Run the basic program on in-memory ports")]
struct Args {
    /// Flows to send from host port 1 towards 10.0.2.0/24.
    #[arg(long, default_value_t = 10_000)]
    flows: u32,
    /// Write one pcap file per egress port into this directory.
    #[arg(long)]
    pcap: Option<PathBuf>,
}

const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const ROUTER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xfe];

fn mac(b: [u8; 6]) -> u128 {
    b.iter().fold(0u128, |a, &x| (a << 8) | u128::from(x))
}

fn insert(entity: Entity) -> Update {
    Update {
        kind: UpdateKind::Insert,
        entity,
    }
}

fn install_entries(c: &Control) {
    let s = c.schema();
    let table = |n: &str| s.tables[s.table_by_name(n).expect("table")].id;
    let action = |n: &str| s.actions[s.action_by_name(n).expect("action")].id;
    let profile = s.action_profiles[0].id;
    let nhop = |port: u128, last: u8| ActionSpec {
        action_id: action("set_nhop"),
        params: vec![
            (1, mac([0x02, 0, 0, 0, 1, last])),
            (2, mac(ROUTER_MAC)),
            (3, port),
        ],
    };
    let mut ups = vec![
        insert(Entity::Member {
            profile_id: profile,
            member_id: 1,
            action: Some(nhop(3, 3)),
        }),
        insert(Entity::Member {
            profile_id: profile,
            member_id: 2,
            action: Some(nhop(4, 4)),
        }),
        insert(Entity::Member {
            profile_id: profile,
            member_id: 3,
            action: Some(nhop(1, 1)),
        }),
        insert(Entity::Group {
            profile_id: profile,
            group_id: 1,
            members: vec![(1, 1), (2, 1)],
            max_size: 0,
        }),
    ];
    let route = |t: &str, value: u128, len: u8, a: TableAction| {
        insert(Entity::TableEntry(TableEntry {
            table_id: table(t),
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
    };
    ups.push(route(
        "ipv4_lpm",
        u128::from(u32::from(Ipv4Addr::new(10, 0, 2, 0))),
        24,
        TableAction::Group(1),
    ));
    ups.push(route(
        "ipv4_lpm",
        u128::from(u32::from(Ipv4Addr::new(10, 0, 1, 0))),
        24,
        TableAction::Member(3),
    ));
    let v6: Ipv6Addr = "2001:db8:2::".parse().expect("address");
    ups.push(route("ipv6_lpm", u128::from(v6), 48, TableAction::Group(1)));
    ups.push(insert(Entity::TableEntry(TableEntry {
        table_id: table("l2_exact"),
        matches: vec![(1, FieldMatch::Exact(mac([0x02, 0, 0, 0, 0, 0x02])))],
        action: Some(TableAction::Action(ActionSpec {
            action_id: action("l2_forward"),
            params: vec![(1, 2)],
        })),
        ..TableEntry::default()
    })));
    // ACL: drop telnet (TCP port 23).
    ups.push(insert(Entity::TableEntry(TableEntry {
        table_id: table("acl"),
        matches: vec![
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
        priority: 10,
        action: Some(TableAction::Action(ActionSpec {
            action_id: action("ingress.drop"),
            params: vec![],
        })),
        ..TableEntry::default()
    })));
    for (i, r) in c
        .write(&ups, Atomicity::DataplaneAtomic)
        .into_iter()
        .enumerate()
    {
        if let Err(e) = r {
            panic!("update {i} failed: {e}");
        }
    }
}

fn ipv4_tcp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, ttl: u8) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(HOST_MAC, ROUTER_MAC)
        .ipv4(src.octets(), dst.octets(), ttl)
        .tcp(sport, dport, 1, 64240);
    let mut out = Vec::with_capacity(b.size(0));
    b.write(&mut out, &[]).expect("build frame");
    out
}

fn main() {
    let args = Args::parse();
    let program = programs::by_name("basic").expect("basic program");
    let pipe = Pipeline::new(program, 1, Config::default());
    pipe.control.set_pause(std::thread::yield_now);
    install_entries(&pipe.control);
    let cpu = pipe.config.cpu_port;
    let mut sw = SimSwitch::new(pipe.clone());
    let mut frames: Vec<(&str, Vec<u8>)> = Vec::new();
    for f in 0..args.flows {
        let dst = Ipv4Addr::new(10, 0, 2, (f % 250) as u8 + 1);
        frames.push((
            "tcp flow",
            ipv4_tcp(
                Ipv4Addr::new(10, 0, 1, 1),
                dst,
                10_000 + (f % 50_000) as u16,
                80,
                64,
            ),
        ));
    }
    frames.push((
        "telnet (ACL drop)",
        ipv4_tcp(
            Ipv4Addr::new(10, 0, 1, 1),
            Ipv4Addr::new(10, 0, 2, 9),
            999,
            23,
            64,
        ),
    ));
    frames.push((
        "ttl 1 (expired)",
        ipv4_tcp(
            Ipv4Addr::new(10, 0, 1, 1),
            Ipv4Addr::new(10, 0, 2, 9),
            999,
            80,
            1,
        ),
    ));
    frames.push((
        "no route",
        ipv4_tcp(
            Ipv4Addr::new(10, 0, 1, 1),
            Ipv4Addr::new(192, 0, 2, 1),
            999,
            80,
            64,
        ),
    ));
    let v6 = PacketBuilder::ethernet2(HOST_MAC, ROUTER_MAC)
        .ipv6(
            [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            "2001:db8:2::5"
                .parse::<Ipv6Addr>()
                .expect("address")
                .octets(),
            64,
        )
        .udp(5000, 53);
    let mut buf = Vec::new();
    v6.write(&mut buf, b"hello").expect("build");
    frames.push(("ipv6 udp", buf));
    // An ARP request, by hand (etherparse 0.16 has no ARP builder).
    let mut buf = vec![0xff; 6];
    buf.extend_from_slice(&HOST_MAC);
    buf.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    buf.extend_from_slice(&HOST_MAC);
    buf.extend_from_slice(&[10, 0, 1, 1, 0, 0, 0, 0, 0, 0, 10, 0, 1, 254]);
    frames.push(("arp (punt)", buf));
    let mut l2 = ipv4_tcp(
        Ipv4Addr::new(10, 0, 1, 1),
        Ipv4Addr::new(10, 0, 1, 2),
        1,
        2,
        64,
    );
    l2[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    frames.push(("l2 switched", l2));
    let good = frames[0].1.clone();
    frames.push(("truncated ipv4", good[..20].to_vec()));
    let mut bad_ihl = good.clone();
    bad_ihl[14] = 0x44;
    frames.push(("bad ihl", bad_ihl));

    let mut per_port: BTreeMap<u16, Vec<Vec<u8>>> = BTreeMap::new();
    let start = Instant::now();
    let mut now = 0u64;
    for (_, f) in &frames {
        now += 1_000;
        for out in sw.inject(1, f, now) {
            per_port.entry(out.port).or_default().push(out.bytes);
        }
    }
    let elapsed = start.elapsed();
    println!(
        "basic on in-memory ports: {} frames in {:?} ({:.0} ns/frame, one core, unbatched)",
        frames.len(),
        elapsed,
        elapsed.as_nanos() as f64 / frames.len() as f64
    );
    println!("\nframes sent per port:");
    for (port, fs) in &per_port {
        let name = if *port == cpu {
            " (CPU)".to_string()
        } else {
            String::new()
        };
        println!("  port {port:>3}{name}: {}", fs.len());
    }
    let (p3, p4) = (
        per_port.get(&3).map_or(0, Vec::len),
        per_port.get(&4).map_or(0, Vec::len),
    );
    if p3 + p4 > 0 {
        println!(
            "\nECMP split over uplinks 3/4: {:.1}% / {:.1}%",
            100.0 * p3 as f64 / (p3 + p4) as f64,
            100.0 * p4 as f64 / (p3 + p4) as f64
        );
    }
    println!("\ndrops by reason:");
    for (name, d) in pipe.control.drop_counts() {
        if d.packets > 0 {
            println!("  {name:<14} {}", d.packets);
        }
    }
    let rx = pipe
        .control
        .read_counters(Some(pipe.control.schema().counters[0].id), Some(1))
        .expect("counter");
    println!(
        "\ningress.port_rx[1] = {} packets, {} bytes",
        rx[0].value.packets, rx[0].value.bytes
    );
    if let Some(dir) = &args.pcap {
        if let Err(e) = write_pcaps(dir, &per_port) {
            eprintln!("pisa-demo: {e:#}");
            std::process::exit(1);
        }
        println!("\npcap files written to {}", dir.display());
    }
}

/// One pcap file per port in `dir` (`port<N>.pcap`) with the frames sent there.
fn write_pcaps(dir: &Path, per_port: &BTreeMap<u16, Vec<Vec<u8>>>) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (port, fs) in per_port {
        let path = dir.join(format!("port{port}.pcap"));
        let at = || format!("writing {}", path.display());
        let file = std::fs::File::create(&path).with_context(at)?;
        let mut w = PcapWriter::new(std::io::BufWriter::new(file)).with_context(at)?;
        for (i, f) in fs.iter().enumerate() {
            w.write(i as u64 * 1_000, f).with_context(at)?;
        }
        w.into_inner().with_context(at)?;
    }
    Ok(())
}
