//! The local control plane of P4TE (Alg. 3) [P Alg. 3, §4.2.2, §6.1.1–6.1.2].
//!
//! On each feedback frame it maps the reported queue depth to one of four ranges and the
//! reported colour to one of three groups, and moves the port between the routing groups of
//! `ingress.queue_depth_up` / `ingress.link_util_up` through the validated write path
//! ([`AgentCx::write`], the same as P4Runtime's):
//! - queue depth `[0, Δ]` → level 1 (highest priority), `[Δ+1, 2Δ]` → 2, `[2Δ+1, 3Δ]` → 3,
//!   above → 4 [A-P4TE-6: the four explicit ranges];
//! - GREEN → level 1, YELLOW → 2, RED → 3 [I];
//! - a port is added to its new group before it leaves the old one; a group that becomes
//!   non-empty gets its table entry, one that becomes empty loses it, so only non-empty groups
//!   match [A-P4TE-7].
//!
//! The truth is the switch's own state: the agent reads the groups before each move, so it
//! needs no memory of its own and survives a pipeline reset or a controller's writes. Ports in
//! no group of the metric (down ports) are left alone.

use super::{Event, FEEDBACK_ETHERTYPE, Feedback};
use pipeline::agent::{Agent, AgentCx};
use pipeline::control::{Entity, TableAction, TableEntry, Update, UpdateKind};
use pipeline::schema::Schema;

/// Group ids of the queue-depth levels 1..=4 are `QUEUE_GROUPS + level` [X].
pub const QUEUE_GROUPS: u32 = 0;
/// Group ids of the utilisation levels 1..=3 are `UTIL_GROUPS + level` [X].
pub const UTIL_GROUPS: u32 = 10;
/// The group of every up port, for untagged traffic.
pub const ECMP_GROUP: u32 = 20;
/// Queue-depth levels (routing groups r = 4) [P §6.1.1].
pub const QUEUE_LEVELS: u32 = 4;
/// Utilisation levels [P §6.1.2].
pub const UTIL_LEVELS: u32 = 3;

/// The P4Runtime priority of level `level` (1 is the highest; larger numbers win).
pub fn priority(level: u32) -> u32 {
    10 - level
}

/// The queue-depth level of `depth` with step `delta`.
pub fn queue_level(depth: u32, delta: u32) -> u32 {
    let d = delta.max(1);
    if depth <= d { 1 } else { (depth - 1) / d + 1 }.min(QUEUE_LEVELS)
}

#[derive(Clone, Copy, Debug)]
struct Metric {
    table_id: u32,
    base: u32,
    levels: u32,
}

/// The agent.
#[derive(Debug)]
pub struct P4teAgent {
    profile_id: u32,
    queue: Metric,
    util: Metric,
    delta_register: usize,
    /// Feedback frames read.
    pub feedback: u64,
    /// Port moves made.
    pub moves: u64,
}

impl P4teAgent {
    /// The agent of a switch running `p4te` (`schema` is its schema).
    pub fn new(schema: &Schema) -> Option<Self> {
        let table = |name: &str| schema.table_by_name(name).map(|i| schema.tables[i].id);
        Some(P4teAgent {
            profile_id: schema.profile_by_name("ingress.up_selector")?.id,
            queue: Metric {
                table_id: table("ingress.queue_depth_up")?,
                base: QUEUE_GROUPS,
                levels: QUEUE_LEVELS,
            },
            util: Metric {
                table_id: table("ingress.link_util_up")?,
                base: UTIL_GROUPS,
                levels: UTIL_LEVELS,
            },
            delta_register: schema
                .registers
                .iter()
                .position(|r| r.name == "egress.qdepth_delta")?,
            feedback: 0,
            moves: 0,
        })
    }

    /// Moves `port` to level `level` of metric `m`.
    fn move_port(&mut self, cx: &mut AgentCx<'_>, m: Metric, port: u32, level: u32) {
        let Ok(groups) = cx.control().read_groups(Some(self.profile_id)) else {
            return;
        };
        let members_of = |g: u32| -> Vec<(u32, u32)> {
            groups
                .iter()
                .find(|(_, id, _)| *id == g)
                .map(|(_, _, m)| m.clone())
                .unwrap_or_default()
        };
        let Some(old) = (1..=m.levels).find(|&l| {
            members_of(m.base + l)
                .iter()
                .any(|(member, _)| *member == port)
        }) else {
            return; // not an up port of this metric
        };
        if old == level {
            return;
        }
        let (new_g, old_g) = (m.base + level, m.base + old);
        let mut new_members = members_of(new_g);
        let was_empty = new_members.is_empty();
        new_members.push((port, 1));
        let mut old_members = members_of(old_g);
        old_members.retain(|(member, _)| *member != port);
        let entry = |level: u32, group: Option<u32>| TableEntry {
            table_id: m.table_id,
            priority: priority(level),
            action: group.map(TableAction::Group),
            ..TableEntry::default()
        };
        let group = |g: u32, members: Vec<(u32, u32)>| Update {
            kind: UpdateKind::Modify,
            entity: Entity::Group {
                profile_id: self.profile_id,
                group_id: g,
                members,
                max_size: 0,
            },
        };
        let mut updates = vec![group(new_g, new_members)];
        if was_empty {
            updates.push(Update {
                kind: UpdateKind::Insert,
                entity: Entity::TableEntry(entry(level, Some(new_g))),
            });
        }
        let now_empty = old_members.is_empty();
        updates.push(group(old_g, old_members));
        if now_empty {
            updates.push(Update {
                kind: UpdateKind::Delete,
                entity: Entity::TableEntry(entry(old, None)),
            });
        }
        let results = cx.write(&updates);
        if results.iter().all(Result::is_ok) {
            self.moves += 1;
        }
    }
}

impl Agent for P4teAgent {
    fn packet_in(&mut self, _now_ns: u64, frame: &[u8], cx: &mut AgentCx<'_>) {
        // After the 2-byte packet_in header.
        let Some(fb) = frame
            .get(2..)
            .filter(|f| f.len() >= 14 && u16::from_be_bytes([f[12], f[13]]) == FEEDBACK_ETHERTYPE)
            .and_then(Feedback::decode)
        else {
            return;
        };
        self.feedback += 1;
        let port = u32::from(fb.port);
        if fb.qd_event != Event::None {
            let delta = cx.control().externs().registers[self.delta_register]
                .read(0)
                .unwrap_or(0) as u32;
            self.move_port(cx, self.queue, port, queue_level(fb.depth, delta));
        }
        if fb.util_event != Event::None {
            self.move_port(cx, self.util, port, fb.color as u32 + 1);
        }
    }
}

/// The registry's constructor.
pub fn build(schema: &std::sync::Arc<Schema>) -> Box<dyn Agent> {
    Box::new(P4teAgent::new(schema).expect("the agent is built for p4te's own schema"))
}
