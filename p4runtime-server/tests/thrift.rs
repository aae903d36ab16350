//! BMv2's Thrift runtime API as `simple_switch_CLI` calls it, over a real TCP connection: the
//! calls' arguments and replies by field id as BMv2's IDL numbers them, what they write seen
//! through the control plane P4Runtime reads, BMv2's handles and priorities, its error codes,
//! and input that must not hurt the server.

mod common;

use std::io::{BufReader, Write};
use std::net::TcpStream;

use common::*;
use p4runtime_server::server::Loader;
use p4runtime_server::thrift::value::{Message, MessageType, Reader, Struct, TType, Value, Writer};
use p4runtime_server::thrift::{self, Options, ThriftServer};
use pipeline::control::TableAction;
use pipeline::table::FieldMatch;

struct Cli {
    r: Reader<BufReader<TcpStream>>,
    s: TcpStream,
}

/// A reply: Ok(result struct) or Err(the TApplicationException's message).
type Answer = Result<Struct, String>;

impl Cli {
    fn connect(t: &ThriftServer) -> Cli {
        let s = TcpStream::connect(t.local_addr()).unwrap();
        Cli {
            r: Reader::new(BufReader::new(s.try_clone().unwrap())),
            s,
        }
    }

    fn call(&mut self, service: &str, method: &str, args: Struct) -> Answer {
        let mut w = Writer::default();
        w.message(&Message {
            name: format!("{service}:{method}"),
            kind: MessageType::Call,
            seq: 0,
        });
        w.strukt(&args);
        w.flush_to(&mut self.s).unwrap();
        let m = self.r.message().unwrap();
        let body = self.r.strukt().unwrap();
        match m.kind {
            MessageType::Reply => Ok(body),
            _ => Err(body.string(1).unwrap()),
        }
    }

    /// A `simple_pre_lag` call with cxt_id 0 and `args` from field 2.
    fn pre(&mut self, method: &str, args: Vec<Value>) -> Answer {
        self.call("simple_pre_lag", method, numbered(args))
    }

    /// A `standard` call on `basic`'s action selector, `args` after its name.
    fn prof(&mut self, method: &str, args: Vec<Value>) -> Answer {
        let mut v = vec![s("ingress.ecmp_selector")];
        v.extend(args);
        self.std(method, v)
    }

    /// A `standard` call with cxt_id 0 and `args` from field 2.
    fn std(&mut self, method: &str, args: Vec<Value>) -> Answer {
        self.call("standard", method, numbered(args))
    }
}

/// Arguments as a call takes them: cxt_id 0 in field 1, `args` from field 2.
fn numbered(args: Vec<Value>) -> Struct {
    let mut s = Struct::new().with(1, Value::I32(0));
    for (i, a) in args.into_iter().enumerate() {
        s = s.with(i as i16 + 2, a);
    }
    s
}

/// The success value of a reply.
fn ok(a: Answer) -> Option<Value> {
    let s = a.expect("a reply");
    assert!(s.get(1).is_none(), "an exception: {s:?}");
    s.get(0).cloned()
}

/// The error code of a reply's declared exception.
fn code(a: Answer) -> i64 {
    a.expect("a reply")
        .strukt(1)
        .expect("an exception")
        .int(1)
        .unwrap()
}

fn s(v: &str) -> Value {
    Value::str(v)
}

fn b(v: &[u8]) -> Value {
    Value::Bytes(v.to_vec())
}

fn data(v: &[&[u8]]) -> Value {
    Value::List(TType::String, v.iter().map(|x| b(x)).collect())
}

fn lpm(key: &[u8], len: i32) -> Value {
    Value::structs([Struct::new().with(1, Value::I32(1)).with(
        3,
        Value::Struct(Struct::new().with(1, b(key)).with(2, Value::I32(len))),
    )])
}

fn options(priority: i32) -> Value {
    Value::Struct(Struct::new().with(1, Value::I32(priority)))
}

