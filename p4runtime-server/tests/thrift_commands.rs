//! `simple_switch_CLI`'s command language run in process (`pisa-switch PROGRAM.json --entries
//! FILE`): a `commands.txt` written for BMv2, with handles that refer to what earlier lines
//! created, checked against what the control plane P4Runtime reads; the state it leaves is the
//! Thrift server's; and lines that are wrong stop with their line number and why.

mod common;

use std::io::BufReader;
use std::net::TcpStream;
use std::sync::Mutex;

use common::*;
use p4runtime_server::server::Loader;
use p4runtime_server::thrift::value::{Message, MessageType, Reader, Struct, Value, Writer};
use p4runtime_server::thrift::{Options, RuntimeApi, Said};
use pipeline::commands::p4runtime_priority;
use pipeline::control::TableAction;
use pipeline::externs::{CounterData, MeterConfig};
use pipeline::table::FieldMatch;

/// The loader's test router with what it lacks for these commands, as p4c writes them: an
/// indexed meter array, a direct meter on the ACL, and an ACL without const entries (written
/// at run time).
fn router_json() -> String {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pipeline/bmv2/tests/programs/router.json"
    ))
    .unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["meter_arrays"] = serde_json::json!([
        {"name": "ingress.police", "id": 0, "is_direct": false, "size": 4, "rate_count": 2,
         "type": "packets"},
        {"name": "ingress.acl_meter", "id": 1, "is_direct": true, "binding": "ingress.acl",
         "rate_count": 2, "type": "bytes"}
    ]);
    let tables = doc["pipelines"][0]["tables"].as_array_mut().unwrap();
    let acl = tables
        .iter_mut()
        .find(|t| t["name"] == "ingress.acl")
        .unwrap()
        .as_object_mut()
        .unwrap();
    acl.remove("entries");
    acl.insert("direct_meters".into(), "ingress.acl_meter".into());
    doc.to_string()
}

/// The admin command lines the runtime API ran (queue and port settings).
type AdminLog = Arc<Mutex<Vec<String>>>;

fn api_for(control: Arc<Control>, io: DeviceIo) -> (Service, RuntimeApi, AdminLog) {
    let service = Service::new(control, io, ServerConfig::default());
    let log: AdminLog = Arc::default();
    let seen = log.clone();
    let opts = Options {
        device_id: 0,
        ports: vec![(1, "veth1".into()), (2, "veth2".into())],
        admin: Some(Arc::new(move |line: &str| {
            if line.starts_with("set_") {
                seen.lock().unwrap().push(line.to_string());
                Ok(String::new())
            } else {
                Err(format!("unknown command {line}"))
            }
        })),
    };
    (service.clone(), RuntimeApi::new(service, opts), log)
}

/// A switch running the router from its JSON, as `pisa-switch router.json` starts it.
fn router() -> (Service, RuntimeApi, AdminLog) {
    let json = router_json();
    let program = bmv2::load(&json, "router").unwrap();
    let pipe = Pipeline::new(Arc::new(program), 1, Config::default());
    let io = DeviceIo {
        loader: Some(Loader {
            build: Box::new(|_, _| Err("not in this test".into())),
            install: Box::new(|_| Err("not in this test".into())),
            running: json.into_bytes(),
        }),
        ..DeviceIo::detached()
    };
    api_for(pipe.control.clone(), io)
}

fn table_id(control: &Control, name: &str) -> u32 {
    let s = control.schema();
    s.tables[s.table_by_name(name).unwrap()].id
}

fn clone_ports(control: &Control, session: u32) -> Vec<(u16, u16)> {
    let s = control.read_clone_sessions(Some(session)).unwrap();
    s[0].1.replicas.iter().map(|r| (r.port, r.rid)).collect()
}

