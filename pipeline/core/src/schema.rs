//! A program's schema: its tables, actions, action profiles and externs, with their P4Info ids.
//!
//! The schema is the single source for both the data plane (which builds its tables and extern
//! arrays from it when the program loads) and the control plane (which generates the P4Info from it
//! and validates every write against it), so names, ids and widths cannot drift apart.
//!
//! Ids follow the P4Runtime convention: the top byte is the object kind's prefix; the low 24 bits
//! are derived from a CRC-32 of the object's full name (as p4c derives them from a name hash), so
//! adding an object does not renumber the others. [`Schema::new`] rejects collisions.

use crate::externs::{CounterKind, MeterAlgorithm, MeterUnit};
use crate::table::{KeyField, MatchKind};

/// P4Info id prefixes (P4Runtime spec 6.3).
pub mod prefix {
    /// Actions.
    pub const ACTION: u8 = 0x01;
    /// Tables.
    pub const TABLE: u8 = 0x02;
    /// Parser value sets.
    pub const VALUE_SET: u8 = 0x03;
    /// Controller packet metadata headers.
    pub const CONTROLLER_HEADER: u8 = 0x04;
    /// Action profiles and selectors.
    pub const ACTION_PROFILE: u8 = 0x11;
    /// Indexed counters.
    pub const COUNTER: u8 = 0x12;
    /// Direct counters.
    pub const DIRECT_COUNTER: u8 = 0x13;
    /// Indexed meters.
    pub const METER: u8 = 0x14;
    /// Direct meters.
    pub const DIRECT_METER: u8 = 0x15;
    /// Registers.
    pub const REGISTER: u8 = 0x16;
    /// Digests.
    pub const DIGEST: u8 = 0x17;
}

/// Where an action may be used in a table (P4Info `ActionRef.scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionScope {
    /// In entries and as the default.
    TableAndDefault,
    /// Only in entries.
    TableOnly,
    /// Only as the default.
    DefaultOnly,
}

/// An action parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamDef {
    /// Id within the action, from 1.
    pub id: u32,
    /// Name.
    pub name: &'static str,
    /// Width in bits (1..=128).
    pub bitwidth: u8,
}

/// An action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionDef {
    /// P4Info id.
    pub id: u32,
    /// Full name, e.g. `ingress.set_nhop`.
    pub name: &'static str,
    /// Parameters in order.
    pub params: Vec<ParamDef>,
}

/// A match field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchFieldDef {
    /// Id within the table, from 1.
    pub id: u32,
    /// Name, e.g. `hdr.ipv4.dst_addr`.
    pub name: &'static str,
    /// Width in bits (1..=128).
    pub bitwidth: u8,
    /// Match kind.
    pub kind: MatchKind,
}

/// An action reference of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionRefDef {
    /// Index of the action in [`Schema::actions`].
    pub action: usize,
    /// Where it may be used.
    pub scope: ActionScope,
}

/// A table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDef {
    /// P4Info id.
    pub id: u32,
    /// Full name.
    pub name: &'static str,
    /// Key fields in order.
    pub fields: Vec<MatchFieldDef>,
    /// Actions allowed.
    pub actions: Vec<ActionRefDef>,
    /// The initial default action (index in [`Schema::actions`]) and its arguments.
    pub default_action: (usize, Vec<u128>),
    /// The default action cannot be changed.
    pub const_default: bool,
    /// Entries cannot be written (P4 `const entries`).
    pub is_const: bool,
    /// Entries present from the start (P4 `entries`/`const entries`): key, priority, action
    /// index and arguments.
    pub const_entries: Vec<ConstEntry>,
    /// Maximum number of entries.
    pub size: usize,
    /// Index in [`Schema::action_profiles`] when the table uses an action profile or selector.
    pub implementation: Option<usize>,
    /// Index in [`Schema::direct_counters`].
    pub direct_counter: Option<usize>,
    /// Index in [`Schema::direct_meters`].
    pub direct_meter: Option<usize>,
    /// Entries support idle timeout with notifications to the controller.
    pub idle_timeout: bool,
}

impl TableDef {
    /// The key layout for [`crate::table::MatchTable`].
    pub fn key_fields(&self) -> Vec<KeyField> {
        self.fields
            .iter()
            .map(|f| KeyField {
                bitwidth: f.bitwidth,
                kind: f.kind,
            })
            .collect()
    }

