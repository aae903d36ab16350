//! The packet driver (`pipeline::driver` through `sim::SimSwitch`): random table
//! entries (ACL, routes, multicast groups, clone sessions, members and groups), random traffic
//! manager settings (queue limits, shaping, ECN, propagation delay, PFC, the shared buffer), and
//! random frames at increasing times: raw bytes, routed IPv4, ARP, VLAN-tagged, PAUSE and PFC
//! frames, from data ports and the CPU port. The program is `basic` wrapped in a chaos stage
//! that, driven by the frame's last byte, resubmits, recirculates, clones (I2E and E2E),
//! multicasts, picks queues and grows or cuts the frame, so every path of the driver runs.
//! Nothing may panic, and the control plane's two copies must stay identical.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::sync::{Arc, OnceLock};

use common::{Bytes, update};
use libfuzzer_sys::fuzz_target;
use pipeline::control::{
    ActionSpec, Atomicity, Entity, TableAction, TableEntry, Update, UpdateKind,
};
use pipeline::frame::Frame;
use pipeline::metadata::StdMeta;
use pipeline::program::{Ctx, Program};
use pipeline::runtime::{Config, Pipeline};
use pipeline::schema::Schema;
use sim::SimSwitch;
use pipeline::tm::{PortConfig, Shaping, SharedBuffer};

/// `basic`, then whatever the frame's last byte asks of the driver.
#[derive(Debug)]
struct Chaos(Arc<dyn Program>);

fn control_byte(pkt: &Frame<'_>) -> u8 {
    pkt.data().last().copied().unwrap_or(0)
}

impl Program for Chaos {
    fn schema(&self) -> &Arc<Schema> {
        self.0.schema()
    }

    fn ingress(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        self.0.ingress(cx, pkt, md);
        let c = control_byte(pkt);
        if c & 0x01 != 0 {
            md.resubmit = true;
        }
        if c & 0x02 != 0 {
            md.clone_session = Some(u32::from(c >> 5));
        }
        if c & 0x04 != 0 {
            md.mcast_grp = u16::from(c >> 5);
        }
        if c & 0x08 != 0 {
            md.qid = (c >> 4) & 7;
        }
        if c & 0x10 != 0 && md.egress_spec.is_none() && md.drop.is_none() {
            md.egress_spec = Some(u16::from(c >> 6) + 1);
        }
    }

    fn egress(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        self.0.egress(cx, pkt, md);
        let c = control_byte(pkt);
        if c & 0x20 != 0 {
            // Grow into the headroom, as a pushed header does.
            if let Some(h) = pkt.push_front(usize::from(c & 0x1f)) {
                h.fill(0xee);
            }
        }
        if c & 0x40 != 0 {
            md.recirculate = true;
        }
        if c & 0x80 != 0 {
            md.clone_session = Some(u32::from(c & 7));
        }
        if c & 0x03 == 0x03 {
            pkt.truncate(usize::from(c));
        }
    }
}

fn pipeline() -> &'static Arc<Pipeline> {
    static P: OnceLock<Arc<Pipeline>> = OnceLock::new();
    P.get_or_init(|| {
        let basic = programs::by_name("basic").expect("basic");
        Pipeline::new(Arc::new(Chaos(basic)), 1, Config::default())
    })
}

/// Routes 10.0.p.0/24 to port p (p = 1..=4) through members 1..=4, so that routing runs.
fn base_config(s: &Schema) -> Vec<Update> {
    let profile = s.action_profiles[0].id;
    let nhop = s.actions[s.action_by_name("set_nhop").expect("set_nhop")].id;
    let lpm = s.tables[s.table_by_name("ipv4_lpm").expect("ipv4_lpm")].id;
    let mut ups = Vec::new();
    for p in 1..=4u32 {
        ups.push(Update {
            kind: UpdateKind::Insert,
            entity: Entity::Member {
                profile_id: profile,
                member_id: p,
                action: Some(ActionSpec {
                    action_id: nhop,
                    params: vec![
                        (1, 0x0200_0000_0100 | u128::from(p)),
                        (2, 0x0200_0000_00fe),
                        (3, u128::from(p)),
                    ],
                }),
            },
        });
        ups.push(Update {
            kind: UpdateKind::Insert,
            entity: Entity::TableEntry(TableEntry {
                table_id: lpm,
                matches: vec![(
                    1,
                    pipeline::table::FieldMatch::Lpm {
                        value: u128::from(0x0a00_0000u32 | (p << 8)),
                        prefix_len: 24,
                    },
                )],
                action: Some(TableAction::Member(p)),
                ..TableEntry::default()
            }),
        });
    }
    ups
}