const ROUTES: &str = "\
# A commands.txt as simple_switch_CLI takes it: handles start at 0 in a fresh switch.
table_add ipv4_lpm set_nhop 10.0.1.0/24 => 02:00:00:00:01:01 02:00:00:00:00:fe 1
table_add ipv4_lpm set_nhop 10.0.2.0/24 => 02:00:00:00:02:01 02:00:00:00:00:fe 2
table_add ingress.ipv4_lpm set_nhop 10.0.3.0/24 => 02:00:00:00:03:01 02:00:00:00:00:fe 3
table_delete ipv4_lpm 1
table_modify ipv4_lpm ingress.drop 2
table_modify ipv4_lpm set_nhop 0 => 02:00:00:00:01:02 02:00:00:00:00:fe 4
counter_write lpm_hits 0 1 100
table_set_default ipv4_lpm mcast 1

# The ACL is ternary: the last word is BMv2's priority, the smallest wins.
table_add acl set_tag 10.0.0.0&&&0xff000000 0&&&0 => 7 20
table_add acl clone_it 10.0.1.0&&&0xffffff00 6&&&0xff => 9 10
meter_set_rates acl_meter 1 0.5:1000 1:2000
meter_array_set_rates police 0.01:10 0.02:20
meter_set_rates police 2 1:5 2:10
register_write last_len 3 1500
counter_write port_ctr 5 2 3000

# Multicast group 1 of two nodes, in the order they are associated.
mc_mgrp_create 1
mc_node_create 0 1 2
mc_node_create 5 3
mc_node_associate 1 1
mc_node_associate 1 0
mirroring_add 4 2
mirroring_add_mc 5 1
mc_node_update 1 4
set_queue_depth 64 2
set_queue_rate 1000
table_dump ipv4_lpm
set_port_rate 1000000000 1
";