    /// Whether entries carry a priority (a ternary, range or optional field).
    pub fn needs_priority(&self) -> bool {
        self.fields.iter().any(|f| {
            matches!(
                f.kind,
                MatchKind::Ternary | MatchKind::Range | MatchKind::Optional
            )
        })
    }

    /// Whether `action` (an index into the schema's actions) is allowed with `scope` use.
    pub fn allows(&self, action: usize, as_default: bool) -> Option<bool> {
        let r = self.actions.iter().find(|r| r.action == action)?;
        Some(match r.scope {
            ActionScope::TableAndDefault => true,
            ActionScope::TableOnly => !as_default,
            ActionScope::DefaultOnly => as_default,
        })
    }
}

/// An entry a program declares with its table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstEntry {
    /// The full key, one match per field.
    pub key: Vec<crate::table::FieldMatch>,
    /// Priority (0 for tables without ternary/range/optional fields).
    pub priority: u32,
    /// Index of the action in [`Schema::actions`].
    pub action: usize,
    /// Its arguments.
    pub params: Vec<u128>,
}

/// An action profile, or an action selector when `selector` is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionProfileDef {
    /// P4Info id.
    pub id: u32,
    /// Full name.
    pub name: &'static str,
    /// Indices of the tables that use it.
    pub tables: Vec<usize>,
    /// Whether members are chosen by a hash (action selector).
    pub selector: bool,
    /// Maximum number of members.
    pub size: usize,
    /// Maximum members in one group.
    pub max_group_size: usize,
}

/// An indexed or direct counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterDef {
    /// P4Info id.
    pub id: u32,
    /// Full name.
    pub name: &'static str,
    /// What it counts.
    pub kind: CounterKind,
    /// Cells (for a direct counter: the table's size).
    pub size: usize,
    /// For a direct counter: the table index.
    pub direct_table: Option<usize>,
}

/// An indexed or direct meter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterDef {
    /// P4Info id.
    pub id: u32,
    /// Full name.
    pub name: &'static str,
    /// Packets or bytes.
    pub unit: MeterUnit,
    /// trTCM or srTCM.
    pub algorithm: MeterAlgorithm,
    /// Cells.
    pub size: usize,
    /// For a direct meter: the table index.
    pub direct_table: Option<usize>,
}

/// A register array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterDef {
    /// P4Info id.
    pub id: u32,
    /// Full name.
    pub name: &'static str,
    /// Cell width in bits (1..=64).
    pub bitwidth: u8,
    /// Cells.
    pub size: usize,
}

/// A digest: a struct of fields sent to the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestDef {
    /// P4Info id.
    pub id: u32,
    /// Full name.
    pub name: &'static str,
    /// Fields (name, width).
    pub fields: Vec<(&'static str, u8)>,
}

/// A parser value set: values a parser state's key is matched against, set by the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueSetDef {
    /// P4Info id.
    pub id: u32,
    /// Full name.
    pub name: &'static str,
    /// The member's fields in order: (id from 1, name, width). A member is their values
    /// concatenated, at most 128 bits.
    pub fields: Vec<(u32, &'static str, u8)>,
    /// The most members it holds.
    pub size: usize,
}

impl ValueSetDef {
    /// A member's width in bits.
    pub fn bitwidth(&self) -> u32 {
        self.fields.iter().map(|f| u32::from(f.2)).sum()
    }
}

/// A controller packet metadata header (`packet_in` or `packet_out`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerHeaderDef {
    /// P4Info id.
    pub id: u32,
    /// `packet_in` or `packet_out`.
    pub name: &'static str,
    /// Fields in wire order: (id from 1, name, width). Widths add up to whole bytes.
    pub fields: Vec<(u32, &'static str, u8)>,
}

impl ControllerHeaderDef {
    /// Header length on the wire in bytes.
    pub fn byte_len(&self) -> usize {
        let bits: usize = self.fields.iter().map(|f| usize::from(f.2)).sum();
        bits.div_ceil(8)
    }
}

