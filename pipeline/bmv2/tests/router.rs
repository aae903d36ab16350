//! A P4 program in BMv2 JSON, written for these tests, run through the engine: parser, checksums,
#![recursion_limit = "512"]
//! tables of every kind, const entries with BMv2's priorities, clone, multicast, resubmission,
//! counters and registers, and programs the loader refuses.

mod common;

use common::{commands, router, switch};
use etherparse::{Ipv4HeaderSlice, PacketBuilder};
use pipeline::metadata::InstanceType;
use sim::SimSwitch;

const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0xfe];

fn tcp4(src: [u8; 4], dst: [u8; 4], ttl: u8) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(SRC, DST)
        .ipv4(src, dst, ttl)
        .tcp(1234, 80, 1, 1000);
    let mut v = Vec::new();
    b.write(&mut v, b"some payload").unwrap();
    v
}

fn ip(frame: &[u8]) -> Ipv4HeaderSlice<'_> {
    Ipv4HeaderSlice::from_slice(&frame[14..]).unwrap()
}

fn checksum_ok(frame: &[u8]) -> bool {
    let h = ip(frame);
    h.to_header().calc_header_checksum() == h.header_checksum()
}

fn drops(pipe: &pipeline::runtime::Pipeline, reason: &str) -> u64 {
    pipe.control
        .drop_counts()
        .into_iter()
        .find(|(n, _)| *n == reason)
        .map_or(0, |(_, c)| c.packets)
}

#[test]
fn routes_ipv4_rewriting_macs_and_ttl_with_a_fresh_checksum() {
    let pipe = switch(&router());
    commands(
        &pipe,
        &["table_add ipv4_lpm set_nhop 10.0.3.0/24 => 02:00:00:00:01:03 02:00:00:00:aa:fe 3"],
    );
    let mut sw = SimSwitch::new(pipe.clone());
    let f = tcp4([192, 168, 0, 1], [10, 0, 3, 7], 64);
    let out = sw.inject(1, &f, 1000);
    assert_eq!(out.len(), 1);
    let o = &out[0];
    assert_eq!(o.port, 3);
    assert_eq!(o.bytes.len(), f.len());
    assert_eq!(&o.bytes[..6], &[0x02, 0, 0, 0, 1, 3]);
    // Egress put the replica id (0) in the source MAC's low 16 bits.
    assert_eq!(&o.bytes[6..12], &[0x02, 0, 0, 0, 0, 0]);
    assert_eq!(ip(&o.bytes).ttl(), 63);
    assert!(checksum_ok(&o.bytes), "the deparser updates the checksum");
    assert_eq!(&o.bytes[34..], &f[34..], "the payload is untouched");
    // The direct counter of the route, the egress port counter and the length register.
    let x = pipe.control.externs();
    let s = pipe.control.schema();
    let ctr = s
        .counters
        .iter()
        .position(|c| c.name == "egress.port_ctr")
        .unwrap();
    let c = x.counters[ctr].read(3).unwrap();
    assert_eq!(
        (c.packets, c.bytes),
        (1, f.len() as u64),
        "the packet's bytes, not the bridge's"
    );
    let reg = s
        .registers
        .iter()
        .position(|r| r.name == "egress.last_len")
        .unwrap();
    assert_eq!(x.registers[reg].read(3), Some(f.len() as u64));
    let lpm = s.table_by_name("ipv4_lpm").unwrap();
    let direct = x.table_direct_counter[lpm].unwrap();
    let c = x.direct_counters[direct].read(0).unwrap();
    assert_eq!((c.packets, c.bytes), (1, f.len() as u64));
}