#[test]
fn a_bmv2_commands_file_means_what_it_means_to_bmv2() {
    let (service, api, admin) = router();
    let n = api.run_commands(ROUTES, "commands.txt").unwrap();
    assert_eq!(n, 27, "every command counts, the read-only one too");
    let control = service.control();

    // Routes: three added (handles 0, 1, 2), the second deleted by its handle, the third
    // modified to drop, the first to another next hop.
    let lpm = table_id(&control, "ingress.ipv4_lpm");
    let entries = control.read_entries(Some(lpm), false, false).unwrap();
    assert_eq!(entries.len(), 2);
    let action_of = |net: u128| {
        let e = entries
            .iter()
            .find(|e| {
                e.matches[0].1
                    == FieldMatch::Lpm {
                        value: net,
                        prefix_len: 24,
                    }
            })
            .unwrap_or_else(|| panic!("no route {net:#x}"));
        match &e.action {
            Some(TableAction::Action(a)) => (
                control.schema().actions[control.schema().action_by_id(a.action_id).unwrap()].name,
                a.params.iter().map(|p| p.1).collect::<Vec<_>>(),
            ),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        action_of(0x0a000100),
        ("ingress.set_nhop", vec![0x020000000102, 0x0200000000fe, 4])
    );
    assert_eq!(action_of(0x0a000300), ("ingress.drop", vec![]));
    let first = control.read_entry_by_id(lpm, 0, true, false).unwrap();
    assert_eq!(
        first.counter_data,
        Some(CounterData {
            bytes: 100,
            packets: 1
        }),
        "the direct counter of handle 0"
    );
    assert!(control.read_entry_by_id(lpm, 1, false, false).is_err());
    let d = control.read_default(lpm).unwrap();
    let Some(TableAction::Action(d)) = d.action else {
        panic!("the default is not an action")
    };
    assert_eq!(
        d.action_id,
        control.schema().actions[control.schema().action_by_name("ingress.mcast").unwrap()].id
    );
    assert_eq!(d.params.iter().map(|p| p.1).collect::<Vec<_>>(), vec![1]);

    // The ACL's priorities in BMv2's order: 10 beats 20, so it has the larger P4Runtime one.
    let acl = table_id(&control, "ingress.acl");
    let mut acls = control.read_entries(Some(acl), false, true).unwrap();
    acls.sort_by_key(|e| std::cmp::Reverse(e.priority));
    let prios: Vec<u32> = acls.iter().map(|e| e.priority).collect();
    assert_eq!(
        prios,
        vec![
            p4runtime_priority(10).unwrap(),
            p4runtime_priority(20).unwrap()
        ]
    );
    let keys: Vec<&FieldMatch> = acls[0].matches.iter().map(|m| &m.1).collect();
    assert_eq!(
        keys,
        vec![
            &FieldMatch::Ternary {
                value: 0x0a000100,
                mask: 0xffffff00
            },
            &FieldMatch::Ternary {
                value: 6,
                mask: 0xff
            }
        ]
    );
    assert_eq!(acls[1].matches.len(), 1, "a zero mask matches anything");
    // The direct meter of ACL handle 1 (the second ACL entry), in units per second.
    let rates = MeterConfig {
        cir: 500_000,
        cburst: 1000,
        pir: 1_000_000,
        pburst: 2000,
    };
    assert_eq!(acls[0].meter_config, Some(rates));
    assert_eq!(acls[1].meter_config, None);

    // Indexed meters: the whole array, then cell 2.
    let police = control.schema().meter_by_name("ingress.police").unwrap().id;
    let cell = |i| control.read_meters(Some(police), Some(i)).unwrap()[0].value;
    let all = MeterConfig {
        cir: 10_000,
        cburst: 10,
        pir: 20_000,
        pburst: 20,
    };
    assert_eq!(cell(0), Some(all));
    assert_eq!(cell(3), Some(all));
    assert_eq!(
        cell(2),
        Some(MeterConfig {
            cir: 1_000_000,
            cburst: 5,
            pir: 2_000_000,
            pburst: 10
        })
    );

    // Register and counter cells.
    let reg = control
        .schema()
        .register_by_name("egress.last_len")
        .unwrap()
        .id;
    assert_eq!(
        control.read_registers(Some(reg), Some(3)).unwrap()[0].value,
        1500
    );
    let ctr = control
        .schema()
        .counter_by_name("egress.port_ctr")
        .unwrap()
        .id;
    assert_eq!(
        control.read_counters(Some(ctr), Some(5)).unwrap()[0].value,
        CounterData {
            bytes: 3000,
            packets: 2
        }
    );

    // Group 1: node 1 (rid 5) then node 0 (rid 0), as associated; node 1 moved to port 4, and
    // the mirroring session to the group followed it.
    assert_eq!(copies(&control, 1), vec![(4, 5), (1, 0), (2, 0)]);
    assert_eq!(clone_ports(&control, 4), vec![(2, 0)]);
    assert_eq!(clone_ports(&control, 5), vec![(4, 5), (1, 0), (2, 0)]);

    // Queue settings went to the switch's admin commands, and so did its own port setting.
    assert_eq!(
        *admin.lock().unwrap(),
        vec![
            "set_queue_depth 64 2",
            "set_queue_rate 1000",
            "set_port_rate 1000000000 1"
        ]
    );

    // One line at a time, the handles the CLI prints.
    assert_eq!(
        api.run_command("table_add acl set_tag 10.0.0.0&&&0xff000000 0&&&0 => 1 30"),
        Ok(Said::Done(Some(
            "Entry has been added with handle 2".into()
        )))
    );
    assert_eq!(
        api.run_command("mc_node_create 9 7"),
        Ok(Said::Done(Some("node was created with handle 2".into())))
    );
    assert_eq!(api.run_command("  # nothing"), Ok(Said::Nothing));
    assert!(matches!(
        api.run_command("register_read last_len 3"),
        Ok(Said::Skipped(_))
    ));
}

/// A `simple_pre_lag` call over the Thrift server, as simple_switch_CLI sends it: the
/// reply's exception code, if any.
fn pre_call(addr: std::net::SocketAddr, method: &str, args: &[i32]) -> Option<i64> {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut r = Reader::new(BufReader::new(s.try_clone().unwrap()));
    let mut body = Struct::new().with(1, Value::I32(0));
    for (i, a) in args.iter().enumerate() {
        body = body.with(i as i16 + 2, Value::I32(*a));
    }
    let mut w = Writer::default();
    w.message(&Message {
        name: format!("simple_pre_lag:{method}"),
        kind: MessageType::Call,
        seq: 0,
    });
    w.strukt(&body);
    w.flush_to(&mut s).unwrap();
    let m = r.message().unwrap();
    assert_eq!(m.kind, MessageType::Reply);
    let reply = r.strukt().unwrap();
    reply.strukt(1).ok().map(|e| e.int(1).unwrap())
}

#[test]
fn the_thrift_server_continues_from_the_file_s_state() {
    let (service, api, _) = router();
    api.run_commands(
        "mc_mgrp_create 3\nmc_node_create 1 1\nmc_node_create 2 2\nmc_node_associate 3 0\n",
        "commands.txt",
    )
    .unwrap();
    let t = api.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    // The CLI, connected later, associates node 1, which the file created, and removes node
    // 0 from the group.
    assert_eq!(
        pre_call(t.local_addr(), "bm_mc_node_associate", &[3, 1]),
        None
    );
    assert_eq!(
        pre_call(t.local_addr(), "bm_mc_node_dissociate", &[3, 0]),
        None
    );
    assert_eq!(copies(&service.control(), 3), vec![(2, 2)]);
    // A node the file did not create is INVALID_L1_HANDLE (4).
    assert_eq!(
        pre_call(t.local_addr(), "bm_mc_node_associate", &[3, 7]),
        Some(4)
    );
    t.stop();
}

#[test]
fn a_wrong_line_stops_the_file_with_its_number_and_why() {
    let (service, api, _) = router();
    let file = "\
table_add ipv4_lpm set_nhop 10.0.1.0/24 => 02:00:00:00:01:01 02:00:00:00:00:fe 1
table_delete ipv4_lpm 0

table_delete ipv4_lpm 0
table_add ipv4_lpm set_nhop 10.0.2.0/24 => 02:00:00:00:02:01 02:00:00:00:00:fe 2
";
    // The deleted handle is refused on line 4; line 5 is not run.
    let e = api.run_commands(file, "commands.txt").unwrap_err();
    assert_eq!(
        e,
        "commands.txt:4: table_delete: not found: ingress.ipv4_lpm: no entry with handle 0 \
         (INVALID_HANDLE)"
    );
    let lpm = table_id(&service.control(), "ingress.ipv4_lpm");
    assert!(
        service
            .control()
            .read_entries(Some(lpm), false, false)
            .unwrap()
            .is_empty()
    );

    let err = |line: &str| api.run_command(line).unwrap_err();
    assert_eq!(
        err("table_add ipv4_lmp drop 10.0.0.0/8 =>"),
        "table_add: Invalid table name (ipv4_lmp)"
    );
    assert_eq!(
        err("table_delete ipv4_lpm 7"),
        "table_delete: not found: ingress.ipv4_lpm: no entry with handle 7 (INVALID_HANDLE)"
    );
    assert_eq!(
        err("table_delete ipv4_lpm"),
        "table_delete: Wrong number of args, expected 2 but got 1 \
         (table_delete <table> <entry handle>)"
    );
    assert_eq!(
        err("table_delete ipv4_lpm first"),
        "table_delete: Bad format for entry handle (first), expected an integer"
    );
    assert_eq!(
        err("table_add ipv4_lpm set_nhop 10.0.9.0/24 => 02:00:00:00:09:01 1"),
        "table_add: Action ingress.set_nhop needs 3 parameters, got 2"
    );
    assert_eq!(
        err("table_add ipv4_lpm set_nhop 10.0.9.0/24 => 02:00:00:00:09:01 02:00:00:00:00:fe 512"),
        "table_add: ingress.set_nhop's port: 512 does not fit 9 bits"
    );
    assert_eq!(
        err("table_add ipv4_lpm set_tag 10.0.9.0/24 => 1"),
        "table_add: ingress.ipv4_lpm has no action set_tag"
    );
    assert!(
        err("table_add ipv4_lpm drop 10.0.9.0 =>")
            .ends_with(": invalid LPM (<value>/<prefix length>) value 10.0.9.0")
    );
    // Without its priority, an ACL entry's last parameter is taken for one, as the CLI takes it.
    assert_eq!(
        err("table_add acl set_tag 10.0.0.0&&&0xff000000 0&&&0 => 7"),
        "table_add: Action ingress.set_tag needs 1 parameters, got 0"
    );
    assert_eq!(
        err("table_add acl set_tag 10.0.0.0&&&0xff000000 0&&&0 => 7 first"),
        "table_add: ingress.acl has ternary or range fields: its entries end with a priority, \
         not 'first'"
    );
    assert_eq!(
        err("table_add ipv4_lpm drop 10.0.9.0/24"),
        "table_add: missing => (table_add <table> <action> <key...> => <parameters...> \
         [priority])"
    );
    assert_eq!(
        err("register_write last_len 16 1"),
        "register_write: egress.last_len[16]: 16 cells (INVALID_INDEX)"
    );
    assert_eq!(
        err("meter_set_rates police 0 1:5"),
        "meter_set_rates: Invalid number of rates, expected 2 but got 1 (<rate>:<burst> \
         committed, then peak)"
    );
    assert_eq!(
        err("mc_node_associate 1 0"),
        "mc_node_associate: group 1 was not created by this runtime API (INVALID_MGRP_HANDLE)"
    );
    api.run_command("mc_mgrp_create 1").unwrap();
    assert_eq!(
        err("mc_node_associate 1 0"),
        "mc_node_associate: no node 0 (INVALID_L1_HANDLE)"
    );
    assert_eq!(
        err("mc_node_create 0 1 1"),
        "mc_node_create: Found duplicate port number '1'"
    );
    assert!(err("mc_node_create 0 1 | 1").contains("LAGs are not supported"));
    assert!(err("mirroring_add 0 1").contains("SESSION_NOT_FOUND"));
    // The switch's own language is not BMv2's: its verbs that the CLI lacks say what to write.
    assert_eq!(
        err("mc_group_create 1 1 2"),
        "mc_group_create: the switch's own command (its language with a hard-wired \
         --program), not simple_switch_CLI's; with a BMv2 program write mc_mgrp_create, \
         mc_node_create and mc_node_associate"
    );
    assert_eq!(
        err("no_such_verb 1"),
        "no_such_verb: unknown command no_such_verb 1"
    );
    assert_eq!(
        err("shell ls"),
        "shell: shell commands are not run from a command file"
    );
    assert!(err("port_add veth9 9").contains("(ERROR)"));
}

/// Action profiles on the hard-wired `basic` (the runtime API describes it as a JSON program):
/// members and groups get the smallest free handles, indirect entries use them.
#[test]
fn action_profile_members_and_groups_by_handle() {
    let pipe = Pipeline::new(programs::by_name("basic").unwrap(), 1, Config::default());
    let (service, api, _) = api_for(pipe.control.clone(), DeviceIo::detached());
    let n = api
        .run_commands(
            "\
act_prof_create_member ecmp_selector set_nhop 02:00:00:00:00:02 02:00:00:00:00:01 2
act_prof_create_member ecmp_selector set_nhop 02:00:00:00:00:03 02:00:00:00:00:01 3
act_prof_create_member ecmp_selector set_nhop 02:00:00:00:00:04 02:00:00:00:00:01 4
act_prof_create_group ecmp_selector
act_prof_add_member_to_group ecmp_selector 1 0
act_prof_add_member_to_group ecmp_selector 2 0
act_prof_delete_member ecmp_selector 0
act_prof_modify_member ecmp_selector set_nhop 2 => 02:00:00:00:00:05 02:00:00:00:00:01 5
table_indirect_add_with_group ipv4_lpm 10.1.0.0/16 => 0
act_prof_create_member ecmp_selector set_nhop 02:00:00:00:00:06 02:00:00:00:00:01 6
table_indirect_add ipv4_lpm 10.2.0.0/16 => 0
",
            "commands.txt",
        )
        .unwrap();
    assert_eq!(n, 11);
    let control = service.control();
    let selector = control
        .schema()
        .profile_by_name("ingress.ecmp_selector")
        .unwrap()
        .id;
    // Member 0 was deleted, so the fourth member took handle 0 again.
    let members = control.read_members(Some(selector)).unwrap();
    let mut ports: Vec<(u32, u128)> = members
        .iter()
        .map(|(_, m, spec)| (*m, spec.params.last().unwrap().1))
        .collect();
    ports.sort_unstable();
    assert_eq!(ports, vec![(0, 6), (1, 3), (2, 5)]);
    let groups = control.read_groups(Some(selector)).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].1, 0);
    let mut in_group = groups[0].2.clone();
    in_group.sort_unstable();
    assert_eq!(in_group, vec![(1, 1), (2, 1)]);
    let lpm = table_id(&control, "ingress.ipv4_lpm");
    let entries = control.read_entries(Some(lpm), false, false).unwrap();
    let actions: Vec<_> = entries.iter().map(|e| e.action.clone().unwrap()).collect();
    assert!(actions.contains(&TableAction::Group(0)));
    assert!(actions.contains(&TableAction::Member(0)));

    let err = |line: &str| api.run_command(line).unwrap_err();
    // The deprecated table_indirect_* verbs name the table for its profile, which two tables
    // share here.
    assert_eq!(
        err("table_indirect_create_member ipv4_lpm set_nhop 1 2 3"),
        "table_indirect_create_member: Legacy command does not work with shared action \
         profiles: use act_prof_create_member ingress.ecmp_selector"
    );
    assert_eq!(
        err("act_prof_add_member_to_group ecmp_selector 1 0"),
        "act_prof_add_member_to_group: member 1 is in group 0 (MBR_ALREADY_IN_GRP)"
    );
    assert_eq!(
        err("table_indirect_add acl 1 =>"),
        "table_indirect_add: Cannot run this command on non-indirect table ingress.acl"
    );
}