/// Everything the control plane and the P4Info need to know about a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// Program name (`pkg_info.name`).
    pub name: &'static str,
    /// Program version.
    pub version: &'static str,
    /// Architecture (`pkg_info.arch`).
    pub arch: &'static str,
    /// Tables.
    pub tables: Vec<TableDef>,
    /// Actions.
    pub actions: Vec<ActionDef>,
    /// Action profiles and selectors.
    pub action_profiles: Vec<ActionProfileDef>,
    /// Indexed counters.
    pub counters: Vec<CounterDef>,
    /// Direct counters.
    pub direct_counters: Vec<CounterDef>,
    /// Indexed meters.
    pub meters: Vec<MeterDef>,
    /// Direct meters.
    pub direct_meters: Vec<MeterDef>,
    /// Registers.
    pub registers: Vec<RegisterDef>,
    /// Digests.
    pub digests: Vec<DigestDef>,
    /// Parser value sets.
    pub value_sets: Vec<ValueSetDef>,
    /// `packet_in` / `packet_out`.
    pub controller_headers: Vec<ControllerHeaderDef>,
    /// The program's own drop reasons, by name (`DropReason::Named(i)` is the i-th); they show
    /// in drop statistics after the standard reasons.
    pub drop_reasons: Vec<&'static str>,
    /// Those of `drop_reasons` that end a packet by design rather than lose it (a probe at the
    /// end of its path, feedback consumed where it was meant to go): experiments leave them out
    /// of their drop counts.
    pub consumed: Vec<&'static str>,
}

/// A schema that failed its consistency checks (a programming error in a program).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("schema of {program}: {what}")]
pub struct SchemaError {
    program: &'static str,
    what: String,
}

/// The P4Info id of the object `name` of kind `prefix`.
pub fn object_id(prefix: u8, name: &str) -> u32 {
    const CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);
    let low = CRC.checksum(name.as_bytes()) & 0x00ff_ffff;
    (u32::from(prefix) << 24) | low.max(1)
}

impl Schema {
    /// Checks a schema assembled by a program: unique ids, valid indices and widths.
    pub fn check(self) -> Result<Self, SchemaError> {
        let err = |what: String| SchemaError {
            program: self.name,
            what,
        };
        let mut ids = std::collections::HashSet::new();
        for (id, name) in self.all_objects() {
            if !ids.insert(id) {
                return Err(err(format!("id {id:#010x} of {name} collides")));
            }
        }
        for v in &self.value_sets {
            if v.fields.iter().any(|f| f.2 == 0) || !(1..=128).contains(&v.bitwidth()) {
                return Err(err(format!("{}: member width out of 1..=128", v.name)));
            }
        }
        for t in &self.tables {
            if t.fields.iter().any(|f| f.bitwidth == 0 || f.bitwidth > 128) {
                return Err(err(format!("{}: field width out of 1..=128", t.name)));
            }
            let known = |a: usize| a < self.actions.len();
            if !t.actions.iter().all(|r| known(r.action)) || !known(t.default_action.0) {
                return Err(err(format!("{}: unknown action", t.name)));
            }
            if t.default_action.1.len() != self.actions[t.default_action.0].params.len() {
                return Err(err(format!("{}: default action arity", t.name)));
            }
            if t.allows(t.default_action.0, true) != Some(true) {
                return Err(err(format!(
                    "{}: default action not allowed as default",
                    t.name
                )));
            }
            if t.implementation
                .is_some_and(|p| p >= self.action_profiles.len())
                || t.direct_counter
                    .is_some_and(|c| c >= self.direct_counters.len())
                || t.direct_meter
                    .is_some_and(|m| m >= self.direct_meters.len())
            {
                return Err(err(format!("{}: unknown resource", t.name)));
            }
        }
        Ok(self)
    }

