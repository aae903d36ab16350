//! The P4Runtime service over real gRPC on loopback, against the `basic` program's control plane
//! (no data plane: packet-out frames land in a channel, packet-ins and digests are fed by the
//! test). Each test names the p4runtime.md items it covers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use p4runtime_server::arbitration::Election;
use p4runtime_server::client::{Client, ClientError};
use p4runtime_server::proto::p4::v1 as p4;
use p4runtime_server::server::{DeviceIo, Running, ServerConfig, Service, serve};
use pipeline::control::Control;
use pipeline::runtime::{Config, Pipeline};
use tonic::Code;

use p4::entity::Entity as E;
use p4::write_request::Atomicity;

struct Fixture {
    running: Running,
    control: Arc<Control>,
    packet_outs: crossbeam::channel::Receiver<Vec<u8>>,
    packet_ins: crossbeam::channel::Sender<Vec<u8>>,
}

impl Fixture {
    fn new(election: Election, device_id: u64) -> Fixture {
        let program = pipeline::program::by_name("basic").unwrap();
        let pipe = Pipeline::new(program, 1, Config::default());
        let control = pipe.control.clone();
        let (out_tx, packet_outs) = crossbeam::channel::unbounded();
        let (packet_ins, in_rx) = crossbeam::channel::unbounded();
        let epoch = Instant::now();
        let io = DeviceIo {
            packet_out: Box::new(move |f| out_tx.send(f).is_ok()),
            max_packet_out: 3840,
            packet_in: in_rx,
            clock: Arc::new(move || epoch.elapsed().as_nanos() as u64),
        };
        let service = Service::new(
            control.clone(),
            io,
            ServerConfig {
                device_id,
                election,
            },
        );
        let running = serve(service, "127.0.0.1:0".parse().unwrap()).unwrap();
        Fixture {
            running,
            control,
            packet_outs,
            packet_ins,
        }
    }

    fn addr(&self) -> String {
        self.running.addr.to_string()
    }

    async fn client(&self, election_id: u128) -> Client {
        Client::connect(&self.addr(), 1, election_id).await.unwrap()
    }

    fn id(&self, kind: &str, name: &str) -> u32 {
        let s = self.control.schema();
        match kind {
            "table" => s.tables[s.table_by_name(name).unwrap()].id,
            "action" => s.actions[s.action_by_name(name).unwrap()].id,
            "counter" => s.counter_by_name(name).unwrap().id,
            "meter" => s.meter_by_name(name).unwrap().id,
            "register" => s.register_by_name(name).unwrap().id,
            "profile" => s.profile_by_name(name).unwrap().id,
            "digest" => s.digests.iter().find(|d| d.name == name).unwrap().id,
            _ => panic!("{kind}"),
        }
    }
}

fn update(t: p4::update::Type, e: E) -> p4::Update {
    p4::Update {
        r#type: t as i32,
        entity: Some(p4::Entity { entity: Some(e) }),
    }
}

/// An ipv4_lpm entry pointing at ECMP member 1 (the table takes members and groups only).
fn lpm_entry(f: &Fixture, value: Vec<u8>, len: i32) -> p4::TableEntry {
    use p4::field_match::{FieldMatchType, Lpm};
    p4::TableEntry {
        table_id: f.id("table", "ingress.ipv4_lpm"),
        r#match: vec![p4::FieldMatch {
            field_id: 1,
            field_match_type: Some(FieldMatchType::Lpm(Lpm {
                value,
                prefix_len: len,
            })),
        }],
        action: Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::ActionProfileMemberId(1)),
        }),
        ..Default::default()
    }
}

/// An l2_exact entry forwarding `mac` (any bytestring form) to `port`.
fn l2_entry(f: &Fixture, mac: Vec<u8>, port: Vec<u8>) -> p4::TableEntry {
    use p4::field_match::{Exact, FieldMatchType};
    p4::TableEntry {
        table_id: f.id("table", "ingress.l2_exact"),
        r#match: vec![p4::FieldMatch {
            field_id: 1,
            field_match_type: Some(FieldMatchType::Exact(Exact { value: mac })),
        }],
        action: Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::Action(p4::Action {
                action_id: f.id("action", "ingress.l2_forward"),
                params: vec![p4::action::Param {
                    param_id: 1,
                    value: port,
                }],
            })),
        }),
        ..Default::default()
    }
}

const MEMBER1: &str =
    "act_prof_create_member ecmp_selector 1 set_nhop 02:00:00:00:00:02 02:00:00:00:00:fe 1";

fn codes(e: ClientError) -> Vec<Option<Code>> {
    match e {
        ClientError::Write { errors, .. } => errors.into_iter().map(|e| e.map(|e| e.0)).collect(),
        other => panic!("expected per-update errors, got {other}"),
    }
}

