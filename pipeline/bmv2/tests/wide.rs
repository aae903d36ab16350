//! Fields held as bytes in a BMv2 JSON program: IPv4 options as a varbit field extracted with
//! `extract_VL`, covered by the header checksum, carried from ingress to egress and emitted; a
//! copy of them into another varbit field (`assign_VL`); a 256-bit field copied whole
//! (`assign`); and the errors `extract_VL` gives (a length beyond `max_length`, a length that is
//! not whole bytes). Using such a field as a value is refused at load time with its path.
#![recursion_limit = "256"]

mod common;

use common::{assign, dummy_table, errors, f, hdr, hex, op, prim, standard_metadata, switch};
use serde_json::{Value, json};
use sim::SimSwitch;

const IPV4: [(&str, u32); 12] = [
    ("version", 4),
    ("ihl", 4),
    ("diffserv", 8),
    ("totalLen", 16),
    ("identification", 16),
    ("flags", 3),
    ("fragOffset", 13),
    ("ttl", 8),
    ("protocol", 8),
    ("hdrChecksum", 16),
    ("srcAddr", 32),
    ("dstAddr", 32),
];

/// Ethernet; IPv4 with up to 40 bytes of options (`max_length` 60); after EtherType 0x9999 a
/// tag header of a 256-bit blob and a kind. Ingress decrements the TTL, copies the options into
/// `opts_copy` and the blob into `tag2`, and sends to port 2 plus the checksum error; egress
/// updates the checksum over the fields and the options.
fn program() -> Value {
    let mut ipv4: Vec<Value> = IPV4.iter().map(|(n, w)| json!([n, w, false])).collect();
    ipv4.push(json!(["options", "*"]));
    let checked: Vec<Value> = IPV4
        .iter()
        .filter(|(n, _)| *n != "hdrChecksum")
        .map(|(n, _)| f("ipv4", n))
        .chain([f("ipv4", "options")])
        .collect();
    // The options' bits from the IHL ahead in the packet: (ihl - 5) * 32.
    let ihl = json!({"type": "lookahead", "value": [4, 4]});
    let vl_bits = op("<<", op("-", ihl, hex(5)), hex(5));
    let state = |name: &str, id: u32, ops: Value, key: Value, transitions: Value| {
        json!({"name": name, "id": id, "parser_ops": ops, "transition_key": key,
               "transitions": transitions})
    };
    let accept = json!([{"type": "default", "value": null, "mask": null, "next_state": null}]);
    json!({
        "__meta__": {"version": [2, 23], "compiler": "written by hand for pisa-switch's tests"},
        "header_types": [
            standard_metadata(),
            {"name": "ethernet_t", "id": 2, "fields": [["dst", 48, false], ["src", 48, false], ["etherType", 16, false]]},
            {"name": "ipv4_t", "id": 3, "fields": ipv4, "max_length": 60},
            {"name": "opts_t", "id": 4, "fields": [["data", "*"]], "max_length": 40},
            {"name": "tag_t", "id": 5, "fields": [["blob", 256, false], ["kind", 16, false]]}
        ],
        "headers": [
            {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata", "metadata": true},
            {"name": "ethernet", "id": 1, "header_type": "ethernet_t", "metadata": false},
            {"name": "ipv4", "id": 2, "header_type": "ipv4_t", "metadata": false},
            {"name": "opts_copy", "id": 3, "header_type": "opts_t", "metadata": false},
            {"name": "tag", "id": 4, "header_type": "tag_t", "metadata": false},
            {"name": "tag2", "id": 5, "header_type": "tag_t", "metadata": false}
        ],
        "header_stacks": [], "header_union_types": [], "header_unions": [], "header_union_stacks": [],
        "field_lists": [], "learn_lists": [], "errors": errors(), "enums": [],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            state("start", 0,
                  json!([{"op": "extract", "parameters": [{"type": "regular", "value": "ethernet"}]}]),
                  json!([f("ethernet", "etherType")]),
                  json!([
                      {"type": "hexstr", "value": "0x0800", "mask": null, "next_state": "parse_ipv4"},
                      {"type": "hexstr", "value": "0x9999", "mask": null, "next_state": "parse_tag"},
                      {"type": "default", "value": null, "mask": null, "next_state": null}])),
            state("parse_ipv4", 1,
                  json!([{"op": "extract_VL", "parameters": [{"type": "regular", "value": "ipv4"}, vl_bits]}]),
                  json!([]), accept.clone()),
            state("parse_tag", 2,
                  json!([{"op": "extract", "parameters": [{"type": "regular", "value": "tag"}]}]),
                  json!([]), accept)
        ]}],
        "parse_vsets": [],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["ethernet", "ipv4", "opts_copy", "tag", "tag2"]}],
        "meter_arrays": [], "counter_arrays": [], "register_arrays": [],
        "calculations": [{"name": "calc", "id": 0, "algo": "csum16", "input": checked}],
        "actions": [
            {"name": "ingress.route", "id": 0, "runtime_data": [], "primitives": [
                assign(f("ipv4", "ttl"), op("&", op("+", f("ipv4", "ttl"), hex(0xff)), hex(0xff))),
                prim("add_header", vec![hdr("opts_copy")]),
                prim("assign_VL", vec![f("opts_copy", "data"), f("ipv4", "options")]),
                assign(f("standard_metadata", "egress_spec"),
                       op("+", hex(2), f("standard_metadata", "checksum_error")))
            ]},
            {"name": "ingress.copy_tag", "id": 1, "runtime_data": [], "primitives": [
                prim("add_header", vec![hdr("tag2")]),
                assign(f("tag2", "blob"), f("tag", "blob")),
                assign(f("tag2", "kind"), op("+", f("tag", "kind"), hex(1))),
                assign(f("standard_metadata", "egress_spec"), hex(4))
            ]},
            {"name": "ingress.drop", "id": 2, "runtime_data": [],
             "primitives": [prim("mark_to_drop", vec![hdr("standard_metadata")])]}
        ],
        "pipelines": [
            {"name": "ingress", "id": 0, "init_table": "node_err", "action_profiles": [],
             "tables": [
                dummy_table("tbl_route", 0, (0, "ingress.route"), vec![], Value::Null),
                dummy_table("tbl_tag", 1, (1, "ingress.copy_tag"), vec![], Value::Null),
                dummy_table("tbl_drop", 2, (2, "ingress.drop"), vec![], Value::Null)
             ],
             "conditionals": [
                {"name": "node_err", "id": 0,
                 "expression": op("!=", f("standard_metadata", "parser_error"), hex(1)),
                 "true_next": "tbl_drop", "false_next": "node_ipv4"},
                {"name": "node_ipv4", "id": 1,
                 "expression": op("d2b", Value::Null, f("ipv4", "$valid$")),
                 "true_next": "tbl_route", "false_next": "tbl_tag"}
             ]},
            {"name": "egress", "id": 1, "init_table": null, "action_profiles": [], "tables": [],
             "conditionals": []}
        ],
        "checksums": [
            {"name": "cksum", "id": 0, "target": ["ipv4", "hdrChecksum"], "type": "generic",
             "calculation": "calc", "verify": true, "update": true,
             "if_cond": op("d2b", Value::Null, f("ipv4", "$valid$"))}
        ]
    })
}

