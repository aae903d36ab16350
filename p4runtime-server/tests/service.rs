//! The P4Runtime service over real gRPC on loopback (`common::Fixture`): arbitration and
//! failover, write errors and rollback, the pipeline config, one-shot action sets. Each test names
//! the p4runtime.md items it covers.

mod common;
use common::*;

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
    // COMMIT takes no config; without one it needs a VERIFY_AND_SAVE first (NOT_FOUND, the
    // spec's SetForwardingPipelineConfig RPC: "if no saved config is found"), and keeps the
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
    assert_eq!(err.code(), Code::NotFound);
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
