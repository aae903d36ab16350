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
//! no group of the metric (down ports) are left alone; reports of ports in no group at all are
//! dropped before any read, by the set of up ports the agent refreshes at each tick (once per
//! hold time, or every 10 ms with no hold: a port a controller adds to a group is heard from
//! the next tick).
//!
//! **Idle ports** [X, A-P4TE-23]: Alg. 1 reports a port's state only when a packet leaves it,
//! so a port that falls silent keeps the colour and depth of its last packets, and with a held
//! colour (`egress.color_hold_ns`) those are the loaded ones: an idle uplink would stay in a
//! low group for good, and flows that re-route at a flowlet boundary would all crowd the group
//! both uplinks end up in. Once per hold time the agent reads `egress.port_tx`; an up port that
//! sent nothing for three looks in a row returns to level 1 of both metrics, and its
//! `old_packet_colors`, `old_queue_depths` and `port_utilizations` cells are cleared, as if a
//! GREEN packet had left an empty queue. With a hold of 0 (Alg. 1 as written) it does nothing.

use std::collections::{BTreeMap, BTreeSet};

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
    hold_register: usize,
    port_tx: usize,
    /// `egress.old_packet_colors`, `egress.old_queue_depths`, `ingress.port_utilizations`.
    idle_registers: [usize; 3],
    /// Each port's transmitted packets at the last idle check, and for how many checks in a
    /// row it has not changed.
    last_tx: Vec<(Option<u64>, u32)>,
    /// The tick interval: the hold time, or [`IDLE_POLL_NS`] without one.
    interval_ns: u64,
    /// Feedback frames read.
    pub feedback: u64,
    /// Port moves made.
    pub moves: u64,
    /// Idle ports returned to level 1.
    pub idle_moves: u64,
    /// Feedback frames of ports in no group, skipped.
    pub skipped: u64,
    /// Links taken down or brought back up ([`Agent::port_status`]).
    pub link_changes: u64,
    /// Ports this agent took out of the groups for a failed link: the only ones a link coming
    /// back up returns (a spine's ports, or a host's, are in no group to begin with).
    failed: BTreeSet<u32>,
    /// Which ports are up ports (in a group), as of the last tick; None until then and after
    /// a reset, when every report is looked at.
    up: Option<Vec<bool>>,
}