fn rpc_code(e: ClientError) -> Code {
    match e {
        ClientError::Rpc(s) => s.code(),
        other => panic!("expected an RPC status, got {other}"),
    }
}

/// Items 1, 2, 3, 6, 26: arbitration replies, the primary's id in replies, an id in use, writes
/// from a backup, capabilities.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arbitration_primary_backup_and_capabilities() {
    let f = Fixture::new(Election::Spec, 1);
    let mut a = f.client(10).await;
    assert!(a.is_primary());
    assert_eq!(a.capabilities().await.unwrap(), "1.5.0");
    let mut b = f.client(5).await;
    let s = b.arbitration().unwrap();
    assert_eq!(s.status, Code::AlreadyExists);
    assert_eq!(s.election_id, 10, "replies carry the primary's election id");
    // The backup may read but not write.
    let e = l2_entry(&f, vec![2, 0, 0, 0, 0, 2], vec![1]);
    let err = b
        .write(
            vec![update(p4::update::Type::Insert, E::TableEntry(e.clone()))],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap_err();
    assert_eq!(rpc_code(err), Code::PermissionDenied);
    a.write(
        vec![update(p4::update::Type::Insert, E::TableEntry(e))],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    let read = b
        .read_one(E::TableEntry(p4::TableEntry {
            table_id: f.id("table", "ingress.l2_exact"),
            ..Default::default()
        }))
        .await
        .unwrap();
    assert_eq!(read.len(), 1);
    // An election id already held by a live stream: INVALID_ARGUMENT, finsy's wording.
    match Client::connect(&f.addr(), 1, 10).await {
        Err(ClientError::Arbitration(why)) => {
            assert!(
                why.contains("InvalidArgument") || why.contains("invalid argument"),
                "{why}"
            );
            assert!(why.contains("election id") && why.contains("used"), "{why}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // A wrong device id is refused.
    assert!(Client::connect(&f.addr(), 7, 20).await.is_err());
}

/// Items 5 and 6: failover under the spec rule and under BMv2's live-highest rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_spec_and_live_highest() {
    for rule in [Election::Spec, Election::LiveHighest] {
        let f = Fixture::new(rule, 1);
        let a = f.client(10).await;
        let mut b = f.client(5).await;
        assert!(!b.is_primary());
        a.close();
        let s = b
            .arbitration_changed(Duration::from_secs(2))
            .await
            .expect("the backup hears that the primary left");
        match rule {
            Election::Spec => {
                assert_eq!(
                    s.status,
                    Code::NotFound,
                    "no primary until id >= 10 returns"
                );
                let s = b.arbitrate(10).await.unwrap();
                assert_eq!(s.status, Code::Ok);
            }
            Election::LiveHighest => assert_eq!(s.status, Code::Ok),
        }
        assert!(b.is_primary());
        let e = l2_entry(&f, vec![2, 0, 0, 0, 0, 2], vec![1]);
        b.write(
            vec![update(p4::update::Type::Insert, E::TableEntry(e))],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap();
    }
}

/// Items 12, 14, 15: per-update errors with their codes, canonical bytestrings, padded input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_errors_carry_one_status_per_update() {
    let f = Fixture::new(Election::Spec, 1);
    let mut c = f.client(1).await;
    let ins = p4::update::Type::Insert;
    c.run_commands(&[MEMBER1]).await.unwrap();
    let good = lpm_entry(&f, vec![0, 0, 10, 1, 0, 0], 16);
    let trailing = lpm_entry(&f, vec![10, 1, 0, 1], 16);
    let wide = l2_entry(&f, vec![2, 0, 0, 0, 0, 2], vec![2, 0]);
    let empty = lpm_entry(&f, vec![], 16);
    let mut prio = lpm_entry(&f, vec![10, 3, 0, 0], 16);
    prio.priority = 5;
    let mut bad_table = lpm_entry(&f, vec![10, 4, 0, 0], 16);
    bad_table.table_id = 0x0200_0001;
    let err = c
        .write(
            vec![
                update(ins, E::TableEntry(good.clone())),
                update(ins, E::TableEntry(good.clone())),
                update(ins, E::TableEntry(trailing)),
                update(ins, E::TableEntry(wide)),
                update(ins, E::TableEntry(empty)),
                update(ins, E::TableEntry(prio)),
                update(ins, E::TableEntry(bad_table)),
                update(p4::update::Type::Unspecified, E::TableEntry(good.clone())),
            ],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap_err();
    assert_eq!(
        codes(err),
        vec![
            None,
            Some(Code::AlreadyExists),
            Some(Code::InvalidArgument),
            Some(Code::OutOfRange),
            Some(Code::OutOfRange),
            Some(Code::InvalidArgument),
            Some(Code::NotFound),
            Some(Code::InvalidArgument),
        ]
    );
    // The entry written with padded bytestrings reads back canonical.
    let read = c
        .read_one(E::TableEntry(p4::TableEntry {
            table_id: good.table_id,
            ..Default::default()
        }))
        .await
        .unwrap();
    let Some(E::TableEntry(t)) = &read[0].entity else {
        panic!()
    };
    let Some(p4::field_match::FieldMatchType::Lpm(l)) = &t.r#match[0].field_match_type else {
        panic!()
    };
    assert_eq!(l.value, vec![10, 1, 0, 0]);
    // Padded action parameters read back canonical too.
    c.write(
        vec![update(
            ins,
            E::TableEntry(l2_entry(&f, vec![0, 2, 0, 0, 0, 0, 7], vec![0, 5])),
        )],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    let read = c
        .read_one(E::TableEntry(p4::TableEntry {
            table_id: f.id("table", "ingress.l2_exact"),
            ..Default::default()
        }))
        .await
        .unwrap();
    let Some(E::TableEntry(t)) = &read[0].entity else {
        panic!()
    };
    let Some(p4::table_action::Type::Action(a)) = &t.action.as_ref().unwrap().r#type else {
        panic!()
    };
    assert_eq!(a.params[0].value, vec![5]);
    // MODIFY and DELETE of a missing entry: NOT_FOUND.
    let missing = lpm_entry(&f, vec![10, 9, 0, 0], 16);
    for t in [p4::update::Type::Modify, p4::update::Type::Delete] {
        let err = c
            .write(
                vec![update(t, E::TableEntry(missing.clone()))],
                Atomicity::ContinueOnError,
            )
            .await
            .unwrap_err();
        assert_eq!(codes(err), vec![Some(Code::NotFound)]);
    }
    // Action scope: set_nhop is table-only, so not a default action: PERMISSION_DENIED.
    let mut default = l2_entry(&f, vec![], vec![1]);
    default.r#match.clear();
    default.table_id = f.id("table", "ingress.ipv4_lpm");
    default.action = Some(p4::TableAction {
        r#type: Some(p4::table_action::Type::Action(p4::Action {
            action_id: f.id("action", "ingress.set_nhop"),
            params: vec![
                p4::action::Param {
                    param_id: 1,
                    value: vec![1],
                },
                p4::action::Param {
                    param_id: 2,
                    value: vec![1],
                },
                p4::action::Param {
                    param_id: 3,
                    value: vec![1],
                },
            ],
        })),
    });
    default.is_default_action = true;
    let err = c
        .write(
            vec![update(p4::update::Type::Modify, E::TableEntry(default))],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap_err();
    assert_eq!(codes(err), vec![Some(Code::PermissionDenied)]);
}

/// Item 13: ROLLBACK_ON_ERROR applies nothing when one update fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_applies_nothing() {
    let f = Fixture::new(Election::Spec, 1);
    let mut c = f.client(1).await;
    let ins = p4::update::Type::Insert;
    let a = l2_entry(&f, vec![2, 0, 0, 0, 0, 1], vec![1]);
    let bad = l2_entry(&f, vec![2, 0, 0, 0, 0, 2], vec![2, 0]);
    let err = c
        .write(
            vec![
                update(ins, E::TableEntry(a.clone())),
                update(ins, E::TableEntry(bad)),
            ],
            Atomicity::RollbackOnError,
        )
        .await
        .unwrap_err();
    assert_eq!(
        codes(err),
        vec![Some(Code::Aborted), Some(Code::OutOfRange)]
    );
    assert_eq!(f.control.read_entries(None, false, false).unwrap().len(), 0);
    c.write(
        vec![update(ins, E::TableEntry(a))],
        Atomicity::DataplaneAtomic,
    )
    .await
    .unwrap();
    assert_eq!(f.control.read_entries(None, false, false).unwrap().len(), 1);
}

