//! The control API: the only door for writes, and reads of every object.
//!
//! # Contract (design.md section 5)
//!
//! A write batch is handled update by update on a private standby copy of the [`State`]: each
//! update is validated against the schema and the standby state as the earlier updates of the batch
//! left it (the step that can fail, with a precise [`WriteError`]), then applied (which cannot fail
//! once validated). When the batch is done the standby copy is published with one atomic swap, so a
//! worker sees all of a batch or none of it. The copy that was current becomes the standby once the
//! workers that were reading it have finished their batch, and the same ops are replayed on it.
//! Every write is incremental (no structure is rebuilt), so a single-entry write is visible in
//! microseconds even with a million entries.
//!
//! Registers, counters and meters are written in place (they are not snapshotted); in a batch,
//! those writes are deferred to the end so that a rolled-back batch leaves them untouched too.
//!
//! Writers are serialised by a mutex; readers (workers) never take it.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};
use parking_lot::Mutex;

use crate::digest::DigestQueue;
use crate::externs::{Counter, CounterData, CounterKind, MeterArray, MeterConfig, Register};
use crate::metadata::DropReason;
use crate::pre::{self, CloneSession, MulticastGroup, Replica};
use crate::schema::Schema;
use crate::state::{ActionCall, ApplyError, Entry, EntryAction, Op, State};
use crate::table::{EntryId, FieldMatch, HitTimes, MatchKind, ProfileError, TableError};

/// Why a write was refused. Each kind maps to one gRPC / P4Runtime canonical code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The object exists already (ALREADY_EXISTS).
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The object does not exist (NOT_FOUND).
    #[error("not found: {0}")]
    NotFound(String),
    /// A value or index is outside its range (OUT_OF_RANGE).
    #[error("out of range: {0}")]
    OutOfRange(String),
    /// A table, profile or group is full (RESOURCE_EXHAUSTED).
    #[error("resource exhausted: {0}")]
    ResourceExhausted(String),
    /// The request is malformed (INVALID_ARGUMENT).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The object may not be written (PERMISSION_DENIED): const tables and defaults, action scope.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The state does not allow it (FAILED_PRECONDITION): e.g. deleting a member still in use.
    #[error("failed precondition: {0}")]
    FailedPrecondition(String),
    /// The batch was aborted by an earlier failure (ABORTED), under rollback semantics.
    #[error("aborted: {0}")]
    Aborted(String),
}

/// What an update does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateKind {
    /// Create.
    Insert,
    /// Change.
    Modify,
    /// Remove.
    Delete,
}

/// An action named by P4Info id with its arguments by parameter id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionSpec {
    /// P4Info action id.
    pub action_id: u32,
    /// (param id, value).
    pub params: Vec<(u32, u128)>,
}

/// What a table entry does, as the controller says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableAction {
    /// A direct action.
    Action(ActionSpec),
    /// An action profile member.
    Member(u32),
    /// An action selector group.
    Group(u32),
}

/// A table entry as the controller writes and reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableEntry {
    /// P4Info table id.
    pub table_id: u32,
    /// (field id, match); don't-care fields omitted.
    pub matches: Vec<(u32, FieldMatch)>,
    /// Priority (0 for tables without ternary/range/optional fields).
    pub priority: u32,
    /// The action (required for insert and modify).
    pub action: Option<TableAction>,
    /// This is the table's default entry.
    pub is_default: bool,
    /// Idle timeout in ns (0 = none).
    pub idle_timeout_ns: u64,
    /// Controller cookie.
    pub metadata: Vec<u8>,
    /// Direct counter value (written with the entry, or returned when asked for).
    pub counter_data: Option<CounterData>,
    /// Direct meter config (written with the entry, or returned when asked for).
    pub meter_config: Option<MeterConfig>,
    /// On read: ns since the entry last matched (None if the table has no idle timeout).
    pub elapsed_since_hit_ns: Option<u64>,
}

/// One object of a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entity {
    /// A table entry or default entry.
    TableEntry(TableEntry),
    /// An action profile member.
    Member {
        /// P4Info action profile id.
        profile_id: u32,
        /// Member id.
        member_id: u32,
        /// Its action (required except for delete).
        action: Option<ActionSpec>,
    },
    /// An action selector group.
    Group {
        /// P4Info action profile id.
        profile_id: u32,
        /// Group id.
        group_id: u32,
        /// (member id, weight).
        members: Vec<(u32, u32)>,
        /// Maximum size (0 = the profile's max group size).
        max_size: u32,
    },
    /// Cells of an indexed counter.
    Counter {
        /// P4Info counter id.
        counter_id: u32,
        /// Cell (None = all cells).
        index: Option<u64>,
        /// Value.
        data: CounterData,
    },
    /// The direct counter of one entry (the key of `entry` identifies it).
    DirectCounter {
        /// Entry whose counter is written.
        entry: TableEntry,
        /// Value.
        data: CounterData,
    },
    /// Cells of an indexed meter.
    Meter {
        /// P4Info meter id.
        meter_id: u32,
        /// Cell (None = all cells).
        index: Option<u64>,
        /// Config (None = unconfigured, all packets green).
        config: Option<MeterConfig>,
    },
    /// The direct meter of one entry.
    DirectMeter {
        /// Entry whose meter is configured.
        entry: TableEntry,
        /// Config.
        config: Option<MeterConfig>,
    },
    /// Cells of a register.
    Register {
        /// P4Info register id.
        register_id: u32,
        /// Cell (None = all cells).
        index: Option<u64>,
        /// Value.
        value: u128,
    },
    /// A multicast group.
    MulticastGroup {
        /// Group id (1..=65535).
        group_id: u32,
        /// Copies.
        replicas: Vec<Replica>,
        /// Controller metadata.
        metadata: Vec<u8>,
    },
    /// A clone session.
    CloneSession {
        /// Session id (1..=1023).
        session_id: u32,
        /// The session.
        session: CloneSession,
    },
}

/// One update of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    /// Insert, modify or delete.
    pub kind: UpdateKind,
    /// The object.
    pub entity: Entity,
}

/// How a batch treats a failing update (P4Runtime WriteRequest.atomicity).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Atomicity {
    /// Apply every update that can be applied.
    #[default]
    ContinueOnError,
    /// Apply all or none.
    RollbackOnError,
    /// All or none, and the data plane sees the batch at once (always true here).
    DataplaneAtomic,
}