/// An IPv4 frame with `options` (whole 32-bit words) and a correct checksum over them.
fn ipv4_frame(ttl: u8, options: &[u8]) -> Vec<u8> {
    assert_eq!(options.len() % 4, 0);
    let ihl = 5 + options.len() / 4;
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (ihl * 4 + 8) as u16;
    let mut ip = vec![
        0x40 | ihl as u8,
        0,
        0,
        0,
        0,
        1,
        0,
        0,
        ttl,
        17,
        0,
        0,
        10,
        0,
        0,
        1,
        10,
        0,
        0,
        2,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(options);
    let sum = checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(b"8 bytes!");
    f
}

/// RFC 1071's checksum.
fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[test]
fn ipv4_options_are_extracted_checksummed_carried_to_egress_and_emitted() {
    let mut sw = SimSwitch::new(switch(&program()));
    for options in [&[][..], &[0x94, 0x04, 0, 0][..], &[0x01; 40][..]] {
        let input = ipv4_frame(64, options);
        let out = sw.inject(1, &input, 1);
        assert_eq!(out.len(), 1, "{} bytes of options", options.len());
        // A correct checksum over the options: no checksum error, port 2.
        assert_eq!(out[0].port, 2, "{} bytes of options", options.len());
        // The TTL is one less and the checksum updated over the options; the copy of the
        // options follows them.
        let mut want = ipv4_frame(63, options);
        let end = 14 + 20 + options.len();
        want.splice(end..end, options.iter().copied());
        assert_eq!(out[0].bytes, want, "{} bytes of options", options.len());
    }
    // A wrong checksum over the options is seen: port 3.
    let mut bad = ipv4_frame(64, &[0x94, 0x04, 0, 0]);
    bad[14 + 21] ^= 0xff;
    let out = sw.inject(1, &bad, 1);
    assert_eq!(out[0].port, 3);
}

#[test]
fn extract_vl_refuses_lengths_beyond_the_header_or_the_packet() {
    // The error each frame gets, from the trace (the program drops on any parser error).
    let error = |sw: &mut SimSwitch, frame: &[u8]| {
        sw.worker().set_tracing(true);
        let out = sw.inject(1, frame, 1);
        let trace = sw.take_trace().join("\n");
        let e = trace
            .lines()
            .find_map(|l| l.strip_prefix("parser error="))
            .map(|l| l.split(' ').next().unwrap_or_default().to_owned());
        (out.len(), e)
    };
    let mut sw = SimSwitch::new(switch(&program()));
    // ihl 15 is 40 bytes of options, the most; a packet that ends inside them is too short
    // (PacketTooShort, 2 in the program's errors).
    let mut short = ipv4_frame(64, &[0x01; 40]);
    short.truncate(14 + 20 + 12);
    assert_eq!(error(&mut sw, &short), (0, Some("2".into())));
    // ihl 4 asks for -32 bits: not a length (ParserInvalidArgument, 7).
    let mut neg = ipv4_frame(64, &[]);
    neg[14] = 0x44;
    assert_eq!(error(&mut sw, &neg), (0, Some("7".into())));
    assert_eq!(error(&mut sw, &ipv4_frame(64, &[0x01; 40])), (1, None));
    // With max_length 56, 40 bytes of options are more than the header holds (HeaderTooShort,
    // 5); 36 still parse.
    let mut p = program();
    p["header_types"][2]["max_length"] = json!(56);
    let mut sw = SimSwitch::new(switch(&p));
    assert_eq!(
        error(&mut sw, &ipv4_frame(64, &[0x01; 40])),
        (0, Some("5".into()))
    );
    assert_eq!(error(&mut sw, &ipv4_frame(64, &[0x01; 36])), (1, None));
}

#[test]
fn a_256_bit_field_is_extracted_copied_whole_and_emitted() {
    let mut sw = SimSwitch::new(switch(&program()));
    let mut input = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x99, 0x99];
    let blob: Vec<u8> = (1..=32).collect();
    input.extend_from_slice(&blob);
    input.extend_from_slice(&[0x12, 0x34]);
    input.extend_from_slice(b"payload");
    let out = sw.inject(1, &input, 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 4);
    let mut want = input[..14 + 34].to_vec();
    want.extend_from_slice(&blob);
    want.extend_from_slice(&[0x12, 0x35]);
    want.extend_from_slice(b"payload");
    assert_eq!(out[0].bytes, want);
}

