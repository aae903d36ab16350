//! The P4Runtime service (`common::Fixture`): every entity kind written and read back. Each test
//! names the p4runtime.md items it covers.

mod common;
use common::*;

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
    // The command's BMv2 priority 10 (smallest wins) reads back as P4Runtime's 2^31 - 1 - 10.
    assert!(t.priority == i32::MAX - 10 && t.meter_config.is_none());
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