/// Stateful externs, shared in place by workers and the control plane.
#[derive(Debug)]
pub struct Externs {
    /// Indexed counters in schema order.
    pub counters: Vec<Counter>,
    /// Direct counters in schema order (indexed by entry id).
    pub direct_counters: Vec<Counter>,
    /// Indexed meters in schema order.
    pub meters: Vec<MeterArray>,
    /// Direct meters in schema order (indexed by entry id).
    pub direct_meters: Vec<MeterArray>,
    /// Registers in schema order.
    pub registers: Vec<Register>,
    /// Per table with idle timeout: last hit time of each entry.
    pub hit_times: Vec<Option<HitTimes>>,
    /// Digests for the controller.
    pub digests: DigestQueue,
    /// Digests for the switch-local agent (a copy of each, while one is attached): the agent
    /// and a P4Runtime client each get every digest, and neither can starve the other.
    pub agent_digests: DigestQueue,
    /// Whether an agent takes digests ([`Externs::agent_digests`]).
    pub agent_attached: std::sync::atomic::AtomicBool,
    /// Drops per [`DropReason::index`].
    pub drops: Counter,
    /// Per table: its direct counter's index.
    pub table_direct_counter: Vec<Option<usize>>,
    /// Per table: its direct meter's index.
    pub table_direct_meter: Vec<Option<usize>>,
    /// Table names, for traces.
    pub table_names: Vec<&'static str>,
    /// Action names, for traces.
    pub action_names: Vec<&'static str>,
}

impl Externs {
    /// Extern arrays for `schema`, with `shards` per-worker counter shards.
    pub fn new(schema: &Schema, shards: usize) -> Self {
        let counter = |c: &crate::schema::CounterDef| Counter::new(c.size, c.kind, shards);
        let meter = |m: &crate::schema::MeterDef| MeterArray::new(m.size, m.unit, m.algorithm);
        Externs {
            counters: schema.counters.iter().map(counter).collect(),
            direct_counters: schema.direct_counters.iter().map(counter).collect(),
            meters: schema.meters.iter().map(meter).collect(),
            direct_meters: schema.direct_meters.iter().map(meter).collect(),
            registers: schema
                .registers
                .iter()
                .map(|r| Register::new(r.size, r.bitwidth))
                .collect(),
            hit_times: schema
                .tables
                .iter()
                .map(|t| t.idle_timeout.then(|| HitTimes::new(t.size)))
                .collect(),
            digests: DigestQueue::new(4096),
            agent_digests: DigestQueue::new(4096),
            agent_attached: std::sync::atomic::AtomicBool::new(false),
            drops: Counter::new(
                DropReason::NAMES.len() + schema.drop_reasons.len(),
                CounterKind::Both,
                shards,
            ),
            table_direct_counter: schema.tables.iter().map(|t| t.direct_counter).collect(),
            table_direct_meter: schema.tables.iter().map(|t| t.direct_meter).collect(),
            table_names: schema.tables.iter().map(|t| t.name).collect(),
            action_names: schema.actions.iter().map(|a| a.name).collect(),
        }
    }

    /// The direct counter of table `table`.
    #[inline]
    pub fn direct_counter_of(&self, table: usize) -> Option<&Counter> {
        self.table_direct_counter
            .get(table)
            .copied()
            .flatten()
            .map(|c| &self.direct_counters[c])
    }

    /// The direct meter of table `table`.
    #[inline]
    pub fn direct_meter_of(&self, table: usize) -> Option<&MeterArray> {
        self.table_direct_meter
            .get(table)
            .copied()
            .flatten()
            .map(|m| &self.direct_meters[m])
    }

    /// Counts a drop.
    #[inline]
    pub fn count_drop(&self, shard: usize, reason: DropReason, bytes: u32) {
        self.drops.count(shard, reason.index(), bytes);
    }
}

/// An in-place extern write, deferred to the end of its batch.
#[derive(Debug)]
enum InPlace {
    Counter {
        direct: bool,
        idx: usize,
        cells: std::ops::Range<usize>,
        data: CounterData,
    },
    Meter {
        direct: bool,
        idx: usize,
        cells: std::ops::Range<usize>,
        config: Option<MeterConfig>,
    },
    Register {
        idx: usize,
        cells: std::ops::Range<usize>,
        value: u64,
    },
    /// A new entry: reset its direct resources and idle time, then apply the given values.
    NewEntry {
        table: usize,
        id: EntryId,
        counter: Option<CounterData>,
        meter: Option<MeterConfig>,
    },
}

/// The writer's private side.
#[derive(Debug)]
struct Writer {
    /// The copy not being read, when it has caught up with the current one.
    standby: Option<Arc<State>>,
    /// The previous current copy, waiting for readers to leave, and the ops it misses.
    lagging: Option<(Arc<State>, Vec<Op>)>,
}

/// The control plane of one program instance.
#[derive(Debug)]
pub struct Control {
    schema: Arc<Schema>,
    current: ArcSwap<State>,
    writer: Mutex<Writer>,
    externs: Arc<Externs>,
    /// Monotonic clock value of the last write, for idle-time reads (set by the caller).
    now_ns: std::sync::atomic::AtomicU64,
    /// Pipeline resets so far (each [`Control::clear`]), so agents notice them.
    generation: std::sync::atomic::AtomicU64,
}

/// A worker's view of the state for one batch. Drop it before sleeping: a held snapshot keeps
/// the writer from reusing the old copy.
pub type Snapshot = Guard<Arc<State>>;

fn table_err(what: &str, e: TableError) -> WriteError {
    match e {
        TableError::AlreadyExists => WriteError::AlreadyExists(format!("{what}: entry exists")),
        TableError::NotFound => WriteError::NotFound(format!("{what}: no such entry")),
        TableError::Full => WriteError::ResourceExhausted(format!("{what}: table full")),
        TableError::InvalidKey(why) | TableError::InvalidPriority(why) => {
            WriteError::InvalidArgument(format!("{what}: {why}"))
        }
    }
}

fn profile_err(what: &str, e: ProfileError) -> WriteError {
    let msg = format!("{what}: {e}");
    match e {
        ProfileError::AlreadyExists => WriteError::AlreadyExists(msg),
        ProfileError::NotFound | ProfileError::MemberNotFound(_) => WriteError::NotFound(msg),
        ProfileError::Full | ProfileError::GroupTooLarge => WriteError::ResourceExhausted(msg),
        ProfileError::InUse => WriteError::FailedPrecondition(msg),
        ProfileError::DuplicateMember(_) | ProfileError::InvalidWeight(_) => {
            WriteError::InvalidArgument(msg)
        }
    }
}

