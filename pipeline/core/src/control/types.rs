//! The control plane's vocabulary: updates, entities, table entries, actions, atomicity and the
//! errors a write can meet.

use super::*;

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