fn router_json() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pipeline/bmv2/tests/programs/router.json"
    ))
    .unwrap()
}

/// The loader's test router, started from its JSON as `pisa-switch router.json` starts it.
fn router() -> (Service, ThriftServer) {
    let json = router_json();
    let program = bmv2::load(std::str::from_utf8(&json).unwrap(), "router").unwrap();
    let pipe = Pipeline::new(Arc::new(program), 1, Config::default());
    let io = DeviceIo {
        loader: Some(Loader {
            build: Box::new(|_, _| Err("not in this test".into())),
            install: Box::new(|_| Err("not in this test".into())),
            running: json,
        }),
        ..DeviceIo::detached()
    };
    let service = Service::new(pipe.control.clone(), io, ServerConfig::default());
    let t = thrift::serve(service.clone(), "127.0.0.1:0".parse().unwrap(), opts()).unwrap();
    (service, t)
}

fn opts() -> Options {
    Options {
        device_id: 0,
        ports: vec![(1, "veth1".into()), (2, "veth2".into())],
        admin: None,
    }
}

#[test]
fn table_calls_write_what_p4runtime_reads_and_use_bmv2_handles() {
    let (service, t) = router();
    let mut c = Cli::connect(&t);
    // The CLI starts by reading the program's JSON.
    let Some(Value::Bytes(json)) = ok(c.std("bm_get_config", vec![])) else {
        panic!("no config");
    };
    assert_eq!(json, router_json());

    let nhop = |port: u8| data(&[&[2, 0, 0, 0, 2, 2], &[2, 0, 0, 0, 0, 0xfe], &[0, port]]);
    let add = |c: &mut Cli, net: [u8; 4], len, port| {
        c.std(
            "bm_mt_add_entry",
            vec![
                s("ingress.ipv4_lpm"),
                lpm(&net, len),
                s("ingress.set_nhop"),
                nhop(port),
                options(0),
            ],
        )
    };
    let Some(Value::I32(h1)) = ok(add(&mut c, [10, 0, 2, 0], 24, 2)) else {
        panic!()
    };
    let Some(Value::I32(h2)) = ok(add(&mut c, [10, 0, 3, 9], 24, 3)) else {
        panic!()
    };
    assert_ne!(h1, h2);
    // The same key again is a duplicate (17); the prefix's host bits were cleared.
    assert_eq!(code(add(&mut c, [10, 0, 3, 0], 24, 3)), 17);

    // P4Runtime's reader sees both, the second with its host bits cleared.
    let control = service.control();
    let table =
        control.schema().tables[control.schema().table_by_name("ingress.ipv4_lpm").unwrap()].id;
    let entries = control.read_entries(Some(table), false, false).unwrap();
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().any(|e| e.matches[0].1
        == FieldMatch::Lpm {
            value: 0x0a000300,
            prefix_len: 24
        }));

    // Modify and read back by handle.
    ok(c.std(
        "bm_mt_modify_entry",
        vec![
            s("ingress.ipv4_lpm"),
            Value::I32(h2),
            s("ingress.drop"),
            data(&[]),
        ],
    ));
    let Some(Value::Struct(e)) = ok(c.std(
        "bm_mt_get_entry",
        vec![s("ingress.ipv4_lpm"), Value::I32(h2)],
    )) else {
        panic!()
    };
    assert_eq!(e.int(3).unwrap(), i64::from(h2));
    assert_eq!(
        e.strukt(2).unwrap().int(1).unwrap(),
        -1,
        "no priority in an LPM table"
    );
    assert_eq!(e.strukt(4).unwrap().string(2).unwrap(), "ingress.drop");
    let key = &e.list(1).unwrap()[0];
    let Value::Struct(key) = key else { panic!() };
    assert_eq!(key.strukt(3).unwrap().bytes(1).unwrap(), &[10, 0, 3, 0]);
    assert_eq!(key.strukt(3).unwrap().int(2).unwrap(), 24);
    let Some(Value::List(_, all)) = ok(c.std("bm_mt_get_entries", vec![s("ingress.ipv4_lpm")]))
    else {
        panic!()
    };
    assert_eq!(all.len(), 2);

    // The direct counter of an entry, by handle.
    let Some(Value::Struct(cv)) = ok(c.std(
        "bm_mt_read_counter",
        vec![s("ingress.ipv4_lpm"), Value::I32(h1)],
    )) else {
        panic!()
    };
    assert_eq!((cv.int(1).unwrap(), cv.int(2).unwrap()), (0, 0));

    // Delete by handle; the handle is then invalid (2), and so is a name that is not a table (7).
    ok(c.std(
        "bm_mt_delete_entry",
        vec![s("ingress.ipv4_lpm"), Value::I32(h1)],
    ));
    assert_eq!(
        code(c.std(
            "bm_mt_delete_entry",
            vec![s("ingress.ipv4_lpm"), Value::I32(h1)]
        )),
        2
    );
    assert_eq!(code(c.std("bm_mt_get_num_entries", vec![s("ipv4_lpm")])), 7);
    let Some(Value::I64(n)) = ok(c.std("bm_mt_get_num_entries", vec![s("ingress.ipv4_lpm")]))
    else {
        panic!()
    };
    assert_eq!(n, 1);

    // Wrong action data (8 and 26), a const table (25), and a default action.
    let bad_action = c.std(
        "bm_mt_add_entry",
        vec![
            s("ingress.ipv4_lpm"),
            lpm(&[10, 9, 0, 0], 16),
            s("ingress.nothing"),
            data(&[]),
            options(0),
        ],
    );
    assert_eq!(code(bad_action), 8);
    let too_wide = c.std(
        "bm_mt_add_entry",
        vec![
            s("ingress.ipv4_lpm"),
            lpm(&[10, 9, 0, 0], 16),
            s("ingress.set_nhop"),
            data(&[&[0; 6], &[0; 6], &[2, 0]]),
            options(0),
        ],
    );
    assert_eq!(code(too_wide), 26, "port is 9 bits");
    ok(c.std(
        "bm_mt_set_default_action",
        vec![s("ingress.ipv4_lpm"), s("ingress.set_nhop"), nhop(4)],
    ));
    let d = control.read_default(table).unwrap();
    assert!(matches!(d.action, Some(TableAction::Action(a)) if a.params.len() == 3));
    ok(c.std("bm_mt_reset_default_entry", vec![s("ingress.ipv4_lpm")]));
    let Some(Value::Struct(d)) = ok(c.std("bm_mt_get_default_entry", vec![s("ingress.ipv4_lpm")]))
    else {
        panic!()
    };
    assert_eq!(
        d.string(2).unwrap(),
        "ingress.drop",
        "the program's initial default"
    );

    // bm_reset_state empties the tables.
    ok(c.std("bm_reset_state", vec![]));
    assert!(
        control
            .read_entries(Some(table), false, false)
            .unwrap()
            .is_empty()
    );
    t.stop();
}