    fn all_objects(&self) -> impl Iterator<Item = (u32, &'static str)> + '_ {
        let t = self.tables.iter().map(|x| (x.id, x.name));
        let a = self.actions.iter().map(|x| (x.id, x.name));
        let p = self.action_profiles.iter().map(|x| (x.id, x.name));
        let c = self
            .counters
            .iter()
            .chain(&self.direct_counters)
            .map(|x| (x.id, x.name));
        let m = self
            .meters
            .iter()
            .chain(&self.direct_meters)
            .map(|x| (x.id, x.name));
        let r = self.registers.iter().map(|x| (x.id, x.name));
        let d = self.digests.iter().map(|x| (x.id, x.name));
        let h = self.controller_headers.iter().map(|x| (x.id, x.name));
        let v = self.value_sets.iter().map(|x| (x.id, x.name));
        t.chain(a)
            .chain(p)
            .chain(c)
            .chain(m)
            .chain(r)
            .chain(d)
            .chain(h)
            .chain(v)
    }

    /// Index of the table with P4Info id `id`.
    pub fn table_by_id(&self, id: u32) -> Option<usize> {
        self.tables.iter().position(|t| t.id == id)
    }

    /// Index of the table named `name` (full name or its last component).
    pub fn table_by_name(&self, name: &str) -> Option<usize> {
        self.tables.iter().position(|t| matches_name(t.name, name))
    }

    /// Index of the action with P4Info id `id`.
    pub fn action_by_id(&self, id: u32) -> Option<usize> {
        self.actions.iter().position(|a| a.id == id)
    }

    /// Index of the action named `name` (full name or its last component).
    pub fn action_by_name(&self, name: &str) -> Option<usize> {
        self.actions.iter().position(|a| matches_name(a.name, name))
    }

    /// Index of the action profile with P4Info id `id`.
    pub fn profile_by_id(&self, id: u32) -> Option<usize> {
        self.action_profiles.iter().position(|p| p.id == id)
    }

    /// Index of the counter with P4Info id `id`.
    pub fn counter_by_id(&self, id: u32) -> Option<usize> {
        self.counters.iter().position(|c| c.id == id)
    }

    /// Index of the direct counter with P4Info id `id`.
    pub fn direct_counter_by_id(&self, id: u32) -> Option<usize> {
        self.direct_counters.iter().position(|c| c.id == id)
    }

    /// Index of the meter with P4Info id `id`.
    pub fn meter_by_id(&self, id: u32) -> Option<usize> {
        self.meters.iter().position(|m| m.id == id)
    }

    /// Index of the direct meter with P4Info id `id`.
    pub fn direct_meter_by_id(&self, id: u32) -> Option<usize> {
        self.direct_meters.iter().position(|m| m.id == id)
    }

    /// Index of the register with P4Info id `id`.
    pub fn register_by_id(&self, id: u32) -> Option<usize> {
        self.registers.iter().position(|r| r.id == id)
    }

    /// Index of the digest with P4Info id `id`.
    pub fn digest_by_id(&self, id: u32) -> Option<usize> {
        self.digests.iter().position(|d| d.id == id)
    }

    /// The index of the value set with P4Info id `id`.
    pub fn value_set_by_id(&self, id: u32) -> Option<usize> {
        self.value_sets.iter().position(|v| v.id == id)
    }

    /// The index of the value set named `name` (full name or its last component).
    pub fn value_set_by_name(&self, name: &str) -> Option<usize> {
        self.value_sets
            .iter()
            .position(|v| v.name == name || alias(v.name) == name)
    }

    /// The register named `name` (full name or its last component).
    pub fn register_by_name(&self, name: &str) -> Option<&RegisterDef> {
        self.registers.iter().find(|r| matches_name(r.name, name))
    }

    /// The indexed counter named `name` (full name or its last component).
    pub fn counter_by_name(&self, name: &str) -> Option<&CounterDef> {
        self.counters.iter().find(|c| matches_name(c.name, name))
    }

    /// The indexed meter named `name` (full name or its last component).
    pub fn meter_by_name(&self, name: &str) -> Option<&MeterDef> {
        self.meters.iter().find(|m| matches_name(m.name, name))
    }

    /// The action profile named `name` (full name or its last component).
    pub fn profile_by_name(&self, name: &str) -> Option<&ActionProfileDef> {
        self.action_profiles
            .iter()
            .find(|p| matches_name(p.name, name))
    }

    /// The controller header named `name` (`packet_in` or `packet_out`).
    pub fn controller_header(&self, name: &str) -> Option<&ControllerHeaderDef> {
        self.controller_headers.iter().find(|h| h.name == name)
    }
}

/// Whether `full` is `query` or ends with `.query` (P4Info aliases are the last component).
fn matches_name(full: &str, query: &str) -> bool {
    full == query || full.rsplit('.').next() == Some(query)
}

/// The short alias of a full name: its last dotted component.
pub fn alias(full: &str) -> &str {
    full.rsplit('.').next().unwrap_or(full)
}

/// Typed indices of a program's objects, returned by the [`SchemaBuilder`] and taken by the
/// per-packet API ([`crate::program::Ctx`]), so that passing a counter where a table belongs does
/// not compile.
macro_rules! index_types {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(usize);

        impl $name {
            /// The position in the schema's list of such objects.
            #[inline]
            pub const fn index(self) -> usize {
                self.0
            }
        }
    )*};
}

index_types! {
    /// A table of the schema.
    TableIx,
    /// An indexed counter of the schema.
    CounterIx,
    /// An indexed meter of the schema.
    MeterIx,
    /// A register array of the schema.
    RegisterIx,
    /// A digest of the schema.
    DigestIx,
}