impl P4teAgent {
    /// The agent of a switch running `p4te` (`schema` is its schema).
    pub fn new(schema: &Schema) -> Option<Self> {
        let table = |name: &str| schema.table_by_name(name).map(|i| schema.tables[i].id);
        let register = |name: &str| schema.registers.iter().position(|r| r.name == name);
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
            delta_register: register("egress.qdepth_delta")?,
            hold_register: register("egress.color_hold_ns")?,
            port_tx: schema
                .counters
                .iter()
                .position(|c| c.name == "egress.port_tx")?,
            idle_registers: [
                register("egress.old_packet_colors")?,
                register("egress.old_queue_depths")?,
                register("ingress.port_utilizations")?,
            ],
            last_tx: Vec::new(),
            interval_ns: IDLE_POLL_NS,
            feedback: 0,
            moves: 0,
            idle_moves: 0,
            skipped: 0,
            link_changes: 0,
            failed: BTreeSet::new(),
            up: None,
        })
    }

    /// The up ports (members of any level of either metric), each with its levels
    /// `(port, utilisation level, queue level)`.
    fn levels(&self, cx: &AgentCx<'_>) -> Option<Vec<(u32, u32, u32)>> {
        let groups = cx.control().read_groups(Some(self.profile_id)).ok()?;
        let mut ports: BTreeMap<u32, (u32, u32)> = BTreeMap::new();
        for (_, g, members) in &groups {
            let level = |m: Metric| g.checked_sub(m.base).filter(|l| (1..=m.levels).contains(l));
            for (port, _) in members {
                let e = ports.entry(*port);
                match (level(self.util), level(self.queue)) {
                    (Some(l), _) => e.or_insert((1, 1)).0 = l,
                    (_, Some(l)) => e.or_insert((1, 1)).1 = l,
                    _ => {}
                }
            }
        }
        Some(ports.into_iter().map(|(p, (u, q))| (p, u, q)).collect())
    }

    /// Returns every up port of `ports` that sent nothing for [`IDLE_CHECKS`] checks to level 1
    /// of both metrics.
    fn idle_check(&mut self, cx: &mut AgentCx<'_>, ports: Vec<(u32, u32, u32)>) {
        let externs = cx.control().externs().clone();
        for (port, util, queue) in ports {
            let p = port as usize;
            let tx = externs.counters[self.port_tx].read(p).map(|c| c.packets);
            if self.last_tx.len() <= p {
                self.last_tx.resize(p + 1, (None, 0));
            }
            let (last, quiet) = self.last_tx[p];
            let quiet = if tx.is_some() && last == tx {
                quiet + 1
            } else {
                0
            };
            self.last_tx[p] = (tx, quiet);
            if quiet >= IDLE_CHECKS && (util != 1 || queue != 1) {
                for r in self.idle_registers {
                    externs.registers[r].write(p, 0);
                }
                self.idle_moves += 1;
                if util != 1 {
                    self.move_port(cx, self.util, port, 1);
                }
                if queue != 1 {
                    self.move_port(cx, self.queue, port, 1);
                }
            }
        }
    }

    /// Moves `port` to level `level` of metric `m`.
    fn move_port(&mut self, cx: &mut AgentCx<'_>, m: Metric, port: u32, level: u32) {
        let Some(groups) = self.groups(cx) else {
            return;
        };
        let members_of = |g: u32| groups.get(&g).cloned().unwrap_or_default();
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
        let mut updates = vec![self.group(new_g, new_members)];
        if was_empty {
            updates.push(level_entry(m, level, UpdateKind::Insert));
        }
        let now_empty = old_members.is_empty();
        updates.push(self.group(old_g, old_members));
        if now_empty {
            updates.push(level_entry(m, old, UpdateKind::Delete));
        }
        let results = cx.write(&updates);
        if results.iter().all(Result::is_ok) {
            self.moves += 1;
        }
    }

    /// A port's link failed or came back (§5.1 of the paper: "when a link fails, the operator
    /// can remove the link from its current routing group"). Down: the port leaves every group
    /// of both metrics and the ECMP group, and a level left empty loses its entry (A-P4TE-7);
    /// running flowlets keep their port until their next flowlet. Up: the port joins level 1 of
    /// both metrics and the ECMP group with its monitoring cells cleared, as a port that has
    /// carried nothing; only a port this agent took out comes back, so a port that was in no
    /// group (a host's, a spine's) stays out, and a second "up" changes nothing.
    fn set_link(&mut self, cx: &mut AgentCx<'_>, port: u32, up: bool) {
        if up && !self.failed.contains(&port) {
            return;
        }
        let Some(groups) = self.groups(cx) else {
            return;
        };
        let members_of = |g: u32| groups.get(&g).cloned().unwrap_or_default();
        let has = |g: u32| members_of(g).iter().any(|(member, _)| *member == port);
        let mut updates = Vec::new();
        for m in [self.queue, self.util] {
            for level in 1..=m.levels {
                let g = m.base + level;
                let mut members = members_of(g);
                if up && level == 1 && !(1..=m.levels).any(|l| has(m.base + l)) {
                    members.push((port, 1));
                    updates.push(self.group(g, members.clone()));
                    if members.len() == 1 {
                        updates.push(level_entry(m, level, UpdateKind::Insert));
                    }
                } else if !up && has(g) {
                    members.retain(|(member, _)| *member != port);
                    updates.push(self.group(g, members.clone()));
                    if members.is_empty() {
                        updates.push(level_entry(m, level, UpdateKind::Delete));
                    }
                }
            }
        }
        let mut ecmp = members_of(ECMP_GROUP);
        if up != has(ECMP_GROUP) {
            if up {
                ecmp.push((port, 1));
            } else {
                ecmp.retain(|(member, _)| *member != port);
            }
            updates.push(self.group(ECMP_GROUP, ecmp));
        }
        if up {
            let externs = cx.control().externs().clone();
            for r in self.idle_registers {
                externs.registers[r].write(port as usize, 0);
            }
        }
        if let Some(v) = &mut self.up {
            if v.len() <= port as usize {
                v.resize(port as usize + 1, false);
            }
            v[port as usize] = up;
        }
        if updates.is_empty() {
            return; // down on a port in no group: nothing to take out, nothing to bring back
        }
        if cx.write(&updates).iter().all(Result::is_ok) {
            self.link_changes += 1;
            if up {
                self.failed.remove(&port);
            } else {
                self.failed.insert(port);
            }
        }
    }

    /// The up selector's groups, by id, with their members (None if they cannot be read).
    fn groups(&self, cx: &AgentCx<'_>) -> Option<BTreeMap<u32, Vec<(u32, u32)>>> {
        let groups = cx.control().read_groups(Some(self.profile_id)).ok()?;
        Some(groups.into_iter().map(|(_, g, m)| (g, m)).collect())
    }

    /// Sets group `g`'s members.
    fn group(&self, g: u32, members: Vec<(u32, u32)>) -> Update {
        Update {
            kind: UpdateKind::Modify,
            entity: Entity::Group {
                profile_id: self.profile_id,
                group_id: g,
                members,
                max_size: 0,
            },
        }
    }
}

