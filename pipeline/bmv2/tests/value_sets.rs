//! Parser value sets in a BMv2 JSON program: `select` transitions on sets the control plane
//! fills at run time, matched against the key's fields concatenated without padding (BMv2's
//! compressed form), with and without a static mask, and emptied by a pipeline reset.
#![recursion_limit = "256"]

mod common;

use common::{switch, vsets};
use sim::SimSwitch;

fn frame(ether_type: u16, f1: u8, f2: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    f.extend_from_slice(&ether_type.to_be_bytes());
    f.extend_from_slice(&((u16::from(f1) << 13) | f2).to_be_bytes());
    f.extend_from_slice(b"payload");
    f
}

/// The port a frame leaves on (1 + the value set state that marked it).
fn port(sw: &mut SimSwitch, f: &[u8]) -> u16 {
    let out = sw.inject(1, f, 1);
    assert_eq!(out.len(), 1, "one copy out");
    assert_eq!(out[0].bytes, f, "the frame leaves as it came");
    out[0].port
}

#[test]
fn transitions_follow_the_members_the_control_plane_sets() {
    let pipe = switch(&vsets());
    let schema = pipe.control.schema().clone();
    let set =
        |name: &str| &pipe.control.externs().value_sets[schema.value_set_by_name(name).unwrap()];
    let mut sw = SimSwitch::new(pipe.clone());
    // Empty sets match nothing.
    assert_eq!(port(&mut sw, &frame(0x9000, 5, 0x123)), 1);

    set("pv1").add(0x9000).unwrap();
    assert_eq!(port(&mut sw, &frame(0x9000, 5, 0x123)), 2);
    assert_eq!(port(&mut sw, &frame(0x9001, 5, 0x123)), 1);

    // A member of two fields is their values concatenated: f1 (3 bits) then f2 (13 bits).
    // The byte-padded key (0x05_0123) is not what a member holds.
    set("pv2").add(0x05_0123).unwrap_err();
    set("pv2").add((5 << 13) | 0x123).unwrap();
    assert_eq!(port(&mut sw, &frame(0x9000, 5, 0x123)), 3);
    assert_eq!(port(&mut sw, &frame(0x9000, 5, 0x124)), 2);

    // pv3 matches under the transition's mask 0xff00: any low byte.
    set("pv3").add(0x4200).unwrap();
    assert_eq!(port(&mut sw, &frame(0x9000, 2, 0x2ab)), 4);
    assert_eq!(port(&mut sw, &frame(0x9000, 2, 0x3ab)), 2);

    // Removed, and replaced.
    assert!(set("pv2").remove((5 << 13) | 0x123));
    assert_eq!(port(&mut sw, &frame(0x9000, 5, 0x123)), 2);
    set("pv1").replace(&[0x9100]).unwrap();
    assert_eq!(port(&mut sw, &frame(0x9000, 5, 0x123)), 1);
    assert_eq!(port(&mut sw, &frame(0x9100, 5, 0x123)), 2);

    // A pipeline reset empties them.
    pipe.control.clear();
    assert!(set("pv1").members().is_empty() && set("pv3").members().is_empty());
    assert_eq!(port(&mut sw, &frame(0x9100, 2, 0x2ab)), 1);
}

#[test]
fn a_value_set_on_a_key_of_another_width_is_refused_with_its_path() {
    let mut p = vsets();
    p["parse_vsets"][1]["compressed_bitwidth"] = 12.into();
    let e = bmv2::load(&p.to_string(), "vsets").unwrap_err().to_string();
    assert!(
        e.contains("parsers[0].parse_states[1].transitions[0]"),
        "{e}"
    );
    assert!(e.contains("a value set of 12 bits on a key of 16"), "{e}");
    let mut p = vsets();
    p["parsers"][0]["parse_states"][0]["transitions"][1]["value"] = "nowhere".into();
    let e = bmv2::load(&p.to_string(), "vsets").unwrap_err().to_string();
    assert!(e.contains("no value set \"nowhere\""), "{e}");
}