/// Builds a [`Schema`], assigning ids from names and resolving references by index.
#[derive(Debug)]
pub struct SchemaBuilder {
    schema: Schema,
}

/// Describes one table for [`SchemaBuilder::table`].
#[derive(Clone, Debug)]
pub struct TableSpec {
    /// Full name.
    pub name: &'static str,
    /// Key fields: (name, width, kind).
    pub fields: Vec<(&'static str, u8, MatchKind)>,
    /// Allowed actions with their scope.
    pub actions: Vec<(usize, ActionScope)>,
    /// Initial default action and arguments.
    pub default_action: (usize, Vec<u128>),
    /// The default cannot change.
    pub const_default: bool,
    /// Maximum entries.
    pub size: usize,
    /// Supports idle timeout.
    pub idle_timeout: bool,
}

impl SchemaBuilder {
    /// An empty schema for program `name`.
    pub fn new(name: &'static str, version: &'static str) -> Self {
        SchemaBuilder {
            schema: Schema {
                name,
                version,
                arch: "v1model",
                tables: vec![],
                actions: vec![],
                action_profiles: vec![],
                counters: vec![],
                direct_counters: vec![],
                meters: vec![],
                direct_meters: vec![],
                registers: vec![],
                digests: vec![],
                value_sets: vec![],
                controller_headers: vec![],
                drop_reasons: vec![],
                consumed: vec![],
            },
        }
    }