fn apply_err(what: &str, e: ApplyError) -> WriteError {
    match e {
        ApplyError::Table(e) => table_err(what, e),
        ApplyError::Profile(e) => profile_err(what, e),
        ApplyError::NotFound => WriteError::NotFound(what.to_string()),
        ApplyError::AlreadyExists => WriteError::AlreadyExists(what.to_string()),
    }
}

fn fits(value: u128, bitwidth: u8) -> bool {
    bitwidth >= 128 || value >> bitwidth == 0
}

fn mask(bitwidth: u8) -> u128 {
    if bitwidth >= 128 {
        u128::MAX
    } else {
        (1u128 << bitwidth) - 1
    }
}

fn cells(
    index: Option<u64>,
    size: usize,
    what: &str,
) -> Result<std::ops::Range<usize>, WriteError> {
    match index {
        None => Ok(0..size),
        Some(i) => {
            let i = usize::try_from(i).unwrap_or(usize::MAX);
            if i >= size {
                return Err(WriteError::OutOfRange(format!(
                    "{what}: index {i} >= size {size}"
                )));
            }
            Ok(i..i + 1)
        }
    }
}

impl Control {
    /// The control plane of `schema`, with empty tables and `shards` counter shards.
    pub fn new(schema: Arc<Schema>, shards: usize) -> Self {
        let state = State::new(&schema);
        let externs = Arc::new(Externs::new(&schema, shards));
        Control {
            current: ArcSwap::from_pointee(state.clone()),
            writer: Mutex::new(Writer {
                standby: Some(Arc::new(state)),
                lagging: None,
            }),
            schema,
            externs,
            now_ns: std::sync::atomic::AtomicU64::new(0),
            generation: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How many times the pipeline was reset ([`Control::clear`]); a switch-local agent resets
    /// itself when this changes.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The schema.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The externs.
    pub fn externs(&self) -> &Arc<Externs> {
        &self.externs
    }

    /// The current snapshot, for one batch of packets (or one read).
    #[inline]
    pub fn snapshot(&self) -> Snapshot {
        self.current.load()
    }

    /// Tells the control plane the data plane's clock, for idle-time reads and new entries.
    pub fn set_now(&self, now_ns: u64) {
        self.now_ns
            .store(now_ns, std::sync::atomic::Ordering::Relaxed);
    }

    /// Applies a batch. Returns one result per update, in order.
    pub fn write(&self, updates: &[Update], atomicity: Atomicity) -> Vec<Result<(), WriteError>> {
        let mut w = self.writer.lock();
        let mut standby = self.take_standby(&mut w);
        let state = Arc::get_mut(&mut standby).expect("standby copy is private");
        let mut ops = Vec::new();
        let mut in_place = Vec::new();
        let mut results = Vec::with_capacity(updates.len());
        let mut failed = false;
        for u in updates {
            let r = self.stage(state, u, &mut ops, &mut in_place);
            failed |= r.is_err();
            results.push(r);
        }
        if failed && atomicity != Atomicity::ContinueOnError {
            // Roll back: the standby copy goes back to what is published, and nothing is applied
            // in place. Updates that would have succeeded are reported as aborted.
            *state = State::clone(&self.current.load());
            for r in &mut results {
                if r.is_ok() {
                    *r = Err(WriteError::Aborted(
                        "another update of the batch failed".into(),
                    ));
                }
            }
            w.standby = Some(standby);
            return results;
        }
        for p in in_place {
            self.apply_in_place(p);
        }
        if ops.is_empty() {
            w.standby = Some(standby);
            return results;
        }
        let old = self.current.swap(standby);
        w.lagging = Some((old, ops));
        // Catch the old copy up now if its readers are gone already; otherwise the next write does.
        self.catch_up(&mut w, Duration::from_micros(200));
        results
    }

    /// The standby copy, caught up with the current one.
    fn take_standby(&self, w: &mut Writer) -> Arc<State> {
        if let Some(s) = w.standby.take() {
            return s;
        }
        self.catch_up(w, Duration::from_secs(3600));
        w.standby.take().expect("caught up")
    }

    /// Waits up to `patience` for the lagging copy's readers to leave, then replays its ops.
    fn catch_up(&self, w: &mut Writer, patience: Duration) {
        let Some((mut old, ops)) = w.lagging.take() else {
            return;
        };
        let start = std::time::Instant::now();
        let mut spins = 0u32;
        loop {
            if let Some(state) = Arc::get_mut(&mut old) {
                for op in &ops {
                    let r = state.apply(&self.schema, op);
                    debug_assert!(r.is_ok(), "replay of {op:?} failed: {r:?}");
                }
                w.standby = Some(old);
                return;
            }
            if start.elapsed() > patience {
                w.lagging = Some((old, ops));
                return;
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Validates one update against `state`, applies its snapshot part to `state` and queues the op
    /// for replay; in-place parts are queued in `in_place`.
    fn stage(
        &self,
        state: &mut State,
        u: &Update,
        ops: &mut Vec<Op>,
        in_place: &mut Vec<InPlace>,
    ) -> Result<(), WriteError> {
        let op = match &u.entity {
            Entity::TableEntry(e) => self.table_entry_op(state, u.kind, e, in_place)?,
            Entity::Member {
                profile_id,
                member_id,
                action,
            } => {
                let p = self.profile(*profile_id)?;
                match u.kind {
                    UpdateKind::Delete => Op::DeleteMember {
                        profile: p,
                        id: *member_id,
                    },
                    kind => {
                        let spec = action.as_ref().ok_or_else(|| {
                            WriteError::InvalidArgument("member without an action".into())
                        })?;
                        let call = self.profile_action(p, spec)?;
                        let insert = kind == UpdateKind::Insert;
                        Op::PutMember {
                            profile: p,
                            id: *member_id,
                            call,
                            insert,
                        }
                    }
                }
            }
            Entity::Group {
                profile_id,
                group_id,
                members,
                max_size,
            } => {
                let p = self.profile(*profile_id)?;
                let def = &self.schema.action_profiles[p];
                if !def.selector && u.kind != UpdateKind::Delete {
                    return Err(WriteError::InvalidArgument(format!(
                        "{} is an action profile without a selector: no groups",
                        def.name
                    )));
                }
                match u.kind {
                    UpdateKind::Delete => Op::DeleteGroup {
                        profile: p,
                        id: *group_id,
                    },
                    kind => {
                        if members.iter().any(|&(_, w)| w == 0) {
                            return Err(WriteError::InvalidArgument("member weight 0".into()));
                        }
                        let max = if *max_size == 0 {
                            def.max_group_size as u32
                        } else {
                            *max_size
                        };
                        if max as usize > def.max_group_size {
                            return Err(WriteError::OutOfRange(format!(
                                "max_group_size {max} > {}",
                                def.max_group_size
                            )));
                        }
                        let insert = kind == UpdateKind::Insert;
                        let members = members.clone();
                        Op::PutGroup {
                            profile: p,
                            id: *group_id,
                            members,
                            max_size: max,
                            insert,
                        }
                    }
                }
            }
            Entity::MulticastGroup {
                group_id,
                replicas,
                metadata,
            } => {
                let id = *group_id;
                if id == 0 || id > pre::MAX_GROUP_ID {
                    return Err(WriteError::InvalidArgument(format!(
                        "multicast group id {id}"
                    )));
                }
                check_replicas(replicas)?;
                let exists = state.pre.groups.contains_key(&id);
                self.check_exists(u.kind, exists, &format!("multicast group {id}"))?;
                match u.kind {
                    UpdateKind::Delete => Op::DeleteMulticast { id },
                    _ => {
                        let group = MulticastGroup {
                            replicas: replicas.clone(),
                            metadata: metadata.clone(),
                        };
                        Op::PutMulticast { id, group }
                    }
                }
            }
            Entity::CloneSession {
                session_id,
                session,
            } => {
                let id = *session_id;
                if id == 0 || id > pre::MAX_SESSION_ID {
                    return Err(WriteError::InvalidArgument(format!(
                        "clone session id {id}"
                    )));
                }
                check_replicas(&session.replicas)?;
                if session.class_of_service > 7 {
                    return Err(WriteError::OutOfRange("class_of_service > 7".into()));
                }
                let exists = state.pre.sessions.contains_key(&id);
                self.check_exists(u.kind, exists, &format!("clone session {id}"))?;
                match u.kind {
                    UpdateKind::Delete => Op::DeleteCloneSession { id },
                    _ => Op::PutCloneSession {
                        id,
                        session: session.clone(),
                    },
                }
            }
            Entity::Counter {
                counter_id,
                index,
                data,
            } => {
                self.modify_only(u.kind, "counter")?;
                let idx = self
                    .schema
                    .counter_by_id(*counter_id)
                    .ok_or_else(|| WriteError::NotFound(format!("counter id {counter_id}")))?;
                let c = &self.schema.counters[idx];
                let cells = cells(*index, c.size, c.name)?;
                in_place.push(InPlace::Counter {
                    direct: false,
                    idx,
                    cells,
                    data: *data,
                });
                return Ok(());
            }
            Entity::Meter {
                meter_id,
                index,
                config,
            } => {
                self.modify_only(u.kind, "meter")?;
                let idx = self
                    .schema
                    .meter_by_id(*meter_id)
                    .ok_or_else(|| WriteError::NotFound(format!("meter id {meter_id}")))?;
                let m = &self.schema.meters[idx];
                let cells = cells(*index, m.size, m.name)?;
                check_meter(config.as_ref(), &self.externs.meters[idx])?;
                in_place.push(InPlace::Meter {
                    direct: false,
                    idx,
                    cells,
                    config: *config,
                });
                return Ok(());
            }
            Entity::Register {
                register_id,
                index,
                value,
            } => {
                self.modify_only(u.kind, "register")?;
                let idx = self
                    .schema
                    .register_by_id(*register_id)
                    .ok_or_else(|| WriteError::NotFound(format!("register id {register_id}")))?;
                let r = &self.schema.registers[idx];
                let cells = cells(*index, r.size, r.name)?;
                if !fits(*value, r.bitwidth) {
                    return Err(WriteError::OutOfRange(format!(
                        "{}: value too wide",
                        r.name
                    )));
                }
                in_place.push(InPlace::Register {
                    idx,
                    cells,
                    value: *value as u64,
                });
                return Ok(());
            }
            Entity::DirectCounter { entry, data } => {
                self.modify_only(u.kind, "direct counter")?;
                let (table, id) = self.existing_entry(state, entry)?;
                let idx = self.schema.tables[table].direct_counter.ok_or_else(|| {
                    WriteError::NotFound(format!(
                        "{}: no direct counter",
                        self.schema.tables[table].name
                    ))
                })?;
                let cells = id as usize..id as usize + 1;
                in_place.push(InPlace::Counter {
                    direct: true,
                    idx,
                    cells,
                    data: *data,
                });
                return Ok(());
            }
            Entity::DirectMeter { entry, config } => {
                self.modify_only(u.kind, "direct meter")?;
                let (table, id) = self.existing_entry(state, entry)?;
                let t = &self.schema.tables[table];
                let idx = t
                    .direct_meter
                    .ok_or_else(|| WriteError::NotFound(format!("{}: no direct meter", t.name)))?;
                check_meter(config.as_ref(), &self.externs.direct_meters[idx])?;
                let cells = id as usize..id as usize + 1;
                in_place.push(InPlace::Meter {
                    direct: true,
                    idx,
                    cells,
                    config: *config,
                });
                return Ok(());
            }
        };
        let what = format!("{:?}", u.kind);
        let id = state
            .apply(&self.schema, &op)
            .map_err(|e| apply_err(&what, e))?;
        let op = match (op, id) {
            (
                Op::Insert {
                    table,
                    key,
                    priority,
                    entry,
                    ..
                },
                Some(id),
            ) => {
                if let Entity::TableEntry(e) = &u.entity {
                    in_place.push(InPlace::NewEntry {
                        table,
                        id,
                        counter: e.counter_data,
                        meter: e.meter_config,
                    });
                }
                Op::Insert {
                    table,
                    key,
                    priority,
                    entry,
                    id,
                }
            }
            (op, _) => op,
        };
        ops.push(op);
        Ok(())
    }

    fn modify_only(&self, kind: UpdateKind, what: &str) -> Result<(), WriteError> {
        if kind != UpdateKind::Modify {
            return Err(WriteError::InvalidArgument(format!(
                "{what}: only MODIFY is allowed"
            )));
        }
        Ok(())
    }

    fn check_exists(&self, kind: UpdateKind, exists: bool, what: &str) -> Result<(), WriteError> {
        match (kind, exists) {
            (UpdateKind::Insert, true) => Err(WriteError::AlreadyExists(what.to_string())),
            (UpdateKind::Modify | UpdateKind::Delete, false) => {
                Err(WriteError::NotFound(what.to_string()))
            }
            _ => Ok(()),
        }
    }

    fn profile(&self, id: u32) -> Result<usize, WriteError> {
        self.schema
            .profile_by_id(id)
            .ok_or_else(|| WriteError::NotFound(format!("action profile id {id}")))
    }

    /// A member's action must be allowed in every table of the profile.
    fn profile_action(&self, profile: usize, spec: &ActionSpec) -> Result<ActionCall, WriteError> {
        let def = &self.schema.action_profiles[profile];
        let mut call = None;
        for &t in &def.tables {
            call = Some(self.action_call(t, spec, false)?);
        }
        call.ok_or_else(|| WriteError::InvalidArgument(format!("{}: no table", def.name)))
    }

    /// Validates an action against table `table`'s action refs and the action's parameters.
    fn action_call(
        &self,
        table: usize,
        spec: &ActionSpec,
        as_default: bool,
    ) -> Result<ActionCall, WriteError> {
        let t = &self.schema.tables[table];
        let a = self
            .schema
            .action_by_id(spec.action_id)
            .ok_or_else(|| WriteError::NotFound(format!("action id {}", spec.action_id)))?;
        let def = &self.schema.actions[a];
        match t.allows(a, as_default) {
            None => {
                return Err(WriteError::InvalidArgument(format!(
                    "{} is not an action of {}",
                    def.name, t.name
                )));
            }
            Some(false) => {
                return Err(WriteError::PermissionDenied(format!(
                    "{} may not be used {} in {}",
                    def.name,
                    if as_default {
                        "as the default"
                    } else {
                        "in entries"
                    },
                    t.name
                )));
            }
            Some(true) => {}
        }
        if spec.params.len() != def.params.len() {
            return Err(WriteError::InvalidArgument(format!(
                "{} takes {} parameters, got {}",
                def.name,
                def.params.len(),
                spec.params.len()
            )));
        }
        let mut values = vec![0u128; def.params.len()];
        let mut seen = vec![false; def.params.len()];
        for &(pid, v) in &spec.params {
            let i = def.params.iter().position(|p| p.id == pid).ok_or_else(|| {
                WriteError::InvalidArgument(format!("{}: no parameter id {pid}", def.name))
            })?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: parameter id {pid} twice",
                    def.name
                )));
            }
            if !fits(v, def.params[i].bitwidth) {
                return Err(WriteError::OutOfRange(format!(
                    "{}.{}: value wider than {} bits",
                    def.name, def.params[i].name, def.params[i].bitwidth
                )));
            }
            values[i] = v;
        }
        Ok(ActionCall::new(a, &values))
    }

    /// The full key (don't-cares filled in) of a controller's match list, validated.
    fn full_key(&self, table: usize, e: &TableEntry) -> Result<Box<[FieldMatch]>, WriteError> {
        let t = &self.schema.tables[table];
        let mut key: Vec<Option<FieldMatch>> = vec![None; t.fields.len()];
        for (fid, m) in &e.matches {
            let i = t.fields.iter().position(|f| f.id == *fid).ok_or_else(|| {
                WriteError::InvalidArgument(format!("{}: no match field id {fid}", t.name))
            })?;
            let f = &t.fields[i];
            if key[i].is_some() {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: field {} twice",
                    t.name, f.name
                )));
            }
            let bad =
                |why: &str| WriteError::InvalidArgument(format!("{}.{}: {why}", t.name, f.name));
            let wide = || WriteError::OutOfRange(format!("{}.{}: value too wide", t.name, f.name));
            match (f.kind, m) {
                (MatchKind::Exact, FieldMatch::Exact(v)) => {
                    if !fits(*v, f.bitwidth) {
                        return Err(wide());
                    }
                }
                (MatchKind::Lpm, FieldMatch::Lpm { value, prefix_len }) => {
                    if *prefix_len == 0 {
                        return Err(bad("prefix length 0 must be omitted"));
                    }
                    if *prefix_len > f.bitwidth {
                        return Err(bad("prefix longer than the field"));
                    }
                    if !fits(*value, f.bitwidth) {
                        return Err(wide());
                    }
                    let host = mask(f.bitwidth - *prefix_len);
                    if value & host != 0 {
                        return Err(bad("bits set beyond the prefix length"));
                    }
                }
                (MatchKind::Ternary, FieldMatch::Ternary { value, mask: m }) => {
                    if *m == 0 {
                        return Err(bad("mask 0 must be omitted"));
                    }
                    if !fits(*value, f.bitwidth) || !fits(*m, f.bitwidth) {
                        return Err(wide());
                    }
                    if value & !m != 0 {
                        return Err(bad("value has bits outside the mask"));
                    }
                }
                (MatchKind::Range, FieldMatch::Range { low, high }) => {
                    if !fits(*low, f.bitwidth) || !fits(*high, f.bitwidth) {
                        return Err(wide());
                    }
                    if low > high {
                        return Err(bad("range low > high"));
                    }
                    if *low == 0 && *high == mask(f.bitwidth) {
                        return Err(bad("a full range must be omitted"));
                    }
                }
                (MatchKind::Optional, FieldMatch::Optional(Some(v))) => {
                    if !fits(*v, f.bitwidth) {
                        return Err(wide());
                    }
                }
                _ => return Err(bad("match kind differs from the field's")),
            }
            key[i] = Some(m.clone());
        }
        t.fields
            .iter()
            .zip(key)
            .map(|(f, m)| match (m, f.kind) {
                (Some(m), _) => Ok(m),
                (None, MatchKind::Exact) => Err(WriteError::InvalidArgument(format!(
                    "{}: exact field {} omitted",
                    t.name, f.name
                ))),
                (None, MatchKind::Lpm) => Ok(FieldMatch::Lpm {
                    value: 0,
                    prefix_len: 0,
                }),
                (None, MatchKind::Ternary) => Ok(FieldMatch::Ternary { value: 0, mask: 0 }),
                (None, MatchKind::Range) => Ok(FieldMatch::Range {
                    low: 0,
                    high: mask(f.bitwidth),
                }),
                (None, MatchKind::Optional) => Ok(FieldMatch::Optional(None)),
            })
            .collect()
    }

    fn table_index(&self, id: u32) -> Result<usize, WriteError> {
        self.schema
            .table_by_id(id)
            .ok_or_else(|| WriteError::NotFound(format!("table id {id}")))
    }

    fn check_priority(&self, table: usize, priority: u32) -> Result<(), WriteError> {
        let t = &self.schema.tables[table];
        match (t.needs_priority(), priority) {
            (true, 0) => Err(WriteError::InvalidArgument(format!(
                "{}: priority required",
                t.name
            ))),
            (false, p) if p != 0 => Err(WriteError::InvalidArgument(format!(
                "{}: priority must be 0",
                t.name
            ))),
            _ => Ok(()),
        }
    }

    /// The table index and entry id of an existing entry named by its key.
    fn existing_entry(
        &self,
        state: &State,
        e: &TableEntry,
    ) -> Result<(usize, EntryId), WriteError> {
        let table = self.table_index(e.table_id)?;
        self.check_priority(table, e.priority)?;
        let key = self.full_key(table, e)?;
        let id = state.tables[table]
            .matcher
            .find(&key, e.priority)
            .ok_or_else(|| {
                WriteError::NotFound(format!("{}: no such entry", self.schema.tables[table].name))
            })?;
        Ok((table, id))
    }

    fn entry_data(&self, table: usize, e: &TableEntry) -> Result<Entry, WriteError> {
        let t = &self.schema.tables[table];
        let action = match (&e.action, t.implementation) {
            (None, _) => {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: entry without action",
                    t.name
                )));
            }
            (Some(TableAction::Action(spec)), None) => {
                EntryAction::Action(self.action_call(table, spec, false)?)
            }
            (Some(TableAction::Action(_)), Some(_)) => {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: uses an action profile; give a member or group",
                    t.name
                )));
            }
            (Some(TableAction::Member(m)), Some(_)) => EntryAction::Member(*m),
            (Some(TableAction::Group(g)), Some(p)) => {
                if !self.schema.action_profiles[p].selector {
                    return Err(WriteError::InvalidArgument(format!(
                        "{}: no selector",
                        t.name
                    )));
                }
                EntryAction::Group(*g)
            }
            (Some(_), None) => {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: has no action profile; give an action",
                    t.name
                )));
            }
        };
        if e.idle_timeout_ns != 0 && !t.idle_timeout {
            return Err(WriteError::InvalidArgument(format!(
                "{}: no idle timeout support",
                t.name
            )));
        }
        if e.counter_data.is_some() && t.direct_counter.is_none() {
            return Err(WriteError::InvalidArgument(format!(
                "{}: no direct counter",
                t.name
            )));
        }
        if let Some(c) = &e.meter_config {
            let m = t.direct_meter.ok_or_else(|| {
                WriteError::InvalidArgument(format!("{}: no direct meter", t.name))
            })?;
            check_meter(Some(c), &self.externs.direct_meters[m])?;
        }
        Ok(Entry {
            action,
            idle_timeout_ns: e.idle_timeout_ns,
            metadata: e.metadata.clone(),
        })
    }

    fn table_entry_op(
        &self,
        state: &State,
        kind: UpdateKind,
        e: &TableEntry,
        in_place: &mut Vec<InPlace>,
    ) -> Result<Op, WriteError> {
        let table = self.table_index(e.table_id)?;
        let t = &self.schema.tables[table];
        if e.is_default {
            if kind != UpdateKind::Modify {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: the default entry can only be modified",
                    t.name
                )));
            }
            if !e.matches.is_empty() || e.priority != 0 {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: the default entry has no key and no priority",
                    t.name
                )));
            }
            if t.const_default {
                return Err(WriteError::PermissionDenied(format!(
                    "{}: const default action",
                    t.name
                )));
            }
            let call = match &e.action {
                None => ActionCall::new(t.default_action.0, &t.default_action.1),
                Some(TableAction::Action(spec)) => self.action_call(table, spec, true)?,
                Some(_) => {
                    return Err(WriteError::InvalidArgument(format!(
                        "{}: the default entry takes a direct action",
                        t.name
                    )));
                }
            };
            return Ok(Op::SetDefault { table, call });
        }
        if t.is_const {
            return Err(WriteError::PermissionDenied(format!(
                "{}: const table",
                t.name
            )));
        }
        self.check_priority(table, e.priority)?;
        let key = self.full_key(table, e)?;
        match kind {
            UpdateKind::Insert => {
                let entry = self.entry_data(table, e)?;
                Ok(Op::Insert {
                    table,
                    key,
                    priority: e.priority,
                    entry,
                    id: 0,
                })
            }
            UpdateKind::Modify => {
                let entry = self.entry_data(table, e)?;
                let id = state.tables[table]
                    .matcher
                    .find(&key, e.priority)
                    .ok_or_else(|| WriteError::NotFound(format!("{}: no such entry", t.name)))?;
                // P4Runtime 9.1.7: direct resources written with a MODIFY are updated too.
                if let Some(c) = t.direct_counter.filter(|_| e.counter_data.is_some()) {
                    let data = e.counter_data.unwrap_or_default();
                    let cells = id as usize..id as usize + 1;
                    in_place.push(InPlace::Counter {
                        direct: true,
                        idx: c,
                        cells,
                        data,
                    });
                }
                if let Some(m) = t.direct_meter.filter(|_| e.meter_config.is_some()) {
                    let cells = id as usize..id as usize + 1;
                    let config = e.meter_config;
                    in_place.push(InPlace::Meter {
                        direct: true,
                        idx: m,
                        cells,
                        config,
                    });
                }
                Ok(Op::Modify { table, id, entry })
            }
            UpdateKind::Delete => Ok(Op::Delete {
                table,
                key,
                priority: e.priority,
            }),
        }
    }

    fn apply_in_place(&self, p: InPlace) {
        let x = &self.externs;
        match p {
            InPlace::Counter {
                direct,
                idx,
                cells,
                data,
            } => {
                let c = if direct {
                    &x.direct_counters[idx]
                } else {
                    &x.counters[idx]
                };
                for i in cells {
                    c.write(i, data);
                }
            }
            InPlace::Meter {
                direct,
                idx,
                cells,
                config,
            } => {
                let m = if direct {
                    &x.direct_meters[idx]
                } else {
                    &x.meters[idx]
                };
                for i in cells {
                    // Validated before: cannot fail.
                    let _ = m.configure(i, config);
                }
            }
            InPlace::Register { idx, cells, value } => {
                for i in cells {
                    x.registers[idx].write(i, value);
                }
            }
            InPlace::NewEntry {
                table,
                id,
                counter,
                meter,
            } => {
                let t = &self.schema.tables[table];
                let i = id as usize;
                if let Some(c) = t.direct_counter {
                    x.direct_counters[c].write(i, counter.unwrap_or_default());
                }
                if let Some(m) = t.direct_meter {
                    let _ = x.direct_meters[m].configure(i, meter);
                }
                if let Some(h) = &x.hit_times[table] {
                    h.reset(id, self.now_ns.load(std::sync::atomic::Ordering::Relaxed));
                }
            }
        }
    }

    /// Removes every entry, member, group, multicast group and clone session and restores the
    /// initial defaults (SetForwardingPipelineConfig VERIFY_AND_COMMIT). Externs are reset too.
    pub fn clear(&self) {
        let mut w = self.writer.lock();
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let mut standby = self.take_standby(&mut w);
        let state = Arc::get_mut(&mut standby).expect("standby copy is private");
        let _ = state.apply(&self.schema, &Op::Clear);
        let old = self.current.swap(standby);
        w.lagging = Some((old, vec![Op::Clear]));
        self.catch_up(&mut w, Duration::from_micros(200));
        let x = &self.externs;
        x.counters
            .iter()
            .chain(&x.direct_counters)
            .for_each(Counter::reset_all);
        for m in x.meters.iter().chain(&x.direct_meters) {
            for i in 0..m.size() {
                let _ = m.configure(i, None);
            }
        }
        x.registers.iter().for_each(Register::reset);
    }
}

