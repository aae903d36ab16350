//! P4Info generation: a program's [`Schema`] printed as `p4.config.v1.P4Info` in protobuf text
//! format.
//!
//! Each program's P4Info is checked in as `pipeline/programs/p4info/<program>.txt` so users can hand it to
//! their controller; a test fails when the checked-in text and the generated text differ. Only
//! fields that exist in P4Runtime 1.4.1 are emitted (p4runtime-shell parses P4Info with the 1.4.1
//! descriptors).

use std::fmt::Write;

use crate::externs::{CounterKind, MeterUnit};
use crate::schema::{ActionScope, Schema, alias};
use crate::table::MatchKind;

/// A tiny indenting writer for protobuf text format.
struct Text {
    out: String,
    depth: usize,
}

impl Text {
    fn open(&mut self, name: &str) {
        self.line(format_args!("{name} {{"));
        self.depth += 1;
    }

    fn close(&mut self) {
        self.depth -= 1;
        self.line(format_args!("}}"));
    }

    fn line(&mut self, args: std::fmt::Arguments<'_>) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        // Writing to a String cannot fail.
        let _ = self.out.write_fmt(args);
        self.out.push('\n');
    }

    fn field(&mut self, name: &str, value: impl std::fmt::Display) {
        self.line(format_args!("{name}: {value}"));
    }

    fn string(&mut self, name: &str, value: &str) {
        self.line(format_args!("{name}: \"{}\"", value.escape_default()));
    }

    fn preamble(&mut self, id: u32, name: &str, annotations: &[String]) {
        self.open("preamble");
        self.field("id", id);
        self.string("name", name);
        self.string("alias", alias(name));
        for a in annotations {
            self.string("annotations", a);
        }
        self.close();
    }

    fn bitstring(&mut self, bitwidth: u8) {
        self.open("type_spec");
        self.open("bitstring");
        self.open("bit");
        self.field("bitwidth", bitwidth);
        self.close();
        self.close();
        self.close();
    }
}

fn match_type(kind: MatchKind) -> &'static str {
    match kind {
        MatchKind::Exact => "EXACT",
        MatchKind::Lpm => "LPM",
        MatchKind::Ternary => "TERNARY",
        MatchKind::Range => "RANGE",
        MatchKind::Optional => "OPTIONAL",
    }
}

fn counter_unit(kind: CounterKind) -> &'static str {
    match kind {
        CounterKind::Packets => "PACKETS",
        CounterKind::Bytes => "BYTES",
        CounterKind::Both => "BOTH",
    }
}

fn meter_unit(unit: MeterUnit) -> &'static str {
    match unit {
        MeterUnit::Packets => "PACKETS",
        MeterUnit::Bytes => "BYTES",
    }
}