    /// Adds an action with (name, width) parameters; returns its index.
    pub fn action(&mut self, name: &'static str, params: &[(&'static str, u8)]) -> usize {
        let params = (1..)
            .zip(params)
            .map(|(id, &(name, bitwidth))| ParamDef { id, name, bitwidth })
            .collect();
        self.schema.actions.push(ActionDef {
            id: object_id(prefix::ACTION, name),
            name,
            params,
        });
        self.schema.actions.len() - 1
    }

    /// Adds a table; returns its index.
    pub fn table(&mut self, spec: TableSpec) -> TableIx {
        let fields = (1..)
            .zip(spec.fields)
            .map(|(id, (name, bitwidth, kind))| MatchFieldDef {
                id,
                name,
                bitwidth,
                kind,
            })
            .collect();
        let actions = spec
            .actions
            .into_iter()
            .map(|(action, scope)| ActionRefDef { action, scope })
            .collect();
        self.schema.tables.push(TableDef {
            id: object_id(prefix::TABLE, spec.name),
            name: spec.name,
            fields,
            actions,
            default_action: spec.default_action,
            const_default: spec.const_default,
            is_const: false,
            const_entries: Vec::new(),
            size: spec.size,
            implementation: None,
            direct_counter: None,
            direct_meter: None,
            idle_timeout: spec.idle_timeout,
        });
        TableIx(self.schema.tables.len() - 1)
    }

    /// Makes `table` a const table holding exactly `entries` (P4 `const entries`).
    pub fn const_entries(&mut self, table: TableIx, entries: Vec<ConstEntry>) {
        let t = &mut self.schema.tables[table.0];
        t.is_const = true;
        t.const_entries = entries;
    }

    /// Adds an action profile (or selector) shared by `tables`; returns its index.
    pub fn action_profile(
        &mut self,
        name: &'static str,
        tables: &[TableIx],
        selector: bool,
        size: usize,
        max_group_size: usize,
    ) -> usize {
        let idx = self.schema.action_profiles.len();
        for &t in tables {
            self.schema.tables[t.0].implementation = Some(idx);
        }
        self.schema.action_profiles.push(ActionProfileDef {
            id: object_id(prefix::ACTION_PROFILE, name),
            name,
            tables: tables.iter().map(|t| t.0).collect(),
            selector,
            size,
            max_group_size,
        });
        idx
    }

    /// Adds an indexed counter; returns its index.
    pub fn counter(&mut self, name: &'static str, kind: CounterKind, size: usize) -> CounterIx {
        let id = object_id(prefix::COUNTER, name);
        self.schema.counters.push(CounterDef {
            id,
            name,
            kind,
            size,
            direct_table: None,
        });
        CounterIx(self.schema.counters.len() - 1)
    }

    /// Adds a direct counter on `table`; returns its index.
    pub fn direct_counter(
        &mut self,
        name: &'static str,
        kind: CounterKind,
        table: TableIx,
    ) -> usize {
        let table = table.0;
        let id = object_id(prefix::DIRECT_COUNTER, name);
        let size = self.schema.tables[table].size;
        let idx = self.schema.direct_counters.len();
        self.schema.tables[table].direct_counter = Some(idx);
        self.schema.direct_counters.push(CounterDef {
            id,
            name,
            kind,
            size,
            direct_table: Some(table),
        });
        idx
    }

    /// Adds an indexed meter; returns its index.
    pub fn meter(
        &mut self,
        name: &'static str,
        unit: MeterUnit,
        algorithm: MeterAlgorithm,
        size: usize,
    ) -> MeterIx {
        let id = object_id(prefix::METER, name);
        self.schema.meters.push(MeterDef {
            id,
            name,
            unit,
            algorithm,
            size,
            direct_table: None,
        });
        MeterIx(self.schema.meters.len() - 1)
    }

    /// Adds a direct meter on `table`; returns its index.
    pub fn direct_meter(
        &mut self,
        name: &'static str,
        unit: MeterUnit,
        algorithm: MeterAlgorithm,
        table: TableIx,
    ) -> usize {
        let table = table.0;
        let id = object_id(prefix::DIRECT_METER, name);
        let size = self.schema.tables[table].size;
        let idx = self.schema.direct_meters.len();
        self.schema.tables[table].direct_meter = Some(idx);
        let def = MeterDef {
            id,
            name,
            unit,
            algorithm,
            size,
            direct_table: Some(table),
        };
        self.schema.direct_meters.push(def);
        idx
    }

    /// Adds a register array; returns its index.
    pub fn register(&mut self, name: &'static str, bitwidth: u8, size: usize) -> RegisterIx {
        let id = object_id(prefix::REGISTER, name);
        self.schema.registers.push(RegisterDef {
            id,
            name,
            bitwidth,
            size,
        });
        RegisterIx(self.schema.registers.len() - 1)
    }

    /// Adds a digest of (name, width) fields; returns its index.
    pub fn digest(&mut self, name: &'static str, fields: &[(&'static str, u8)]) -> DigestIx {
        let id = object_id(prefix::DIGEST, name);
        self.schema.digests.push(DigestDef {
            id,
            name,
            fields: fields.to_vec(),
        });
        DigestIx(self.schema.digests.len() - 1)
    }

    /// Adds a drop reason of the program's own, counted and shown under `name`; returns the
    /// reason to pass to `StdMeta::mark_to_drop`.
    ///
    /// # Panics
    /// With more than 256 reasons or a name a standard reason already has (a programming error
    /// in a program, found when it is built).
    pub fn drop_reason(&mut self, name: &'static str) -> crate::metadata::DropReason {
        use crate::metadata::DropReason;
        assert!(
            !DropReason::NAMES.contains(&name) && !self.schema.drop_reasons.contains(&name),
            "drop reason {name} defined twice"
        );
        let i = u8::try_from(self.schema.drop_reasons.len()).expect("at most 256 drop reasons");
        self.schema.drop_reasons.push(name);
        DropReason::Named(i)
    }

    /// A drop reason for packets whose path ends here by design (see `Schema::consumed`).
    pub fn consume_reason(&mut self, name: &'static str) -> crate::metadata::DropReason {
        let r = self.drop_reason(name);
        self.schema.consumed.push(name);
        r
    }

    /// Adds a parser value set of members made of (name, width) fields, at most `size` of
    /// them; returns its index.
    pub fn value_set(
        &mut self,
        name: &'static str,
        fields: &[(&'static str, u8)],
        size: usize,
    ) -> usize {
        let fields = (1..).zip(fields).map(|(id, &(n, w))| (id, n, w)).collect();
        let id = object_id(prefix::VALUE_SET, name);
        self.schema.value_sets.push(ValueSetDef {
            id,
            name,
            fields,
            size,
        });
        self.schema.value_sets.len() - 1
    }

    /// Adds a controller header (`packet_in` or `packet_out`) of (name, width) fields.
    pub fn controller_header(&mut self, name: &'static str, fields: &[(&'static str, u8)]) {
        let fields = (1..).zip(fields).map(|(id, &(n, w))| (id, n, w)).collect();
        let id = object_id(prefix::CONTROLLER_HEADER, name);
        self.schema
            .controller_headers
            .push(ControllerHeaderDef { id, name, fields });
    }

    /// Checks and returns the schema.
    pub fn build(self) -> Result<Schema, SchemaError> {
        self.schema.check()
    }
}