fn check_replicas(replicas: &[Replica]) -> Result<(), WriteError> {
    if replicas.len() > pre::MAX_REPLICAS {
        return Err(WriteError::ResourceExhausted(format!(
            "{} replicas > {}",
            replicas.len(),
            pre::MAX_REPLICAS
        )));
    }
    let mut seen = hashbrown::HashSet::new();
    for r in replicas {
        if r.port >= 1 << crate::metadata::PORT_BITS {
            return Err(WriteError::OutOfRange(format!("replica port {}", r.port)));
        }
        if !seen.insert((r.port, r.rid)) {
            return Err(WriteError::InvalidArgument(format!(
                "duplicate replica (port {}, instance {})",
                r.port, r.rid
            )));
        }
    }
    Ok(())
}

fn check_meter(config: Option<&MeterConfig>, meter: &MeterArray) -> Result<(), WriteError> {
    if let Some(c) = config {
        meter
            .validate(c)
            .map_err(|e| WriteError::InvalidArgument(format!("meter config: {e}")))?;
    }
    Ok(())
}

/// A group as read: (profile id, group id, (member id, weight)s).
pub type GroupRead = (u32, u32, Vec<(u32, u32)>);

/// One cell of an indexed extern, as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell<T> {
    /// P4Info id of the extern.
    pub id: u32,
    /// Cell index.
    pub index: u64,
    /// Value.
    pub value: T,
}

