//! What the fuzz targets share: a reader of the fuzzer's bytes, and a generator of control-plane
//! updates for any program's schema with small id and value domains, so that random sequences
//! insert, hit, modify and delete the same entries, members, groups and sessions.
#![allow(dead_code, reason = "each target uses a different subset")]

use pipeline::control::{ActionSpec, Entity, TableAction, TableEntry, Update, UpdateKind};
use pipeline::externs::{CounterData, MeterConfig};
use pipeline::pre::{CloneSession, Replica};
use pipeline::schema::{MatchFieldDef, Schema};
use pipeline::table::{FieldMatch, MatchKind};

/// The fuzzer's bytes, read front to back; zeros once they run out.
#[derive(Debug)]
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            usize::from(self.u8()) % n
        }
    }

    pub fn flag(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// Up to `max` bytes.
    pub fn take(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1).min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a.to_vec()
    }
}

fn ones(width: u8) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// A value of `width` bits from a small domain (so that keys collide), now and then one too wide.
pub fn value(b: &mut Bytes<'_>, width: u8) -> u128 {
    match b.u8() % 8 {
        0 => 0,
        1 => 1,
        2 => ones(width),
        3 => u128::from(b.u16()) & ones(width),
        4 => (u128::from(b.u64()) | (u128::from(b.u64()) << 64)) & ones(width),
        // Beyond the width now and then: validation must refuse it.
        5 if b.u8() == 0 => ones(width).wrapping_add(1).max(1) << 1,
        _ => u128::from(b.u8() % 4),
    }
}

fn field_match(b: &mut Bytes<'_>, f: &MatchFieldDef) -> FieldMatch {
    let v = value(b, f.bitwidth);
    match f.kind {
        MatchKind::Exact => FieldMatch::Exact(v),
        MatchKind::Lpm => {
            let len = (b.u8() % (f.bitwidth.saturating_add(2))).min(f.bitwidth + 1);
            let masked = if len <= f.bitwidth && b.u8() != 0 {
                // The top `len` bits of the field.
                let low = ones(f.bitwidth).checked_shr(u32::from(len)).unwrap_or(0);
                let keep = ones(f.bitwidth) ^ low;
                v & keep
            } else {
                v
            };
            FieldMatch::Lpm {
                value: masked,
                prefix_len: len,
            }
        }
        MatchKind::Ternary => {
            let mask = value(b, f.bitwidth);
            let value = if b.u8() != 0 { v & mask } else { v };
            FieldMatch::Ternary { value, mask }
        }
        MatchKind::Range => {
            let other = value(b, f.bitwidth);
            FieldMatch::Range {
                low: v.min(other),
                high: if b.u8() == 0 {
                    v.min(other)
                } else {
                    v.max(other)
                },
            }
        }
        MatchKind::Optional => FieldMatch::Optional(b.flag().then_some(v)),
    }
}

fn action_spec(b: &mut Bytes<'_>, s: &Schema, action: usize) -> ActionSpec {
    let a = &s.actions[action];
    let mut params: Vec<(u32, u128)> = a
        .params
        .iter()
        .map(|p| (p.id, value(b, p.bitwidth)))
        .collect();
    if b.u8() == 0 {
        params.pop();
    }
    ActionSpec {
        action_id: if b.u8() == 0 { b.u32() } else { a.id },
        params,
    }
}

/// An action of table `t` (an action the table allows, now and then any).
fn table_action_spec(b: &mut Bytes<'_>, s: &Schema, t: usize) -> ActionSpec {
    let table = &s.tables[t];
    let action = if table.actions.is_empty() || b.u8() == 0 {
        b.below(s.actions.len())
    } else {
        table.actions[b.below(table.actions.len())].action
    };
    action_spec(b, s, action)
}

pub fn table_entry(b: &mut Bytes<'_>, s: &Schema, t: usize) -> TableEntry {
    let table = &s.tables[t];
    let mut matches: Vec<(u32, FieldMatch)> = table
        .fields
        .iter()
        .map(|f| (f.id, field_match(b, f)))
        .collect();
    // Ternary, optional and LPM fields may be left out (don't care).
    if b.u8() % 4 == 0 && !matches.is_empty() {
        let i = b.below(matches.len());
        matches.remove(i);
    }
    let priority = match b.u8() % 4 {
        0 => 0,
        1 => 1 + u32::from(b.u8() % 4),
        2 => b.u32(),
        _ => 10,
    };
    let action = match (table.implementation.is_some(), b.u8() % 8) {
        (_, 0) => None,
        (true, 1..=3) => Some(TableAction::Member(1 + u32::from(b.u8() % 6))),
        (true, 4..=5) => Some(TableAction::Group(1 + u32::from(b.u8() % 3))),
        _ => Some(TableAction::Action(table_action_spec(b, s, t))),
    };
    TableEntry {
        table_id: table.id,
        matches,
        priority,
        action,
        is_default: b.u8() % 16 == 0,
        idle_timeout_ns: if table.idle_timeout && b.flag() {
            1_000_000
        } else {
            0
        },
        metadata: b.take(3),
        counter_data: (table.direct_counter.is_some() && b.u8() % 4 == 0).then(|| CounterData {
            packets: u64::from(b.u8()),
            bytes: u64::from(b.u16()),
        }),
        meter_config: (table.direct_meter.is_some() && b.u8() % 4 == 0).then(|| meter(b)),
        elapsed_since_hit_ns: None,
    }
}

