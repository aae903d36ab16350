//! Test programs in p4c's BMv2 JSON, written for these tests, and the helpers that write them.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::sync::Arc;

use pipeline::commands::{Command, parse_line};
use pipeline::control::Atomicity;
use pipeline::runtime::{Config, Pipeline};
use serde_json::{Value, json};

pub(crate) fn f(h: &str, x: &str) -> Value {
    json!({"type": "field", "value": [h, x]})
}

pub(crate) fn hex(v: u128) -> Value {
    json!({"type": "hexstr", "value": format!("0x{v:x}")})
}

pub(crate) fn rd(i: u32) -> Value {
    json!({"type": "runtime_data", "value": i})
}

pub(crate) fn hdr(h: &str) -> Value {
    json!({"type": "header", "value": h})
}

pub(crate) fn op(o: &str, left: Value, right: Value) -> Value {
    json!({"type": "expression", "value": {"op": o, "left": left, "right": right}})
}

pub(crate) fn prim(o: &str, params: Vec<Value>) -> Value {
    json!({"op": o, "parameters": params})
}

pub(crate) fn assign(dst: Value, src: Value) -> Value {
    prim("assign", vec![dst, src])
}

/// The v1model's standard metadata as p4c lays it out.
pub(crate) fn standard_metadata() -> Value {
    json!({"name": "standard_metadata", "id": 1, "fields": [
        ["ingress_port", 9, false], ["egress_spec", 9, false], ["egress_port", 9, false],
        ["instance_type", 32, false], ["packet_length", 32, false], ["enq_timestamp", 32, false],
        ["enq_qdepth", 19, false], ["deq_timedelta", 32, false], ["deq_qdepth", 19, false],
        ["ingress_global_timestamp", 48, false], ["egress_global_timestamp", 48, false],
        ["mcast_grp", 16, false], ["egress_rid", 16, false], ["checksum_error", 1, false],
        ["parser_error", 32, false], ["priority", 3, false], ["_padding", 3, false]
    ]})
}

pub(crate) fn errors() -> Value {
    json!([
        ["NoError", 1],
        ["PacketTooShort", 2],
        ["NoMatch", 3],
        ["StackOutOfBounds", 4],
        ["HeaderTooShort", 5],
        ["ParserTimeout", 6],
        ["ParserInvalidArgument", 7]
    ])
}

/// A table p4c would write for a direct action call: no key, a const default; `action` is the
/// action's (id, name).
pub(crate) fn dummy_table(
    name: &str,
    id: u32,
    action: (u32, &str),
    data: Vec<&str>,
    next: Value,
) -> Value {
    let (action, action_name) = action;
    json!({"name": name, "id": id, "key": [], "match_type": "exact", "type": "simple",
           "max_size": 1024, "with_counters": false, "support_timeout": false,
           "direct_meters": null, "action_ids": [action], "actions": [action_name],
           "base_default_next": next, "next_tables": {},
           "default_entry": {"action_id": action, "action_const": true,
                             "action_data": data, "action_entry_const": true}})
}

const IPV4_FIELDS: [&str; 11] = [
    "version",
    "ihl",
    "diffserv",
    "totalLen",
    "identification",
    "flags",
    "fragOffset",
    "ttl",
    "protocol",
    "srcAddr",
    "dstAddr",
];

/// The CPU port of the test programs (the switch's default).
pub(crate) const CPU_PORT: u16 = 510;