impl Control {
    /// The controller's form of a stored key: don't-care fields omitted.
    fn controller_key(&self, table: usize, key: &[FieldMatch]) -> Vec<(u32, FieldMatch)> {
        let t = &self.schema.tables[table];
        t.fields
            .iter()
            .zip(key)
            .filter(|(f, m)| match m {
                FieldMatch::Lpm { prefix_len: 0, .. }
                | FieldMatch::Ternary { mask: 0, .. }
                | FieldMatch::Optional(None) => false,
                FieldMatch::Range { low: 0, high } => *high != mask(f.bitwidth),
                _ => true,
            })
            .map(|(f, m)| (f.id, m.clone()))
            .collect()
    }

    fn controller_action(&self, call: &ActionCall) -> ActionSpec {
        let def = &self.schema.actions[usize::from(call.action)];
        ActionSpec {
            action_id: def.id,
            params: def
                .params
                .iter()
                .zip(call.params.iter())
                .map(|(p, v)| (p.id, *v))
                .collect(),
        }
    }

    fn read_entry(
        &self,
        state: &State,
        table: usize,
        id: EntryId,
        with_counter: bool,
        with_meter: bool,
    ) -> Option<TableEntry> {
        let t = &self.schema.tables[table];
        let ts = &state.tables[table];
        let (key, priority) = ts.matcher.key_of(id)?;
        let entry = ts.entry(id)?;
        let action = match &entry.action {
            EntryAction::Action(call) => TableAction::Action(self.controller_action(call)),
            EntryAction::Member(m) => TableAction::Member(*m),
            EntryAction::Group(g) => TableAction::Group(*g),
        };
        let x = &self.externs;
        let now = self.now_ns.load(std::sync::atomic::Ordering::Relaxed);
        Some(TableEntry {
            table_id: t.id,
            matches: self.controller_key(table, key),
            priority,
            action: Some(action),
            is_default: false,
            idle_timeout_ns: entry.idle_timeout_ns,
            metadata: entry.metadata.clone(),
            counter_data: t
                .direct_counter
                .filter(|_| with_counter)
                .map(|c| x.direct_counters[c].read(id as usize).unwrap_or_default()),
            meter_config: t
                .direct_meter
                .filter(|_| with_meter)
                .and_then(|m| x.direct_meters[m].config(id as usize)),
            elapsed_since_hit_ns: x.hit_times[table]
                .as_ref()
                .map(|h| now.saturating_sub(h.last_hit(id).unwrap_or(now))),
        })
    }

