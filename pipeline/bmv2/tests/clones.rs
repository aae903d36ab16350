//! Egress-to-egress clones in a BMv2 JSON program: a clone keeps the values of its field list
//! (metadata egress left) and nothing else of the metadata, is made of the packet egress
//! emitted, and leaves the original without the bridge that carried the list.
#![recursion_limit = "256"]

mod common;

use common::{assign, commands, dummy_table, errors, f, hex, op, prim, standard_metadata, switch};
use serde_json::{Value, json};
use sim::SimSwitch;

/// Ethernet only. Ingress sets `meta.a` = 0x55 and `meta.c` = 0x77 and sends to port 2. Egress,
/// for the original (instance type 0), sets `meta.b` = 0x66 and clones to session 5 keeping
/// `[meta.a, meta.b]`; every packet writes a, b, c and its instance type into the source MAC.
fn program() -> Value {
    json!({
        "__meta__": {"version": [2, 23], "compiler": "written by hand for pisa-switch's tests"},
        "header_types": [
            standard_metadata(),
            {"name": "meta_t", "id": 2, "fields": [["a", 8, false], ["b", 8, false], ["c", 8, false]]},
            {"name": "ethernet_t", "id": 3, "fields": [["dst", 48, false], ["src", 48, false], ["etherType", 16, false]]}
        ],
        "headers": [
            {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata", "metadata": true},
            {"name": "meta", "id": 1, "header_type": "meta_t", "metadata": true},
            {"name": "ethernet", "id": 2, "header_type": "ethernet_t", "metadata": false}
        ],
        "header_stacks": [], "header_union_types": [], "header_unions": [], "header_union_stacks": [],
        "field_lists": [{"id": 1, "name": "keep", "elements": [f("meta", "a"), f("meta", "b")]}],
        "learn_lists": [], "errors": errors(), "enums": [],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            {"name": "start", "id": 0,
             "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "ethernet"}]}],
             "transition_key": [],
             "transitions": [{"type": "default", "value": null, "mask": null, "next_state": null}]}
        ]}],
        "parse_vsets": [],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["ethernet"]}],
        "meter_arrays": [], "counter_arrays": [], "register_arrays": [], "calculations": [],
        "actions": [
            {"name": "ingress.go", "id": 0, "runtime_data": [], "primitives": [
                assign(f("meta", "a"), hex(0x55)),
                assign(f("meta", "c"), hex(0x77)),
                assign(f("standard_metadata", "egress_spec"), hex(2))
            ]},
            {"name": "egress.clone_it", "id": 1, "runtime_data": [], "primitives": [
                assign(f("meta", "b"), hex(0x66)),
                prim("clone_egress_pkt_to_egress", vec![hex(5), hex(1)])
            ]},
            {"name": "egress.mark", "id": 2, "runtime_data": [], "primitives": [
                assign(f("ethernet", "src"),
                       op("|", op("|", op("<<", f("meta", "a"), hex(24)), op("<<", f("meta", "b"), hex(16))),
                          op("|", op("<<", f("meta", "c"), hex(8)), f("standard_metadata", "instance_type"))))
            ]}
        ],
        "pipelines": [
            {"name": "ingress", "id": 0, "init_table": "tbl_go", "action_profiles": [],
             "tables": [dummy_table("tbl_go", 0, (0, "ingress.go"), vec![], Value::Null)],
             "conditionals": []},
            {"name": "egress", "id": 1, "init_table": "node_normal", "action_profiles": [],
             "tables": [
                dummy_table("tbl_clone", 1, (1, "egress.clone_it"), vec![], json!("tbl_mark")),
                dummy_table("tbl_mark", 2, (2, "egress.mark"), vec![], Value::Null)
             ],
             "conditionals": [
                {"name": "node_normal", "id": 0,
                 "expression": op("==", f("standard_metadata", "instance_type"), hex(0)),
                 "true_next": "tbl_clone", "false_next": "tbl_mark"}
             ]}
        ],
        "checksums": []
    })
}

#[test]
fn an_egress_clone_keeps_its_field_list_and_the_original_leaves_without_it() {
    let pipe = switch(&program());
    commands(&pipe, &["mirroring_add 5 3"]);
    let mut sw = SimSwitch::new(pipe);
    let mut input = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5];
    input.extend_from_slice(b"a payload of some bytes");
    let mut out = sw.inject(1, &input, 1);
    out.sort_by_key(|o| o.port);
    assert_eq!(out.len(), 2, "the packet and its clone");
    let src = |o: &sim::Output| o.bytes[6..12].to_vec();
    // The original: a, b and c as egress left them, instance type 0, and exactly its own bytes
    // (no bridge behind them).
    assert_eq!(out[0].port, 2);
    assert_eq!(src(&out[0]), [0, 0, 0x55, 0x66, 0x77, 0]);
    assert_eq!(out[0].bytes.len(), input.len());
    assert_eq!(out[0].bytes[12..], input[12..]);
    // The clone, of the packet egress emitted: a and b kept, c reset, instance type 2 (E2E).
    assert_eq!(out[1].port, 3);
    assert_eq!(src(&out[1]), [0, 0, 0x55, 0x66, 0, 2]);
    assert_eq!(out[1].bytes.len(), input.len());
    assert_eq!(out[1].bytes[12..], input[12..]);
}