/// `router`: Ethernet and IPv4 with a verified and updated header checksum; parser and checksum
/// errors dropped; an LPM route that rewrites MACs and decrements the TTL (hit: on to an ACL of
/// const ternary entries with BMv2 priorities that tag or clone); multicast; L2 by ingress port
/// with a resubmission that keeps a field list, or punting to the CPU behind a `packet_in` header;
/// frames from the CPU port carry a `packet_out` header naming their port; egress writes the
/// ingress tag, the replica id and the instance type into the packet, counts per port and
/// records the length in a register.
pub(crate) fn router() -> Value {
    let mut ipv4_fields: Vec<Value> = IPV4_FIELDS
        .iter()
        .zip([4, 4, 8, 16, 16, 3, 13, 8, 8, 32, 32])
        .map(|(n, w)| json!([n, w, false]))
        .collect();
    ipv4_fields.insert(9, json!(["hdrChecksum", 16, false]));
    // The checksum covers every field but itself.
    let checked: Vec<Value> = IPV4_FIELDS.iter().map(|n| f("ipv4", n)).collect();
    let actions = json!([
        {"name": "NoAction", "id": 0, "runtime_data": [], "primitives": []},
        {"name": "ingress.drop", "id": 1, "runtime_data": [],
         "primitives": [prim("mark_to_drop", vec![hdr("standard_metadata")])]},
        {"name": "ingress.set_nhop", "id": 2,
         "runtime_data": [{"name": "dmac", "bitwidth": 48}, {"name": "smac", "bitwidth": 48},
                          {"name": "port", "bitwidth": 9}],
         "primitives": [
            assign(f("ethernet", "dstAddr"), rd(0)),
            assign(f("ethernet", "srcAddr"), rd(1)),
            assign(f("standard_metadata", "egress_spec"), rd(2)),
            assign(f("ipv4", "ttl"), op("&", op("+", f("ipv4", "ttl"), hex(0xff)), hex(0xff)))
         ]},
        {"name": "ingress.set_tag", "id": 3, "runtime_data": [{"name": "tag", "bitwidth": 8}],
         "primitives": [assign(f("meta", "tag"), rd(0))]},
        {"name": "ingress.l2_out", "id": 4, "runtime_data": [{"name": "port", "bitwidth": 9}],
         "primitives": [assign(f("standard_metadata", "egress_spec"), rd(0))]},
        {"name": "ingress.mcast", "id": 5, "runtime_data": [{"name": "grp", "bitwidth": 16}],
         "primitives": [assign(f("standard_metadata", "mcast_grp"), rd(0))]},
        {"name": "ingress.clone_it", "id": 6, "runtime_data": [{"name": "session", "bitwidth": 32}],
         "primitives": [prim("clone_ingress_pkt_to_egress", vec![rd(0), hex(0)])]},
        {"name": "egress.mark", "id": 7, "runtime_data": [],
         "primitives": [
            assign(f("ipv4", "diffserv"), f("meta", "tag")),
            assign(f("ethernet", "srcAddr"),
                   op("|", op("&", f("ethernet", "srcAddr"), hex(0xffff_ffff_0000)),
                      f("standard_metadata", "egress_rid"))),
            assign(f("ipv4", "identification"), f("standard_metadata", "instance_type")),
            prim("count", vec![json!({"type": "counter_array", "value": "egress.port_ctr"}),
                               f("standard_metadata", "egress_port")]),
            prim("register_write", vec![json!({"type": "register_array", "value": "egress.last_len"}),
                                        op("&", f("standard_metadata", "egress_port"), hex(0xf)),
                                        f("standard_metadata", "packet_length")])
         ]},
        {"name": "ingress.resub", "id": 8, "runtime_data": [],
         "primitives": [assign(f("meta", "pass"), hex(1)), prim("resubmit", vec![hex(1)])]},
        {"name": "ingress.punt", "id": 9, "runtime_data": [],
         "primitives": [
            assign(f("standard_metadata", "egress_spec"), hex(u128::from(CPU_PORT))),
            prim("add_header", vec![hdr("packet_in")]),
            assign(f("packet_in", "ingress_port"), f("standard_metadata", "ingress_port"))
         ]},
        {"name": "ingress.from_cpu", "id": 10, "runtime_data": [],
         "primitives": [
            assign(f("standard_metadata", "egress_spec"), f("packet_out", "egress_port")),
            prim("remove_header", vec![hdr("packet_out")])
         ]}
    ]);
    json!({
        "__meta__": {"version": [2, 23], "compiler": "written by hand for pisa-switch's tests"},
        "header_types": [
            {"name": "meta_t", "id": 0, "fields": [["tag", 8, false], ["pass", 8, false]]},
            standard_metadata(),
            {"name": "ethernet_t", "id": 2, "fields": [["dstAddr", 48, false], ["srcAddr", 48, false], ["etherType", 16, false]]},
            {"name": "ipv4_t", "id": 3, "fields": ipv4_fields},
            {"name": "packet_in_t", "id": 4, "fields": [["ingress_port", 9, false], ["_pad", 7, false]]},
            {"name": "packet_out_t", "id": 5, "fields": [["egress_port", 9, false], ["_pad", 7, false]]}
        ],
        "headers": [
            {"name": "meta", "id": 0, "header_type": "meta_t", "metadata": true},
            {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": true},
            {"name": "ethernet", "id": 2, "header_type": "ethernet_t", "metadata": false},
            {"name": "ipv4", "id": 3, "header_type": "ipv4_t", "metadata": false},
            {"name": "packet_in", "id": 4, "header_type": "packet_in_t", "metadata": false},
            {"name": "packet_out", "id": 5, "header_type": "packet_out_t", "metadata": false}
        ],
        "header_stacks": [], "header_union_types": [], "header_unions": [], "header_union_stacks": [],
        "field_lists": [{"id": 1, "name": "keep_pass", "elements": [f("meta", "pass")]}],
        "errors": errors(),
        "enums": [],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            {"name": "start", "id": 2,
             "parser_ops": [],
             "transition_key": [f("standard_metadata", "ingress_port")],
             "transitions": [
                {"type": "hexstr", "value": format!("0x{CPU_PORT:04x}"), "mask": null, "next_state": "parse_packet_out"},
                {"type": "default", "value": null, "mask": null, "next_state": "parse_ethernet"}]},
            {"name": "parse_packet_out", "id": 3,
             "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "packet_out"}]}],
             "transition_key": [],
             "transitions": [{"type": "default", "value": null, "mask": null, "next_state": "parse_ethernet"}]},
            {"name": "parse_ethernet", "id": 0,
             "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "ethernet"}]}],
             "transition_key": [f("ethernet", "etherType")],
             "transitions": [
                {"type": "hexstr", "value": "0x0800", "mask": null, "next_state": "parse_ipv4"},
                {"type": "default", "value": null, "mask": null, "next_state": null}]},
            {"name": "parse_ipv4", "id": 1,
             "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "ipv4"}]}],
             "transition_key": [],
             "transitions": [{"value": "default", "mask": null, "next_state": null}]}
        ]}],
        "parse_vsets": [],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["packet_in", "ethernet", "ipv4"]}],
        "meter_arrays": [],
        "counter_arrays": [
            {"name": "egress.port_ctr", "id": 0, "size": 512, "is_direct": false},
            {"name": "ingress.lpm_hits", "id": 1, "is_direct": true, "binding": "ingress.ipv4_lpm"}
        ],
        "register_arrays": [{"name": "egress.last_len", "id": 0, "size": 16, "bitwidth": 32}],
        "calculations": [{"name": "calc", "id": 0, "algo": "csum16", "input": checked}],
        "learn_lists": [],
        "actions": actions,
        "pipelines": [
            {"name": "ingress", "id": 0, "init_table": "node_from_cpu",
             "action_profiles": [],
             "tables": [
                dummy_table("tbl_pass2", 0, (4, "ingress.l2_out"), vec!["0x0002"], Value::Null),
                dummy_table("tbl_drop", 1, (1, "ingress.drop"), vec![], Value::Null),
                dummy_table("tbl_from_cpu", 6, (10, "ingress.from_cpu"), vec![], Value::Null),
                {"name": "ingress.ipv4_lpm", "id": 2,
                 "key": [{"match_type": "lpm", "name": "hdr.ipv4.dstAddr", "target": ["ipv4", "dstAddr"], "mask": null}],
                 "match_type": "lpm", "type": "simple", "max_size": 1024, "with_counters": true,
                 "support_timeout": false, "direct_meters": null,
                 "action_ids": [2, 1, 5, 0], "actions": ["ingress.set_nhop", "ingress.drop", "ingress.mcast", "NoAction"],
                 "base_default_next": null,
                 "next_tables": {"__HIT__": "ingress.acl", "__MISS__": null},
                 "default_entry": {"action_id": 1, "action_const": false, "action_data": [], "action_entry_const": false}},
                {"name": "ingress.acl", "id": 3,
                 "key": [{"match_type": "ternary", "name": "hdr.ipv4.srcAddr", "target": ["ipv4", "srcAddr"], "mask": null},
                         {"match_type": "ternary", "name": "hdr.ipv4.protocol", "target": ["ipv4", "protocol"], "mask": null}],
                 "match_type": "ternary", "type": "simple", "max_size": 64, "with_counters": false,
                 "support_timeout": false, "direct_meters": null,
                 "action_ids": [3, 6, 0], "actions": ["ingress.set_tag", "ingress.clone_it", "NoAction"],
                 "base_default_next": null,
                 "next_tables": {"ingress.set_tag": null, "ingress.clone_it": null, "NoAction": null},
                 "default_entry": {"action_id": 0, "action_const": false, "action_data": [], "action_entry_const": false},
                 "entries": [
                    {"match_key": [{"match_type": "ternary", "key": "0x0a000000", "mask": "0xff000000"},
                                   {"match_type": "ternary", "key": "0x00", "mask": "0x00"}],
                     "action_entry": {"action_id": 3, "action_data": ["0x01"]}, "priority": 10},
                    {"match_key": [{"match_type": "ternary", "key": "0x0a000100", "mask": "0xffffff00"},
                                   {"match_type": "ternary", "key": "0x00", "mask": "0x00"}],
                     "action_entry": {"action_id": 3, "action_data": ["0x02"]}, "priority": 5},
                    {"match_key": [{"match_type": "ternary", "key": "0x0a000200", "mask": "0xffffff00"},
                                   {"match_type": "ternary", "key": "0x06", "mask": "0xff"}],
                     "action_entry": {"action_id": 6, "action_data": ["0x00000007"]}, "priority": 1}
                 ]},
                {"name": "ingress.l2", "id": 4,
                 "key": [{"match_type": "exact", "name": "standard_metadata.ingress_port", "target": ["standard_metadata", "ingress_port"], "mask": null}],
                 "match_type": "exact", "type": "simple", "max_size": 64, "with_counters": false,
                 "support_timeout": false, "direct_meters": null,
                 "action_ids": [4, 8, 9, 1], "actions": ["ingress.l2_out", "ingress.resub", "ingress.punt", "ingress.drop"],
                 "base_default_next": null,
                 "next_tables": {"ingress.l2_out": null, "ingress.resub": null, "ingress.punt": null, "ingress.drop": null},
                 "default_entry": {"action_id": 1, "action_const": false, "action_data": [], "action_entry_const": false}}
             ],
             "conditionals": [
                {"name": "node_from_cpu", "id": 3,
                 "expression": op("d2b", Value::Null, f("packet_out", "$valid$")),
                 "true_next": "tbl_from_cpu", "false_next": "node_pass2"},
                {"name": "node_pass2", "id": 0,
                 "expression": op("==", f("meta", "pass"), hex(1)),
                 "true_next": "tbl_pass2", "false_next": "node_guard"},
                {"name": "node_guard", "id": 1,
                 "expression": op("or",
                    op("!=", f("standard_metadata", "parser_error"), hex(1)),
                    op("==", f("standard_metadata", "checksum_error"), hex(1))),
                 "true_next": "tbl_drop", "false_next": "node_ipv4"},
                {"name": "node_ipv4", "id": 2,
                 "expression": op("d2b", Value::Null, f("ipv4", "$valid$")),
                 "true_next": "ingress.ipv4_lpm", "false_next": "ingress.l2"}
             ]},
            {"name": "egress", "id": 1, "init_table": "tbl_mark", "action_profiles": [],
             "tables": [dummy_table("tbl_mark", 5, (7, "egress.mark"), vec![], Value::Null)],
             "conditionals": []}
        ],
        "checksums": [
            {"name": "cksum", "id": 0, "source_info": {}, "target": ["ipv4", "hdrChecksum"], "type": "generic",
             "calculation": "calc", "verify": true, "update": false,
             "if_cond": op("d2b", Value::Null, f("ipv4", "$valid$"))},
            {"name": "cksum_0", "id": 1, "target": ["ipv4", "hdrChecksum"], "type": "generic",
             "calculation": "calc", "verify": false, "update": true,
             "if_cond": op("d2b", Value::Null, f("ipv4", "$valid$"))}
        ],
        "force_arith": [], "extern_instances": [], "field_aliases": [],
        "program": "router.p4"
    })
}