    /// Entries of table `table_id` (None = every table), with direct counters and meters if asked.
    pub fn read_entries(
        &self,
        table_id: Option<u32>,
        with_counter: bool,
        with_meter: bool,
    ) -> Result<Vec<TableEntry>, WriteError> {
        let state = self.snapshot();
        let tables = match table_id {
            Some(id) => vec![self.table_index(id)?],
            None => (0..self.schema.tables.len()).collect(),
        };
        let mut out = Vec::new();
        for table in tables {
            for (id, _, _) in state.tables[table].matcher.iter() {
                out.extend(self.read_entry(&state, table, id, with_counter, with_meter));
            }
        }
        Ok(out)
    }

    /// The entry with `e`'s key, or NOT_FOUND.
    pub fn read_entry_by_key(
        &self,
        e: &TableEntry,
        with_counter: bool,
        with_meter: bool,
    ) -> Result<TableEntry, WriteError> {
        let state = self.snapshot();
        let (table, id) = self.existing_entry(&state, e)?;
        self.read_entry(&state, table, id, with_counter, with_meter)
            .ok_or_else(|| WriteError::NotFound("entry".into()))
    }

    /// The default entry of table `table_id`.
    pub fn read_default(&self, table_id: u32) -> Result<TableEntry, WriteError> {
        let table = self.table_index(table_id)?;
        let state = self.snapshot();
        let call = &state.tables[table].default;
        Ok(TableEntry {
            table_id,
            action: Some(TableAction::Action(self.controller_action(call))),
            is_default: true,
            ..TableEntry::default()
        })
    }