/// Items 9, 10, 11: the P4Info before any Set, VERIFY, VERIFY_AND_COMMIT clearing state,
/// RECONCILE_AND_COMMIT keeping it, a foreign P4Info refused, the cookie.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_config() {
    use p4::set_forwarding_pipeline_config_request::Action as A;
    let f = Fixture::new(Election::Spec, 1);
    let mut c = f.client(1).await;
    let (p4info, cookie) = c.get_pipeline().await.unwrap();
    let p4info = p4info.expect("P4Info before any Set");
    assert_eq!(cookie, None);
    assert_eq!(p4info.pkg_info.as_ref().unwrap().name, "basic");
    // The checked-in text parses to the same program.
    c.run_commands(&["table_add l2_exact l2_forward 02:00:00:00:00:02 => 1"])
        .await
        .unwrap();
    c.set_pipeline(A::Verify, p4info.clone(), vec![], Some(1))
        .await
        .unwrap();
    c.set_pipeline(A::ReconcileAndCommit, p4info.clone(), vec![], Some(2))
        .await
        .unwrap();
    assert_eq!(f.control.read_entries(None, false, false).unwrap().len(), 1);
    assert_eq!(c.get_pipeline().await.unwrap().1, Some(2));
    c.set_pipeline(
        A::VerifyAndCommit,
        p4info.clone(),
        b"blob".to_vec(),
        Some(3),
    )
    .await
    .unwrap();
    assert_eq!(f.control.read_entries(None, false, false).unwrap().len(), 0);
    assert_eq!(c.get_pipeline().await.unwrap().1, Some(3));
    let mut foreign = p4info.clone();
    foreign.tables[0].preamble.as_mut().unwrap().name = "ingress.other".into();
    let err = c
        .set_pipeline(A::VerifyAndCommit, foreign, vec![], None)
        .await
        .unwrap_err();
    assert_eq!(rpc_code(err), Code::InvalidArgument);
    let err = c
        .set_pipeline(A::Unspecified, p4info.clone(), vec![], None)
        .await
        .unwrap_err();
    assert_eq!(rpc_code(err), Code::InvalidArgument);
    // COMMIT takes no config; without one it needs a VERIFY_AND_SAVE first, and keeps the
    // writes made since.
    let err = c
        .set_pipeline(A::Commit, p4info.clone(), vec![], None)
        .await
        .unwrap_err();
    assert_eq!(rpc_code(err), Code::InvalidArgument);
    let mut raw = p4::p4_runtime_client::P4RuntimeClient::connect(format!("http://{}", f.addr()))
        .await
        .unwrap();
    let commit = p4::SetForwardingPipelineConfigRequest {
        device_id: 1,
        election_id: Some(p4::Uint128 { high: 0, low: 1 }),
        action: A::Commit as i32,
        ..Default::default()
    };
    let err = raw
        .set_forwarding_pipeline_config(commit.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    c.set_pipeline(A::VerifyAndSave, p4info, vec![], Some(4))
        .await
        .unwrap();
    c.run_commands(&["table_add l2_exact l2_forward 02:00:00:00:00:03 => 1"])
        .await
        .unwrap();
    raw.set_forwarding_pipeline_config(commit).await.unwrap();
    assert_eq!(f.control.read_entries(None, false, false).unwrap().len(), 1);
    assert_eq!(c.get_pipeline().await.unwrap().1, Some(4));
}

