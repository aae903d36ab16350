//! Header unions in a BMv2 JSON program: a union stack of options extracted by member
//! (`union_stack` extracts, a `union_stack_field` transition on the member just extracted), at
//! most one member of each union valid (extracting or adding one invalidates the other), the
//! union stack's out-of-bounds error, and the unions' state carried from ingress to egress.
#![recursion_limit = "256"]

mod common;

use common::switch;
use sim::SimSwitch;

fn unions() -> serde_json::Value {
    serde_json::from_str(include_str!("programs/unions.json")).unwrap()
}

/// Option A: kind 0x0a, bottom of stack, a 16-bit value.
fn opt_a(bos: bool, a: u16) -> Vec<u8> {
    let mut o = vec![0x0a, u8::from(bos)];
    o.extend_from_slice(&a.to_be_bytes());
    o
}

/// Option B: kind 0x0b, bottom of stack, a 32-bit value.
fn opt_b(bos: bool, b: u32) -> Vec<u8> {
    let mut o = vec![0x0b, u8::from(bos)];
    o.extend_from_slice(&b.to_be_bytes());
    o
}

fn frame(options: &[Vec<u8>]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x99, 0x99];
    for o in options {
        f.extend_from_slice(o);
    }
    f.extend_from_slice(b"payload after the options");
    f
}

#[test]
fn each_union_holds_the_member_extracted_and_the_deparser_emits_it() {
    let mut sw = SimSwitch::new(switch(&unions()));
    // B then A: union 0 holds optB_0 (port bit 1), union 1 optA_1 (bit 2); egress turns union
    // 1's member into an option B, which invalidates optA_1.
    let out = sw.inject(1, &frame(&[opt_b(false, 7), opt_a(true, 9)]), 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 16 + 2 + 4);
    assert_eq!(out[0].bytes, frame(&[opt_b(false, 7), opt_b(true, 0)]));
    // A alone: union 0 holds optA_0; the frame leaves unchanged.
    let f = frame(&[opt_a(true, 3)]);
    let out = sw.inject(1, &f, 1);
    assert_eq!((out[0].port, &out[0].bytes), (16 + 1, &f));
    // B, B: both unions hold their option B.
    let f = frame(&[opt_b(false, 1), opt_b(true, 2)]);
    let out = sw.inject(1, &f, 1);
    assert_eq!((out[0].port, &out[0].bytes), (16 + 2 + 8, &f));
}

#[test]
fn a_third_option_is_out_of_the_union_stacks_bounds() {
    let mut sw = SimSwitch::new(switch(&unions()));
    let three = frame(&[opt_a(false, 1), opt_a(false, 2), opt_a(true, 3)]);
    assert!(
        sw.inject(1, &three, 1).is_empty(),
        "a parser error drops it"
    );
}

#[test]
fn unions_whose_members_or_types_disagree_are_refused_with_their_path() {
    let refuse = |edit: &dyn Fn(&mut serde_json::Value), want: &str| {
        let mut j = unions();
        edit(&mut j);
        let e = bmv2::load(&j.to_string(), "x").expect_err(want).to_string();
        assert!(e.contains(want), "{e}");
    };
    // A member whose header is not of the type the union type names.
    refuse(
        &|j| j["header_unions"][0]["header_ids"] = serde_json::json!([3, 2]),
        "header_unions[0].header_ids[0]: member optionA of options is a optionA_t",
    );
    // A union of another type in the stack.
    refuse(
        &|j| {
            let types = j["header_union_types"].as_array_mut().unwrap();
            types.push(serde_json::json!({"name": "other", "id": 1,
                "headers": [["optionA", "optionA_t"], ["optionB", "optionB_t"]]}));
            j["header_unions"][1]["union_type"] = "other".into();
        },
        "header_union_stacks[0].header_union_ids[1]: a union of type other in a stack of options",
    );
    refuse(
        &|j| j["header_union_stacks"][0]["header_union_ids"] = serde_json::json!([]),
        "header_union_stacks[0]: not supported: a union stack of 0 unions",
    );
}

/// Replaces egress's action with `primitives`, run on every packet.
fn with_egress(primitives: serde_json::Value) -> serde_json::Value {
    let mut j = unions();
    j["actions"][2]["primitives"] = primitives;
    j["pipelines"][1]["init_table"] = "tbl_to_b".into();
    j
}

fn union_arg(kind: &str, name: &str) -> serde_json::Value {
    serde_json::json!({"type": kind, "value": name})
}

#[test]
fn a_unions_validity_is_any_of_its_members() {
    // Ingress sends to 16 + options_1's validity.
    let mut j = unions();
    j["actions"][0]["primitives"][0]["parameters"][1] = serde_json::json!({"type": "expression",
        "value": {"op": "+", "left": {"type": "hexstr", "value": "0x10"},
                  "right": {"type": "expression", "value": {"op": "valid_union", "left": null,
                            "right": union_arg("header_union", "options_1")}}}});
    let mut sw = SimSwitch::new(switch(&j));
    assert_eq!(sw.inject(1, &frame(&[opt_a(true, 1)]), 1)[0].port, 16);
    assert_eq!(
        sw.inject(1, &frame(&[opt_a(false, 1), opt_b(true, 2)]), 1)[0].port,
        17
    );
}

#[test]
fn unions_and_union_stacks_are_assigned_pushed_and_popped() {
    let run = |prims: serde_json::Value, options: &[Vec<u8>]| {
        let mut sw = SimSwitch::new(switch(&with_egress(prims)));
        let out = sw.inject(1, &frame(options), 1);
        assert_eq!(out.len(), 1);
        out[0].bytes.clone()
    };
    let two = [opt_b(false, 7), opt_a(true, 9)];
    // assign_union: union 0 takes union 1's member, option A; its option B becomes invalid.
    let assign = serde_json::json!([{"op": "assign_union", "parameters": [
        union_arg("header_union", "options_0"), union_arg("header_union", "options_1")]}]);
    assert_eq!(run(assign, &two), frame(&[opt_a(true, 9), opt_a(true, 9)]));
    // pop: the stack moves down by one; push: up by one, the first union invalid.
    let pop = serde_json::json!([{"op": "pop", "parameters": [
        union_arg("header_union_stack", "options"), {"type": "hexstr", "value": "0x1"}]}]);
    assert_eq!(run(pop, &two), frame(&[opt_a(true, 9)]));
    let push = serde_json::json!([{"op": "push", "parameters": [
        union_arg("header_union_stack", "options"), {"type": "hexstr", "value": "0x1"}]}]);
    assert_eq!(run(push, &two), frame(&[opt_b(false, 7)]));
    // A union assigned from a union stack is refused with its path.
    let mut bad = with_egress(serde_json::json!([{"op": "assign_union", "parameters": [
        union_arg("header_union", "options_0"), union_arg("header_union_stack", "options")]}]));
    let e = bmv2::load(&bad.to_string(), "x").unwrap_err().to_string();
    assert!(e.contains("actions[2].primitives[0]"), "{e}");
    assert!(e.contains("two kinds or sizes"), "{e}");
    bad["actions"][2]["primitives"][0]["parameters"][1] = union_arg("header_union", "nowhere");
    let e = bmv2::load(&bad.to_string(), "x").unwrap_err().to_string();
    assert!(e.contains("no header union nowhere"), "{e}");
}