/// Inserts (pointing at the level's group) or deletes the entry of level `level` of metric `m`.
fn level_entry(m: Metric, level: u32, kind: UpdateKind) -> Update {
    let group = (kind != UpdateKind::Delete).then_some(m.base + level);
    Update {
        kind,
        entity: Entity::TableEntry(TableEntry {
            table_id: m.table_id,
            priority: priority(level),
            action: group.map(TableAction::Group),
            ..TableEntry::default()
        }),
    }
}

/// Checks in a row (one per hold time) without a packet that make a port idle: a worker that
/// was off its core for a hold time must not look idle.
const IDLE_CHECKS: u32 = 3;

/// How often the agent looks at the hold time while it is 0 (no idle checks).
const IDLE_POLL_NS: u64 = 10_000_000;

impl Agent for P4teAgent {
    fn tick_interval_ns(&self) -> Option<u64> {
        Some(self.interval_ns)
    }

    fn tick(&mut self, _now_ns: u64, cx: &mut AgentCx<'_>) {
        let hold = cx.control().externs().registers[self.hold_register]
            .read(0)
            .unwrap_or(0);
        // The host calls again after the interval this leaves.
        self.interval_ns = if hold == 0 { IDLE_POLL_NS } else { hold };
        let Some(ports) = self.levels(cx) else {
            return;
        };
        let mut up = vec![false; ports.iter().map(|p| p.0 as usize + 1).max().unwrap_or(0)];
        for p in &ports {
            up[p.0 as usize] = true;
        }
        self.up = Some(up);
        if hold != 0 {
            self.idle_check(cx, ports);
        }
    }

    fn port_status(&mut self, _now_ns: u64, port: u32, up: bool, cx: &mut AgentCx<'_>) {
        self.set_link(cx, port, up);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("feedback", self.feedback),
            ("skipped", self.skipped),
            ("moves", self.moves),
            ("idle_moves", self.idle_moves),
            ("link_changes", self.link_changes),
        ]
    }

    fn reset(&mut self) {
        self.last_tx.clear();
        self.failed.clear();
        self.up = None;
    }

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
        // A port in no group (a host port, or any port of a switch with no up ports) is left
        // alone before any read of the groups.
        if let Some(up) = &self.up
            && !up.get(port as usize).copied().unwrap_or(false)
        {
            self.skipped += 1;
            return;
        }
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