/// A register of 65 to 128 bits: the program's writes and the control plane's keep every bit.
#[test]
fn a_register_wider_than_64_bits_keeps_every_bit() {
    use pipeline::control::{Atomicity, Entity, Update, UpdateKind};
    let mut j = router();
    j["register_arrays"][0]["bitwidth"] = 100.into();
    let pipe = switch(&j);
    commands(
        &pipe,
        &["table_add ipv4_lpm set_nhop 10.0.3.0/24 => 02:00:00:00:01:03 02:00:00:00:aa:fe 3"],
    );
    let s = pipe.control.schema();
    let reg = s
        .registers
        .iter()
        .find(|r| r.name == "egress.last_len")
        .unwrap();
    assert_eq!(reg.bitwidth, 100);
    let id = reg.id;
    let read = |i| pipe.control.read_registers(Some(id), Some(i)).unwrap()[0].value;
    let f = tcp4([192, 168, 0, 1], [10, 0, 3, 7], 64);
    assert_eq!(SimSwitch::new(pipe.clone()).inject(1, &f, 1000).len(), 1);
    assert_eq!(read(3), f.len() as u128, "the program's write");
    let big = (1u128 << 99) | (1 << 70) | 5;
    let w = |value| Update {
        kind: UpdateKind::Modify,
        entity: Entity::Register {
            register_id: id,
            index: Some(4),
            value,
        },
    };
    assert!(pipe.control.write(&[w(big)], Atomicity::ContinueOnError)[0].is_ok());
    assert_eq!(read(4), big, "the control plane's write, read back whole");
    let too_wide = pipe
        .control
        .write(&[w(1 << 100)], Atomicity::ContinueOnError);
    assert!(too_wide[0].is_err(), "a value over 100 bits is refused");
}

#[test]
fn a_route_miss_drops_with_the_default_action() {
    let pipe = switch(&router());
    let mut sw = SimSwitch::new(pipe.clone());
    assert!(
        sw.inject(1, &tcp4([1, 1, 1, 1], [10, 0, 3, 7], 64), 1)
            .is_empty()
    );
    assert_eq!(drops(&pipe, "program"), 1);
}

#[test]
fn const_ternary_entries_take_bmv2_priorities_where_the_smallest_wins() {
    let pipe = switch(&router());
    commands(
        &pipe,
        &["table_add ipv4_lpm set_nhop 10.0.3.0/24 => 02:00:00:00:01:03 02:00:00:00:00:fe 3"],
    );
    let mut sw = SimSwitch::new(pipe);
    // 10.0.1.5 matches 10/8 (priority 10, tag 1) and 10.0.1/24 (priority 5, tag 2): 5 wins.
    let o = sw.inject(1, &tcp4([10, 0, 1, 5], [10, 0, 3, 7], 64), 1);
    assert_eq!(ip(&o[0].bytes).dcp_and_ecn(), 2);
    let o = sw.inject(1, &tcp4([10, 0, 5, 5], [10, 0, 3, 7], 64), 1);
    assert_eq!(ip(&o[0].bytes).dcp_and_ecn(), 1);
}

trait Tos {
    fn dcp_and_ecn(&self) -> u8;
}

impl Tos for Ipv4HeaderSlice<'_> {
    fn dcp_and_ecn(&self) -> u8 {
        (self.dcp().value() << 2) | self.ecn().value()
    }
}

#[test]
fn an_ingress_clone_is_the_packet_as_received() {
    let pipe = switch(&router());
    commands(
        &pipe,
        &[
            "table_add ipv4_lpm set_nhop 10.0.3.0/24 => 02:00:00:00:01:03 02:00:00:00:00:fe 3",
            "mirroring_add 7 4",
        ],
    );
    let mut sw = SimSwitch::new(pipe);
    let f = tcp4([10, 0, 2, 5], [10, 0, 3, 7], 64);
    let out = sw.inject(1, &f, 1);
    assert_eq!(out.len(), 2, "{out:?}");
    let routed = out.iter().find(|o| o.port == 3).expect("the packet");
    let clone = out.iter().find(|o| o.port == 4).expect("the clone");
    assert_eq!(clone.instance_type, InstanceType::IngressClone);
    assert_eq!(ip(&routed.bytes).ttl(), 63);
    // The clone: the frame as it came in (TTL and MACs), then egress's marks: no tag (the
    // clone's metadata starts over), instance type 1 in the identification, a fresh checksum.
    assert_eq!(ip(&clone.bytes).ttl(), 64);
    assert_eq!(&clone.bytes[..6], &f[..6]);
    assert_eq!(ip(&clone.bytes).identification(), 1);
    assert_eq!(ip(&clone.bytes).dcp_and_ecn(), 0);
    assert!(checksum_ok(&clone.bytes));
    assert_eq!(&clone.bytes[34..], &f[34..]);
}