/// A switch running `program` with one worker and CPU port 510.
pub(crate) fn switch(program: &Value) -> Arc<Pipeline> {
    let p = bmv2::load(&program.to_string(), "router").expect("the test program loads");
    Pipeline::new(
        Arc::new(p),
        1,
        Config {
            cpu_port: 510,
            ..Config::default()
        },
    )
}

/// Runs BMv2-style commands against the switch.
pub(crate) fn commands(pipe: &Pipeline, lines: &[&str]) {
    for line in lines {
        let schema = pipe.control.schema().clone();
        match parse_line(&schema, line).unwrap_or_else(|e| panic!("{line}: {e}")) {
            Command::Write(u) => {
                for r in pipe.control.write(&u, Atomicity::ContinueOnError) {
                    r.unwrap_or_else(|e| panic!("{line}: {e}"));
                }
            }
            Command::Nothing => {}
            Command::Other(v, _) => panic!("{line}: {v} is not a write"),
        }
    }
}

fn deref(stack: &str, index: Value) -> Value {
    json!({"type": "expression", "value": {"op": "dereference_header_stack",
           "left": {"type": "header_stack", "value": stack}, "right": index}})
}

/// `labels[i].<field at offset>` with `i` computed: p4c's `access_field`.
pub(crate) fn stack_field_at(stack: &str, index: Value, offset: u32) -> Value {
    json!({"type": "expression", "value": {"op": "access_field", "left": deref(stack, index), "right": offset}})
}

