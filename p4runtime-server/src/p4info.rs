//! A program's P4Info as the `p4.config.v1.P4Info` message, built from the same
//! [`pipeline::schema::Schema`] as the checked-in text (`pipeline/programs/p4info/<program>.txt`), so the
//! service hands controllers exactly the ids, names and widths the data plane uses. Only fields of
//! P4Runtime 1.4.1 are set (p4runtime-shell parses P4Info with those descriptors).

use pipeline::externs::{CounterKind, MeterAlgorithm, MeterUnit};
use pipeline::schema::{ActionScope, Schema, alias};
use pipeline::table::MatchKind;

use crate::proto::p4::config::v1 as p4i;

fn preamble(id: u32, name: &str) -> Option<p4i::Preamble> {
    Some(p4i::Preamble {
        id,
        name: name.to_string(),
        alias: alias(name).to_string(),
        ..Default::default()
    })
}

fn bitstring(bitwidth: u8) -> p4i::P4DataTypeSpec {
    use p4i::p4_bitstring_like_type_spec::TypeSpec as Bits;
    use p4i::p4_data_type_spec::TypeSpec;
    let bit = p4i::P4BitTypeSpec {
        bitwidth: i32::from(bitwidth),
    };
    let bits = p4i::P4BitstringLikeTypeSpec {
        type_spec: Some(Bits::Bit(bit)),
        ..Default::default()
    };
    p4i::P4DataTypeSpec {
        type_spec: Some(TypeSpec::Bitstring(bits)),
    }
}

fn match_type(kind: MatchKind) -> p4i::match_field::MatchType {
    use p4i::match_field::MatchType as M;
    match kind {
        MatchKind::Exact => M::Exact,
        MatchKind::Lpm => M::Lpm,
        MatchKind::Ternary => M::Ternary,
        MatchKind::Range => M::Range,
        MatchKind::Optional => M::Optional,
    }
}

fn counter_spec(kind: CounterKind) -> Option<p4i::CounterSpec> {
    use p4i::counter_spec::Unit;
    let unit = match kind {
        CounterKind::Packets => Unit::Packets,
        CounterKind::Bytes => Unit::Bytes,
        CounterKind::Both => Unit::Both,
    };
    Some(p4i::CounterSpec { unit: unit as i32 })
}

fn meter_spec(unit: MeterUnit, algorithm: MeterAlgorithm) -> Option<p4i::MeterSpec> {
    use p4i::meter_spec::{Type, Unit};
    let unit = match unit {
        MeterUnit::Packets => Unit::Packets,
        MeterUnit::Bytes => Unit::Bytes,
    };
    let kind = match algorithm {
        MeterAlgorithm::TrTcm => Type::TwoRateThreeColor,
        MeterAlgorithm::SrTcm => Type::SingleRateThreeColor,
    };
    Some(p4i::MeterSpec {
        unit: unit as i32,
        r#type: kind as i32,
    })
}

