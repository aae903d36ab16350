//! The BMv2 JSON document as p4c writes it (format 2.x, `docs/JSON_format.md` of
//! p4lang/behavioral-model), read as-is. Polymorphic places (type-value objects, primitive
//! arguments) stay [`Value`]s; the compiler ([`crate::load`]) interprets them and names the JSON
//! path of whatever it refuses.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The whole document.
#[derive(Debug, Deserialize)]
pub(crate) struct Doc {
    #[serde(default)]
    pub header_types: Vec<HeaderType>,
    #[serde(default)]
    pub headers: Vec<Header>,
    #[serde(default)]
    pub header_stacks: Vec<HeaderStack>,
    #[serde(default)]
    pub header_union_types: Vec<HeaderUnionType>,
    #[serde(default)]
    pub header_unions: Vec<HeaderUnion>,
    #[serde(default)]
    pub header_union_stacks: Vec<HeaderUnionStack>,
    #[serde(default)]
    pub field_lists: Vec<FieldList>,
    #[serde(default)]
    pub errors: Vec<(String, i64)>,
    #[serde(default)]
    pub parsers: Vec<Parser>,
    #[serde(default)]
    pub parse_vsets: Vec<ParseVset>,
    #[serde(default)]
    pub deparsers: Vec<Deparser>,
    #[serde(default)]
    pub meter_arrays: Vec<MeterArray>,
    #[serde(default)]
    pub counter_arrays: Vec<CounterArray>,
    #[serde(default)]
    pub register_arrays: Vec<RegisterArray>,
    #[serde(default)]
    pub calculations: Vec<Calculation>,
    #[serde(default)]
    pub learn_lists: Vec<FieldList>,
    #[serde(default)]
    pub actions: Vec<Action>,
    #[serde(default)]
    pub pipelines: Vec<Pipeline>,
    #[serde(default)]
    pub checksums: Vec<Checksum>,
    #[serde(default)]
    pub extern_instances: Vec<Value>,
    #[serde(default)]
    pub field_aliases: Vec<(String, (String, String))>,
    #[serde(rename = "__meta__", default)]
    pub meta: Option<Meta>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Meta {
    pub version: Vec<u32>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct HeaderType {
    pub name: String,
    /// (name, width or "*", signed?)
    pub fields: Vec<Vec<Value>>,
    /// With a varbit field: the header's largest size in bytes.
    #[serde(default)]
    pub max_length: Option<u64>,
    /// P4_14's length of a varbit field, an expression on the header's fields.
    #[serde(default)]
    pub length_exp: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct HeaderStack {
    pub name: String,
    pub header_ids: Vec<i64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct HeaderUnionType {
    pub name: String,
    /// (member name, header type)
    pub headers: Vec<(String, String)>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct HeaderUnion {
    pub name: String,
    pub id: i64,
    pub union_type: String,
    /// The members' headers, in the union type's order.
    pub header_ids: Vec<i64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct HeaderUnionStack {
    pub name: String,
    pub union_type: String,
    pub header_union_ids: Vec<i64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Header {
    pub name: String,
    pub id: i64,
    pub header_type: String,
    #[serde(default)]
    pub metadata: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct FieldList {
    pub id: i64,
    pub name: String,
    #[serde(default)]
    pub elements: Vec<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Parser {
    pub name: String,
    pub init_state: String,
    pub parse_states: Vec<ParseState>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ParseState {
    pub name: String,
    #[serde(default)]
    pub parser_ops: Vec<ParserOp>,
    #[serde(default)]
    pub transition_key: Vec<Value>,
    #[serde(default)]
    pub transitions: Vec<Transition>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ParserOp {
    pub op: String,
    #[serde(default)]
    pub parameters: Vec<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Transition {
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub value: Value,
    #[serde(default)]
    pub mask: Value,
    #[serde(default)]
    pub next_state: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Deparser {
    pub name: String,
    pub order: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct MeterArray {
    pub name: String,
    #[serde(rename = "type")]
    pub unit: String,
    #[serde(default = "two")]
    pub rate_count: u32,
    #[serde(default)]
    pub size: usize,
    #[serde(default)]
    pub is_direct: bool,
    #[serde(default)]
    pub binding: Option<String>,
    #[serde(default)]
    pub result_target: Option<(String, String)>,
}

fn two() -> u32 {
    2
}

#[derive(Debug, Deserialize)]
pub(crate) struct CounterArray {
    pub name: String,
    #[serde(default)]
    pub size: usize,
    #[serde(default)]
    pub is_direct: bool,
    #[serde(default)]
    pub binding: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ParseVset {
    pub name: String,
    pub compressed_bitwidth: u32,
    /// The most members (newer p4c writes it; BMv2 bounds none without it).
    #[serde(default)]
    pub max_size: Option<usize>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RegisterArray {
    pub name: String,
    pub size: usize,
    pub bitwidth: u32,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Calculation {
    pub name: String,
    pub algo: String,
    pub input: Vec<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Action {
    pub name: String,
    pub id: i64,
    #[serde(default)]
    pub runtime_data: Vec<RuntimeData>,
    #[serde(default)]
    pub primitives: Vec<Primitive>,
}

#[derive(Debug, Deserialize, PartialEq)]
pub(crate) struct RuntimeData {
    pub name: String,
    pub bitwidth: u32,
}

#[derive(Debug, Deserialize, PartialEq)]
pub(crate) struct Primitive {
    pub op: String,
    #[serde(default)]
    pub parameters: Vec<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Pipeline {
    pub name: String,
    #[serde(default)]
    pub init_table: Option<String>,
    #[serde(default)]
    pub action_profiles: Vec<ActionProfile>,
    #[serde(default)]
    pub tables: Vec<Table>,
    #[serde(default)]
    pub conditionals: Vec<Conditional>,
    #[serde(default)]
    pub action_calls: Vec<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ActionProfile {
    pub name: String,
    #[serde(default)]
    pub max_size: usize,
    #[serde(default)]
    pub selector: Option<Selector>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Selector {
    pub algo: String,
    pub input: Vec<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Table {
    pub name: String,
    #[serde(default)]
    pub key: Vec<KeyField>,
    #[serde(rename = "type", default = "simple")]
    pub kind: String,
    #[serde(default)]
    pub action_profile: Option<String>,
    /// The older format's profile of its own, named in the table, with its selector.
    #[serde(default)]
    pub act_prof_name: Option<String>,
    #[serde(default)]
    pub selector: Option<Selector>,
    #[serde(default)]
    pub max_size: usize,
    #[serde(default)]
    pub support_timeout: bool,
    #[serde(default)]
    pub action_ids: Vec<i64>,
    #[serde(default)]
    pub actions: Vec<String>,
    #[serde(default)]
    pub next_tables: BTreeMap<String, Option<String>>,
    #[serde(default)]
    pub base_default_next: Option<String>,
    #[serde(default)]
    pub default_entry: Option<DefaultEntry>,
    #[serde(default)]
    pub entries: Vec<Entry>,
}

fn simple() -> String {
    "simple".into()
}

#[derive(Debug, Deserialize)]
pub(crate) struct KeyField {
    pub match_type: String,
    pub target: Value,
    #[serde(default)]
    pub mask: Value,
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DefaultEntry {
    pub action_id: i64,
    #[serde(default)]
    pub action_const: bool,
    #[serde(default)]
    pub action_data: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Entry {
    pub match_key: Vec<Value>,
    pub action_entry: ActionEntry,
    #[serde(default)]
    pub priority: Option<i64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ActionEntry {
    pub action_id: i64,
    #[serde(default)]
    pub action_data: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Conditional {
    pub name: String,
    pub expression: Value,
    #[serde(default)]
    pub true_next: Option<String>,
    #[serde(default)]
    pub false_next: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Checksum {
    pub target: (String, String),
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    pub calculation: String,
    #[serde(default)]
    pub verify: Option<bool>,
    #[serde(default)]
    pub update: Option<bool>,
    #[serde(default)]
    pub if_cond: Value,
}