/// Items 16-23: defaults, const default, indexed and direct resources, registers, PRE entries
/// in both replica forms, action profiles, digest configs, wildcard reads, an empty entity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_entity_writes_and_reads() {
    use p4::packet_replication_engine_entry::Type as Pre;
    let f = Fixture::new(Election::Spec, 1);
    let mut c = f.client(1).await;
    let n = c
        .run_commands(&[
            "act_prof_create_member ecmp_selector 1 set_nhop 02:00:00:00:00:03 02:00:00:00:00:fe 3",
            "act_prof_create_member ecmp_selector 2 set_nhop 02:00:00:00:00:04 02:00:00:00:00:fe 4",
            "act_prof_create_group ecmp_selector 7 1 2:3",
            "table_indirect_add_with_group ipv4_lpm 10.0.0.0/8 => 7",
            "table_add acl drop 0&&&0 0&&&0 0x0800&&&0xffff 0&&&0 0&&&0 17&&&0xff 0&&&0 53&&&0xffff => 10",
            "table_set_default ipv4_lpm punt_to_cpu",
            "mc_group_create 5 1 2 3:1",
            "mirroring_add 9 4 128",
            "register_write flow_last_seen 3 77",
            "meter_set port_meter 2 1000 100 2000 200",
        ])
        .await
        .unwrap();
    assert_eq!(n, 10);
    // Wildcard read of every table.
    let all = c
        .read_one(E::TableEntry(p4::TableEntry::default()))
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    // The default entry.
    let d = c
        .read_one(E::TableEntry(p4::TableEntry {
            table_id: f.id("table", "ingress.ipv4_lpm"),
            is_default_action: true,
            ..Default::default()
        }))
        .await
        .unwrap();
    assert_eq!(d.len(), 1);
    // A const default: PERMISSION_DENIED.
    let smac_default = p4::TableEntry {
        table_id: f.id("table", "ingress.smac"),
        is_default_action: true,
        action: Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::Action(p4::Action {
                action_id: f.id("action", "NoAction"),
                params: vec![],
            })),
        }),
        ..Default::default()
    };
    let err = c
        .write(
            vec![update(
                p4::update::Type::Modify,
                E::TableEntry(smac_default),
            )],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap_err();
    assert_eq!(codes(err), vec![Some(Code::PermissionDenied)]);
    // Direct counter of the ACL: table id only is a wildcard over its entries (item 18).
    let acl = f.id("table", "ingress.acl");
    let dc = c
        .read_one(E::DirectCounterEntry(p4::DirectCounterEntry {
            table_entry: Some(p4::TableEntry {
                table_id: acl,
                ..Default::default()
            }),
            data: None,
        }))
        .await
        .unwrap();
    assert_eq!(dc.len(), 1);
    // Direct counters accept MODIFY only.
    let Some(E::DirectCounterEntry(mut dce)) = dc[0].entity.clone() else {
        panic!()
    };
    dce.data = Some(p4::CounterData {
        byte_count: 1000,
        packet_count: 10,
    });
    let err = c
        .write(
            vec![update(
                p4::update::Type::Insert,
                E::DirectCounterEntry(dce.clone()),
            )],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap_err();
    assert_eq!(codes(err), vec![Some(Code::InvalidArgument)]);
    c.write(
        vec![update(p4::update::Type::Modify, E::DirectCounterEntry(dce))],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    // Entries read with counter_data asked for carry it.
    let with = c
        .read_one(E::TableEntry(p4::TableEntry {
            table_id: acl,
            counter_data: Some(p4::CounterData::default()),
            ..Default::default()
        }))
        .await
        .unwrap();
    let Some(E::TableEntry(t)) = &with[0].entity else {
        panic!()
    };
    assert_eq!(t.counter_data.unwrap().packet_count, 10);
    assert!(t.priority == 10 && t.meter_config.is_none());
    // Indexed counters: id 0 = all counters, no index = every cell; index >= size OUT_OF_RANGE.
    let counters = c
        .read_one(E::CounterEntry(p4::CounterEntry::default()))
        .await
        .unwrap();
    assert_eq!(counters.len(), 1024);
    let err = c
        .read_one(E::CounterEntry(p4::CounterEntry {
            counter_id: f.id("counter", "ingress.port_rx"),
            index: Some(p4::Index { index: 512 }),
            data: None,
        }))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(err), Code::OutOfRange);
    // Registers (item 19).
    let reg = f.id("register", "ingress.flow_last_seen");
    let r = c
        .read_one(E::RegisterEntry(p4::RegisterEntry {
            register_id: reg,
            index: Some(p4::Index { index: 3 }),
            data: None,
        }))
        .await
        .unwrap();
    let Some(E::RegisterEntry(re)) = &r[0].entity else {
        panic!()
    };
    assert_eq!(
        re.data.as_ref().unwrap().data,
        Some(p4::p4_data::Data::Bitstring(vec![77]))
    );
    // Meters.
    let m = c
        .read_one(E::MeterEntry(p4::MeterEntry {
            meter_id: f.id("meter", "ingress.port_meter"),
            index: Some(p4::Index { index: 2 }),
            ..Default::default()
        }))
        .await
        .unwrap();
    let Some(E::MeterEntry(me)) = &m[0].entity else {
        panic!()
    };
    assert_eq!(me.config.unwrap().pir, 2000);
    // Multicast group written with `port` bytes reads back in that form; clone session too.
    let mc = c
        .read_one(E::PacketReplicationEngineEntry(
            p4::PacketReplicationEngineEntry {
                r#type: Some(Pre::MulticastGroupEntry(p4::MulticastGroupEntry::default())),
            },
        ))
        .await
        .unwrap();
    let Some(E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
        r#type: Some(Pre::MulticastGroupEntry(g)),
    })) = &mc[0].entity
    else {
        panic!()
    };
    assert_eq!(g.multicast_group_id, 5);
    assert_eq!(g.replicas.len(), 3);
    assert_eq!(
        g.replicas[2].port_kind,
        Some(p4::replica::PortKind::Port(vec![3]))
    );
    // A group written with the deprecated egress_port reads back with it (item 20).
    #[expect(deprecated, reason = "p4runtime-shell sends egress_port")]
    let old_form = p4::Replica {
        instance: 0,
        port_kind: Some(p4::replica::PortKind::EgressPort(4)),
        ..Default::default()
    };
    let group6 = p4::MulticastGroupEntry {
        multicast_group_id: 6,
        replicas: vec![old_form.clone()],
        metadata: b"cookie".to_vec(),
    };
    c.write(
        vec![update(
            p4::update::Type::Insert,
            E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                r#type: Some(Pre::MulticastGroupEntry(group6.clone())),
            }),
        )],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    let mc6 = c
        .read_one(E::PacketReplicationEngineEntry(
            p4::PacketReplicationEngineEntry {
                r#type: Some(Pre::MulticastGroupEntry(p4::MulticastGroupEntry {
                    multicast_group_id: 6,
                    ..Default::default()
                })),
            },
        ))
        .await
        .unwrap();
    assert_eq!(
        mc6[0].entity,
        Some(E::PacketReplicationEngineEntry(
            p4::PacketReplicationEngineEntry {
                r#type: Some(Pre::MulticastGroupEntry(group6)),
            }
        ))
    );
    // Group id 0 is invalid in writes.
    let err = c
        .write(
            vec![update(
                p4::update::Type::Insert,
                E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                    r#type: Some(Pre::MulticastGroupEntry(p4::MulticastGroupEntry {
                        multicast_group_id: 0,
                        replicas: vec![old_form],
                        metadata: vec![],
                    })),
                }),
            )],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap_err();
    assert_eq!(codes(err), vec![Some(Code::InvalidArgument)]);
    let cs = c
        .read_one(E::PacketReplicationEngineEntry(
            p4::PacketReplicationEngineEntry {
                r#type: Some(Pre::CloneSessionEntry(p4::CloneSessionEntry::default())),
            },
        ))
        .await
        .unwrap();
    let Some(E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
        r#type: Some(Pre::CloneSessionEntry(s)),
    })) = &cs[0].entity
    else {
        panic!()
    };
    assert_eq!((s.session_id, s.packet_length_bytes), (9, 128));
    // Action profile members and groups, by wildcard (item 21).
    let members = c
        .read_one(E::ActionProfileMember(p4::ActionProfileMember::default()))
        .await
        .unwrap();
    assert_eq!(members.len(), 2);
    let groups = c
        .read_one(E::ActionProfileGroup(p4::ActionProfileGroup::default()))
        .await
        .unwrap();
    let Some(E::ActionProfileGroup(g)) = &groups[0].entity else {
        panic!()
    };
    assert_eq!(g.members[1].weight, 3);
    // Deleting a member still in a group: FAILED_PRECONDITION.
    let err = c
        .write(
            vec![update(
                p4::update::Type::Delete,
                E::ActionProfileMember(p4::ActionProfileMember {
                    action_profile_id: f.id("profile", "ingress.ecmp_selector"),
                    member_id: 1,
                    action: None,
                }),
            )],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap_err();
    assert_eq!(codes(err), vec![Some(Code::FailedPrecondition)]);
    // Digest configs (item 22).
    let digest = p4::DigestEntry {
        digest_id: f.id("digest", "ingress.mac_learn"),
        config: Some(p4::digest_entry::Config {
            max_timeout_ns: 0,
            max_list_size: 1,
            ack_timeout_ns: 1_000_000_000,
        }),
    };
    let ins = update(p4::update::Type::Insert, E::DigestEntry(digest));
    c.write(vec![ins.clone()], Atomicity::ContinueOnError)
        .await
        .unwrap();
    let err = c
        .write(vec![ins], Atomicity::ContinueOnError)
        .await
        .unwrap_err();
    assert_eq!(codes(err), vec![Some(Code::AlreadyExists)]);
    let read = c
        .read_one(E::DigestEntry(p4::DigestEntry::default()))
        .await
        .unwrap();
    assert_eq!(read[0].entity, Some(E::DigestEntry(digest)));
    // An entity with nothing set: INVALID_ARGUMENT (item 23).
    let err = c.read(vec![p4::Entity { entity: None }]).await.unwrap_err();
    assert_eq!(rpc_code(err), Code::InvalidArgument);
    // Unknown role: NOT_FOUND (item 8).
    let mut raw = p4::p4_runtime_client::P4RuntimeClient::connect(format!("http://{}", f.addr()))
        .await
        .unwrap();
    let err = raw
        .read(p4::ReadRequest {
            device_id: 1,
            role: "sdn".into(),
            entities: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

/// Items 22, 24, 25: packet-out encoding, packet-in decoding, digests with acks, idle timeouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_packet_io_digests_and_idle_timeouts() {
    use p4::stream_message_response::Update as U;
    let f = Fixture::new(Election::Spec, 1);
    let mut c = f.client(1).await;
    // Packet-out: egress_port 3 and _pad, header packed into two bytes before the payload.
    c.packet_out(vec![0xaa; 20], &[(1, 3), (2, 0)])
        .await
        .unwrap();
    let frame = f.packet_outs.recv_timeout(Duration::from_secs(2));
    let Ok(frame) = frame else {
        panic!("{:?}", c.next_event(Duration::from_secs(1)).await)
    };
    assert_eq!(&frame[..2], &[0x01, 0x80]);
    assert_eq!(frame.len(), 22);
    // A packet-out with a metadata id the header lacks: a stream error, nothing injected.
    c.packet_out(vec![0xaa; 20], &[(9, 1)]).await.unwrap();
    match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::Error(e)),
        })) => assert_eq!(e.canonical_code, Code::InvalidArgument as i32),
        other => panic!("expected a stream error, got {other:?}"),
    }
    assert!(f.packet_outs.try_recv().is_err());
    // Issue 10, defect 6: a packet-out longer than a buffer carries is refused whole with
    // INVALID_ARGUMENT and the packet, not cut (2 header bytes + 3,838 fit; one more does not).
    c.packet_out(vec![0xbb; 3838], &[(1, 3), (2, 0)])
        .await
        .unwrap();
    let fits = f.packet_outs.recv_timeout(Duration::from_secs(2)).unwrap();
    assert_eq!(fits.len(), 3840);
    c.packet_out(vec![0xcc; 3839], &[(1, 3), (2, 0)])
        .await
        .unwrap();
    match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::Error(e)),
        })) => {
            assert_eq!(e.canonical_code, Code::InvalidArgument as i32, "{e:?}");
            match e.details {
                Some(p4::stream_error::Details::PacketOut(p4::PacketOutError {
                    packet_out: Some(p),
                })) => assert_eq!(p.payload, vec![0xcc; 3839]),
                other => panic!("the error carries the packet: {other:?}"),
            }
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
    assert!(
        f.packet_outs.try_recv().is_err(),
        "the over-long packet-out reached the data plane"
    );
    // Packet-in: ingress_port 7.
    f.packet_ins
        .send([vec![0x03, 0x80], vec![0x55; 30]].concat())
        .unwrap();
    match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::Packet(p)),
        })) => {
            assert_eq!(p.payload, vec![0x55; 30]);
            assert_eq!(p.metadata[0].metadata_id, 1);
            assert_eq!(p.metadata[0].value, vec![7]);
        }
        other => panic!("expected a packet-in, got {other:?}"),
    }
    // Digests: unconfigured ones are dropped; configured ones arrive in lists and wait for acks.
    let learn = f
        .control
        .schema()
        .digests
        .iter()
        .position(|d| d.name == "ingress.mac_learn");
    let learn = learn.unwrap() as u16;
    let digests = &f.control.externs().digests;
    digests.push(learn, &[0x0200_0000_0001, 1], 0);
    // The service drains the queue at least every 100 ms; unconfigured digests are dropped.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let digest_id = f.id("digest", "ingress.mac_learn");
    c.write(
        vec![update(
            p4::update::Type::Insert,
            E::DigestEntry(p4::DigestEntry {
                digest_id,
                config: Some(p4::digest_entry::Config {
                    max_timeout_ns: 200_000_000,
                    max_list_size: 2,
                    ack_timeout_ns: 10_000_000_000,
                }),
            }),
        )],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    digests.push(learn, &[0x0200_0000_0002, 2], 0);
    digests.push(learn, &[0x0200_0000_0002, 2], 0);
    digests.push(learn, &[0x0200_0000_0003, 3], 0);
    let list = match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::Digest(l)),
        })) => l,
        other => panic!("expected a digest list, got {other:?}"),
    };
    assert_eq!(list.digest_id, digest_id);
    assert_eq!(
        list.data.len(),
        2,
        "duplicates folded, the unconfigured one dropped"
    );
    digests.push(learn, &[0x0200_0000_0004, 4], 0);
    assert!(
        c.next_event(Duration::from_millis(300)).await.is_none(),
        "no new list before the ack"
    );
    c.ack_digest(digest_id, list.list_id).await.unwrap();
    match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::Digest(l)),
        })) => assert_eq!(l.data.len(), 1),
        other => panic!("expected a second digest list, got {other:?}"),
    }
    // Idle timeout: an smac entry with a 50 ms timeout is reported once.
    c.write(
        vec![update(
            p4::update::Type::Insert,
            E::TableEntry(p4::TableEntry {
                table_id: f.id("table", "ingress.smac"),
                r#match: vec![p4::FieldMatch {
                    field_id: 1,
                    field_match_type: Some(p4::field_match::FieldMatchType::Exact(
                        p4::field_match::Exact {
                            value: vec![2, 0, 0, 0, 0, 9],
                        },
                    )),
                }],
                action: Some(p4::TableAction {
                    r#type: Some(p4::table_action::Type::Action(p4::Action {
                        action_id: f.id("action", "NoAction"),
                        params: vec![],
                    })),
                }),
                idle_timeout_ns: 50_000_000,
                ..Default::default()
            }),
        )],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    let started = Instant::now();
    match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::IdleTimeoutNotification(n)),
        })) => {
            assert_eq!(n.table_entry.len(), 1);
            assert_eq!(n.table_entry[0].idle_timeout_ns, 50_000_000);
        }
        other => panic!("expected an idle timeout notification, got {other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_millis(30));
    assert!(
        c.next_event(Duration::from_millis(300)).await.is_none(),
        "reported once"
    );
}