/// A switch running the loader's value-set test program from its JSON.
fn vsets() -> (Service, RuntimeApi) {
    let json = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pipeline/bmv2/tests/programs/vsets.json"
    ))
    .unwrap();
    let program = bmv2::load(&json, "vsets").unwrap();
    let pipe = Pipeline::new(Arc::new(program), 1, Config::default());
    let (service, api, _) = api_for(pipe.control.clone(), DeviceIo::detached());
    (service, api)
}

/// `bm_parse_vset_get` over the Thrift server, as simple_switch_CLI's `pvs_get` sends it: the
/// members as the bytes it prints.
fn pvs_get(addr: std::net::SocketAddr, name: &str) -> Vec<Vec<u8>> {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut r = Reader::new(BufReader::new(s.try_clone().unwrap()));
    let body = Struct::new()
        .with(1, Value::I32(0))
        .with(2, Value::Bytes(name.as_bytes().to_vec()));
    let mut w = Writer::default();
    w.message(&Message {
        name: "standard:bm_parse_vset_get".into(),
        kind: MessageType::Call,
        seq: 0,
    });
    w.strukt(&body);
    w.flush_to(&mut s).unwrap();
    assert_eq!(r.message().unwrap().kind, MessageType::Reply);
    match r.strukt().unwrap().get(0) {
        Some(Value::List(_, items)) => items
            .iter()
            .map(|v| match v {
                Value::Bytes(b) => b.clone(),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn parser_value_sets_take_pvs_commands_as_bmv2_does() {
    let (service, api) = vsets();
    api.run_commands(
        "pvs_add pv1 0x9000\npvs_add pv2 0xa123\npvs_add pv2 0x0001\npvs_remove pv2 0xa123\n\
         pvs_add pv3 0x4200\npvs_clear pv3\npvs_get pv1\nshow_pvs\n",
        "commands.txt",
    )
    .unwrap();
    let control = service.control();
    let members = |name: &str| {
        let s = control.schema();
        control.externs().value_sets[s.value_set_by_name(name).unwrap()].members()
    };
    assert_eq!(members("pv1"), [0x9000]);
    assert_eq!(members("pv2"), [0x0001]);
    assert!(members("pv3").is_empty());
    // A value wider than the set, and a set the program lacks, stop with BMv2's words.
    let e = api.run_command("pvs_add pv1 0x10000").unwrap_err();
    assert!(e.contains("does not fit 16 bits"), "{e}");
    let e = api.run_command("pvs_add nowhere 1").unwrap_err();
    assert!(e.contains("Invalid parser value set name (nowhere)"), "{e}");
    // The Thrift server reads them back in the set's width.
    let t = api.serve("127.0.0.1:0".parse().unwrap()).unwrap();
    assert_eq!(pvs_get(t.local_addr(), "pv1"), [vec![0x90, 0x00]]);
    t.stop();
}