#[test]
fn multicast_replicas_see_their_rid_and_the_ingress_metadata_in_egress() {
    let pipe = switch(&router());
    commands(
        &pipe,
        &[
            "mc_group_create 5 1:1 3:2",
            "table_add ipv4_lpm mcast 10.9.0.0/16 => 5",
        ],
    );
    let mut sw = SimSwitch::new(pipe);
    let f = tcp4([10, 0, 5, 5], [10, 9, 0, 1], 64);
    let mut out = sw.inject(2, &f, 1);
    out.sort_by_key(|o| o.port);
    assert_eq!(
        out.iter().map(|o| (o.port, o.rid)).collect::<Vec<_>>(),
        [(1, 1), (3, 2)]
    );
    for (o, rid) in out.iter().zip([1u8, 2]) {
        assert_eq!(o.bytes[11], rid, "egress saw egress_rid");
        assert_eq!(
            ip(&o.bytes).dcp_and_ecn(),
            1,
            "the ingress tag reached egress"
        );
        assert_eq!(
            ip(&o.bytes).identification(),
            5,
            "instance type: replication"
        );
        assert_eq!(ip(&o.bytes).ttl(), 64);
        assert!(checksum_ok(&o.bytes));
    }
}

#[test]
fn parser_and_checksum_errors_reach_ingress_which_drops_them() {
    let pipe = switch(&router());
    commands(
        &pipe,
        &["table_add ipv4_lpm set_nhop 10.0.3.0/24 => 02:00:00:00:01:03 02:00:00:00:00:fe 3"],
    );
    let mut sw = SimSwitch::new(pipe.clone());
    let f = tcp4([192, 168, 0, 1], [10, 0, 3, 7], 64);
    // An IPv4 header cut short: PacketTooShort.
    assert!(sw.inject(1, &f[..24], 1).is_empty());
    // A wrong header checksum.
    let mut bad = f.clone();
    bad[24] ^= 0x55;
    assert!(sw.inject(1, &bad, 1).is_empty());
    assert_eq!(drops(&pipe, "program"), 2);
    // The good one still goes.
    assert_eq!(sw.inject(1, &f, 1).len(), 1);
}

#[test]
fn a_resubmitted_packet_keeps_its_field_list_and_nothing_else() {
    let pipe = switch(&router());
    commands(&pipe, &["table_add l2 resub 9 =>"]);
    let mut sw = SimSwitch::new(pipe);
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&DST);
    f[6..12].copy_from_slice(&SRC);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..]
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = i as u8);
    let out = sw.inject(9, &f, 1);
    // Pass 1 sets meta.pass and resubmits keeping it; pass 2 sees it and sends to port 2.
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    let mut want = f.clone();
    want[10] = 0;
    want[11] = 0;
    assert_eq!(out[0].bytes, want);
}

