//! The metadata that rides from ingress to egress: the fields egress may read.
//!
//! Ingress hands its header vector to egress through the traffic manager: the headers the
//! deparser emits in the frame, the rest in a bridge behind it ([`crate::Bmv2Program`]).
//! Egress starts from zeros, so a metadata field that nothing egress runs can read need not
//! ride. A field rides if its name appears anywhere in what egress runs (its pipeline: table
//! keys, conditions, selectors, and every action its tables may call) or in what either side
//! may run (calculations, checksums, field lists, which resubmits, recirculations and clones
//! keep, learn lists, meters' result targets, and the aliases of standard metadata). The search
//! goes by name over the whole JSON of those parts, so it errs toward riding: a string that only
//! looks like a reference keeps its field, and a construct the search does not know is still
//! searched.

use std::collections::HashSet;

use serde_json::Value;

use crate::layout::Layout;

/// The metadata fields egress may read, in field order.
pub(crate) fn egress_reads(doc: &Value, l: &Layout) -> Vec<u32> {
    let mut live = vec![false; l.fields.len()];
    let mut mark = |v: &Value| walk(v, l, &mut live);
    for part in [
        "calculations",
        "checksums",
        "field_lists",
        "learn_lists",
        "meter_arrays",
        "field_aliases",
    ] {
        if let Some(v) = doc.get(part) {
            mark(v);
        }
    }
    let pipelines = doc.get("pipelines").and_then(Value::as_array);
    let egress = pipelines.and_then(|ps| {
        ps.iter()
            .find(|p| p.get("name").and_then(Value::as_str) == Some("egress"))
    });
    if let Some(e) = egress {
        mark(e);
        // The actions its tables may call, by id and (the older format) by name.
        let mut ids = HashSet::new();
        let mut names = HashSet::new();
        for t in e
            .get("tables")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let list = |k: &str| t.get(k).and_then(Value::as_array).into_iter().flatten();
            ids.extend(list("action_ids").filter_map(Value::as_i64));
            names.extend(list("actions").filter_map(Value::as_str));
        }
        for a in doc
            .get("actions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = a.get("id").and_then(Value::as_i64);
            let name = a.get("name").and_then(Value::as_str);
            if id.is_some_and(|i| ids.contains(&i)) || name.is_some_and(|n| names.contains(n)) {
                mark(a);
            }
        }
    }
    (0..l.fields.len() as u32)
        .filter(|&f| {
            let fd = &l.fields[f as usize];
            live[f as usize] && l.headers[fd.header as usize].metadata && fd.wide.is_none()
        })
        .collect()
}

/// Marks every field `v` names: a pair `[header, field]`, or a header named alone (all its
/// fields).
fn walk(v: &Value, l: &Layout, live: &mut [bool]) {
    match v {
        Value::String(s) => {
            if let Ok(h) = l.header("", s) {
                let hd = &l.headers[h as usize];
                live[hd.first as usize..(hd.first + hd.count) as usize].fill(true);
            }
        }
        Value::Array(a) => {
            if let [Value::String(h), Value::String(f)] = a.as_slice()
                && let Ok(f) = l.any_field("", h, f)
            {
                // A field, not its header whole.
                live[f as usize] = true;
            } else {
                a.iter().for_each(|x| walk(x, l, live));
            }
        }
        Value::Object(o) => o.values().for_each(|x| walk(x, l, live)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Doc;
    use serde::Deserialize;

    #[test]
    fn only_what_egress_or_a_list_names_rides() {
        let raw: Value =
            serde_json::from_str(include_str!("../tests/programs/router.json")).unwrap();
        let l = Layout::build(&Doc::deserialize(&raw).unwrap()).unwrap();
        let names: Vec<String> = egress_reads(&raw, &l)
            .into_iter()
            .map(|f| {
                let fd = &l.fields[f as usize];
                format!("{}.{}", l.headers[fd.header as usize].name, fd.name)
            })
            .collect();
        // egress.mark reads meta.tag and four standard fields; meta.pass is kept by a
        // resubmit's field list. What only ingress reads (the ingress port, the multicast
        // group, the ACL's ...) and every header field stay out.
        assert_eq!(
            names,
            [
                "meta.tag",
                "meta.pass",
                "standard_metadata.egress_port",
                "standard_metadata.instance_type",
                "standard_metadata.packet_length",
                "standard_metadata.egress_rid",
            ]
        );
    }
}