#[test]
fn registers_counters_multicast_and_mirroring() {
    let (service, t) = router();
    let mut c = Cli::connect(&t);
    let control = service.control();
    // Registers keep their width's low bits, as BMv2's.
    ok(c.std(
        "bm_register_write",
        vec![
            s("egress.last_len"),
            Value::I32(3),
            Value::I64(0x1_0000_0007),
        ],
    ));
    assert_eq!(
        ok(c.std(
            "bm_register_read",
            vec![s("egress.last_len"), Value::I32(3)]
        )),
        Some(Value::I64(7))
    );
    let Some(Value::List(_, all)) = ok(c.std("bm_register_read_all", vec![s("egress.last_len")]))
    else {
        panic!()
    };
    assert_eq!(all.len(), 16);
    assert_eq!(
        code(c.std(
            "bm_register_read",
            vec![s("egress.last_len"), Value::I32(16)]
        )),
        2
    );
    assert_eq!(
        code(c.std("bm_register_read", vec![s("nothing"), Value::I32(0)])),
        1
    );
    ok(c.std("bm_register_reset", vec![s("egress.last_len")]));
    assert_eq!(
        ok(c.std(
            "bm_register_read",
            vec![s("egress.last_len"), Value::I32(3)]
        )),
        Some(Value::I64(0))
    );

    // Counters: write, read, reset.
    let cv = Value::Struct(
        Struct::new()
            .with(1, Value::I64(1500))
            .with(2, Value::I64(1)),
    );
    ok(c.std(
        "bm_counter_write",
        vec![s("egress.port_ctr"), Value::I32(5), cv.clone()],
    ));
    assert_eq!(
        ok(c.std("bm_counter_read", vec![s("egress.port_ctr"), Value::I32(5)])),
        Some(cv)
    );
    ok(c.std("bm_counter_reset_all", vec![s("egress.port_ctr")]));
    let Some(Value::Struct(z)) =
        ok(c.std("bm_counter_read", vec![s("egress.port_ctr"), Value::I32(5)]))
    else {
        panic!()
    };
    assert_eq!(z.int(2).unwrap(), 0);

    // Multicast: a group and two nodes become one P4Runtime group's copies, in order.
    assert_eq!(
        ok(c.pre("bm_mc_mgrp_create", vec![Value::I32(5)])),
        Some(Value::I32(5))
    );
    let Some(Value::I32(n1)) = ok(c.pre("bm_mc_node_create", vec![Value::I32(7), s("110"), s("")]))
    else {
        panic!()
    };
    let Some(Value::I32(n2)) =
        ok(c.pre("bm_mc_node_create", vec![Value::I32(9), s("1000"), s("")]))
    else {
        panic!()
    };
    ok(c.pre("bm_mc_node_associate", vec![Value::I32(5), Value::I32(n2)]));
    ok(c.pre("bm_mc_node_associate", vec![Value::I32(5), Value::I32(n1)]));
    assert_eq!(copies(&control, 5), vec![(3, 9), (1, 7), (2, 7)]);
    // A node in a group cannot join another; LAGs are refused; unknown nodes are code 4.
    assert_eq!(
        code(c.pre("bm_mc_node_associate", vec![Value::I32(5), Value::I32(n1)])),
        5
    );
    assert_eq!(
        code(c.pre("bm_mc_node_create", vec![Value::I32(1), s("1"), s("1")])),
        5
    );
    assert_eq!(code(c.pre("bm_mc_node_destroy", vec![Value::I32(99)])), 4);
    ok(c.pre("bm_mc_node_update", vec![Value::I32(n1), s("10000"), s("")]));
    ok(c.pre("bm_mc_node_dissociate", vec![Value::I32(5), Value::I32(n2)]));
    assert_eq!(copies(&control, 5), vec![(4, 7)]);
    let Some(Value::Bytes(dump)) = ok(c.pre("bm_mc_get_entries", vec![])) else {
        panic!()
    };
    let dump: serde_json::Value = serde_json::from_slice(&dump).unwrap();
    assert_eq!(dump["mgrps"][0]["id"], 5);
    assert_eq!(dump["l2_handles"][0]["ports"], serde_json::json!([4]));

    // Mirroring: a session to a port, read back; deleting a missing one is SESSION_NOT_FOUND.
    let cfg = Value::Struct(Struct::new().with(1, Value::I32(3)));
    let ss = |id: i32| Struct::new().with(1, Value::I32(id));
    ok(c.call("simple_switch", "mirroring_session_add", ss(9).with(2, cfg)));
    let sessions = control.read_clone_sessions(Some(9)).unwrap();
    assert_eq!(sessions[0].1.replicas[0].port, 3);
    let Some(Value::Struct(got)) = ok(c.call("simple_switch", "mirroring_session_get", ss(9)))
    else {
        panic!()
    };
    assert_eq!(got.int(1).unwrap(), 3);
    ok(c.call("simple_switch", "mirroring_session_delete", ss(9)));
    assert_eq!(
        code(c.call("simple_switch", "mirroring_session_delete", ss(9))),
        1
    );
    // No admin runner in this test: queue settings answer 1.
    assert_eq!(
        ok(c.call("simple_switch", "set_all_egress_queue_depths", ss(64))),
        Some(Value::I32(1))
    );
    let Some(Value::Struct(info)) = ok(c.std("bm_mgmt_get_info", vec![])) else {
        panic!()
    };
    assert_eq!(info.int(2).unwrap(), i64::from(t.local_addr().port()));
    t.stop();
}