/// The P4Info of `schema` in protobuf text format.
pub fn to_text(schema: &Schema) -> String {
    let mut t = Text {
        out: String::new(),
        depth: 0,
    };
    t.open("pkg_info");
    t.string("name", schema.name);
    t.string("version", schema.version);
    t.string("arch", schema.arch);
    t.close();
    for table in &schema.tables {
        t.open("tables");
        t.preamble(table.id, table.name, &[]);
        for f in &table.fields {
            t.open("match_fields");
            t.field("id", f.id);
            t.string("name", f.name);
            t.field("bitwidth", f.bitwidth);
            t.field("match_type", match_type(f.kind));
            t.close();
        }
        for r in &table.actions {
            t.open("action_refs");
            t.field("id", schema.actions[r.action].id);
            match r.scope {
                ActionScope::TableAndDefault => {}
                ActionScope::TableOnly => {
                    t.string("annotations", "@tableonly");
                    t.field("scope", "TABLE_ONLY");
                }
                ActionScope::DefaultOnly => {
                    t.string("annotations", "@defaultonly");
                    t.field("scope", "DEFAULT_ONLY");
                }
            }
            t.close();
        }
        if table.const_default {
            t.field(
                "const_default_action_id",
                schema.actions[table.default_action.0].id,
            );
        }
        if let Some(p) = table.implementation {
            t.field("implementation_id", schema.action_profiles[p].id);
        }
        if let Some(c) = table.direct_counter {
            t.field("direct_resource_ids", schema.direct_counters[c].id);
        }
        if let Some(m) = table.direct_meter {
            t.field("direct_resource_ids", schema.direct_meters[m].id);
        }
        t.field("size", table.size);
        if table.idle_timeout {
            t.field("idle_timeout_behavior", "NOTIFY_CONTROL");
        }
        if table.is_const {
            t.field("is_const_table", true);
        }
        t.close();
    }
    for action in &schema.actions {
        t.open("actions");
        t.preamble(action.id, action.name, &[]);
        for p in &action.params {
            t.open("params");
            t.field("id", p.id);
            t.string("name", p.name);
            t.field("bitwidth", p.bitwidth);
            t.close();
        }
        t.close();
    }
    for p in &schema.action_profiles {
        t.open("action_profiles");
        t.preamble(p.id, p.name, &[]);
        for &table in &p.tables {
            t.field("table_ids", schema.tables[table].id);
        }
        if p.selector {
            t.field("with_selector", true);
        }
        t.field("size", p.size);
        t.field("max_group_size", p.max_group_size);
        t.close();
    }
    for c in &schema.counters {
        t.open("counters");
        t.preamble(c.id, c.name, &[]);
        t.open("spec");
        t.field("unit", counter_unit(c.kind));
        t.close();
        t.field("size", c.size);
        t.close();
    }
    for c in &schema.direct_counters {
        t.open("direct_counters");
        t.preamble(c.id, c.name, &[]);
        t.open("spec");
        t.field("unit", counter_unit(c.kind));
        t.close();
        if let Some(table) = c.direct_table {
            t.field("direct_table_id", schema.tables[table].id);
        }
        t.close();
    }
    for m in &schema.meters {
        t.open("meters");
        t.preamble(m.id, m.name, &[]);
        t.open("spec");
        t.field("unit", meter_unit(m.unit));
        t.close();
        t.field("size", m.size);
        t.close();
    }
    for m in &schema.direct_meters {
        t.open("direct_meters");
        t.preamble(m.id, m.name, &[]);
        t.open("spec");
        t.field("unit", meter_unit(m.unit));
        t.close();
        if let Some(table) = m.direct_table {
            t.field("direct_table_id", schema.tables[table].id);
        }
        t.close();
    }
    for h in &schema.controller_headers {
        t.open("controller_packet_metadata");
        t.preamble(
            h.id,
            h.name,
            &[format!("@controller_header(\"{}\")", h.name)],
        );
        for &(id, name, bitwidth) in &h.fields {
            t.open("metadata");
            t.field("id", id);
            t.string("name", name);
            t.field("bitwidth", bitwidth);
            t.close();
        }
        t.close();
    }
    for r in &schema.registers {
        t.open("registers");
        t.preamble(r.id, r.name, &[]);
        t.bitstring(r.bitwidth);
        t.field("size", r.size);
        t.close();
    }
    for d in &schema.digests {
        t.open("digests");
        t.preamble(d.id, d.name, &[]);
        t.open("type_spec");
        t.open("struct");
        t.string("name", &struct_name(d.name));
        t.close();
        t.close();
        t.close();
    }
    if !schema.digests.is_empty() {
        t.open("type_info");
        for d in &schema.digests {
            t.open("structs");
            t.string("key", &struct_name(d.name));
            t.open("value");
            for &(name, width) in &d.fields {
                t.open("members");
                t.string("name", name);
                t.bitstring(width);
                t.close();
            }
            t.close();
            t.close();
        }
        t.close();
    }
    t.out
}

/// The P4 struct type name of a digest.
pub fn struct_name(digest: &str) -> String {
    format!("{}_t", alias(digest))
}