#[test]
fn wide_and_varbit_fields_used_as_values_are_refused_with_their_path() {
    let refuse = |edit: &dyn Fn(&mut Value), want: &str| {
        let mut j = program();
        edit(&mut j);
        let e = bmv2::load(&j.to_string(), "x").expect_err(want).to_string();
        assert!(e.contains(want), "{e}");
    };
    // In an expression.
    refuse(
        &|j| {
            j["actions"][1]["primitives"][2] =
                assign(f("tag2", "kind"), op("+", f("tag", "blob"), hex(1)));
        },
        "tag.blob, a 256-bit field, as a value",
    );
    // Sizes beyond a jumbo frame, and a header type of over 2^32 bits.
    refuse(
        &|j| j["header_types"][3]["max_length"] = json!(100_000),
        "header_types[3].max_length: not supported: max_length 100000",
    );
    refuse(
        &|j| j["header_types"][4]["fields"][0] = json!(["blob", 4_294_967_288u64, false]),
        "header_types[4].fields[",
    );
    // Copied from a field of another kind.
    refuse(
        &|j| {
            j["actions"][0]["primitives"][2] =
                prim("assign_VL", vec![f("opts_copy", "data"), f("tag", "blob")])
        },
        "assign_VL other than of a whole field",
    );
    // A varbit field off a byte boundary, or without a max_length.
    refuse(
        &|j| j["header_types"][3]["fields"] = json!([["x", 4, false], ["data", "*"]]),
        "header_types[3].fields[1]",
    );
    refuse(
        &|j| {
            j["header_types"][3]
                .as_object_mut()
                .unwrap()
                .remove("max_length");
        },
        "header_types[3]: ",
    );
}