#[test]
fn what_the_loader_does_not_run_is_refused_with_its_json_path() {
    let refuse = |edit: &dyn Fn(&mut serde_json::Value), want: &str| {
        let mut j = router();
        edit(&mut j);
        let e = bmv2::load(&j.to_string(), "x").expect_err(want).to_string();
        assert!(e.contains(want), "{e}");
    };
    refuse(
        &|j| {
            j["header_unions"] = serde_json::json!([{"name": "u", "id": 0, "union_type": "u_t", "header_ids": [2, 3]}])
        },
        "header_unions[0]: no union type u_t",
    );
    // A union as a primitive's argument (p4c's assign_union, or a union's setValid).
    refuse(
        &|j| {
            j["actions"][1]["primitives"][0] = serde_json::json!({"op": "add_header",
                "parameters": [{"type": "header_union", "value": "u"}]})
        },
        "actions[1].primitives[0].parameters[0]: not supported: a header_union where a header is expected",
    );
    refuse(
        &|j| j["actions"][1]["primitives"][0]["op"] = "funnel".into(),
        "actions[1].primitives[0]: not supported: primitive funnel",
    );
    refuse(
        &|j| j["register_arrays"][0]["bitwidth"] = 129.into(),
        "register_arrays[0]: not supported: registers of 129 bits",
    );
    refuse(
        &|j| {
            j["parse_vsets"] =
                serde_json::json!([{"name": "wide", "id": 0, "compressed_bitwidth": 160}])
        },
        "parse_vsets[0]: not supported: value sets of 160 bits",
    );
    refuse(
        &|j| j["parsers"][0]["parse_states"][0]["transitions"][0]["type"] = "parse_union".into(),
        "parsers[0].parse_states[0].transitions[0]: not supported: parse_union transitions",
    );
    refuse(
        &|j| j["pipelines"][0]["tables"][2]["next_tables"]["__HIT__"] = "nowhere".into(),
        "pipelines[0].tables[2].next_tables: no table or condition nowhere",
    );
    refuse(&|j| *j = serde_json::json!([1, 2]), "not BMv2 JSON");
}

/// `tests/programs/router.json` is this file's `router()` as a file, for the switch binary and
/// the namespace test; `BLESS=1` rewrites it after a change to `router()`.
#[test]
fn the_router_json_file_is_the_test_program() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/router.json");
    let want = serde_json::to_string_pretty(&router()).unwrap() + "\n";
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} differs from router(): run with BLESS=1",
        path.display()
    );
}

/// p4c writes an action called directly with bound arguments as a second action of the same
/// name with fewer parameters, used by a hidden table. The action with the parameters keeps the
/// name (the one a P4Info names); the copy runs as an action of its own.
#[test]
fn a_copy_of_an_action_with_bound_arguments_keeps_out_of_its_name() {
    let mut j = router();
    j["actions"].as_array_mut().unwrap().push(serde_json::json!({
        "name": "ingress.l2_out", "id": 9, "runtime_data": [],
        "primitives": [common::assign(common::f("standard_metadata", "egress_spec"), common::hex(2))]
    }));
    let pass2 = &mut j["pipelines"][0]["tables"][0];
    pass2["action_ids"] = serde_json::json!([9]);
    pass2["default_entry"]["action_id"] = 9.into();
    pass2["default_entry"]["action_data"] = serde_json::json!([]);
    let pipe = switch(&j);
    let s = pipe.control.schema();
    let named = &s.actions[s.action_by_name("ingress.l2_out").unwrap()];
    assert_eq!(named.params.len(), 1, "the P4Info's action keeps the name");
    assert!(s.actions.iter().any(|a| a.name == "ingress.l2_out$9"));
    // The hidden table runs the copy: the resubmitted packet still leaves on port 2.
    commands(&pipe, &["table_add l2 resub 9 =>"]);
    let mut sw = SimSwitch::new(pipe);
    let mut f = vec![0u8; 60];
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    assert_eq!(sw.inject(9, &f, 1)[0].port, 2);
}