fn port_config(b: &mut Bytes<'_>) -> PortConfig {
    PortConfig {
        max_packets: u32::from(b.u8() % 64),
        max_bytes: u64::from(b.u16()) * 8,
        ecn_threshold: b.flag().then(|| u32::from(b.u8() % 16)),
        shaping: match b.u8() % 3 {
            0 => Shaping::None,
            1 => Shaping::BitsPerSec(u64::from(b.u32())),
            _ => Shaping::PacketsPerSec(u64::from(b.u16())),
        },
        burst: u64::from(b.u16()),
        delay_ns: u64::from(b.u32() % 2_000_000),
        link_bps: 1 + u64::from(b.u32()) * 100,
        pfc: b.flag(),
        pfc_xoff: b.flag().then(|| u32::from(b.u8() % 32 + 1)),
        pfc_xon: b.flag().then(|| u32::from(b.u8() % 32 + 1)),
    }
}

fn frame(b: &mut Bytes<'_>) -> Vec<u8> {
    let router = [2, 0, 0, 0, 0, 0xfe];
    let host = [2, 0, 0, 0, 0, 1];
    let mut f = Vec::new();
    match b.u8() % 8 {
        0 | 1 => return b.take(200),
        2 | 3 => {
            // IPv4 TCP to 10.0.x.y, with a payload whose last byte steers the chaos stage.
            let builder = etherparse::PacketBuilder::ethernet2(host, router)
                .ipv4([10, 0, 9, 1], [10, 0, b.u8() % 6, b.u8()], b.u8())
                .tcp(b.u16(), [22, 23, 179, 443][b.below(4)], 1, 1000);
            let mut payload = b.take(40);
            let len = usize::from(b.u16()) % 9000;
            if b.u8() % 8 == 0 {
                payload.resize(len, 0);
            }
            payload.push(b.u8());
            let _ = builder.write(&mut f, &payload);
        }
        4 => {
            // ARP request (punted).
            f.extend_from_slice(&[0xff; 6]);
            f.extend_from_slice(&host);
            f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
            f.extend_from_slice(&host);
            f.extend_from_slice(&[10, 0, 9, 1, 0, 0, 0, 0, 0, 0, 10, 0, 9, 254]);
            f.push(b.u8());
        }
        5 => {
            // PAUSE (opcode 1) or PFC (0x0101), random vector and quanta.
            f.extend_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 0x01]);
            f.extend_from_slice(&host);
            f.extend_from_slice(&[0x88, 0x08]);
            if b.flag() {
                f.extend_from_slice(&[0x01, 0x01, 0, b.u8()]);
                for _ in 0..8 {
                    f.extend_from_slice(&b.u16().to_be_bytes());
                }
            } else {
                f.extend_from_slice(&[0x00, 0x01]);
                f.extend_from_slice(&b.u16().to_be_bytes());
            }
            let n = b.below(60);
            f.resize(f.len().max(n), 0);
        }
        6 => {
            // 802.1Q-tagged IPv4.
            let builder = etherparse::PacketBuilder::ethernet2(host, router)
                .single_vlan(etherparse::VlanId::try_new(b.u16() & 0xfff).unwrap_or_default())
                .ipv4([10, 0, 9, 1], [10, 0, b.u8() % 6, 7], 64)
                .udp(1, 2);
            let mut payload = b.take(20);
            payload.push(b.u8());
            let _ = builder.write(&mut f, &payload);
        }
        _ => {
            // A packet-out from the CPU port: the packet_out header, then a frame.
            let port = u16::from(b.u8() % 8) << 7;
            f.extend_from_slice(&port.to_be_bytes());
            f.extend_from_slice(&b.take(100));
        }
    }
    f
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let pipe = pipeline();
    let control = &pipe.control;
    let schema = control.schema().clone();
    control.clear();
    let _ = control.write(&base_config(&schema), Atomicity::ContinueOnError);
    let n = b.below(24);
    let ups: Vec<Update> = (0..n).map(|_| update(&mut b, &schema)).collect();
    let _ = control.write(&ups, Atomicity::ContinueOnError);
    let shared = (b.u8() % 4 == 0).then(|| SharedBuffer {
        total_bytes: u64::from(b.u16()) * 16,
        xoff_bytes: b.flag().then(|| u64::from(b.u16())),
        xon_bytes: u64::from(b.u16()),
        pause_quanta: b.u16(),
    });
    let mut sw = SimSwitch::with_tm(pipe.clone(), port_config(&mut b), shared);
    for _ in 0..b.below(4) {
        let p = u16::from(b.u8() % 6);
        sw.tm().configure(p, port_config(&mut b));
    }
    let mut now = 1u64;
    let mut sent = 0;
    while !b.is_empty() && sent < 64 {
        sent += 1;
        let port = match b.u8() % 8 {
            0 => pipe.config.cpu_port,
            1 => u16::from(b.u8()),
            p => u16::from(p % 5),
        };
        let f = frame(&mut b);
        now = now.saturating_add(u64::from(b.u16()) * 100);
        let _ = sw.inject(port, &f, now);
        // Table writes between frames, as a controller's would come.
        if b.u8() % 8 == 0 {
            let u = update(&mut b, &schema);
            let _ = control.write(&[u], Atomicity::ContinueOnError);
        }
    }
    drop(sw);
    if let Err(e) = control.check_copies() {
        panic!("{e}");
    }
});