fn meter(b: &mut Bytes<'_>) -> MeterConfig {
    let cir = u64::from(b.u16());
    let pir = if b.u8() == 0 {
        0
    } else {
        cir + u64::from(b.u16())
    };
    MeterConfig {
        cir,
        cburst: u64::from(b.u16()),
        pir,
        pburst: u64::from(b.u16()),
    }
}

fn index(b: &mut Bytes<'_>, size: usize) -> Option<u64> {
    match b.u8() % 4 {
        0 => None,
        1 => Some(size as u64),
        _ => Some(b.below(size.clamp(1, 255)) as u64),
    }
}

fn replicas(b: &mut Bytes<'_>) -> Vec<Replica> {
    (0..b.below(5))
        .map(|_| Replica {
            port: if b.u8() % 8 == 0 {
                b.u16()
            } else {
                u16::from(b.u8() % 6)
            },
            rid: u16::from(b.u8() % 3),
        })
        .collect()
}

/// One update of any kind of entity the schema has.
pub fn update(b: &mut Bytes<'_>, s: &Schema) -> Update {
    let kind = match b.u8() % 4 {
        0 | 1 => UpdateKind::Insert,
        2 => UpdateKind::Modify,
        _ => UpdateKind::Delete,
    };
    let profile_id = |b: &mut Bytes<'_>| {
        if s.action_profiles.is_empty() || b.u8() == 0 {
            b.u32()
        } else {
            s.action_profiles[b.below(s.action_profiles.len())].id
        }
    };
    let entity = match b.u8() % 16 {
        0..=6 if !s.tables.is_empty() => {
            let t = b.below(s.tables.len());
            Entity::TableEntry(table_entry(b, s, t))
        }
        7 => {
            let profile_id = profile_id(b);
            // An action of a table that uses this profile.
            let table = s.tables.iter().position(|t| {
                t.implementation
                    .is_some_and(|p| s.action_profiles[p].id == profile_id)
            });
            let action = match table {
                Some(t) if b.u8() != 0 => Some(table_action_spec(b, s, t)),
                _ if b.u8() == 0 => None,
                _ => {
                    let a = b.below(s.actions.len());
                    Some(action_spec(b, s, a))
                }
            };
            Entity::Member {
                profile_id,
                member_id: 1 + u32::from(b.u8() % 6),
                action,
            }
        }
        8 => Entity::Group {
            profile_id: profile_id(b),
            group_id: 1 + u32::from(b.u8() % 3),
            members: (0..b.below(5))
                .map(|_| (1 + u32::from(b.u8() % 6), u32::from(b.u8() % 4)))
                .collect(),
            max_size: u32::from(b.u8() % 8),
        },
        9 if !s.counters.is_empty() => {
            let c = &s.counters[b.below(s.counters.len())];
            Entity::Counter {
                counter_id: c.id,
                index: index(b, c.size),
                data: CounterData {
                    packets: u64::from(b.u8()),
                    bytes: u64::from(b.u8()),
                },
            }
        }
        10 if !s.meters.is_empty() => {
            let m = &s.meters[b.below(s.meters.len())];
            Entity::Meter {
                meter_id: m.id,
                index: index(b, m.size),
                config: b.flag().then(|| meter(b)),
            }
        }
        11 if !s.registers.is_empty() => {
            let r = &s.registers[b.below(s.registers.len())];
            Entity::Register {
                register_id: r.id,
                index: index(b, r.size),
                value: value(b, r.bitwidth),
            }
        }
        12 => {
            let with: Vec<usize> = (0..s.tables.len())
                .filter(|&t| {
                    s.tables[t].direct_counter.is_some() || s.tables[t].direct_meter.is_some()
                })
                .collect();
            let t = if with.is_empty() {
                b.below(s.tables.len().max(1))
            } else {
                with[b.below(with.len())]
            };
            let entry = if s.tables.is_empty() {
                TableEntry::default()
            } else {
                table_entry(b, s, t)
            };
            if b.flag() {
                Entity::DirectCounter {
                    entry,
                    data: CounterData {
                        packets: u64::from(b.u8()),
                        bytes: u64::from(b.u8()),
                    },
                }
            } else {
                Entity::DirectMeter {
                    entry,
                    config: b.flag().then(|| meter(b)),
                }
            }
        }
        13 | 14 => Entity::MulticastGroup {
            group_id: if b.u8() == 0 {
                b.u32()
            } else {
                u32::from(b.u8() % 6)
            },
            replicas: replicas(b),
            metadata: b.take(2),
        },
        _ => Entity::CloneSession {
            session_id: if b.u8() == 0 {
                b.u32()
            } else {
                u32::from(b.u8() % 8)
            },
            session: CloneSession {
                replicas: replicas(b),
                class_of_service: b.u8() % 9,
                truncate: if b.flag() { 0 } else { u32::from(b.u16()) },
            },
        },
    };
    Update { kind, entity }
}
