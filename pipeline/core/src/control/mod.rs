//! The control API: the only door for writes, and reads of every object.
//!
//! # Contract (docs/architecture.md, "The control/data-plane contract")
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
//!
//! The parts: [`types`] (updates, entities, errors), `validate` (the step that can fail),
//! `publish` (apply, swap, catch up) and `read`.

mod publish;
mod read;
pub mod types;
mod validate;

pub use read::{Cell, GroupRead};
pub use types::*;

use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use parking_lot::Mutex;

use crate::digest::DigestQueue;
use crate::externs::{Counter, CounterData, CounterKind, MeterArray, MeterConfig, Register};
use crate::metadata::DropReason;
use crate::pre::{self, CloneSession, MulticastGroup, Replica};
use crate::schema::Schema;
use crate::state::{ActionCall, ApplyError, Entry, EntryAction, Op, State};
use crate::table::{EntryId, FieldMatch, HitTimes, MatchKind, ProfileError, TableError, id_space};

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
    /// Parser value sets in schema order.
    pub value_sets: Vec<crate::externs::ValueSet>,
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
        // Direct resources are indexed by entry id: they hold the table's whole id space (its
        // live entries and the ids in quarantine, `table::id_space`).
        let ids_of = |is_mine: &dyn Fn(&crate::schema::TableDef) -> bool, size: usize| {
            schema
                .tables
                .iter()
                .filter(|t| is_mine(t))
                .map(|t| id_space(t.size.max(t.const_entries.len())))
                .max()
                .unwrap_or(size)
        };
        let direct_counter = |(i, c): (usize, &crate::schema::CounterDef)| {
            let size = ids_of(&|t| t.direct_counter == Some(i), c.size);
            Counter::new(size, c.kind, shards)
        };
        let direct_meter = |(i, m): (usize, &crate::schema::MeterDef)| {
            let size = ids_of(&|t| t.direct_meter == Some(i), m.size);
            MeterArray::new(size, m.unit, m.algorithm)
        };
        Externs {
            counters: schema.counters.iter().map(counter).collect(),
            direct_counters: schema
                .direct_counters
                .iter()
                .enumerate()
                .map(direct_counter)
                .collect(),
            meters: schema.meters.iter().map(meter).collect(),
            direct_meters: schema
                .direct_meters
                .iter()
                .enumerate()
                .map(direct_meter)
                .collect(),
            registers: schema
                .registers
                .iter()
                .map(|r| Register::new(r.size, r.bitwidth))
                .collect(),
            value_sets: schema
                .value_sets
                .iter()
                .map(|v| crate::externs::ValueSet::new(v.bitwidth(), v.size))
                .collect(),
            hit_times: schema
                .tables
                .iter()
                .map(|t| {
                    let ids = id_space(t.size.max(t.const_entries.len()));
                    t.idle_timeout.then(|| HitTimes::new(ids))
                })
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
        value: u128,
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
    /// What the writer does while it waits for a reader to leave ([`Control::set_pause`]).
    pause: fn(),
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
                pause: std::hint::spin_loop,
            }),
            schema,
            externs,
            now_ns: std::sync::atomic::AtomicU64::new(0),
            generation: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Sets what the writer does while it waits for the last reader of the old copy to leave.
    /// The engine owns no threads, so the default only spins; whoever runs workers on threads
    /// passes `std::thread::yield_now`, so that a writer never spins against a descheduled
    /// worker.
    pub fn set_pause(&self, pause: fn()) {
        self.writer.lock().pause = pause;
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
}
