//! Header stacks in a BMv2 JSON program: extraction into the next element with a bottom-of-stack
//! transition on `stack_field`, the stack-out-of-bounds parser error, `pop` and `push`,
//! elements chosen by a computed index (`dereference_header_stack`, `access_field`), the
//! stack's size and last index, and the stack's state carried from ingress to egress.
#![recursion_limit = "256"]

mod common;

use common::{mpls, switch};
use sim::SimSwitch;

/// An MPLS label stack entry: label (20 bits), traffic class (3), bottom of stack (1), TTL (8).
fn label(label: u32, bos: bool, ttl: u8) -> [u8; 4] {
    ((label << 12) | (u32::from(bos) << 8) | u32::from(ttl)).to_be_bytes()
}

fn frame(labels: &[[u8; 4]]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x88, 0x47];
    for l in labels {
        f.extend_from_slice(l);
    }
    f.extend_from_slice(b"payload after the labels");
    f
}

#[test]
fn labels_are_popped_in_ingress_and_pushed_in_egress_on_the_stack_ingress_left() {
    let mut sw = SimSwitch::new(switch(&mpls()));
    sw.worker().set_tracing(true);
    let f = frame(&[label(3, false, 9), label(7, true, 8)]);
    let out = sw.inject(1, &f, 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 3, "sent to the top label's port");
    // Egress pushed label 100 + 2 (the stack as parsed) over the label left after the pop; its
    // TTL is the last index after the push: 1, as egress saw one label left by ingress.
    let want = frame(&[label(102, false, 1), label(7, true, 8)]);
    assert_eq!(out[0].bytes, want);
    let trace = sw.take_trace().join("\n");
    assert!(trace.contains("log_msg label 3"), "{trace}");
    assert!(trace.contains("log_msg label 7"), "{trace}");
}

#[test]
fn a_fourth_label_is_a_stack_out_of_bounds_parser_error() {
    let pipe = switch(&mpls());
    let mut sw = SimSwitch::new(pipe.clone());
    let l = label(1, false, 1);
    assert!(
        sw.inject(1, &frame(&[l, l, l, label(1, true, 1)]), 1)
            .is_empty()
    );
    // Three labels fit.
    assert_eq!(sw.inject(1, &frame(&[l, l, label(1, true, 1)]), 1).len(), 1);
}