/// A field the P4Info declares `optional` is ternary in p4c's JSON: loaded with the P4Info's ids
/// it is an optional match, and the const entries' ternary keys on it become values or
/// wildcards.
#[test]
fn a_p4info_optional_field_written_as_ternary_in_the_json_is_optional() {
    let mut ids = bmv2::P4Ids::default();
    ids.optional_fields
        .insert(("ingress.acl".into(), "hdr.ipv4.protocol".into()));
    let p = bmv2::load_with_ids(&router().to_string(), "router", Some(&ids)).unwrap();
    let s = pipeline::program::Program::schema(&p).clone();
    let acl = &s.tables[s.table_by_name("acl").unwrap()];
    assert_eq!(acl.fields[1].kind, pipeline::table::MatchKind::Optional);
    let keys: Vec<_> = acl.const_entries.iter().map(|e| e.key[1].clone()).collect();
    use pipeline::table::FieldMatch::Optional;
    assert_eq!(keys, [Optional(None), Optional(None), Optional(Some(6))]);
    // The entries match as before: 10.0.1.5 takes the tag of priority 5.
    let pipe = pipeline::runtime::Pipeline::new(
        std::sync::Arc::new(p),
        1,
        pipeline::runtime::Config::default(),
    );
    commands(
        &pipe,
        &["table_add ipv4_lpm set_nhop 10.0.3.0/24 => 02:00:00:00:01:03 02:00:00:00:00:fe 3"],
    );
    let mut sw = SimSwitch::new(pipe);
    let o = sw.inject(1, &tcp4([10, 0, 1, 5], [10, 0, 3, 7], 64), 1);
    assert_eq!(ip(&o[0].bytes).dcp_and_ecn(), 2);
}

/// The controller's headers as a P4 program declares them: a frame from the CPU port carries a
/// `packet_out` header naming its port, which the program strips; a punted frame leaves on the
/// CPU port behind a `packet_in` header naming where it came in.
#[test]
fn packet_out_and_packet_in_headers_are_the_programs_own() {
    let pipe = switch(&router());
    commands(&pipe, &["table_add l2 punt 7 =>"]);
    let mut sw = SimSwitch::new(pipe);
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&DST);
    f[6..12].copy_from_slice(&SRC);
    f[12..14].copy_from_slice(&[0x88, 0xcc]);
    // packet_out { egress_port = 3 (9 bits), _pad (7 bits) }, then the frame.
    let mut out = vec![(3u16 >> 1) as u8, ((3u16 & 1) << 7) as u8];
    out.extend_from_slice(&f);
    let o = sw.inject(common::CPU_PORT, &out, 1);
    assert_eq!(o.len(), 1);
    assert_eq!(o[0].port, 3);
    assert_eq!(&o[0].bytes[12..], &f[12..], "the packet_out header is gone");
    // Punted from port 7: packet_in { ingress_port = 7 } in front of the frame.
    let o = sw.inject(7, &f, 1);
    assert_eq!(o.len(), 1);
    assert_eq!(o[0].port, common::CPU_PORT);
    let port = (u16::from(o[0].bytes[0]) << 1) | u16::from(o[0].bytes[1] >> 7);
    assert_eq!(port, 7);
    assert_eq!(&o[0].bytes[2 + 12..], &f[12..]);
}

/// `--trace` names the parser's states, the conditions with their outcome, and the tables and
/// actions, by their names in the program.
#[test]
fn the_trace_names_states_conditions_tables_and_actions() {
    let pipe = switch(&router());
    commands(
        &pipe,
        &["table_add ipv4_lpm set_nhop 10.0.3.0/24 => 02:00:00:00:01:03 02:00:00:00:00:fe 3"],
    );
    let mut sw = SimSwitch::new(pipe);
    sw.worker().set_tracing(true);
    sw.inject(1, &tcp4([192, 168, 0, 1], [10, 0, 3, 7], 64), 1);
    let text = sw.take_trace().join("\n");
    for want in [
        "parser state=parse_ipv4",
        "condition=node_ipv4 value=true",
        "condition=node_guard value=false",
        "table=ingress.ipv4_lpm hit=true",
        "action=ingress.set_nhop",
        "table=tbl_mark hit=false action=egress.mark",
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }
}