#[test]
fn without_a_field_list_an_egress_clone_keeps_no_metadata() {
    let mut p = program();
    p["actions"][1]["primitives"][1] = prim("clone_egress_pkt_to_egress", vec![hex(5), hex(0)]);
    let pipe = switch(&p);
    commands(&pipe, &["mirroring_add 5 3"]);
    let mut sw = SimSwitch::new(pipe);
    let input = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5, 1, 2, 3, 4];
    let mut out = sw.inject(1, &input, 1);
    out.sort_by_key(|o| o.port);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].bytes[6..12], [0, 0, 0, 0, 0, 2]);
    assert_eq!(out[0].bytes.len(), input.len());
}

#[test]
fn an_egress_clone_of_a_recirculated_packet_carries_neither_bridge_out() {
    // Egress clones the original and recirculates it in the same pass; the recirculated packet
    // comes back (instance type 4), is neither cloned nor recirculated again, and leaves on 2.
    let mut p = program();
    p["actions"][1]["primitives"]
        .as_array_mut()
        .unwrap()
        .push(prim("recirculate", vec![hex(1)]));
    let pipe = switch(&p);
    commands(&pipe, &["mirroring_add 5 3"]);
    let mut sw = SimSwitch::new(pipe);
    let mut input = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5];
    input.extend_from_slice(b"some payload");
    let mut out = sw.inject(1, &input, 1);
    out.sort_by_key(|o| o.port);
    assert_eq!(out.len(), 2, "the recirculated packet and the clone");
    // Recirculated with [a, b]: c was reset, and its instance type is 4.
    assert_eq!(out[0].port, 2);
    assert_eq!(out[0].bytes[6..12], [0, 0, 0x55, 0x66, 0x77, 4]);
    assert_eq!(out[0].bytes.len(), input.len());
    // The clone: its list kept, and no bridge of either kind behind it.
    assert_eq!(out[1].port, 3);
    assert_eq!(out[1].bytes[6..12], [0, 0, 0x55, 0x66, 0, 2]);
    assert_eq!(out[1].bytes.len(), input.len());
}

#[test]
fn egress_sees_the_length_ingress_left_and_a_list_keeps_no_instance_type() {
    // Ingress removes a 2-byte tag; egress writes packet_length where c was. The field list
    // also names standard_metadata's instance_type and packet_length, which the clone does not
    // take from it (simple_switch sets them after copying the list).
    let mut p = program();
    p["header_types"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "tag_t", "id": 4, "fields": [["t", 16, false]]}));
    p["headers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "tag", "id": 3, "header_type": "tag_t", "metadata": false}));
    p["parsers"][0]["parse_states"][0]["transition_key"] = json!([f("ethernet", "etherType")]);
    p["parsers"][0]["parse_states"][0]["transitions"] = json!([
        {"type": "hexstr", "value": "0x88b5", "mask": null, "next_state": "parse_tag"},
        {"type": "default", "value": null, "mask": null, "next_state": null}]);
    p["parsers"][0]["parse_states"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "parse_tag", "id": 1,
            "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "tag"}]}],
            "transition_key": [],
            "transitions": [{"type": "default", "value": null, "mask": null, "next_state": null}]}));
    p["deparsers"][0]["order"] = json!(["ethernet", "tag"]);
    p["field_lists"][0]["elements"] = json!([
        f("meta", "a"),
        f("meta", "b"),
        f("standard_metadata", "instance_type"),
        f("standard_metadata", "packet_length")
    ]);
    p["actions"][0]["primitives"]
        .as_array_mut()
        .unwrap()
        .push(prim(
            "remove_header",
            vec![json!({"type": "header", "value": "tag"})],
        ));
    p["actions"][2]["primitives"][0] = assign(
        f("ethernet", "src"),
        op(
            "|",
            op("<<", f("standard_metadata", "packet_length"), hex(8)),
            f("standard_metadata", "instance_type"),
        ),
    );
    let pipe = switch(&p);
    commands(&pipe, &["mirroring_add 5 3"]);
    let mut sw = SimSwitch::new(pipe);
    let mut input = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5, 0xaa, 0xbb];
    input.extend_from_slice(&[0; 30]);
    let mut out = sw.inject(1, &input, 1);
    out.sort_by_key(|o| o.port);
    assert_eq!(out.len(), 2);
    // 46 bytes received, 44 after ingress removed the tag.
    assert_eq!(out[0].bytes[6..12], [0, 0, 0, 0, 44, 0]);
    assert_eq!(out[0].bytes.len(), 44);
    // The clone: instance type 2, not the list's 0; the original's length.
    assert_eq!(out[1].bytes[6..12], [0, 0, 0, 0, 44, 2]);
}