/// Item 21: one-shot action selector programming (spec 9.2.3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_action_sets() {
    let f = Fixture::new(Election::Spec, 1);
    let mut c = f.client(1).await;
    let nhop = |port: u8| p4::ActionProfileAction {
        action: Some(p4::Action {
            action_id: f.id("action", "ingress.set_nhop"),
            params: vec![
                p4::action::Param {
                    param_id: 1,
                    value: vec![2, 0, 0, 0, 0, port],
                },
                p4::action::Param {
                    param_id: 2,
                    value: vec![2, 0, 0, 0, 0, 0xfe],
                },
                p4::action::Param {
                    param_id: 3,
                    value: vec![port],
                },
            ],
        }),
        weight: i32::from(port),
        watch_kind: None,
    };
    let with_set = |ports: &[u8]| {
        let mut e = lpm_entry(&f, vec![10, 0, 0, 0], 8);
        e.action = Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::ActionProfileActionSet(
                p4::ActionProfileActionSet {
                    action_profile_actions: ports.iter().map(|&p| nhop(p)).collect(),
                    ..Default::default()
                },
            )),
        });
        e
    };
    let write = |t, e| vec![update(t, E::TableEntry(e))];
    c.write(
        write(p4::update::Type::Insert, with_set(&[2, 3])),
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    let read = c
        .read_one(E::TableEntry(p4::TableEntry::default()))
        .await
        .unwrap();
    let Some(E::TableEntry(t)) = &read[0].entity else {
        panic!()
    };
    assert_eq!(
        t.action,
        with_set(&[2, 3]).action,
        "reads back as the set written"
    );
    // The hidden members and group are not visible as such.
    let members = c
        .read_one(E::ActionProfileMember(p4::ActionProfileMember::default()))
        .await
        .unwrap();
    assert!(members.is_empty());
    // Modify to another set: the old group goes.
    c.write(
        write(p4::update::Type::Modify, with_set(&[4])),
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    assert_eq!(f.control.read_groups(None).unwrap().len(), 1);
    assert_eq!(f.control.read_members(None).unwrap().len(), 1);
    // A failed insert (the key exists) leaves nothing behind.
    let err = c
        .write(
            write(p4::update::Type::Insert, with_set(&[2])),
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap_err();
    assert_eq!(codes(err), vec![Some(Code::AlreadyExists)]);
    assert_eq!(f.control.read_members(None).unwrap().len(), 1);
    c.write(
        write(p4::update::Type::Delete, with_set(&[4])),
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    assert!(f.control.read_groups(None).unwrap().is_empty());
    assert!(f.control.read_members(None).unwrap().is_empty());
    // In one batch: insert with a set, then modify to another: only the second group remains.
    let mut batch = write(p4::update::Type::Insert, with_set(&[2, 3]));
    batch.extend(write(p4::update::Type::Modify, with_set(&[4])));
    c.write(batch, Atomicity::ContinueOnError).await.unwrap();
    assert_eq!(f.control.read_groups(None).unwrap().len(), 1);
    assert_eq!(f.control.read_members(None).unwrap().len(), 1);
    let mut batch = write(p4::update::Type::Delete, with_set(&[4]));
    batch.extend(write(p4::update::Type::Insert, with_set(&[2])));
    batch.extend(write(p4::update::Type::Delete, with_set(&[2])));
    c.write(batch, Atomicity::ContinueOnError).await.unwrap();
    assert!(f.control.read_groups(None).unwrap().is_empty());
    assert!(f.control.read_members(None).unwrap().is_empty());
    // Reserved ids are refused.
    let err = c
        .write(
            vec![update(
                p4::update::Type::Insert,
                E::ActionProfileMember(p4::ActionProfileMember {
                    action_profile_id: f.id("profile", "ingress.ecmp_selector"),
                    member_id: 0x8000_0001,
                    action: nhop(2).action,
                }),
            )],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap_err();
    assert_eq!(codes(err), vec![Some(Code::OutOfRange)]);
}