#[test]
fn a_hard_wired_program_is_described_and_takes_bmv2_priorities() {
    let f = Fixture::new(Election::Spec, 1);
    let t = thrift::serve(
        f.running.service().clone(),
        "127.0.0.1:0".parse().unwrap(),
        opts(),
    )
    .unwrap();
    let mut c = Cli::connect(&t);
    let Some(Value::Bytes(json)) = ok(c.std("bm_get_config", vec![])) else {
        panic!()
    };
    let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let acl = doc["pipelines"][0]["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ingress.acl")
        .unwrap();
    assert_eq!(acl["match_type"], "ternary");
    assert_eq!(acl["key"].as_array().unwrap().len(), 8);
    let lpm4 = doc["pipelines"][0]["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ingress.ipv4_lpm")
        .unwrap();
    assert_eq!(lpm4["type"], "indirect_ws");
    assert_eq!(lpm4["action_profile"], "ingress.ecmp_selector");

    // Two ACL entries matching everything: BMv2's smaller priority number must win, so it
    // becomes the larger P4Runtime priority.
    let any = Value::structs((0..8).map(|i| {
        let w = [2, 6, 2, 4, 4, 1, 2, 2][i];
        Struct::new().with(1, Value::I32(2)).with(
            4,
            Value::Struct(
                Struct::new()
                    .with(1, b(&vec![0; w]))
                    .with(2, b(&vec![0; w])),
            ),
        )
    }));
    let mut add = |action: &str, prio: i32| {
        c.std(
            "bm_mt_add_entry",
            vec![
                s("ingress.acl"),
                any.clone(),
                s(action),
                data(&[]),
                options(prio),
            ],
        )
    };
    ok(add("ingress.drop", 10));
    ok(add("ingress.punt_to_cpu", 5));
    let acl_id = f.id("table", "ingress.acl");
    let mut entries = f.control.read_entries(Some(acl_id), false, false).unwrap();
    entries.sort_by_key(|e| std::cmp::Reverse(e.priority));
    let winner = match &entries[0].action {
        Some(TableAction::Action(a)) => a.action_id,
        _ => panic!(),
    };
    assert_eq!(
        winner,
        f.id("action", "ingress.punt_to_cpu"),
        "priority 5 wins over 10"
    );
    let Some(Value::List(_, dumped)) = ok(c.std("bm_mt_get_entries", vec![s("ingress.acl")]))
    else {
        panic!()
    };
    let prios: Vec<i64> = dumped
        .iter()
        .map(|e| match e {
            Value::Struct(e) => e.strukt(2).unwrap().int(1).unwrap(),
            _ => panic!(),
        })
        .collect();
    assert_eq!(prios, vec![10, 5], "read back in BMv2's numbers");

    // A const default action (20), and an action outside its scope (8): smac's default is
    // const, and `learn` may only be its default.
    assert_eq!(
        code(c.std(
            "bm_mt_set_default_action",
            vec![s("ingress.smac"), s("NoAction"), data(&[])]
        )),
        20
    );
    let mac = Value::structs([Struct::new().with(1, Value::I32(0)).with(
        2,
        Value::Struct(Struct::new().with(1, b(&[2, 0, 0, 0, 0, 1]))),
    )]);
    assert_eq!(
        code(c.std(
            "bm_mt_add_entry",
            vec![
                s("ingress.smac"),
                mac,
                s("ingress.learn"),
                data(&[]),
                options(0)
            ]
        )),
        8
    );

    // Action profile members and groups get the smallest free handles.
    let nh = data(&[&[2, 0, 0, 0, 0, 2], &[2, 0, 0, 0, 0, 1], &[0, 2]]);
    assert_eq!(
        ok(c.prof(
            "bm_mt_act_prof_add_member",
            vec![s("ingress.set_nhop"), nh.clone()]
        )),
        Some(Value::I32(0))
    );
    assert_eq!(
        ok(c.prof("bm_mt_act_prof_add_member", vec![s("ingress.set_nhop"), nh])),
        Some(Value::I32(1))
    );
    assert_eq!(
        ok(c.prof("bm_mt_act_prof_create_group", vec![])),
        Some(Value::I32(0))
    );
    ok(c.prof(
        "bm_mt_act_prof_add_member_to_group",
        vec![Value::I32(1), Value::I32(0)],
    ));
    assert_eq!(
        code(c.prof(
            "bm_mt_act_prof_add_member_to_group",
            vec![Value::I32(1), Value::I32(0)]
        )),
        12
    );
    assert_eq!(
        code(c.prof("bm_mt_act_prof_delete_member", vec![Value::I32(1)])),
        11,
        "still in a group"
    );
    let Some(Value::List(_, groups)) = ok(c.prof("bm_mt_act_prof_get_groups", vec![])) else {
        panic!()
    };
    assert_eq!(groups.len(), 1);
    t.stop();
}