fn size(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The P4Info of `schema`.
pub fn p4info(schema: &Schema) -> p4i::P4Info {
    let tables = schema
        .tables
        .iter()
        .map(|t| {
            let match_fields = t
                .fields
                .iter()
                .map(|f| p4i::MatchField {
                    id: f.id,
                    name: f.name.to_string(),
                    bitwidth: i32::from(f.bitwidth),
                    r#match: Some(p4i::match_field::Match::MatchType(match_type(f.kind) as i32)),
                    ..Default::default()
                })
                .collect();
            let action_refs = t
                .actions
                .iter()
                .map(|r| {
                    use p4i::action_ref::Scope;
                    let (scope, annotation) = match r.scope {
                        ActionScope::TableAndDefault => (Scope::TableAndDefault, None),
                        ActionScope::TableOnly => (Scope::TableOnly, Some("@tableonly")),
                        ActionScope::DefaultOnly => (Scope::DefaultOnly, Some("@defaultonly")),
                    };
                    p4i::ActionRef {
                        id: schema.actions[r.action].id,
                        scope: scope as i32,
                        annotations: annotation.map(str::to_string).into_iter().collect(),
                        ..Default::default()
                    }
                })
                .collect();
            let direct_resource_ids = t
                .direct_counter
                .map(|c| schema.direct_counters[c].id)
                .into_iter()
                .chain(t.direct_meter.map(|m| schema.direct_meters[m].id))
                .collect();
            p4i::Table {
                preamble: preamble(t.id, t.name),
                match_fields,
                action_refs,
                const_default_action_id: if t.const_default {
                    schema.actions[t.default_action.0].id
                } else {
                    0
                },
                implementation_id: t.implementation.map_or(0, |p| schema.action_profiles[p].id),
                direct_resource_ids,
                size: size(t.size),
                idle_timeout_behavior: if t.idle_timeout {
                    p4i::table::IdleTimeoutBehavior::NotifyControl as i32
                } else {
                    p4i::table::IdleTimeoutBehavior::NoTimeout as i32
                },
                is_const_table: t.is_const,
                ..Default::default()
            }
        })
        .collect();
    let actions = schema
        .actions
        .iter()
        .map(|a| p4i::Action {
            preamble: preamble(a.id, a.name),
            params: a
                .params
                .iter()
                .map(|p| p4i::action::Param {
                    id: p.id,
                    name: p.name.to_string(),
                    bitwidth: i32::from(p.bitwidth),
                    ..Default::default()
                })
                .collect(),
        })
        .collect();
    let action_profiles = schema
        .action_profiles
        .iter()
        .map(|p| p4i::ActionProfile {
            preamble: preamble(p.id, p.name),
            table_ids: p.tables.iter().map(|&t| schema.tables[t].id).collect(),
            with_selector: p.selector,
            size: size(p.size),
            max_group_size: i32::try_from(p.max_group_size).unwrap_or(i32::MAX),
            ..Default::default()
        })
        .collect();
    let counters = schema
        .counters
        .iter()
        .map(|c| p4i::Counter {
            preamble: preamble(c.id, c.name),
            spec: counter_spec(c.kind),
            size: size(c.size),
            ..Default::default()
        })
        .collect();
    let direct_counters = schema
        .direct_counters
        .iter()
        .map(|c| p4i::DirectCounter {
            preamble: preamble(c.id, c.name),
            spec: counter_spec(c.kind),
            direct_table_id: c.direct_table.map_or(0, |t| schema.tables[t].id),
        })
        .collect();
    let meters = schema
        .meters
        .iter()
        .map(|m| p4i::Meter {
            preamble: preamble(m.id, m.name),
            spec: meter_spec(m.unit, m.algorithm),
            size: size(m.size),
            ..Default::default()
        })
        .collect();
    let direct_meters = schema
        .direct_meters
        .iter()
        .map(|m| p4i::DirectMeter {
            preamble: preamble(m.id, m.name),
            spec: meter_spec(m.unit, m.algorithm),
            direct_table_id: m.direct_table.map_or(0, |t| schema.tables[t].id),
        })
        .collect();
    let controller_packet_metadata = schema
        .controller_headers
        .iter()
        .map(|h| {
            let mut pre = preamble(h.id, h.name);
            if let Some(p) = pre.as_mut() {
                p.annotations
                    .push(format!("@controller_header(\"{}\")", h.name));
            }
            p4i::ControllerPacketMetadata {
                preamble: pre,
                metadata: h
                    .fields
                    .iter()
                    .map(
                        |&(id, name, bitwidth)| p4i::controller_packet_metadata::Metadata {
                            id,
                            name: name.to_string(),
                            bitwidth: i32::from(bitwidth),
                            ..Default::default()
                        },
                    )
                    .collect(),
            }
        })
        .collect();
    let registers = schema
        .registers
        .iter()
        .map(|r| p4i::Register {
            preamble: preamble(r.id, r.name),
            type_spec: Some(bitstring(r.bitwidth)),
            size: i32::try_from(r.size).unwrap_or(i32::MAX),
            ..Default::default()
        })
        .collect();
    let value_sets = schema
        .value_sets
        .iter()
        .map(|v| p4i::ValueSet {
            preamble: preamble(v.id, v.name),
            r#match: v
                .fields
                .iter()
                .map(|&(id, name, bitwidth)| p4i::MatchField {
                    id,
                    name: name.to_string(),
                    bitwidth: i32::from(bitwidth),
                    r#match: Some(p4i::match_field::Match::MatchType(
                        p4i::match_field::MatchType::Exact as i32,
                    )),
                    ..Default::default()
                })
                .collect(),
            size: i32::try_from(v.size).unwrap_or(i32::MAX),
        })
        .collect();
    let mut type_info = p4i::P4TypeInfo::default();
    let digests = schema
        .digests
        .iter()
        .map(|d| {
            let name = pipeline::p4info::struct_name(d.name);
            let members = d
                .fields
                .iter()
                .map(|&(n, w)| p4i::p4_struct_type_spec::Member {
                    name: n.to_string(),
                    type_spec: Some(bitstring(w)),
                })
                .collect();
            type_info.structs.insert(
                name.clone(),
                p4i::P4StructTypeSpec {
                    members,
                    ..Default::default()
                },
            );
            let named = p4i::P4NamedType { name };
            p4i::Digest {
                preamble: preamble(d.id, d.name),
                type_spec: Some(p4i::P4DataTypeSpec {
                    type_spec: Some(p4i::p4_data_type_spec::TypeSpec::Struct(named)),
                }),
            }
        })
        .collect();
    p4i::P4Info {
        pkg_info: Some(p4i::PkgInfo {
            name: schema.name.to_string(),
            version: schema.version.to_string(),
            arch: schema.arch.to_string(),
            ..Default::default()
        }),
        tables,
        actions,
        action_profiles,
        counters,
        direct_counters,
        meters,
        direct_meters,
        controller_packet_metadata,
        registers,
        digests,
        value_sets,
        type_info: (!schema.digests.is_empty()).then_some(type_info),
        ..Default::default()
    }
}