    /// Members of profile `profile_id` (None = all profiles): (profile id, member id, action).
    pub fn read_members(
        &self,
        profile_id: Option<u32>,
    ) -> Result<Vec<(u32, u32, ActionSpec)>, WriteError> {
        let state = self.snapshot();
        let mut out = Vec::new();
        for p in self.profiles(profile_id)? {
            let pid = self.schema.action_profiles[p].id;
            for (m, call) in state.profiles[p].members() {
                out.push((pid, m, self.controller_action(call)));
            }
        }
        Ok(out)
    }

    /// Groups of profile `profile_id` (None = all): (profile id, group id, (member, weight)s).
    pub fn read_groups(&self, profile_id: Option<u32>) -> Result<Vec<GroupRead>, WriteError> {
        let state = self.snapshot();
        let mut out = Vec::new();
        for p in self.profiles(profile_id)? {
            let pid = self.schema.action_profiles[p].id;
            for (g, members) in state.profiles[p].groups() {
                out.push((pid, g, members.to_vec()));
            }
        }
        Ok(out)
    }

    fn profiles(&self, profile_id: Option<u32>) -> Result<Vec<usize>, WriteError> {
        Ok(match profile_id {
            Some(id) => vec![self.profile(id)?],
            None => (0..self.schema.action_profiles.len()).collect(),
        })
    }