#[test]
fn a_p4_14_program_multicasts_by_its_intrinsic_metadata_instance() {
    // No standard_metadata.mcast_grp and no alias: simple_switch reads the field of the
    // instance named intrinsic_metadata.
    let mut p = program();
    p["header_types"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "intrinsic_metadata_t", "id": 5, "fields": [["mcast_grp", 4, false], ["egress_rid", 4, false]]}));
    p["headers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "intrinsic_metadata", "id": 4, "header_type": "intrinsic_metadata_t", "metadata": true}));
    let sm = p["header_types"][0]["fields"].as_array_mut().unwrap();
    sm.retain(|f| f[0] != "mcast_grp" && f[0] != "egress_rid");
    sm.push(json!(["_pad2", 0x20, false]));
    p["actions"][0]["primitives"][2] = assign(f("intrinsic_metadata", "mcast_grp"), hex(1));
    let pipe = switch(&p);
    commands(&pipe, &["mc_group_create 1 2 4"]);
    let mut sw = SimSwitch::new(pipe);
    let input = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb6, 1, 2, 3, 4];
    let mut ports: Vec<u16> = sw.inject(1, &input, 1).iter().map(|o| o.port).collect();
    ports.sort_unstable();
    // Each replica is cloned in egress to session 5, which is not configured here.
    assert_eq!(ports, [2, 4]);
}

/// The clone program with egress recirculating the original, cloning it with field list
/// `first_list` on the first pass, and cloning the recirculated packet without a list.
fn recirculating(first_list: u128) -> Value {
    let mut p = program();
    p["actions"][1]["primitives"] = json!([
        assign(f("meta", "b"), hex(0x66)),
        prim("clone_egress_pkt_to_egress", vec![hex(5), hex(first_list)]),
        prim("recirculate", vec![hex(1)])
    ]);
    p["actions"].as_array_mut().unwrap().push(
        json!({"name": "egress.clone_again", "id": 3, "runtime_data": [],
            "primitives": [prim("clone_egress_pkt_to_egress", vec![hex(5), hex(0)])]}),
    );
    let egress = &mut p["pipelines"][1];
    egress["tables"].as_array_mut().unwrap().push(dummy_table(
        "tbl_again",
        3,
        (3, "egress.clone_again"),
        vec![],
        json!("tbl_mark"),
    ));
    egress["conditionals"][0]["false_next"] = json!("node_recirculated");
    egress["conditionals"].as_array_mut().unwrap().push(
        json!({"name": "node_recirculated", "id": 1,
            "expression": op("==", f("standard_metadata", "instance_type"), hex(4)),
            "true_next": "tbl_again", "false_next": "tbl_mark"}),
    );
    p
}

#[test]
fn clones_with_and_without_lists_around_a_recirculation_each_leave_whole() {
    for first_list in [0, 1] {
        let pipe = switch(&recirculating(first_list));
        commands(&pipe, &["mirroring_add 5 3"]);
        let mut sw = SimSwitch::new(pipe);
        let mut input = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5];
        input.extend_from_slice(b"some payload");
        let out = sw.inject(1, &input, 1);
        // The recirculated packet on 2; on 3 the clone of the first pass (instance type 2, its
        // list kept when it has one) and the clone of the recirculated packet, without a list
        // (a stale length of the first pass's list bridge must not be read as its own).
        let mut got: Vec<(u16, usize, Vec<u8>)> = out
            .iter()
            .map(|o| (o.port, o.bytes.len(), o.bytes[8..12].to_vec()))
            .collect();
        got.sort();
        let kept = if first_list == 1 { 0x55 } else { 0 };
        let first_b = if first_list == 1 { 0x66 } else { 0 };
        let mut want = vec![
            (2, input.len(), vec![0x55, 0x66, 0x77, 4]),
            (3, input.len(), vec![kept, first_b, 0, 2]),
            (3, input.len(), vec![0, 0, 0, 2]),
        ];
        want.sort();
        assert_eq!(got, want, "first clone's list {first_list}");
    }
}
