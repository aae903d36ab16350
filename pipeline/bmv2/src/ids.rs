//! The ids a controller's P4Info gives a program's objects, applied to the schema built from the
//! JSON, so that the program answers to the P4Info p4c wrote for it.

use std::collections::HashMap;

use pipeline::table::{FieldMatch, MatchKind};

use crate::load::intern;

/// The ids a P4Info gives a program's objects, by name: a program loaded with them answers to
/// the P4Info p4c wrote for it. Objects the P4Info does not name (p4c's hidden tables for direct
/// action calls, and their actions) keep ids derived from their names.
#[derive(Debug, Default, Clone)]
pub struct P4Ids {
    /// Tables: name -> (id, match field name -> id).
    pub tables: HashMap<String, (u32, HashMap<String, u32>)>,
    /// Match fields the P4Info declares `optional` (table name, field name): p4c writes them
    /// as ternary in the JSON.
    pub optional_fields: std::collections::HashSet<(String, String)>,
    /// Actions: name -> (id, parameter name -> id).
    pub actions: HashMap<String, (u32, HashMap<String, u32>)>,
    /// Action profiles and selectors.
    pub action_profiles: HashMap<String, u32>,
    /// Indexed counters.
    pub counters: HashMap<String, u32>,
    /// Direct counters.
    pub direct_counters: HashMap<String, u32>,
    /// Indexed meters.
    pub meters: HashMap<String, u32>,
    /// Direct meters.
    pub direct_meters: HashMap<String, u32>,
    /// Registers.
    pub registers: HashMap<String, u32>,
    /// Digests (by the learn list's name).
    pub digests: HashMap<String, u32>,
    /// Controller packet metadata (`packet_in`, `packet_out`).
    pub controller_headers: Vec<ControllerHeader>,
    /// Parser value sets: name -> their P4Info's id, member fields and size.
    pub value_sets: HashMap<String, ValueSetIds>,
}

/// A parser value set of a P4Info.
#[derive(Debug, Default, Clone)]
pub struct ValueSetIds {
    /// Its id.
    pub id: u32,
    /// Its member's fields in order: (id, name, width).
    pub fields: Vec<(u32, String, u8)>,
    /// The most members it holds (0: unbounded).
    pub size: usize,
}

/// A controller packet metadata header of a P4Info.
#[derive(Debug, Default, Clone)]
pub struct ControllerHeader {
    /// `packet_in` or `packet_out`.
    pub name: String,
    /// Its id.
    pub id: u32,
    /// Its fields in wire order: (id, name, width).
    pub fields: Vec<(u32, String, u8)>,
}

impl P4Ids {
    /// Gives `schema`'s objects the ids named here.
    pub(crate) fn apply(&self, schema: &mut pipeline::schema::Schema) {
        for t in &mut schema.tables {
            if let Some((id, fields)) = self.tables.get(t.name) {
                t.id = *id;
                for f in &mut t.fields {
                    if let Some(&fid) = fields.get(f.name) {
                        f.id = fid;
                    }
                }
            }
            for (k, f) in t.fields.iter_mut().enumerate() {
                let optional = (t.name.to_owned(), f.name.to_owned());
                if f.kind == MatchKind::Ternary && self.optional_fields.contains(&optional) {
                    f.kind = MatchKind::Optional;
                    // A ternary const entry on it is a value with a full mask, or a wildcard.
                    for e in &mut t.const_entries {
                        if let Some(m @ FieldMatch::Ternary { .. }) = e.key.get_mut(k) {
                            let FieldMatch::Ternary { value, mask } = *m else {
                                continue;
                            };
                            *m = FieldMatch::Optional((mask != 0).then_some(value));
                        }
                    }
                }
            }
        }
        for a in &mut schema.actions {
            if let Some((id, params)) = self.actions.get(a.name) {
                a.id = *id;
                for p in &mut a.params {
                    if let Some(&pid) = params.get(p.name) {
                        p.id = pid;
                    }
                }
            }
        }
        let by_name = |m: &HashMap<String, u32>, name: &str, id: &mut u32| {
            if let Some(&x) = m.get(name) {
                *id = x;
            }
        };
        for p in &mut schema.action_profiles {
            by_name(&self.action_profiles, p.name, &mut p.id);
        }
        for c in &mut schema.counters {
            by_name(&self.counters, c.name, &mut c.id);
        }
        for c in &mut schema.direct_counters {
            by_name(&self.direct_counters, c.name, &mut c.id);
        }
        for m in &mut schema.meters {
            by_name(&self.meters, m.name, &mut m.id);
        }
        for m in &mut schema.direct_meters {
            by_name(&self.direct_meters, m.name, &mut m.id);
        }
        for r in &mut schema.registers {
            by_name(&self.registers, r.name, &mut r.id);
        }
        for d in &mut schema.digests {
            by_name(&self.digests, d.name, &mut d.id);
        }
        for v in &mut schema.value_sets {
            let Some(ids) = self.value_sets.get(v.name) else {
                continue;
            };
            v.id = ids.id;
            if ids.size > 0 {
                v.size = ids.size;
            }
            // The P4Info's fields, when they make up the width the JSON compressed them to.
            let width: u32 = ids.fields.iter().map(|f| u32::from(f.2)).sum();
            if width == v.bitwidth() {
                v.fields = ids
                    .fields
                    .iter()
                    .map(|(fid, n, w)| (*fid, intern(n), *w))
                    .collect();
            }
        }
        schema.controller_headers = self
            .controller_headers
            .iter()
            .map(|h| pipeline::schema::ControllerHeaderDef {
                id: h.id,
                name: intern(&h.name),
                fields: h
                    .fields
                    .iter()
                    .map(|(fid, n, w)| (*fid, intern(n), *w))
                    .collect(),
            })
            .collect();
    }
}