/// The ids a controller's P4Info gives each object, by name: what a BMv2 JSON program is loaded
/// with so that it answers to the P4Info p4c wrote for it.
pub fn program_ids(p: &p4i::P4Info) -> bmv2::P4Ids {
    use std::collections::HashMap;
    fn name_id(pre: Option<&p4i::Preamble>) -> Option<(String, u32)> {
        pre.map(|p| (p.name.clone(), p.id))
    }
    fn objects<'a>(it: impl Iterator<Item = Option<&'a p4i::Preamble>>) -> HashMap<String, u32> {
        it.filter_map(name_id).collect()
    }
    let width = |w: i32| u8::try_from(w).unwrap_or(0);
    bmv2::P4Ids {
        tables: p
            .tables
            .iter()
            .filter_map(|t| {
                let (name, id) = name_id(t.preamble.as_ref())?;
                let fields = t
                    .match_fields
                    .iter()
                    .map(|f| (f.name.clone(), f.id))
                    .collect();
                Some((name, (id, fields)))
            })
            .collect(),
        actions: p
            .actions
            .iter()
            .filter_map(|a| {
                let (name, id) = name_id(a.preamble.as_ref())?;
                let params = a.params.iter().map(|q| (q.name.clone(), q.id)).collect();
                Some((name, (id, params)))
            })
            .collect(),
        optional_fields: p
            .tables
            .iter()
            .flat_map(|t| {
                let table = t
                    .preamble
                    .as_ref()
                    .map(|p| p.name.clone())
                    .unwrap_or_default();
                t.match_fields
                    .iter()
                    .filter(|f| {
                        f.r#match
                            == Some(p4i::match_field::Match::MatchType(
                                p4i::match_field::MatchType::Optional as i32,
                            ))
                    })
                    .map(move |f| (table.clone(), f.name.clone()))
            })
            .collect(),
        action_profiles: objects(p.action_profiles.iter().map(|x| x.preamble.as_ref())),
        counters: objects(p.counters.iter().map(|x| x.preamble.as_ref())),
        direct_counters: objects(p.direct_counters.iter().map(|x| x.preamble.as_ref())),
        meters: objects(p.meters.iter().map(|x| x.preamble.as_ref())),
        direct_meters: objects(p.direct_meters.iter().map(|x| x.preamble.as_ref())),
        registers: objects(p.registers.iter().map(|x| x.preamble.as_ref())),
        digests: objects(p.digests.iter().map(|x| x.preamble.as_ref())),
        controller_headers: p
            .controller_packet_metadata
            .iter()
            .filter_map(|c| {
                let (name, id) = name_id(c.preamble.as_ref())?;
                let fields = c
                    .metadata
                    .iter()
                    .map(|m| (m.id, m.name.clone(), width(m.bitwidth)))
                    .collect();
                Some(bmv2::ControllerHeader { name, id, fields })
            })
            .collect(),
        value_sets: p
            .value_sets
            .iter()
            .filter_map(|v| {
                let (name, id) = name_id(v.preamble.as_ref())?;
                let fields = v
                    .r#match
                    .iter()
                    .map(|f| (f.id, f.name.clone(), width(f.bitwidth)))
                    .collect();
                let size = usize::try_from(v.size).unwrap_or(0);
                Some((name, bmv2::ValueSetIds { id, fields, size }))
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// The message carries every object of the schema with its id, name and widths, and
    /// survives an encode/decode round trip.
    #[test]
    fn basic_p4info_matches_its_schema() {
        for name in programs::names() {
            let program = programs::by_name(name).unwrap();
            let s = program.schema();
            let info = p4info(s);
            let back = p4i::P4Info::decode(info.encode_to_vec().as_slice()).unwrap();
            assert_eq!(back, info);
            assert_eq!(info.tables.len(), s.tables.len());
            for (t, d) in info.tables.iter().zip(&s.tables) {
                let pre = t.preamble.as_ref().unwrap();
                assert_eq!((pre.id, pre.name.as_str()), (d.id, d.name));
                assert_eq!(t.size, d.size as i64);
                let widths: Vec<i32> = t.match_fields.iter().map(|f| f.bitwidth).collect();
                let want: Vec<i32> = d.fields.iter().map(|f| i32::from(f.bitwidth)).collect();
                assert_eq!(widths, want);
                assert_eq!(t.action_refs.len(), d.actions.len());
            }
            for (a, d) in info.actions.iter().zip(&s.actions) {
                assert_eq!(a.preamble.as_ref().unwrap().id, d.id);
                assert_eq!(a.params.len(), d.params.len());
            }
            assert_eq!(info.counters.len(), s.counters.len());
            assert_eq!(info.direct_counters.len(), s.direct_counters.len());
            assert_eq!(info.meters.len(), s.meters.len());
            assert_eq!(info.direct_meters.len(), s.direct_meters.len());
            assert_eq!(info.registers.len(), s.registers.len());
            assert_eq!(info.digests.len(), s.digests.len());
            let names: Vec<&str> = info
                .controller_packet_metadata
                .iter()
                .map(|c| c.preamble.as_ref().unwrap().name.as_str())
                .collect();
            assert_eq!(names, ["packet_in", "packet_out"]);
            // Every id in the text P4Info appears in the message, and the other way round.
            let text = pipeline::p4info::to_text(s);
            for t in &info.tables {
                assert!(text.contains(&format!("id: {}\n", t.preamble.as_ref().unwrap().id)));
            }
        }
    }
}
