//! Packet-in classes (issue 10, defect 9): a flood of punts in one class does not starve what a
//! program sends its agent and controller in another. In a file of its own: the flood takes the
//! CPU for a second, which would disturb the timing tests of `switch.rs` running beside it.

use std::sync::Arc;
use std::time::Duration;

use dataplane::switch::{PortSpec, Switch, SwitchConfig};
use etherparse::PacketBuilder;
use pipeline::control::{
    ActionSpec, Atomicity, Control, Entity, TableAction, TableEntry, Update, UpdateKind,
};
use pipeline::runtime::{Config, Pipeline};
use pipeline::table::FieldMatch;

const ROUTER: [u8; 6] = [0x02, 0, 0, 0, 0, 0xfe];

/// basic with 10.0.3.0/24 routed to port 3.
fn basic() -> Arc<Pipeline> {
    let pipe = Pipeline::new(programs::by_name("basic").unwrap(), 2, Config::default());
    let c: &Control = &pipe.control;
    let s = c.schema().clone();
    let ups = [
        Update {
            kind: UpdateKind::Insert,
            entity: Entity::Member {
                profile_id: s.action_profiles[0].id,
                member_id: 3,
                action: Some(ActionSpec {
                    action_id: s.actions[s.action_by_name("set_nhop").unwrap()].id,
                    params: vec![(1, 0x0200_0000_0103), (2, 0x0200_0000_00fe), (3, 3)],
                }),
            },
        },
        Update {
            kind: UpdateKind::Insert,
            entity: Entity::TableEntry(TableEntry {
                table_id: s.tables[s.table_by_name("ipv4_lpm").unwrap()].id,
                matches: vec![(
                    1,
                    FieldMatch::Lpm {
                        value: 0x0a00_0300,
                        prefix_len: 24,
                    },
                )],
                action: Some(TableAction::Member(3)),
                ..TableEntry::default()
            }),
        },
    ];
    assert!(
        c.write(&ups, Atomicity::ContinueOnError)
            .iter()
            .all(Result::is_ok)
    );
    pipe
}

/// Issue 10, defect 9: an ARP flood at full rate must not starve what a program sends its agent
/// and controller on purpose. `basic` punts ARP on the CPU port's queue 0 (class 0); its ACL
/// clones TCP port 443 to clone session 7, here the CPU port with class of service 3 (class 3):
/// the program's feedback. The controller and the agent drain their queues slowly (5,000 and
/// 2,500 packet-ins/s), far below the flood. Every packet-in used to share one queue to each, so
/// the flood kept them full and the feedback was refused with the ARP.
#[test]
fn an_arp_flood_does_not_starve_program_feedback() {
    use pipeline::pre::{CloneSession, Replica};
    use std::sync::atomic::{AtomicBool, Ordering};
    let pipe = basic();
    let c: &Control = &pipe.control;
    let s = c.schema().clone();
    let acl = s.tables[s.table_by_name("acl").unwrap()].id;
    let clone = s.actions[s.action_by_name("clone_to_session").unwrap()].id;
    let ups = [
        Update {
            kind: UpdateKind::Insert,
            entity: Entity::CloneSession {
                session_id: 7,
                session: CloneSession {
                    replicas: vec![Replica {
                        port: pipe.config.cpu_port,
                        rid: 0,
                    }],
                    class_of_service: 3,
                    truncate: 0,
                },
            },
        },
        Update {
            kind: UpdateKind::Insert,
            entity: Entity::TableEntry(TableEntry {
                table_id: acl,
                matches: vec![(
                    8,
                    FieldMatch::Ternary {
                        value: 443,
                        mask: 0xffff,
                    },
                )],
                priority: 10,
                action: Some(TableAction::Action(ActionSpec {
                    action_id: clone,
                    params: vec![(1, 7)],
                })),
                ..TableEntry::default()
            }),
        },
    ];
    assert!(
        c.write(&ups, Atomicity::ContinueOnError)
            .iter()
            .all(Result::is_ok)
    );
    let (ports, links) = PortSpec::mem_pairs(1..=4).unwrap();
    let sw = Switch::start(
        pipe.clone(),
        ports,
        SwitchConfig {
            workers: 2,
            ..SwitchConfig::default()
        },
    )
    .unwrap();
    let agent = sw.attach_agent();
    let stop = Arc::new(AtomicBool::new(false));
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[
        2, 0, 0, 0, 0, 9, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 9, 10, 0, 9, 1, 0, 0,
        0, 0, 0, 0, 10, 0, 9, 254,
    ]);
    let feedback = {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 9], ROUTER)
            .ipv4([10, 0, 9, 1], [10, 0, 3, 7], 64)
            .tcp(1000, 443, 1, 1000);
        let mut f = Vec::new();
        b.write(&mut f, &[0u8; 20]).unwrap();
        f
    };
    // A slow consumer counting feedback (a TCP frame) and punts (ARP) among what it gets.
    let drain =
        |rx: crossbeam::channel::Receiver<Vec<u8>>, per: Duration, stop: Arc<AtomicBool>| {
            std::thread::spawn(move || {
                let (mut fb, mut punts) = (0u64, 0u64);
                // Until the flood is over and the queue drained.
                loop {
                    match rx.recv_timeout(Duration::from_millis(20)) {
                        Ok(f) => {
                            // packet_in header (2 bytes), then the frame: its EtherType at 14..16.
                            match f.get(14..16) {
                                Some([0x08, 0x00]) => fb += 1,
                                Some([0x08, 0x06]) => punts += 1,
                                _ => {}
                            }
                            std::thread::sleep(per);
                        }
                        Err(_) if stop.load(Ordering::Relaxed) => break,
                        Err(_) => {}
                    }
                }
                (fb, punts)
            })
        };
    let controller = drain(
        sw.cpu_port().packet_in.clone(),
        Duration::from_micros(200),
        stop.clone(),
    );
    let agent = drain(agent, Duration::from_micros(400), stop.clone());
    let flood = {
        let (stop, link, arp) = (stop.clone(), links[0].clone(), arp.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..64 {
                    link.send(&arp);
                }
                n += 64;
                // About a million frames a second at most: what one worker forwards, without
                // piling up an unbounded backlog on the in-memory link.
                std::thread::sleep(Duration::from_micros(50));
            }
            n
        })
    };
    // Let the flood fill every queue first, then send the feedback: 200 frames, one per 2 ms.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..200 {
        links[1].send(&feedback);
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let flooded = flood.join().unwrap();
    let (fb_ctl, punts_ctl) = controller.join().unwrap();
    let (fb_agent, _) = agent.join().unwrap();
    let stats = |class| sw.cpu_port().class_stats(class).unwrap();
    eprintln!(
        "ARP frames sent {flooded}; controller got {fb_ctl} feedback, {punts_ctl} punts; agent \
         got {fb_agent} feedback; class 0 {:?}; class 3 {:?}",
        stats(0),
        stats(3)
    );
    assert!(punts_ctl > 100, "the flood reached the controller too");
    assert!(
        stats(0).policed + stats(0).controller_full > 0,
        "the flood was limited"
    );
    assert!(
        fb_ctl >= 195,
        "the controller got {fb_ctl} of 200 feedback packet-ins"
    );
    assert!(
        fb_agent >= 195,
        "the agent got {fb_agent} of 200 feedback packet-ins"
    );
    sw.stop();
}