    fn cells_of<T>(
        &self,
        defs: impl Iterator<Item = (u32, usize)>,
        id: Option<u32>,
        index: Option<u64>,
        what: &str,
        read: impl Fn(usize, usize) -> T,
    ) -> Result<Vec<Cell<T>>, WriteError> {
        let defs: Vec<(usize, (u32, usize))> = defs.enumerate().collect();
        let chosen: Vec<_> = match id {
            Some(id) => {
                let d = defs
                    .iter()
                    .find(|(_, (did, _))| *did == id)
                    .ok_or_else(|| WriteError::NotFound(format!("{what} id {id}")))?;
                vec![*d]
            }
            None => defs,
        };
        let mut out = Vec::new();
        for (k, (did, size)) in chosen {
            for i in cells(index, size, what)? {
                out.push(Cell {
                    id: did,
                    index: i as u64,
                    value: read(k, i),
                });
            }
        }
        Ok(out)
    }

    /// Counter cells (id None = all counters, index None = all cells).
    pub fn read_counters(
        &self,
        id: Option<u32>,
        index: Option<u64>,
    ) -> Result<Vec<Cell<CounterData>>, WriteError> {
        let defs = self.schema.counters.iter().map(|c| (c.id, c.size));
        self.cells_of(defs, id, index, "counter", |k, i| {
            self.externs.counters[k].read(i).unwrap_or_default()
        })
    }

    /// Meter cells and their configs.
    pub fn read_meters(
        &self,
        id: Option<u32>,
        index: Option<u64>,
    ) -> Result<Vec<Cell<Option<MeterConfig>>>, WriteError> {
        let defs = self.schema.meters.iter().map(|m| (m.id, m.size));
        self.cells_of(defs, id, index, "meter", |k, i| {
            self.externs.meters[k].config(i)
        })
    }

    /// Register cells.
    pub fn read_registers(
        &self,
        id: Option<u32>,
        index: Option<u64>,
    ) -> Result<Vec<Cell<u64>>, WriteError> {
        let defs = self.schema.registers.iter().map(|r| (r.id, r.size));
        self.cells_of(defs, id, index, "register", |k, i| {
            self.externs.registers[k].read(i).unwrap_or(0)
        })
    }

    /// Multicast groups (id None or 0 = all).
    pub fn read_multicast_groups(
        &self,
        id: Option<u32>,
    ) -> Result<Vec<(u32, MulticastGroup)>, WriteError> {
        let state = self.snapshot();
        let mut out: Vec<_> = match id.filter(|&i| i != 0) {
            Some(i) => {
                let g = state
                    .pre
                    .groups
                    .get(&i)
                    .ok_or_else(|| WriteError::NotFound(format!("multicast group {i}")))?;
                vec![(i, g.clone())]
            }
            None => state
                .pre
                .groups
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .collect(),
        };
        out.sort_by_key(|(k, _)| *k);
        Ok(out)
    }

    /// Clone sessions (id None or 0 = all).
    pub fn read_clone_sessions(
        &self,
        id: Option<u32>,
    ) -> Result<Vec<(u32, CloneSession)>, WriteError> {
        let state = self.snapshot();
        let mut out: Vec<_> = match id.filter(|&i| i != 0) {
            Some(i) => {
                let s = state
                    .pre
                    .sessions
                    .get(&i)
                    .ok_or_else(|| WriteError::NotFound(format!("clone session {i}")))?;
                vec![(i, s.clone())]
            }
            None => state
                .pre
                .sessions
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .collect(),
        };
        out.sort_by_key(|(k, _)| *k);
        Ok(out)
    }

    /// Drops by reason, named: the standard reasons, then the program's own.
    pub fn drop_counts(&self) -> Vec<(&'static str, CounterData)> {
        DropReason::NAMES
            .iter()
            .chain(&self.schema.drop_reasons)
            .enumerate()
            .map(|(i, n)| (*n, self.externs.drops.read(i).unwrap_or_default()))
            .collect()
    }
}