/// `mpls`: a stack of up to three MPLS labels, parsed until the bottom of stack; ingress sends
/// to the port in the top label's low bits and pops it; egress pushes a new top label whose
/// label is 100 + the stack's size as parsed (kept in metadata) and whose TTL is the stack's
/// last index after the push (so egress must see the stack ingress left, popped).
pub(crate) fn mpls() -> Value {
    let stack = json!({"type": "header_stack", "value": "labels"});
    json!({
        "__meta__": {"version": [2, 23], "compiler": "written by hand for pisa-switch's tests"},
        "header_types": [
            {"name": "meta_t", "id": 0, "fields": [["n", 8, false]]},
            standard_metadata(),
            {"name": "ethernet_t", "id": 2, "fields": [["dst", 48, false], ["src", 48, false], ["etherType", 16, false]]},
            {"name": "label_t", "id": 3, "fields": [["label", 20, false], ["tc", 3, false], ["bos", 1, false], ["ttl", 8, false]]}
        ],
        "headers": [
            {"name": "meta", "id": 0, "header_type": "meta_t", "metadata": true},
            {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": true},
            {"name": "ethernet", "id": 2, "header_type": "ethernet_t", "metadata": false},
            {"name": "labels[0]", "id": 3, "header_type": "label_t", "metadata": false},
            {"name": "labels[1]", "id": 4, "header_type": "label_t", "metadata": false},
            {"name": "labels[2]", "id": 5, "header_type": "label_t", "metadata": false}
        ],
        "header_stacks": [{"name": "labels", "id": 0, "header_type": "label_t", "size": 3, "header_ids": [3, 4, 5]}],
        "errors": errors(),
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            {"name": "start", "id": 0,
             "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "ethernet"}]}],
             "transition_key": [f("ethernet", "etherType")],
             "transitions": [
                {"type": "hexstr", "value": "0x8847", "mask": null, "next_state": "parse_label"},
                {"type": "default", "value": null, "mask": null, "next_state": null}]},
            {"name": "parse_label", "id": 1,
             "parser_ops": [{"op": "extract", "parameters": [{"type": "stack", "value": "labels"}]},
                            {"op": "primitive", "parameters": [{"op": "log_msg", "parameters": [
                                {"type": "string", "value": "label {}"},
                                {"type": "parameters_vector", "value": [{"type": "stack_field", "value": ["labels", "label"]}]}]}]}],
             "transition_key": [{"type": "stack_field", "value": ["labels", "bos"]}],
             "transitions": [
                {"type": "hexstr", "value": "0x01", "mask": null, "next_state": null},
                {"type": "default", "value": null, "mask": null, "next_state": "parse_label"}]}
        ]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["ethernet", "labels[0]", "labels[1]", "labels[2]"]}],
        "actions": [
            {"name": "ingress.drop", "id": 0, "runtime_data": [],
             "primitives": [prim("mark_to_drop", vec![hdr("standard_metadata")])]},
            {"name": "ingress.route", "id": 1, "runtime_data": [],
             "primitives": [
                assign(f("meta", "n"), op("size_stack", Value::Null, stack.clone())),
                assign(f("standard_metadata", "egress_spec"),
                       op("&", stack_field_at("labels", hex(0), 0), hex(0x1ff))),
                prim("pop", vec![stack.clone(), hex(1)])
             ]},
            {"name": "egress.push", "id": 2, "runtime_data": [],
             "primitives": [
                prim("push", vec![stack.clone(), hex(1)]),
                prim("add_header", vec![deref("labels", hex(0))]),
                assign(stack_field_at("labels", op("-", op("size_stack", Value::Null, stack.clone()), hex(2)), 0),
                       op("+", f("meta", "n"), hex(100))),
                assign(f("labels[0]", "ttl"), op("last_stack_index", Value::Null, stack.clone()))
             ]}
        ],
        "pipelines": [
            {"name": "ingress", "id": 0, "init_table": "node_err", "action_profiles": [],
             "tables": [
                dummy_table("tbl_drop", 0, (0, "ingress.drop"), vec![], Value::Null),
                dummy_table("tbl_route", 1, (1, "ingress.route"), vec![], Value::Null)
             ],
             "conditionals": [
                {"name": "node_err", "id": 0,
                 "expression": op("!=", f("standard_metadata", "parser_error"), hex(1)),
                 "true_next": "tbl_drop", "false_next": "tbl_route"}
             ]},
            {"name": "egress", "id": 1, "init_table": "tbl_push", "action_profiles": [],
             "tables": [dummy_table("tbl_push", 2, (2, "egress.push"), vec![], Value::Null)], "conditionals": []}
        ]
    })
}

/// `vsets` (`programs/vsets.json`): parser value sets. The start state selects on the
/// EtherType: 0x0800 accepts, a member of `pv1` (16 bits) goes on to extract `my_header` (f1:
/// 3 bits, f2: 13), where a member of `pv2` (16 bits: f1 and f2 concatenated, BMv2's compressed
/// form) or, under the mask 0xff00, of `pv3` marks the packet. Ingress sends to port 1 + the
/// state that marked it (0: none, 1: pv1, 2: pv2, 3: pv3).
pub(crate) fn vsets() -> Value {
    serde_json::from_str(include_str!("../programs/vsets.json")).expect("vsets.json is JSON")
}
