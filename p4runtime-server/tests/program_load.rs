//! A switch that takes programs over P4Runtime: SetForwardingPipelineConfig with a P4Info and
//! p4c's BMv2 JSON loads the program with the P4Info's ids, and the controller's writes use
//! them. The JSON is the loader's test router (`pipeline/bmv2/tests/programs/router.json`); the
//! P4Info is the one the switch generates for it, renumbered and without the tables p4c hides,
//! as p4c's own would differ from ours.

mod common;

use std::sync::Mutex;

use common::*;
use p4runtime_server::p4info::{p4info, program_ids};
use p4runtime_server::proto::p4::config::v1 as p4i;
use p4runtime_server::server::Loader;

fn router_json() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pipeline/bmv2/tests/programs/router.json"
    );
    std::fs::read(path).unwrap()
}

/// The P4Info a compiler would give the router: every id moved, the hidden tables left out.
fn foreign_p4info() -> p4i::P4Info {
    let text = String::from_utf8(router_json()).unwrap();
    let program = bmv2::load(&text, "router").unwrap();
    let mut p = p4info(pipeline::program::Program::schema(&program));
    p.tables
        .retain(|t| !t.preamble.as_ref().unwrap().name.starts_with("tbl_"));
    for t in &mut p.tables {
        t.preamble.as_mut().unwrap().id += 0x100;
        for f in &mut t.match_fields {
            f.id += 10;
        }
        for r in &mut t.action_refs {
            r.id += 0x100;
        }
    }
    for a in &mut p.actions {
        a.preamble.as_mut().unwrap().id += 0x100;
        for q in &mut a.params {
            q.id += 20;
        }
    }
    for c in &mut p.counters {
        c.preamble.as_mut().unwrap().id += 0x100;
    }
    for c in &mut p.direct_counters {
        c.preamble.as_mut().unwrap().id += 0x100;
        c.direct_table_id += 0x100;
    }
    for t in &mut p.tables {
        t.direct_resource_ids.iter_mut().for_each(|d| *d += 0x100);
    }
    for r in &mut p.registers {
        r.preamble.as_mut().unwrap().id += 0x100;
    }
    p
}

/// A route to 10.0.3.0/24 in the test router's `ipv4_lpm`, with the ids of `p4info`.
fn route_entry(p4info: &p4i::P4Info) -> p4::TableEntry {
    let table = p4info
        .tables
        .iter()
        .find(|t| t.preamble.as_ref().unwrap().name == "ingress.ipv4_lpm")
        .unwrap();
    let action = p4info
        .actions
        .iter()
        .find(|a| a.preamble.as_ref().unwrap().name == "ingress.set_nhop")
        .unwrap();
    p4::TableEntry {
        table_id: table.preamble.as_ref().unwrap().id,
        r#match: vec![p4::FieldMatch {
            field_id: table.match_fields[0].id,
            field_match_type: Some(p4::field_match::FieldMatchType::Lpm(p4::field_match::Lpm {
                value: vec![10, 0, 3, 0],
                prefix_len: 24,
            })),
        }],
        action: Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::Action(p4::Action {
                action_id: action.preamble.as_ref().unwrap().id,
                params: action
                    .params
                    .iter()
                    .zip([vec![2, 0, 0, 0, 1, 3], vec![2, 0, 0, 0, 0, 0xfe], vec![3]])
                    .map(|(q, value)| p4::action::Param {
                        param_id: q.id,
                        value,
                    })
                    .collect(),
            })),
        }),
        ..Default::default()
    }
}

/// A switch with no program, as `pisa-switch --no-p4`, whose loader records what it installs.
fn no_program_switch() -> (Running, Arc<Mutex<Option<Arc<Pipeline>>>>) {
    let pipe = Pipeline::new(Arc::new(bmv2::Empty::new()), 1, Config::default());
    let installed: Arc<Mutex<Option<Arc<Pipeline>>>> = Arc::default();
    let slot = installed.clone();
    let io = DeviceIo {
        loader: Some(Loader {
            build: Box::new(|p4info, config| {
                let text = std::str::from_utf8(config).map_err(|e| e.to_string())?;
                let ids = program_ids(p4info);
                let p =
                    bmv2::load_with_ids(text, "router", Some(&ids)).map_err(|e| e.to_string())?;
                Ok(Pipeline::new(Arc::new(p), 1, Config::default()))
            }),
            install: Box::new(move |p| {
                *slot.lock().unwrap() = Some(p);
                Ok(())
            }),
            running: Vec::new(),
        }),
        ..DeviceIo::detached()
    };
    let service = Service::new(pipe.control.clone(), io, ServerConfig::default());
    (
        serve(service, "127.0.0.1:0".parse().unwrap()).unwrap(),
        installed,
    )
}