#[test]
fn bad_input_never_stops_the_server() {
    let (_service, t) = router();
    // Garbage, a huge length prefix, a truncated call: each connection ends, the server lives.
    for junk in [
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        vec![0x80, 1, 0, 1, 0x7f, 0xff, 0xff, 0xff],
        vec![0x80, 1, 0, 1, 0, 0, 0, 3, b'a', b'b'],
    ] {
        let mut s = TcpStream::connect(t.local_addr()).unwrap();
        s.write_all(&junk).unwrap();
        drop(s);
    }
    let mut c = Cli::connect(&t);
    // An unknown method and arguments of the wrong type are application exceptions, and the
    // connection goes on.
    let e = c.std("bm_no_such_call", vec![]).unwrap_err();
    assert!(e.contains("bm_no_such_call"), "{e}");
    let e = c
        .std("bm_mt_get_num_entries", vec![Value::I32(5)])
        .unwrap_err();
    assert!(e.contains("field 2"), "{e}");
    // A key of the wrong match type is BAD_MATCH_KEY (18).
    let exact = Value::structs([Struct::new()
        .with(1, Value::I32(0))
        .with(2, Value::Struct(Struct::new().with(1, b(&[10, 0, 0, 1]))))]);
    assert_eq!(
        code(c.std(
            "bm_mt_add_entry",
            vec![
                s("ingress.ipv4_lpm"),
                exact,
                s("ingress.drop"),
                data(&[]),
                options(0)
            ]
        )),
        18
    );
    assert!(ok(c.std("bm_get_config", vec![])).is_some());
    t.stop();
}

/// Two clients at once, changes the engine refuses, and calls the CLI must survive: state
/// read and written in one step, nodes kept only when their group was written, a mirroring
/// session that follows its group, and every mirroring failure as the code the CLI knows.
#[test]
fn concurrent_clients_and_refused_changes_keep_the_state_whole() {
    let f = Fixture::new(Election::Spec, 1);
    let t = thrift::serve(
        f.running.service().clone(),
        "127.0.0.1:0".parse().unwrap(),
        opts(),
    )
    .unwrap();
    let nh = data(&[&[2, 0, 0, 0, 0, 2], &[2, 0, 0, 0, 0, 1], &[0, 2]]);
    let mut c = Cli::connect(&t);
    assert_eq!(
        ok(c.prof("bm_mt_act_prof_create_group", vec![])),
        Some(Value::I32(0))
    );
    // Two clients each create 20 members and add them to the one group, interleaved: every
    // member gets its own handle and ends in the group.
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (addr, nh) = (t.local_addr(), nh.clone());
            std::thread::spawn(move || {
                let s0 = TcpStream::connect(addr).unwrap();
                let mut c = Cli {
                    r: Reader::new(BufReader::new(s0.try_clone().unwrap())),
                    s: s0,
                };
                for _ in 0..20 {
                    let Some(Value::I32(m)) = ok(c.prof(
                        "bm_mt_act_prof_add_member",
                        vec![s("ingress.set_nhop"), nh.clone()],
                    )) else {
                        panic!()
                    };
                    ok(c.prof(
                        "bm_mt_act_prof_add_member_to_group",
                        vec![Value::I32(m), Value::I32(0)],
                    ));
                }
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    let selector = f.id("profile", "ingress.ecmp_selector");
    let groups = f.control.read_groups(Some(selector)).unwrap();
    assert_eq!(
        groups[0].2.len(),
        40,
        "no member lost to the other client's write"
    );

    // Two nodes with the same (port, rid): the engine refuses the group with both, so the
    // second association fails and leaves its node out, in the engine and in mc_dump.
    ok(c.pre("bm_mc_mgrp_create", vec![Value::I32(6)]));
    let cfg = Value::Struct(Struct::new().with(2, Value::I32(6)));
    ok(c.call(
        "simple_switch",
        "mirroring_session_add",
        Struct::new().with(1, Value::I32(10)).with(2, cfg),
    ));
    let node = |c: &mut Cli| {
        let Some(Value::I32(h)) =
            ok(c.pre("bm_mc_node_create", vec![Value::I32(3), s("100"), s("")]))
        else {
            panic!()
        };
        h
    };
    let (n1, n2) = (node(&mut c), node(&mut c));
    ok(c.pre("bm_mc_node_associate", vec![Value::I32(6), Value::I32(n1)]));
    assert_eq!(
        code(c.pre("bm_mc_node_associate", vec![Value::I32(6), Value::I32(n2)])),
        5
    );
    assert_eq!(copies(&f.control, 6), vec![(2, 3)]);
    let Some(Value::Bytes(dump)) = ok(c.pre("bm_mc_get_entries", vec![])) else {
        panic!()
    };
    let dump: serde_json::Value = serde_json::from_slice(&dump).unwrap();
    assert_eq!(dump["mgrps"][0]["l1_handles"], serde_json::json!([n1]));
    // The session to group 6, made while the group was empty, copies what it has now.
    let sessions = f.control.read_clone_sessions(Some(10)).unwrap();
    let ports: Vec<u16> = sessions[0].1.replicas.iter().map(|r| r.port).collect();
    assert_eq!(ports, vec![2]);

    // Mirroring failures are SESSION_NOT_FOUND (1), the one code the CLI knows, never an
    // exception that would end it.
    let port = Value::Struct(Struct::new().with(1, Value::I32(1)));
    for id in [0, 5000] {
        let add = Struct::new().with(1, Value::I32(id)).with(2, port.clone());
        assert_eq!(
            code(c.call("simple_switch", "mirroring_session_add", add)),
            1
        );
    }
    // serialize_state answers with a note, not an exception.
    assert!(matches!(
        ok(c.std("bm_serialize_state", vec![])),
        Some(Value::Bytes(_))
    ));
    t.stop();
}