/// A program whose tables are all hidden has a P4Info that names no object, as the empty
/// program's does: its JSON still loads (behavioral-model's clone test program is one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_p4info_naming_nothing_still_loads_its_device_config() {
    use p4::set_forwarding_pipeline_config_request::Action as A;
    let (running, installed) = no_program_switch();
    let mut c = Client::connect(&running.addr.to_string(), 1, 1)
        .await
        .unwrap();
    let empty = p4i::P4Info {
        pkg_info: Some(p4i::PkgInfo {
            arch: "v1model".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    c.set_pipeline(A::VerifyAndCommit, empty, router_json(), None)
        .await
        .unwrap();
    assert!(installed.lock().unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bmv2_json_program_loads_with_the_ids_of_its_p4info() {
    use p4::set_forwarding_pipeline_config_request::Action as A;
    // The switch starts with no program, as `pisa-switch --no-p4`.
    let (running, installed) = no_program_switch();
    let mut c = Client::connect(&running.addr.to_string(), 1, 1)
        .await
        .unwrap();
    let p4info = foreign_p4info();
    let json = router_json();

    // A JSON that is not the P4Info's program, and a P4Info naming a table the JSON lacks.
    let err = c
        .set_pipeline(A::VerifyAndCommit, p4info.clone(), b"{}".to_vec(), None)
        .await
        .unwrap_err();
    assert!(format!("{err}").contains("the pipeline config"), "{err}");
    let mut wrong = p4info.clone();
    wrong.tables[0].preamble.as_mut().unwrap().name = "ingress.nothing".into();
    let err = c
        .set_pipeline(A::VerifyAndCommit, wrong, json.clone(), None)
        .await
        .unwrap_err();
    assert!(format!("{err}").contains("does not describe"), "{err}");
    assert!(installed.lock().unwrap().is_none());

    // VERIFY builds without running; VERIFY_AND_COMMIT runs it.
    c.set_pipeline(A::Verify, p4info.clone(), json.clone(), None)
        .await
        .unwrap();
    assert!(installed.lock().unwrap().is_none());
    c.set_pipeline(A::VerifyAndCommit, p4info.clone(), json.clone(), Some(7))
        .await
        .unwrap();
    let loaded = installed.lock().unwrap().clone().expect("the program runs");
    // Get returns what was set.
    let (got, cookie) = c.get_pipeline().await.unwrap();
    assert_eq!(got.as_ref(), Some(&p4info));
    assert_eq!(cookie, Some(7));

    // A route written with the P4Info's ids lands in the loaded program's table.
    let entry = route_entry(&p4info);
    c.write(
        vec![update(
            p4::update::Type::Insert,
            E::TableEntry(entry.clone()),
        )],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    let schema = loaded.control.schema();
    let lpm = schema.tables[schema.table_by_name("ipv4_lpm").unwrap()].id;
    assert_eq!(lpm, entry.table_id);
    let entries = loaded
        .control
        .read_entries(Some(lpm), false, false)
        .unwrap();
    assert_eq!(entries.len(), 1);
    // The same entry read back carries the P4Info's ids.
    let read = c
        .read_one(E::TableEntry(p4::TableEntry {
            table_id: entry.table_id,
            ..Default::default()
        }))
        .await
        .unwrap();
    assert_eq!(read.len(), 1);
    // The switch's own ids for the table (derived from names) are not the P4Info's: a write
    // with them is refused.
    let own = p4info_ids_of_the_json();
    let mut stale = entry;
    stale.table_id = own;
    let err = c
        .write(
            vec![update(p4::update::Type::Insert, E::TableEntry(stale))],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap_err();
    assert!(
        format!("{err}").contains("NOT_FOUND") || format!("{err:?}").contains("NotFound"),
        "{err:?}"
    );
}

/// VERIFY_AND_SAVE of another program, then writes, then COMMIT (PI's demo controller swaps
/// programs so): the writes go to the saved program (spec: after VERIFY_AND_SAVE "any subsequent
/// Read / Write requests must refer to fields in the new config") and it runs with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_after_verify_and_save_go_to_the_saved_program_and_run_at_commit() {
    use p4::set_forwarding_pipeline_config_request::Action as A;
    let (running, installed) = no_program_switch();
    let mut c = Client::connect(&running.addr.to_string(), 1, 1)
        .await
        .unwrap();
    let p4info = foreign_p4info();
    c.set_pipeline(A::VerifyAndSave, p4info.clone(), router_json(), Some(3))
        .await
        .unwrap();
    assert!(installed.lock().unwrap().is_none(), "SAVE runs nothing");
    let entry = route_entry(&p4info);
    c.write(
        vec![update(
            p4::update::Type::Insert,
            E::TableEntry(entry.clone()),
        )],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    let read = c
        .read_one(E::TableEntry(p4::TableEntry {
            table_id: entry.table_id,
            ..Default::default()
        }))
        .await
        .unwrap();
    assert_eq!(read.len(), 1, "the saved program's table reads back");
    c.commit().await.unwrap();
    let loaded = installed.lock().unwrap().clone().expect("COMMIT runs it");
    let entries = loaded
        .control
        .read_entries(Some(entry.table_id), false, false)
        .unwrap();
    assert_eq!(entries.len(), 1, "the write made before COMMIT stands");
    let (got, cookie) = c.get_pipeline().await.unwrap();
    assert_eq!((got.as_ref(), cookie), (Some(&p4info), Some(3)));
}

fn p4info_ids_of_the_json() -> u32 {
    let text = String::from_utf8(router_json()).unwrap();
    let program = bmv2::load(&text, "router").unwrap();
    let s = pipeline::program::Program::schema(&program);
    s.tables[s.table_by_name("ipv4_lpm").unwrap()].id
}

fn vsets_json() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pipeline/bmv2/tests/programs/vsets.json"
    );
    std::fs::read(path).unwrap()
}

/// A value set member of the P4Info's `pv2` (f1: 3 bits, f2: 13) with its fields' ids.
fn member(fields: &[(u32, Vec<u8>)]) -> p4::ValueSetMember {
    p4::ValueSetMember {
        r#match: fields
            .iter()
            .map(|(id, value)| p4::FieldMatch {
                field_id: *id,
                field_match_type: Some(p4::field_match::FieldMatchType::Exact(
                    p4::field_match::Exact {
                        value: value.clone(),
                    },
                )),
            })
            .collect(),
    }
}

/// Parser value sets over P4Runtime: MODIFY replaces the members (fields as the P4Info gives
/// them, concatenated as the parser matches them), Read returns them, and each wrong write
/// gets the code the specification names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn value_sets_are_written_with_modify_and_read_back_with_the_p4infos_fields() {
    use p4::set_forwarding_pipeline_config_request::Action as A;
    use p4::update::Type as T;
    let (running, installed) = no_program_switch();
    let mut c = Client::connect(&running.addr.to_string(), 1, 1)
        .await
        .unwrap();
    // A P4Info as p4c writes one for `value_set<pv2_t>(2) pv2` where pv2_t is { bit<3> f1;
    // bit<13> f2; }: its own ids, two fields, a size.
    let text = String::from_utf8(vsets_json()).unwrap();
    let program = bmv2::load(&text, "vsets").unwrap();
    let mut p4info = p4info(pipeline::program::Program::schema(&program));
    assert_eq!(p4info.value_sets.len(), 3);
    for v in &mut p4info.value_sets {
        v.preamble.as_mut().unwrap().id += 0x100;
        v.size = 4;
    }
    let pv2 = &mut p4info.value_sets[1];
    assert_eq!(pv2.preamble.as_ref().unwrap().name, "pv2");
    pv2.size = 2;
    let field = |id: u32, name: &str, bitwidth: i32| p4i::MatchField {
        id,
        name: name.into(),
        bitwidth,
        r#match: Some(p4i::match_field::Match::MatchType(
            p4i::match_field::MatchType::Exact as i32,
        )),
        ..Default::default()
    };
    pv2.r#match = vec![field(1, "f1", 3), field(2, "f2", 13)];
    let pv2_id = pv2.preamble.as_ref().unwrap().id;
    c.set_pipeline(A::VerifyAndCommit, p4info.clone(), vsets_json(), None)
        .await
        .unwrap();
    let loaded = installed.lock().unwrap().clone().expect("the program runs");
    let set = |m: Vec<p4::ValueSetMember>| p4::ValueSetEntry {
        value_set_id: pv2_id,
        members: m,
    };
    let good = member(&[(1, vec![5]), (2, vec![0x01, 0x23])]);
    c.write(
        vec![update(T::Modify, E::ValueSetEntry(set(vec![good.clone()])))],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    let schema = loaded.control.schema();
    let ix = schema.value_set_by_name("pv2").unwrap();
    assert_eq!(
        loaded.control.externs().value_sets[ix].members(),
        [(5 << 13) | 0x123]
    );
    let read = c
        .read_one(E::ValueSetEntry(p4::ValueSetEntry {
            value_set_id: pv2_id,
            ..Default::default()
        }))
        .await
        .unwrap();
    assert_eq!(
        read.iter().map(|e| e.entity.clone()).collect::<Vec<_>>(),
        [Some(E::ValueSetEntry(set(vec![good.clone()])))]
    );
    // Every value set at once.
    let all = c
        .read_one(E::ValueSetEntry(p4::ValueSetEntry::default()))
        .await
        .unwrap();
    assert_eq!(all.len(), 3);

    // INSERT and DELETE are not how a value set is written; an unknown set; more members than
    // its size; a missing field; a value too wide for its field; a ternary member; a member
    // given twice.
    let mut ternary = good.clone();
    ternary.r#match[0].field_match_type = Some(p4::field_match::FieldMatchType::Ternary(
        p4::field_match::Ternary {
            value: vec![5],
            mask: vec![7],
        },
    ));
    let other = member(&[(1, vec![1]), (2, vec![1])]);
    let third = member(&[(1, vec![2]), (2, vec![2])]);
    let mut unknown = set(vec![]);
    unknown.value_set_id = 0x0300_0001;
    let bad = vec![
        update(T::Insert, E::ValueSetEntry(set(vec![good.clone()]))),
        update(T::Delete, E::ValueSetEntry(set(vec![]))),
        update(T::Modify, E::ValueSetEntry(unknown)),
        update(
            T::Modify,
            E::ValueSetEntry(set(vec![good.clone(), other, third])),
        ),
        update(
            T::Modify,
            E::ValueSetEntry(set(vec![member(&[(1, vec![5])])])),
        ),
        update(
            T::Modify,
            E::ValueSetEntry(set(vec![member(&[(1, vec![8]), (2, vec![1])])])),
        ),
        update(T::Modify, E::ValueSetEntry(set(vec![ternary]))),
        update(
            T::Modify,
            E::ValueSetEntry(set(vec![good.clone(), good.clone()])),
        ),
    ];
    let err = c.write(bad, Atomicity::ContinueOnError).await.unwrap_err();
    assert_eq!(
        codes(err),
        [
            Some(Code::InvalidArgument),
            Some(Code::InvalidArgument),
            Some(Code::NotFound),
            Some(Code::ResourceExhausted),
            Some(Code::InvalidArgument),
            Some(Code::OutOfRange),
            Some(Code::Unimplemented),
            Some(Code::AlreadyExists),
        ]
    );
    // None of them changed the set; an empty MODIFY empties it.
    assert_eq!(
        loaded.control.externs().value_sets[ix].members(),
        [(5 << 13) | 0x123]
    );
    c.write(
        vec![update(T::Modify, E::ValueSetEntry(set(vec![])))],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    assert!(loaded.control.externs().value_sets[ix].members().is_empty());
}
