//! The P4Runtime service of one fixed-program switch.
//!
//! It runs on its own tokio runtime (never on a data-plane worker) and reaches the data plane
//! only through the pipeline's [`Control`] (every write) and a [`DeviceIo`] (packet-out, packet-in,
//! the data plane's clock). Two plain threads feed the stream channel: one carries packet-ins
//! from the CPU port to the primary; the other batches digests and watches idle timeouts.
//!
//! What real clients need of it, item by item, is ../shared/docs/p4runtime.md; the tests say
//! which item each covers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use pipeline::control::{self, Atomicity, Control, Entity, Update, UpdateKind};
use pipeline::schema::Schema;
use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status};

use crate::arbitration::{Arbiter, Election, StreamId};
use crate::convert::{self, EntityError, PortForm};
use crate::proto::google::rpc;
use crate::proto::p4::config::v1 as p4i;
use crate::proto::p4::v1 as p4;
use crate::proto::p4::v1::p4_runtime_server::{P4Runtime, P4RuntimeServer};

/// The P4Runtime version this server implements (Capabilities; finsy parses it).
pub const API_VERSION: &str = "1.5.0";

/// Largest message the server accepts or sends (p4runtime.md item 28 asks for at least 4 MB).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// Entities per ReadResponse message.
const READ_CHUNK: usize = 1000;

/// Responses queued per stream before packet-ins to it are dropped.
const STREAM_QUEUE: usize = 4096;

/// Largest encoded error details: `-bin` trailers travel base64-encoded (4/3 larger), and
/// p4runtime-shell keeps gRPC's default 8 KB limit for all of the metadata.
const MAX_DETAILS_BYTES: usize = 5 * 1024;

/// How the service reaches the data plane besides the control API.
pub struct DeviceIo {
    /// Injects a frame (controller header + payload) as if it came from the CPU port. Must not
    /// block (it runs on the service's async runtime): false when the data plane's queue is full
    /// and the frame was dropped.
    pub packet_out: Box<dyn Fn(Vec<u8>) -> bool + Send + Sync>,
    /// Frames the data plane sent to the CPU port (controller header + payload).
    pub packet_in: crossbeam::channel::Receiver<Vec<u8>>,
    /// The data plane's clock in ns (the one hit times and digests are stamped with).
    pub clock: Arc<dyn Fn() -> u64 + Send + Sync>,
}

impl std::fmt::Debug for DeviceIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceIo").finish_non_exhaustive()
    }
}

/// Settings of the service.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The device id clients must use (p4runtime.md item 7: PTF scripts use 0).
    pub device_id: u64,
    /// How the primary is elected.
    pub election: Election,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            device_id: 1,
            election: Election::Spec,
        }
    }
}

/// Counters of the service itself.
#[derive(Debug, Default)]
pub struct ServiceStats {
    /// Packet-ins delivered to the primary.
    pub packet_ins: AtomicU64,
    /// Packet-ins dropped (no primary, or its stream was full).
    pub packet_ins_dropped: AtomicU64,
    /// Packet-outs injected.
    pub packet_outs: AtomicU64,
    /// Packet-outs refused (bad metadata, or not from the primary).
    pub packet_outs_refused: AtomicU64,
    /// Packet-outs dropped because the CPU port's queue to the data plane was full (each one
    /// answered with a RESOURCE_EXHAUSTED stream error).
    pub packet_outs_dropped: AtomicU64,
    /// Digest lists sent.
    pub digest_lists: AtomicU64,
    /// Idle-timeout notifications sent.
    pub idle_notifications: AtomicU64,
}

type StreamTx = mpsc::Sender<Result<p4::StreamMessageResponse, Status>>;

#[derive(Debug, Default)]
struct Streams {
    arbiter: Arbiter,
    tx: HashMap<StreamId, StreamTx>,
    /// The role each stream named in its arbitration (echoed in replies).
    role: HashMap<StreamId, Option<p4::Role>>,
}

/// A digest's configuration and its batching state.
#[derive(Debug, Clone)]
struct DigestState {
    config: p4::digest_entry::Config,
    pending: Vec<Vec<u128>>,
    pending_set: HashSet<Vec<u128>>,
    first_pending_ns: u64,
    /// The list sent and not yet acknowledged, with when it was sent.
    outstanding: Option<(u64, u64)>,
    next_list_id: u64,
}

impl DigestState {
    fn new(config: p4::digest_entry::Config) -> Self {
        DigestState {
            config,
            pending: Vec::new(),
            pending_set: HashSet::new(),
            first_pending_ns: 0,
            outstanding: None,
            next_list_id: 1,
        }
    }
}

/// The pipeline config as last set.
#[derive(Debug, Default, Clone)]
struct PipelineConfig {
    cookie: Option<u64>,
    device_config: Vec<u8>,
    /// VERIFY_AND_SAVE'd and waiting for COMMIT.
    saved: Option<(Option<u64>, Vec<u8>)>,
}

struct Inner {
    config: ServerConfig,
    control: Arc<Control>,
    schema: Arc<Schema>,
    p4info: p4i::P4Info,
    fingerprint: Vec<String>,
    io: DeviceIo,
    pipeline_config: Mutex<PipelineConfig>,
    streams: Mutex<Streams>,
    next_stream: AtomicU64,
    /// Serialises Write and SetForwardingPipelineConfig.
    write_lock: Mutex<()>,
    /// Added to the data plane's clock to give ns since the Unix epoch (stream timestamps).
    epoch_offset_ns: u64,
    next_one_shot: std::sync::atomic::AtomicU32,
    /// How each multicast group (false) and clone session (true) had its replica ports written.
    port_forms: Mutex<HashMap<(bool, u32), PortForm>>,
    /// Digest configs by digest id.
    digests: Mutex<BTreeMap<u32, DigestState>>,
    /// Entries already reported idle: (table id, key, priority) -> elapsed ns when reported.
    idle_reported: Mutex<HashMap<(u32, String), u64>>,
    stop: AtomicBool,
    stats: ServiceStats,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("device_id", &self.config.device_id)
            .field("program", &self.schema.name)
            .finish_non_exhaustive()
    }
}

/// The P4Runtime service (a cheap handle; clone it freely).
#[derive(Debug, Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

fn u128_of(e: &p4::Uint128) -> u128 {
    (u128::from(e.high) << 64) | u128::from(e.low)
}

fn uint128(v: u128) -> p4::Uint128 {
    p4::Uint128 {
        high: (v >> 64) as u64,
        low: v as u64,
    }
}

fn rpc_status(code: Code, message: impl Into<String>) -> rpc::Status {
    rpc::Status {
        code: code as i32,
        message: message.into(),
        details: Vec::new(),
    }
}

/// A normalised view of a P4Info: the ids, names, widths and kinds the data plane depends on.
/// Two P4Infos that agree on it describe the same program, whatever else differs (documentation,
/// annotations, fields a client's older descriptors dropped: p4runtime.md item 11).
pub fn fingerprint(p: &p4i::P4Info) -> Vec<String> {
    fn pre(p: Option<&p4i::Preamble>) -> String {
        p.map_or_else(String::new, |p| format!("{:#x} {}", p.id, p.name))
    }
    fn fields<'a>(it: impl Iterator<Item = (u32, &'a str, i32)>) -> String {
        it.map(|(id, name, w)| format!("{id}:{name}:{w}"))
            .collect::<Vec<_>>()
            .join(",")
    }
    let mut out = Vec::new();
    for t in &p.tables {
        let match_fields: Vec<String> = t
            .match_fields
            .iter()
            .map(|f| format!("{}:{}:{}:{:?}", f.id, f.name, f.bitwidth, f.r#match))
            .collect();
        let mut refs: Vec<u32> = t.action_refs.iter().map(|r| r.id).collect();
        refs.sort_unstable();
        let mut direct = t.direct_resource_ids.clone();
        direct.sort_unstable();
        out.push(format!(
            "table {} [{}] {refs:?} impl={:#x} direct={direct:?} const={}",
            pre(t.preamble.as_ref()),
            match_fields.join(","),
            t.implementation_id,
            t.is_const_table
        ));
    }
    for a in &p.actions {
        let params = fields(a.params.iter().map(|q| (q.id, q.name.as_str(), q.bitwidth)));
        out.push(format!("action {} [{params}]", pre(a.preamble.as_ref())));
    }
    for a in &p.action_profiles {
        let mut tables = a.table_ids.clone();
        tables.sort_unstable();
        out.push(format!(
            "profile {} {tables:?} selector={}",
            pre(a.preamble.as_ref()),
            a.with_selector
        ));
    }
    // The generated types share no trait: a macro takes the preamble of each.
    macro_rules! preambles {
        ($($kind:literal => $list:expr),*) => {
            [$(($kind, $list.iter().map(|c| c.preamble.as_ref()).collect::<Vec<_>>())),*]
        };
    }
    let named = preambles!(
        "counter" => p.counters,
        "direct_counter" => p.direct_counters,
        "meter" => p.meters,
        "direct_meter" => p.direct_meters,
        "register" => p.registers,
        "digest" => p.digests
    );
    for (kind, preambles) in named {
        out.extend(preambles.into_iter().map(|p| format!("{kind} {}", pre(p))));
    }
    for c in &p.controller_packet_metadata {
        let md = fields(
            c.metadata
                .iter()
                .map(|m| (m.id, m.name.as_str(), m.bitwidth)),
        );
        out.push(format!(
            "controller_header {} [{md}]",
            pre(c.preamble.as_ref())
        ));
    }
    out.sort();
    out
}

/// Updates of the pipeline's control API that one P4Runtime update turns into.
struct Expanded {
    /// Applied in the batch; the P4Runtime update fails if any of them fails.
    updates: Vec<Update>,
    /// For replication entries: how the replica ports were written.
    form: Option<((bool, u32), PortForm)>,
    /// It may leave a one-shot group unreferenced (a set written, or an entry of a table with
    /// a selector modified or deleted).
    one_shot: bool,
}

impl Expanded {
    fn one(update: Update) -> Box<Self> {
        Box::new(Expanded {
            updates: vec![update],
            form: None,
            one_shot: false,
        })
    }
}

/// First id of the hidden members and groups that one-shot action sets become (spec 9.2.3);
/// reads never show them as members or groups.
pub const ONE_SHOT_BASE: u32 = 0x8000_0000;

/// What one update of a Write turns into.
enum Staged {
    /// Updates of the pipeline's control API.
    Control(Box<Expanded>),
    /// A digest configuration (kept by the service).
    Digest(UpdateKind, u32, Option<p4::digest_entry::Config>),
}

impl Service {
    /// The service for `control` (the running program's) with `io`.
    pub fn new(control: Arc<Control>, io: DeviceIo, config: ServerConfig) -> Self {
        let schema = control.schema().clone();
        let p4info = crate::p4info::p4info(&schema);
        let fingerprint = fingerprint(&p4info);
        let streams = Streams {
            arbiter: Arbiter::new(config.election),
            ..Streams::default()
        };
        let epoch_offset_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .saturating_sub((io.clock)());
        Service {
            inner: Arc::new(Inner {
                config,
                control,
                schema,
                p4info,
                fingerprint,
                io,
                pipeline_config: Mutex::new(PipelineConfig::default()),
                streams: Mutex::new(streams),
                next_stream: AtomicU64::new(1),
                write_lock: Mutex::new(()),
                epoch_offset_ns,
                next_one_shot: std::sync::atomic::AtomicU32::new(0),
                port_forms: Mutex::new(HashMap::new()),
                digests: Mutex::new(BTreeMap::new()),
                idle_reported: Mutex::new(HashMap::new()),
                stop: AtomicBool::new(false),
                stats: ServiceStats::default(),
            }),
        }
    }

    /// The service's counters.
    pub fn stats(&self) -> &ServiceStats {
        &self.inner.stats
    }

    /// The P4Info this switch serves.
    pub fn p4info(&self) -> &p4i::P4Info {
        &self.inner.p4info
    }
}

impl Inner {
    fn check_device(&self, device_id: u64) -> Result<(), Status> {
        if device_id != self.config.device_id {
            return Err(Status::not_found(format!(
                "device id {device_id} is not this switch's ({})",
                self.config.device_id
            )));
        }
        Ok(())
    }

    fn check_role(role: &str) -> Result<(), Status> {
        if !role.is_empty() {
            return Err(Status::not_found(format!(
                "role {role:?} is not configured (only the default role is)"
            )));
        }
        Ok(())
    }

    fn check_primary(&self, election_id: Option<&p4::Uint128>) -> Result<(), Status> {
        let e = election_id.map(u128_of);
        if !self.streams.lock().arbiter.is_primary_id(e) {
            return Err(Status::permission_denied(
                "only the primary controller may write (send a MasterArbitrationUpdate with the \
                 highest election id on a StreamChannel, and the same id in the request)",
            ));
        }
        Ok(())
    }

    // ----- Write -----

    fn write(&self, req: &p4::WriteRequest) -> Result<(), Status> {
        self.check_device(req.device_id)?;
        Self::check_role(&req.role)?;
        // One write (or pipeline change) at a time: the service's own state (digest configs,
        // one-shot groups) is read and changed along with the batch.
        let _serial = self.write_lock.lock();
        self.check_primary(req.election_id.as_ref())?;
        use p4::write_request::Atomicity as A;
        let atomicity = match A::try_from(req.atomicity) {
            Ok(A::ContinueOnError) => Atomicity::ContinueOnError,
            Ok(A::RollbackOnError) => Atomicity::RollbackOnError,
            Ok(A::DataplaneAtomic) => Atomicity::DataplaneAtomic,
            Err(_) => {
                return Err(Status::invalid_argument(format!(
                    "atomicity {}",
                    req.atomicity
                )));
            }
        };
        self.control.set_now((self.io.clock)());
        let n = req.updates.len();
        let mut results: Vec<Option<Result<(), EntityError>>> = vec![None; n];
        let mut staged: Vec<(usize, Staged)> = Vec::with_capacity(n);
        for (i, u) in req.updates.iter().enumerate() {
            match self.stage(u) {
                Ok(s) => staged.push((i, s)),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        let all_or_none = atomicity != Atomicity::ContinueOnError;
        let aborted = || {
            Err(EntityError::new(
                Code::Aborted,
                "another update of the batch failed",
            ))
        };
        if all_or_none && results.iter().any(Option::is_some) {
            for (i, _) in &staged {
                results[*i] = Some(aborted());
            }
            return self.write_result(results);
        }
        // Digest configs are validated in order against a copy of the configs; the changes are
        // applied to the live state (which also holds the batching state) with the batch.
        let mut configs: BTreeMap<u32, p4::digest_entry::Config> = self
            .digests
            .lock()
            .iter()
            .map(|(id, d)| (*id, d.config))
            .collect();
        let mut digest_changes = Vec::new();
        let mut updates = Vec::new();
        let mut expanded = Vec::new();
        for (i, s) in staged {
            match s {
                Staged::Control(x) => {
                    let range = updates.len()..updates.len() + x.updates.len();
                    updates.extend(x.updates.iter().cloned());
                    expanded.push((i, range, x));
                }
                Staged::Digest(kind, id, config) => {
                    let r = self.stage_digest(&mut configs, kind, id, config);
                    if r.is_ok() {
                        digest_changes.push((id, configs.get(&id).copied()));
                    }
                    results[i] = Some(r);
                }
            }
        }
        let digest_failed = results.iter().any(|r| matches!(r, Some(Err(_))));
        if all_or_none && digest_failed {
            for r in &mut results {
                if matches!(r, Some(Ok(()))) {
                    *r = Some(aborted());
                }
            }
            for (i, _, _) in &expanded {
                results[*i] = Some(aborted());
            }
            return self.write_result(results);
        }
        let outcome = self.control.write(&updates, atomicity);
        let control_failed = outcome.iter().any(Result::is_err);
        let mut one_shot = false;
        for (i, range, x) in expanded {
            let r = outcome[range]
                .iter()
                .find_map(|r| r.clone().err())
                .map_or(Ok(()), |e| Err(EntityError::from(e)));
            if r.is_ok()
                && let Some((key, form)) = x.form
            {
                self.port_forms.lock().insert(key, form);
            }
            one_shot |= x.one_shot;
            results[i] = Some(r);
        }
        if all_or_none && control_failed {
            // Nothing was applied.
            for r in &mut results {
                if matches!(r, Some(Ok(()))) {
                    *r = Some(aborted());
                }
            }
        } else {
            if one_shot {
                self.collect_one_shot_garbage();
            }
            let mut live = self.digests.lock();
            for (id, config) in digest_changes {
                match config {
                    None => {
                        live.remove(&id);
                    }
                    Some(c) => live.entry(id).or_insert_with(|| DigestState::new(c)).config = c,
                }
            }
        }
        self.write_result(results)
    }

    /// OK, or UNKNOWN with one p4.v1.Error per update (p4runtime.md item 12).
    fn write_result(&self, results: Vec<Option<Result<(), EntityError>>>) -> Result<(), Status> {
        let results: Vec<Result<(), EntityError>> = results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(EntityError::new(Code::Internal, "not processed"))))
            .collect();
        let failed = results.iter().filter(|r| r.is_err()).count();
        if failed == 0 {
            return Ok(());
        }
        let first = results
            .iter()
            .find_map(|r| r.as_ref().err())
            .map(|e| e.message.clone())
            .unwrap_or_default();
        let summary = format!("{failed} of {} updates failed: {first}", results.len());
        let encode = |with_messages: bool| {
            let details = results
                .iter()
                .map(|r| {
                    let err = match r {
                        Ok(()) => p4::Error::default(),
                        Err(e) => p4::Error {
                            canonical_code: e.code as i32,
                            message: if with_messages {
                                e.message.clone()
                            } else {
                                String::new()
                            },
                            ..Default::default()
                        },
                    };
                    prost_types::Any {
                        type_url: "type.googleapis.com/p4.v1.Error".into(),
                        value: err.encode_to_vec(),
                    }
                })
                .collect();
            rpc::Status {
                code: Code::Unknown as i32,
                message: summary.clone(),
                details,
            }
            .encode_to_vec()
        };
        let mut bytes = encode(true);
        if bytes.len() > MAX_DETAILS_BYTES {
            bytes = encode(false);
        }
        Err(Status::with_details(
            Code::Unknown,
            summary,
            bytes::Bytes::from(bytes),
        ))
    }

    fn stage(&self, u: &p4::Update) -> Result<Staged, EntityError> {
        use p4::entity::Entity as E;
        let kind = convert::update_kind(u.r#type)?;
        let entity = u
            .entity
            .as_ref()
            .and_then(|e| e.entity.as_ref())
            .ok_or_else(|| EntityError::invalid("update without an entity"))?;
        let schema = &self.schema;
        let control = |entity| Ok(Staged::Control(Expanded::one(Update { kind, entity })));
        match entity {
            E::TableEntry(te) => self.stage_table_entry(kind, te),
            E::ActionProfileMember(m) => {
                reserved(m.member_id)?;
                let action = match (&m.action, kind) {
                    (_, UpdateKind::Delete) => None,
                    (Some(a), _) => Some(convert::action(schema, a)?),
                    (None, _) => return Err(EntityError::invalid("member without an action")),
                };
                control(Entity::Member {
                    profile_id: m.action_profile_id,
                    member_id: m.member_id,
                    action,
                })
            }
            E::ActionProfileGroup(g) => {
                reserved(g.group_id)?;
                let members = g
                    .members
                    .iter()
                    .map(|m| {
                        reserved(m.member_id)?;
                        if m.watch_kind.is_some() {
                            return Err(EntityError::unimplemented("member watch ports"));
                        }
                        let w = match m.weight {
                            0 => 1,
                            w => u32::try_from(w)
                                .map_err(|_| EntityError::invalid(format!("member weight {w}")))?,
                        };
                        Ok((m.member_id, w))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let max_size = u32::try_from(g.max_size)
                    .map_err(|_| EntityError::invalid(format!("max_size {}", g.max_size)))?;
                control(Entity::Group {
                    profile_id: g.action_profile_id,
                    group_id: g.group_id,
                    members,
                    max_size,
                })
            }
            E::CounterEntry(c) => control(Entity::Counter {
                counter_id: c.counter_id,
                index: convert::index(c.index.as_ref())?,
                data: c
                    .data
                    .as_ref()
                    .map(convert::counter_data)
                    .transpose()?
                    .unwrap_or_default(),
            }),
            E::DirectCounterEntry(c) => {
                let te = c
                    .table_entry
                    .as_ref()
                    .ok_or_else(|| EntityError::invalid("direct counter without a table entry"))?;
                control(Entity::DirectCounter {
                    entry: convert::table_entry(schema, te)?,
                    data: c
                        .data
                        .as_ref()
                        .map(convert::counter_data)
                        .transpose()?
                        .unwrap_or_default(),
                })
            }
            E::MeterEntry(m) => {
                let algorithm = schema
                    .meter_by_id(m.meter_id)
                    .map(|i| schema.meters[i].algorithm)
                    .ok_or_else(|| {
                        EntityError::new(Code::NotFound, format!("meter id {}", m.meter_id))
                    })?;
                control(Entity::Meter {
                    meter_id: m.meter_id,
                    index: convert::index(m.index.as_ref())?,
                    config: m
                        .config
                        .as_ref()
                        .map(|c| convert::meter_config(c, algorithm))
                        .transpose()?,
                })
            }
            E::DirectMeterEntry(m) => {
                let te = m
                    .table_entry
                    .as_ref()
                    .ok_or_else(|| EntityError::invalid("direct meter without a table entry"))?;
                let entry = convert::table_entry(schema, te)?;
                let table = schema.table_by_id(entry.table_id).unwrap_or_default();
                let algorithm = convert::direct_meter_algorithm(schema, table);
                control(Entity::DirectMeter {
                    entry,
                    config: m
                        .config
                        .as_ref()
                        .map(|c| convert::meter_config(c, algorithm))
                        .transpose()?,
                })
            }
            E::RegisterEntry(r) => {
                let def = schema
                    .register_by_id(r.register_id)
                    .map(|i| &schema.registers[i])
                    .ok_or_else(|| {
                        EntityError::new(Code::NotFound, format!("register id {}", r.register_id))
                    })?;
                control(Entity::Register {
                    register_id: r.register_id,
                    index: convert::index(r.index.as_ref())?,
                    value: convert::register_value(r.data.as_ref(), def.bitwidth, def.name)?,
                })
            }
            E::PacketReplicationEngineEntry(p) => {
                use p4::packet_replication_engine_entry::Type as T;
                match &p.r#type {
                    Some(T::MulticastGroupEntry(g)) => {
                        let (replicas, form) = convert::replicas(&g.replicas)?;
                        let mut x = Expanded::one(Update {
                            kind,
                            entity: Entity::MulticastGroup {
                                group_id: g.multicast_group_id,
                                replicas,
                                metadata: g.metadata.clone(),
                            },
                        });
                        x.form = Some(((false, g.multicast_group_id), form));
                        Ok(Staged::Control(x))
                    }
                    Some(T::CloneSessionEntry(s)) => {
                        let (session, form) = convert::clone_session(s)?;
                        let mut x = Expanded::one(Update {
                            kind,
                            entity: Entity::CloneSession {
                                session_id: s.session_id,
                                session,
                            },
                        });
                        x.form = Some(((true, s.session_id), form));
                        Ok(Staged::Control(x))
                    }
                    None => Err(EntityError::invalid("replication entry without a type")),
                }
            }
            E::DigestEntry(d) => Ok(Staged::Digest(kind, d.digest_id, d.config)),
            E::ValueSetEntry(_) => Err(EntityError::unimplemented(
                "value sets (the programs have none)",
            )),
            E::ExternEntry(_) => Err(EntityError::unimplemented("architecture-specific externs")),
        }
    }

    /// A table entry update; a one-shot action set becomes a hidden group of hidden members,
    /// created with the entry and removed with it (or when the entry is modified away from it).
    fn stage_table_entry(
        &self,
        kind: UpdateKind,
        te: &p4::TableEntry,
    ) -> Result<Staged, EntityError> {
        let schema = &self.schema;
        let mut entry = convert::table_entry(schema, te)?;
        if kind != UpdateKind::Delete
            && let Some(control::TableAction::Member(id) | control::TableAction::Group(id)) =
                entry.action
        {
            reserved(id)?;
        }
        let set = convert::action_set(schema, te)?;
        let mut x = Expanded::one(Update {
            kind,
            entity: Entity::TableEntry(entry.clone()),
        });
        // Replacing or removing an entry of a table with a selector may orphan its one-shot
        // group: collected after the batch.
        let table = schema.table_by_id(entry.table_id).unwrap_or_default();
        let selector = schema.tables[table]
            .implementation
            .is_some_and(|p| schema.action_profiles[p].selector);
        x.one_shot = selector && kind != UpdateKind::Insert && !entry.is_default;
        let Some(set) = set else {
            return Ok(Staged::Control(x));
        };
        if kind == UpdateKind::Delete {
            return Ok(Staged::Control(x));
        }
        let profile = schema.tables[table]
            .implementation
            .map(|p| &schema.action_profiles[p])
            .filter(|p| p.selector)
            .ok_or_else(|| {
                EntityError::invalid(format!(
                    "{} has no action selector: no one-shot action sets",
                    schema.tables[table].name
                ))
            })?;
        let mut updates = Vec::new();
        let mut members = Vec::new();
        for (action, weight) in set {
            let id = self.next_one_shot_id();
            updates.push(Update {
                kind: UpdateKind::Insert,
                entity: Entity::Member {
                    profile_id: profile.id,
                    member_id: id,
                    action: Some(action),
                },
            });
            members.push((id, weight));
        }
        let group_id = self.next_one_shot_id();
        updates.push(Update {
            kind: UpdateKind::Insert,
            entity: Entity::Group {
                profile_id: profile.id,
                group_id,
                members: members.clone(),
                max_size: 0,
            },
        });
        entry.action = Some(control::TableAction::Group(group_id));
        updates.push(Update {
            kind,
            entity: Entity::TableEntry(entry),
        });
        x.one_shot = true;
        x.updates = updates;
        Ok(Staged::Control(x))
    }

    fn next_one_shot_id(&self) -> u32 {
        let n = self.next_one_shot.fetch_add(1, Ordering::Relaxed);
        ONE_SHOT_BASE | (n & !ONE_SHOT_BASE)
    }

    /// Removes the one-shot groups no entry refers to any more, and hidden members in no
    /// group (what a replaced, deleted or failed one-shot entry leaves behind).
    fn collect_one_shot_garbage(&self) {
        let schema = &self.schema;
        let Ok(groups) = self.control.read_groups(None) else {
            return;
        };
        let hidden_members: Vec<(u32, u32)> = self
            .control
            .read_members(None)
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.1 >= ONE_SHOT_BASE)
            .map(|m| (m.0, m.1))
            .collect();
        if hidden_members.is_empty() && !groups.iter().any(|g| g.1 >= ONE_SHOT_BASE) {
            return;
        }
        let mut referenced = HashSet::new();
        for t in &schema.tables {
            let Some(p) = t.implementation else { continue };
            let pid = schema.action_profiles[p].id;
            for e in self
                .control
                .read_entries(Some(t.id), false, false)
                .unwrap_or_default()
            {
                if let Some(control::TableAction::Group(g)) = e.action
                    && g >= ONE_SHOT_BASE
                {
                    referenced.insert((pid, g));
                }
            }
        }
        let mut deletes = Vec::new();
        let mut in_live_group = HashSet::new();
        for (pid, g, members) in &groups {
            if *g < ONE_SHOT_BASE {
                continue;
            }
            if referenced.contains(&(*pid, *g)) {
                in_live_group.extend(members.iter().map(|m| (*pid, m.0)));
            } else {
                deletes.push(group_removal(*pid, *g));
            }
        }
        for (pid, m) in hidden_members {
            if !in_live_group.contains(&(pid, m)) {
                deletes.push(Update {
                    kind: UpdateKind::Delete,
                    entity: Entity::Member {
                        profile_id: pid,
                        member_id: m,
                        action: None,
                    },
                });
            }
        }
        if !deletes.is_empty() {
            let _ = self.control.write(&deletes, Atomicity::ContinueOnError);
        }
    }

    /// One-shot groups by (profile id, group id) with their actions and weights, for reads.
    fn one_shot_sets(&self) -> HashMap<(u32, u32), Vec<(control::ActionSpec, u32)>> {
        let Ok(groups) = self.control.read_groups(None) else {
            return HashMap::new();
        };
        if !groups.iter().any(|g| g.1 >= ONE_SHOT_BASE) {
            return HashMap::new();
        }
        let actions: HashMap<(u32, u32), control::ActionSpec> = self
            .control
            .read_members(None)
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.1 >= ONE_SHOT_BASE)
            .map(|(p, m, a)| ((p, m), a))
            .collect();
        groups
            .into_iter()
            .filter(|g| g.1 >= ONE_SHOT_BASE)
            .map(|(p, g, members)| {
                let set = members
                    .iter()
                    .filter_map(|(m, w)| Some((actions.get(&(p, *m))?.clone(), *w)))
                    .collect();
                ((p, g), set)
            })
            .collect()
    }

    /// `msg` with its one-shot group shown as the action set it was written as.
    fn show_one_shot(
        &self,
        sets: &HashMap<(u32, u32), Vec<(control::ActionSpec, u32)>>,
        msg: &mut p4::TableEntry,
    ) {
        let Some(p4::table_action::Type::ActionProfileGroupId(g)) =
            msg.action.as_ref().and_then(|a| a.r#type.as_ref())
        else {
            return;
        };
        if *g < ONE_SHOT_BASE {
            return;
        }
        let schema = &self.schema;
        let profile = schema
            .table_by_id(msg.table_id)
            .and_then(|t| schema.tables[t].implementation)
            .map(|p| schema.action_profiles[p].id);
        if let Some(set) = profile.and_then(|p| sets.get(&(p, *g))) {
            msg.action = Some(convert::action_set_msg(set));
        }
    }

    fn stage_digest(
        &self,
        digests: &mut BTreeMap<u32, p4::digest_entry::Config>,
        kind: UpdateKind,
        id: u32,
        config: Option<p4::digest_entry::Config>,
    ) -> Result<(), EntityError> {
        if self.schema.digest_by_id(id).is_none() {
            return Err(EntityError::new(Code::NotFound, format!("digest id {id}")));
        }
        let exists = digests.contains_key(&id);
        match (kind, exists) {
            (UpdateKind::Insert, true) => {
                return Err(EntityError::new(
                    Code::AlreadyExists,
                    format!("digest {id} is configured already"),
                ));
            }
            (UpdateKind::Modify | UpdateKind::Delete, false) => {
                return Err(EntityError::new(
                    Code::NotFound,
                    format!("digest {id} is not configured"),
                ));
            }
            _ => {}
        }
        if kind == UpdateKind::Delete {
            digests.remove(&id);
            return Ok(());
        }
        let c = config.ok_or_else(|| EntityError::invalid("digest entry without a config"))?;
        if c.max_timeout_ns < 0 || c.max_list_size < 0 || c.ack_timeout_ns < 0 {
            return Err(EntityError::invalid("digest config with a negative value"));
        }
        digests.insert(id, c);
        Ok(())
    }

    // ----- Read -----

    fn read(&self, req: &p4::ReadRequest) -> Result<Vec<p4::Entity>, Status> {
        self.check_device(req.device_id)?;
        Self::check_role(&req.role)?;
        self.control.set_now((self.io.clock)());
        let mut out = Vec::new();
        for e in &req.entities {
            let entity = e
                .entity
                .as_ref()
                .ok_or_else(|| Status::invalid_argument("read of an entity with nothing set"))?;
            self.read_one(entity, &mut out)
                .map_err(EntityError::into_status)?;
        }
        Ok(out)
    }

    fn read_one(
        &self,
        entity: &p4::entity::Entity,
        out: &mut Vec<p4::Entity>,
    ) -> Result<(), EntityError> {
        use p4::entity::Entity as E;
        let schema = &self.schema;
        let c = &self.control;
        let push = |out: &mut Vec<p4::Entity>, e: E| out.push(p4::Entity { entity: Some(e) });
        let nonzero = |id: u32| (id != 0).then_some(id);
        match entity {
            E::TableEntry(te) => {
                let with_counter = te.counter_data.is_some();
                let with_meter = te.meter_config.is_some();
                let with_hit = te.time_since_last_hit.is_some();
                let entries = if te.is_default_action {
                    if te.table_id == 0 {
                        return Err(EntityError::invalid(
                            "a default-entry read needs a table id",
                        ));
                    }
                    vec![c.read_default(te.table_id)?]
                } else if te.table_id != 0 && !te.r#match.is_empty() {
                    let key = convert::table_entry(schema, te)?;
                    match c.read_entry_by_key(&key, with_counter, with_meter) {
                        Ok(e) => vec![e],
                        Err(control::WriteError::NotFound(_)) => Vec::new(),
                        Err(e) => return Err(e.into()),
                    }
                } else {
                    c.read_entries(nonzero(te.table_id), with_counter, with_meter)?
                };
                let sets = self.one_shot_sets();
                for e in &entries {
                    let mut msg = convert::table_entry_msg(schema, e, with_hit);
                    self.show_one_shot(&sets, &mut msg);
                    push(out, E::TableEntry(msg));
                }
            }
            E::ActionProfileMember(m) => {
                for (pid, mid, action) in c.read_members(nonzero(m.action_profile_id))? {
                    if (m.member_id != 0 && m.member_id != mid) || mid >= ONE_SHOT_BASE {
                        continue;
                    }
                    let msg = p4::ActionProfileMember {
                        action_profile_id: pid,
                        member_id: mid,
                        action: Some(convert::action_msg(&action)),
                    };
                    push(out, E::ActionProfileMember(msg));
                }
            }
            E::ActionProfileGroup(g) => {
                for (pid, gid, members) in c.read_groups(nonzero(g.action_profile_id))? {
                    if (g.group_id != 0 && g.group_id != gid) || gid >= ONE_SHOT_BASE {
                        continue;
                    }
                    let profile = schema
                        .profile_by_id(pid)
                        .map(|p| &schema.action_profiles[p]);
                    let max = profile.map_or(0, |p| p.max_group_size as u32);
                    let msg = convert::group_msg(pid, gid, &members, max);
                    push(out, E::ActionProfileGroup(msg));
                }
            }
            // Cells read back in the same wire form a client writes them in.
            E::CounterEntry(ce) => {
                let index = convert::index(ce.index.as_ref())?;
                for cell in c.read_counters(nonzero(ce.counter_id), index)? {
                    let e = Entity::Counter {
                        counter_id: cell.id,
                        index: Some(cell.index),
                        data: cell.value,
                    };
                    push(out, convert::entity_msg(schema, &e));
                }
            }
            E::MeterEntry(me) => {
                let index = convert::index(me.index.as_ref())?;
                for cell in c.read_meters(nonzero(me.meter_id), index)? {
                    let e = Entity::Meter {
                        meter_id: cell.id,
                        index: Some(cell.index),
                        config: cell.value,
                    };
                    push(out, convert::entity_msg(schema, &e));
                }
            }
            E::RegisterEntry(re) => {
                let index = convert::index(re.index.as_ref())?;
                for cell in c.read_registers(nonzero(re.register_id), index)? {
                    let e = Entity::Register {
                        register_id: cell.id,
                        index: Some(cell.index),
                        value: u128::from(cell.value),
                    };
                    push(out, convert::entity_msg(schema, &e));
                }
            }
            E::DirectCounterEntry(dc) => {
                let sets = self.one_shot_sets();
                for e in self.direct_entries(dc.table_entry.as_ref(), true, false)? {
                    let data = e.counter_data.map(convert::counter_data_msg);
                    let mut te = convert::table_entry_msg(schema, &e, false);
                    self.show_one_shot(&sets, &mut te);
                    te.counter_data = None;
                    let msg = p4::DirectCounterEntry {
                        table_entry: Some(te),
                        data,
                    };
                    push(out, E::DirectCounterEntry(msg));
                }
            }
            E::DirectMeterEntry(dm) => {
                let sets = self.one_shot_sets();
                for e in self.direct_entries(dm.table_entry.as_ref(), false, true)? {
                    let mut te = convert::table_entry_msg(schema, &e, false);
                    self.show_one_shot(&sets, &mut te);
                    let config = te.meter_config.take();
                    let msg = p4::DirectMeterEntry {
                        table_entry: Some(te),
                        config,
                        counter_data: None,
                    };
                    push(out, E::DirectMeterEntry(msg));
                }
            }
            E::PacketReplicationEngineEntry(p) => {
                use p4::packet_replication_engine_entry::Type as T;
                let forms = self.port_forms.lock().clone();
                match &p.r#type {
                    Some(T::MulticastGroupEntry(g)) => {
                        for (id, group) in c.read_multicast_groups(nonzero(g.multicast_group_id))? {
                            let form = forms.get(&(false, id)).copied().unwrap_or_default();
                            let msg = p4::MulticastGroupEntry {
                                multicast_group_id: id,
                                replicas: convert::replicas_msg(&group.replicas, form),
                                metadata: group.metadata.clone(),
                            };
                            push(
                                out,
                                E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                                    r#type: Some(T::MulticastGroupEntry(msg)),
                                }),
                            );
                        }
                    }
                    Some(T::CloneSessionEntry(s)) => {
                        for (id, session) in c.read_clone_sessions(nonzero(s.session_id))? {
                            let form = forms.get(&(true, id)).copied().unwrap_or_default();
                            let msg = convert::clone_session_msg(id, &session, form);
                            push(
                                out,
                                E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                                    r#type: Some(T::CloneSessionEntry(msg)),
                                }),
                            );
                        }
                    }
                    None => {
                        return Err(EntityError::invalid(
                            "replication entry read without a type",
                        ));
                    }
                }
            }
            E::DigestEntry(d) => {
                let digests = self.digests.lock();
                if d.digest_id != 0 && schema.digest_by_id(d.digest_id).is_none() {
                    return Err(EntityError::new(
                        Code::NotFound,
                        format!("digest id {}", d.digest_id),
                    ));
                }
                for (&id, s) in digests.iter() {
                    if d.digest_id == 0 || d.digest_id == id {
                        let msg = p4::DigestEntry {
                            digest_id: id,
                            config: Some(s.config),
                        };
                        push(out, E::DigestEntry(msg));
                    }
                }
            }
            E::ValueSetEntry(_) => {
                return Err(EntityError::unimplemented(
                    "value sets (the programs have none)",
                ));
            }
            E::ExternEntry(_) => {
                return Err(EntityError::unimplemented("architecture-specific externs"));
            }
        }
        Ok(())
    }

    /// Entries a direct-resource read names: one entry by key, every entry of a table (table id
    /// and no match: p4runtime.md item 18), or every entry of every table with the resource.
    fn direct_entries(
        &self,
        te: Option<&p4::TableEntry>,
        counter: bool,
        meter: bool,
    ) -> Result<Vec<control::TableEntry>, EntityError> {
        let schema = &self.schema;
        let c = &self.control;
        let has = |t: usize| {
            let d = &schema.tables[t];
            (counter && d.direct_counter.is_some()) || (meter && d.direct_meter.is_some())
        };
        let table_id = te.map_or(0, |t| t.table_id);
        if table_id == 0 {
            let mut out = Vec::new();
            for (i, t) in schema.tables.iter().enumerate() {
                if has(i) {
                    out.extend(c.read_entries(Some(t.id), counter, meter)?);
                }
            }
            return Ok(out);
        }
        let table = schema
            .table_by_id(table_id)
            .ok_or_else(|| EntityError::new(Code::NotFound, format!("table id {table_id}")))?;
        if !has(table) {
            return Err(EntityError::invalid(format!(
                "{} has no direct {}",
                schema.tables[table].name,
                if counter { "counter" } else { "meter" }
            )));
        }
        let te = te.expect("table id set");
        if te.r#match.is_empty() && !te.is_default_action {
            return Ok(c.read_entries(Some(table_id), counter, meter)?);
        }
        let key = convert::table_entry(schema, te)?;
        match c.read_entry_by_key(&key, counter, meter) {
            Ok(e) => Ok(vec![e]),
            Err(control::WriteError::NotFound(_)) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    // ----- Pipeline config -----

    fn set_pipeline(&self, req: &p4::SetForwardingPipelineConfigRequest) -> Result<(), Status> {
        use p4::set_forwarding_pipeline_config_request::Action as A;
        self.check_device(req.device_id)?;
        Self::check_role(&req.role)?;
        let _serial = self.write_lock.lock();
        self.check_primary(req.election_id.as_ref())?;
        let action = A::try_from(req.action)
            .ok()
            .filter(|a| *a != A::Unspecified)
            .ok_or_else(|| Status::invalid_argument(format!("action {}", req.action)))?;
        if action == A::Commit {
            // The saved config becomes the current one; the writes made since VERIFY_AND_SAVE
            // stand (the program is the same, so there is nothing to replay them onto).
            if req.config.is_some() {
                return Err(Status::invalid_argument("COMMIT takes no config"));
            }
            let mut pc = self.pipeline_config.lock();
            let (cookie, device_config) = pc.saved.take().ok_or_else(|| {
                Status::failed_precondition("COMMIT without a config saved by VERIFY_AND_SAVE")
            })?;
            pc.cookie = cookie;
            pc.device_config = device_config;
            return Ok(());
        }
        let config = req.config.as_ref().ok_or_else(|| {
            Status::invalid_argument("SetForwardingPipelineConfig without a config")
        })?;
        let p4info = config
            .p4info
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("config without a P4Info"))?;
        if fingerprint(p4info) != self.fingerprint {
            let theirs = fingerprint(p4info);
            let diff = theirs
                .iter()
                .find(|l| !self.fingerprint.contains(l))
                .or_else(|| self.fingerprint.iter().find(|l| !theirs.contains(l)))
                .cloned()
                .unwrap_or_default();
            return Err(Status::invalid_argument(format!(
                "this switch runs the fixed program {:?}; the P4Info given is not its P4Info \
                 (first difference: {diff}); get it with GetForwardingPipelineConfig or from \
                 pipeline/p4info/{}.txt",
                self.schema.name, self.schema.name
            )));
        }
        let cookie = config.cookie.as_ref().map(|c| c.cookie);
        let mut pc = self.pipeline_config.lock();
        match action {
            A::Verify => {}
            A::VerifyAndSave => pc.saved = Some((cookie, config.p4_device_config.clone())),
            A::VerifyAndCommit => {
                self.commit_fresh();
                pc.cookie = cookie;
                pc.device_config = config.p4_device_config.clone();
            }
            A::ReconcileAndCommit => {
                pc.cookie = cookie;
                pc.device_config = config.p4_device_config.clone();
            }
            A::Commit | A::Unspecified => unreachable!("handled above"),
        }
        Ok(())
    }

    /// A fresh pipeline: forwarding state cleared (VERIFY_AND_COMMIT).
    fn commit_fresh(&self) {
        self.control.set_now((self.io.clock)());
        self.control.clear();
        self.port_forms.lock().clear();
        self.digests.lock().clear();
        self.idle_reported.lock().clear();
    }

    fn get_pipeline(
        &self,
        req: &p4::GetForwardingPipelineConfigRequest,
    ) -> Result<p4::GetForwardingPipelineConfigResponse, Status> {
        use p4::get_forwarding_pipeline_config_request::ResponseType as R;
        self.check_device(req.device_id)?;
        let kind = R::try_from(req.response_type).map_err(|_| {
            Status::invalid_argument(format!("response_type {}", req.response_type))
        })?;
        let pc = self.pipeline_config.lock().clone();
        let cookie = pc
            .cookie
            .map(|cookie| p4::forwarding_pipeline_config::Cookie { cookie });
        let with_p4info = matches!(kind, R::All | R::P4infoAndCookie);
        let with_device = matches!(kind, R::All | R::DeviceConfigAndCookie);
        Ok(p4::GetForwardingPipelineConfigResponse {
            config: Some(p4::ForwardingPipelineConfig {
                p4info: with_p4info.then(|| self.p4info.clone()),
                p4_device_config: if with_device {
                    pc.device_config
                } else {
                    Vec::new()
                },
                cookie,
            }),
        })
    }

    // ----- Stream channel -----

    fn arbitration_reply(&self, streams: &Streams, s: StreamId) -> p4::StreamMessageResponse {
        let code = streams.arbiter.status_of(s);
        let message = match code {
            Code::Ok => "you are the primary",
            Code::AlreadyExists => "a primary is connected: you are a backup",
            _ => "there is no primary",
        };
        p4::StreamMessageResponse {
            update: Some(p4::stream_message_response::Update::Arbitration(
                p4::MasterArbitrationUpdate {
                    device_id: self.config.device_id,
                    role: streams.role.get(&s).cloned().flatten(),
                    election_id: streams.arbiter.reply_election_id().map(uint128),
                    status: Some(rpc_status(code, message)),
                },
            )),
        }
    }

    /// Tells every arbitrated stream its status (after the primary changed).
    fn notify_all(&self, streams: &Streams) {
        for s in streams.arbiter.streams() {
            if let Some(tx) = streams.tx.get(&s) {
                let _ = tx.try_send(Ok(self.arbitration_reply(streams, s)));
            }
        }
    }

    fn on_arbitration(
        &self,
        s: StreamId,
        tx: &StreamTx,
        a: &p4::MasterArbitrationUpdate,
    ) -> Result<(), Status> {
        self.check_device(a.device_id)?;
        if let Some(role) = &a.role {
            Self::check_role(&role.name)?;
        }
        let mut streams = self.streams.lock();
        let changed = streams
            .arbiter
            .advertise(s, a.election_id.as_ref().map(u128_of))
            .map_err(|(code, msg)| Status::new(code, msg))?;
        streams.tx.insert(s, tx.clone());
        streams.role.insert(s, a.role.clone());
        if changed {
            self.notify_all(&streams);
            // The new primary starts with a clean digest slate.
            for d in self.digests.lock().values_mut() {
                d.outstanding = None;
            }
        } else {
            let _ = tx.try_send(Ok(self.arbitration_reply(&streams, s)));
        }
        Ok(())
    }

    fn leave(&self, s: StreamId) {
        let mut streams = self.streams.lock();
        streams.tx.remove(&s);
        streams.role.remove(&s);
        if streams.arbiter.remove(s) {
            self.notify_all(&streams);
            // The new primary starts with a clean digest slate.
            for d in self.digests.lock().values_mut() {
                d.outstanding = None;
            }
        }
    }

    fn stream_error(
        code: Code,
        message: String,
        packet: Option<p4::PacketOut>,
    ) -> p4::StreamMessageResponse {
        p4::StreamMessageResponse {
            update: Some(p4::stream_message_response::Update::Error(
                p4::StreamError {
                    canonical_code: code as i32,
                    message,
                    details: packet.map(|p| {
                        p4::stream_error::Details::PacketOut(p4::PacketOutError {
                            packet_out: Some(p),
                        })
                    }),
                    ..Default::default()
                },
            )),
        }
    }

    fn on_packet_out(&self, s: StreamId, tx: &StreamTx, p: p4::PacketOut) {
        let refuse = |code, msg: String, p| {
            self.stats
                .packet_outs_refused
                .fetch_add(1, Ordering::Relaxed);
            let _ = tx.try_send(Ok(Self::stream_error(code, msg, Some(p))));
        };
        if self.streams.lock().arbiter.primary() != Some(s) {
            return refuse(
                Code::PermissionDenied,
                "packet-out from a backup controller: dropped".into(),
                p,
            );
        }
        let frame = match self.packet_out_frame(&p) {
            Ok(f) => f,
            Err(e) => return refuse(e.code, e.message, p),
        };
        if (self.io.packet_out)(frame) {
            self.stats.packet_outs.fetch_add(1, Ordering::Relaxed);
        } else {
            // The data plane is not taking packet-outs as fast as they come: drop and say so
            // rather than block the runtime that serves every other call.
            self.stats
                .packet_outs_dropped
                .fetch_add(1, Ordering::Relaxed);
            let _ = tx.try_send(Ok(Self::stream_error(
                Code::ResourceExhausted,
                "the CPU port's queue is full: packet-out dropped".into(),
                Some(p),
            )));
        }
    }

    fn packet_out_frame(&self, p: &p4::PacketOut) -> Result<Vec<u8>, EntityError> {
        let Some(h) = self.schema.controller_header("packet_out") else {
            if !p.metadata.is_empty() {
                return Err(EntityError::invalid(
                    "this program has no packet_out header",
                ));
            }
            return Ok(p.payload.clone());
        };
        let mut values = vec![0u128; h.fields.len()];
        for m in &p.metadata {
            let i = h
                .fields
                .iter()
                .position(|f| f.0 == m.metadata_id)
                .ok_or_else(|| {
                    EntityError::invalid(format!("packet_out has no metadata id {}", m.metadata_id))
                })?;
            let f = &h.fields[i];
            values[i] = convert::value(&m.value, f.2, &format!("packet_out.{}", f.1))?;
        }
        let mut frame = convert::pack_header(&h.fields, &values);
        frame.extend_from_slice(&p.payload);
        Ok(frame)
    }

    fn on_digest_ack(&self, tx: &StreamTx, ack: &p4::DigestListAck) {
        let mut digests = self.digests.lock();
        match digests.get_mut(&ack.digest_id) {
            Some(d) if d.outstanding.is_some_and(|(id, _)| id == ack.list_id) => {
                d.outstanding = None;
            }
            _ => {
                let msg = p4::StreamMessageResponse {
                    update: Some(p4::stream_message_response::Update::Error(
                        p4::StreamError {
                            canonical_code: Code::NotFound as i32,
                            message: format!(
                                "no outstanding digest list {} of digest {}",
                                ack.list_id, ack.digest_id
                            ),
                            details: Some(p4::stream_error::Details::DigestListAck(
                                p4::DigestListAckError {
                                    digest_list_ack: Some(*ack),
                                },
                            )),
                            ..Default::default()
                        },
                    )),
                };
                let _ = tx.try_send(Ok(msg));
            }
        }
    }

    fn on_stream_message(
        &self,
        s: StreamId,
        tx: &StreamTx,
        msg: p4::StreamMessageRequest,
    ) -> Result<(), Status> {
        use p4::stream_message_request::Update as U;
        let arbitrated = self.streams.lock().arbiter.knows(s);
        match msg.update {
            Some(U::Arbitration(a)) => self.on_arbitration(s, tx, &a),
            _ if !arbitrated => Err(Status::failed_precondition(
                "the first message on a stream must be a MasterArbitrationUpdate",
            )),
            Some(U::Packet(p)) => {
                self.on_packet_out(s, tx, p);
                Ok(())
            }
            Some(U::DigestAck(a)) => {
                // Lists go to the primary; only its acks count.
                if self.streams.lock().arbiter.primary() == Some(s) {
                    self.on_digest_ack(tx, &a);
                }
                Ok(())
            }
            Some(U::Other(_)) | None => {
                let _ = tx.try_send(Ok(Self::stream_error(
                    Code::Unimplemented,
                    "unsupported stream message".into(),
                    None,
                )));
                Ok(())
            }
        }
    }

    /// Sends `msg` to the primary's stream; false if there is none or it is full.
    fn to_primary(&self, msg: p4::StreamMessageResponse) -> bool {
        let streams = self.streams.lock();
        let Some(tx) = streams.arbiter.primary().and_then(|p| streams.tx.get(&p)) else {
            return false;
        };
        tx.try_send(Ok(msg)).is_ok()
    }

    // ----- Background: packet-ins, digests, idle timeouts -----

    fn packet_in_loop(&self) {
        let header = self.schema.controller_header("packet_in").cloned();
        while !self.stop.load(Ordering::Relaxed) {
            let frame = match self.io.packet_in.recv_timeout(Duration::from_millis(200)) {
                Ok(f) => f,
                Err(crossbeam::channel::RecvTimeoutError::Timeout) => continue,
                Err(crossbeam::channel::RecvTimeoutError::Disconnected) => break,
            };
            let (metadata, payload) = match &header {
                Some(h) => {
                    let Some(values) = convert::unpack_header(&h.fields, &frame) else {
                        self.stats
                            .packet_ins_dropped
                            .fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let md = h
                        .fields
                        .iter()
                        .zip(values)
                        .map(|(f, v)| p4::PacketMetadata {
                            metadata_id: f.0,
                            value: crate::bytestring::canonical(v),
                        })
                        .collect();
                    (md, frame[h.byte_len()..].to_vec())
                }
                None => (Vec::new(), frame),
            };
            let msg = p4::StreamMessageResponse {
                update: Some(p4::stream_message_response::Update::Packet(p4::PacketIn {
                    payload,
                    metadata,
                })),
            };
            let counter = if self.to_primary(msg) {
                &self.stats.packet_ins
            } else {
                &self.stats.packet_ins_dropped
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn housekeeping_loop(&self) {
        let mut next_idle_scan = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            let now = (self.io.clock)();
            let busy_digests = self.pump_digests(now);
            // Idle timeouts are scanned at a quarter of the shortest timeout (5 ms to 1 s): the
            // scan reads every entry of the tables that have them.
            if now >= next_idle_scan {
                let step = self
                    .scan_idle(now)
                    .map_or(1_000_000_000, |t| (t / 4).clamp(5_000_000, 1_000_000_000));
                next_idle_scan = now + step;
            }
            // Tick fast only while there is something to watch: an idle switch must stay idle.
            let tick = if busy_digests {
                Duration::from_millis(5)
            } else {
                Duration::from_nanos(
                    next_idle_scan
                        .saturating_sub(now)
                        .clamp(5_000_000, 100_000_000),
                )
            };
            std::thread::sleep(tick);
        }
    }

    fn has_primary(&self) -> bool {
        self.streams.lock().arbiter.primary().is_some()
    }

    fn wall_ns(&self, now: u64) -> i64 {
        i64::try_from(now.saturating_add(self.epoch_offset_ns)).unwrap_or(i64::MAX)
    }

    /// Moves digests from the data plane into lists for the primary. Returns whether any digest
    /// is configured.
    fn pump_digests(&self, now: u64) -> bool {
        let queue = &self.control.externs().digests;
        // Lock order: `streams` before `digests` (arbitration changes take them in that order),
        // so ask about the primary before taking `digests`, never while holding it. Holding
        // `digests` while waiting for `streams` deadlocked against an arbitration or a stream
        // leaving, which froze the whole service (issue 16).
        let primary = self.has_primary();
        let mut digests = self.digests.lock();
        while let Some(m) = queue.pop() {
            let Some(def) = self.schema.digests.get(usize::from(m.digest)) else {
                continue;
            };
            let Some(d) = digests.get_mut(&def.id) else {
                continue; // not configured: the controller did not ask for it
            };
            let values = m.values().to_vec();
            if d.pending.len() < 65536 && d.pending_set.insert(values.clone()) {
                if d.pending.is_empty() {
                    d.first_pending_ns = now;
                }
                d.pending.push(values);
            }
        }
        let mut lists = Vec::new();
        // Without a primary the digests wait (up to the pending limit) rather than go nowhere.
        for (&id, d) in digests.iter_mut().filter(|_| primary) {
            if let Some((_, sent)) = d.outstanding {
                let ack_timeout = u64::try_from(d.config.ack_timeout_ns).unwrap_or(0);
                if now.saturating_sub(sent) < ack_timeout {
                    continue;
                }
                d.outstanding = None;
            }
            if d.pending.is_empty() {
                continue;
            }
            let max_size = usize::try_from(d.config.max_list_size).unwrap_or(1).max(1);
            let timeout = u64::try_from(d.config.max_timeout_ns).unwrap_or(0);
            if d.pending.len() < max_size && now.saturating_sub(d.first_pending_ns) < timeout {
                continue;
            }
            let take = d.pending.len().min(max_size);
            let batch: Vec<Vec<u128>> = d.pending.drain(..take).collect();
            for v in &batch {
                d.pending_set.remove(v);
            }
            d.first_pending_ns = now;
            let list_id = d.next_list_id;
            d.next_list_id += 1;
            d.outstanding = Some((list_id, now));
            lists.push(p4::DigestList {
                digest_id: id,
                list_id,
                data: batch.into_iter().map(|v| digest_data(&v)).collect(),
                timestamp: self.wall_ns(now),
            });
        }
        let any = !digests.is_empty();
        drop(digests);
        for l in lists {
            let msg = p4::StreamMessageResponse {
                update: Some(p4::stream_message_response::Update::Digest(l)),
            };
            if self.to_primary(msg) {
                self.stats.digest_lists.fetch_add(1, Ordering::Relaxed);
            }
        }
        any
    }

    /// Reports entries idle for longer than their timeout, once per idle period (an entry is
    /// marked reported only when a primary took the notification). Returns the shortest idle
    /// timeout among the entries, if any has one.
    fn scan_idle(&self, now: u64) -> Option<u64> {
        let tables: Vec<u32> = self
            .schema
            .tables
            .iter()
            .filter(|t| t.idle_timeout)
            .map(|t| t.id)
            .collect();
        if tables.is_empty() {
            return None;
        }
        self.control.set_now(now);
        let mut shortest: Option<u64> = None;
        let mut expired = Vec::new();
        let mut keys = Vec::new();
        let mut reported = self.idle_reported.lock();
        let mut live = HashSet::new();
        for id in tables {
            let Ok(entries) = self.control.read_entries(Some(id), false, false) else {
                continue;
            };
            for e in entries {
                if e.idle_timeout_ns == 0 {
                    continue;
                }
                shortest = Some(shortest.map_or(e.idle_timeout_ns, |s| s.min(e.idle_timeout_ns)));
                let key = (id, format!("{:?}/{}", e.matches, e.priority));
                live.insert(key.clone());
                let elapsed = e.elapsed_since_hit_ns.unwrap_or(0);
                match reported.get(&key) {
                    // Hit again since the report: re-arm.
                    Some(&at) if elapsed < at => {
                        reported.remove(&key);
                    }
                    Some(_) => continue,
                    None => {}
                }
                if elapsed >= e.idle_timeout_ns {
                    keys.push((key, elapsed));
                    expired.push(convert::table_entry_msg(&self.schema, &e, false));
                }
            }
        }
        reported.retain(|k, _| live.contains(k));
        if !expired.is_empty() {
            let sets = self.one_shot_sets();
            for e in &mut expired {
                self.show_one_shot(&sets, e);
            }
            let msg = p4::StreamMessageResponse {
                update: Some(
                    p4::stream_message_response::Update::IdleTimeoutNotification(
                        p4::IdleTimeoutNotification {
                            table_entry: expired,
                            timestamp: self.wall_ns(now),
                        },
                    ),
                ),
            };
            if self.to_primary(msg) {
                reported.extend(keys);
                self.stats
                    .idle_notifications
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        shortest
    }
}

/// Member and group ids from [`ONE_SHOT_BASE`] are the server's.
fn reserved(id: u32) -> Result<(), EntityError> {
    if id >= ONE_SHOT_BASE {
        return Err(EntityError::new(
            Code::OutOfRange,
            format!("member/group id {id}: ids from 2^31 are reserved for one-shot action sets"),
        ));
    }
    Ok(())
}

/// The delete of group `group` of profile `profile`.
fn group_removal(profile: u32, group: u32) -> Update {
    Update {
        kind: UpdateKind::Delete,
        entity: Entity::Group {
            profile_id: profile,
            group_id: group,
            members: Vec::new(),
            max_size: 0,
        },
    }
}

/// A digest message as P4Data: a struct of bitstrings.
fn digest_data(values: &[u128]) -> p4::P4Data {
    p4::P4Data {
        data: Some(p4::p4_data::Data::Struct(p4::P4StructLike {
            members: values.iter().map(|&v| convert::bitstring(v)).collect(),
        })),
    }
}

#[tonic::async_trait]
impl P4Runtime for Service {
    async fn write(
        &self,
        request: Request<p4::WriteRequest>,
    ) -> Result<Response<p4::WriteResponse>, Status> {
        let inner = self.inner.clone();
        let req = request.into_inner();
        tokio::task::spawn_blocking(move || inner.write(&req))
            .await
            .map_err(|e| Status::internal(e.to_string()))??;
        Ok(Response::new(p4::WriteResponse {}))
    }

    type ReadStream = ReceiverStream<Result<p4::ReadResponse, Status>>;

    async fn read(
        &self,
        request: Request<p4::ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        let inner = self.inner.clone();
        let req = request.into_inner();
        let entities = tokio::task::spawn_blocking(move || inner.read(&req))
            .await
            .map_err(|e| Status::internal(e.to_string()))??;
        let chunks: Vec<_> = entities.chunks(READ_CHUNK).map(<[_]>::to_vec).collect();
        let (tx, rx) = mpsc::channel(chunks.len().max(1));
        if chunks.is_empty() {
            let _ = tx.try_send(Ok(p4::ReadResponse::default()));
        }
        for entities in chunks {
            let _ = tx.try_send(Ok(p4::ReadResponse { entities }));
        }
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<p4::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::SetForwardingPipelineConfigResponse>, Status> {
        let inner = self.inner.clone();
        let req = request.into_inner();
        tokio::task::spawn_blocking(move || inner.set_pipeline(&req))
            .await
            .map_err(|e| Status::internal(e.to_string()))??;
        Ok(Response::new(p4::SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        request: Request<p4::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::GetForwardingPipelineConfigResponse>, Status> {
        // Off the async workers: the config lock is held while a pipeline change clears the
        // tables, and the async workers must stay free for the health service.
        let inner = self.inner.clone();
        let req = request.into_inner();
        let r = tokio::task::spawn_blocking(move || inner.get_pipeline(&req))
            .await
            .map_err(|e| Status::internal(e.to_string()))??;
        Ok(Response::new(r))
    }

    type StreamChannelStream = ReceiverStream<Result<p4::StreamMessageResponse, Status>>;

    async fn stream_channel(
        &self,
        request: Request<tonic::Streaming<p4::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let inner = self.inner.clone();
        let s = inner.next_stream.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            // Ends on half-close or a broken stream: ours ends too (p4runtime.md item 4).
            while let Ok(Some(msg)) = inbound.message().await {
                if let Err(status) = inner.on_stream_message(s, &tx, msg) {
                    let _ = tx.send(Err(status)).await;
                    break;
                }
            }
            inner.leave(s);
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn capabilities(
        &self,
        request: Request<p4::CapabilitiesRequest>,
    ) -> Result<Response<p4::CapabilitiesResponse>, Status> {
        let _ = request;
        Ok(Response::new(p4::CapabilitiesResponse {
            p4runtime_api_version: API_VERSION.into(),
            experimental: None,
        }))
    }
}

/// A running P4Runtime server: its runtime thread and background threads.
#[derive(Debug)]
pub struct Running {
    /// The address it listens on.
    pub addr: SocketAddr,
    service: Service,
    shutdown: Option<tokio::sync::watch::Sender<bool>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    /// The service (for its counters).
    pub fn service(&self) -> &Service {
        &self.service
    }

    /// Stops serving and joins the threads.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.service.inner.stop.store(true, Ordering::Relaxed);
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(true);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Starts serving `service` on `addr` (port 0 picks a free port) on a runtime of its own.
pub fn serve(service: Service, addr: SocketAddr) -> std::io::Result<Running> {
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let (shutdown, shutdown_rx) = tokio::sync::watch::channel(false);
    let mut threads = Vec::new();
    let svc = service.clone();
    threads.push(
        std::thread::Builder::new()
            .name("p4rt-grpc".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("p4rt")
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!("P4Runtime runtime: {e}");
                        return;
                    }
                };
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!("P4Runtime listener: {e}");
                            return;
                        }
                    };
                    // The builder's tcp_nodelay applies only to listeners it binds itself: set
                    // it on each accepted socket, or Nagle and delayed ACKs add ~40 ms to small
                    // answers on a fresh connection (a health probe, a Capabilities call).
                    let incoming = tokio_stream::StreamExt::map(
                        tokio_stream::wrappers::TcpListenerStream::new(listener),
                        |s| {
                            s.inspect(|s| {
                                let _ = s.set_nodelay(true);
                            })
                        },
                    );
                    let server = P4RuntimeServer::new(svc)
                        .max_decoding_message_size(MAX_MESSAGE_BYTES)
                        .max_encoding_message_size(MAX_MESSAGE_BYTES);
                    // grpc.health.v1 on the same port. Its answers come from tonic-health's
                    // own status map, which no P4Runtime call touches, on the async workers,
                    // which never run a write, a read or anything else that can wait for a lock
                    // (those run on the blocking pool).
                    let (health, health_server) = tonic_health::server::health_reporter();
                    health.set_serving::<P4RuntimeServer<Service>>().await;
                    let mut graceful = shutdown_rx.clone();
                    let mut hard = shutdown_rx;
                    let serving = tonic::transport::Server::builder()
                        .tcp_nodelay(true)
                        .add_service(health_server)
                        .add_service(server)
                        .serve_with_incoming_shutdown(incoming, async move {
                            let _ = graceful.changed().await;
                        });
                    // A client that never hangs up must not hold the process: half a second of
                    // grace, then the runtime goes.
                    tokio::select! {
                        r = serving => {
                            if let Err(e) = r {
                                tracing::error!("P4Runtime server: {e}");
                            }
                        }
                        () = async move {
                            let _ = hard.changed().await;
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        } => {}
                    }
                });
                rt.shutdown_timeout(Duration::from_millis(200));
            })?,
    );
    let inner = service.inner.clone();
    threads.push(
        std::thread::Builder::new()
            .name("p4rt-packet-in".into())
            .spawn(move || inner.packet_in_loop())?,
    );
    let inner = service.inner.clone();
    threads.push(
        std::thread::Builder::new()
            .name("p4rt-housekeeping".into())
            .spawn(move || inner.housekeeping_loop())?,
    );
    Ok(Running {
        addr,
        service,
        shutdown: Some(shutdown),
        threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> Service {
        let program = pipeline::program::by_name("basic").expect("basic");
        let pipe =
            pipeline::runtime::Pipeline::new(program, 1, pipeline::runtime::Config::default());
        let (_in_tx, in_rx) = crossbeam::channel::unbounded();
        let io = DeviceIo {
            packet_out: Box::new(|_| true),
            packet_in: in_rx,
            clock: Arc::new(|| 0),
        };
        Service::new(pipe.control.clone(), io, ServerConfig::default())
    }

    /// Issue 16's deadlock: an arbitration change (or a primary leaving) holds `streams` and
    /// takes `digests`; the housekeeping thread's digest pump held `digests` and took `streams`.
    /// Here the test holds `streams` as the arbitration does while the pump runs: the pump may
    /// wait, but it must not be holding `digests` meanwhile, or the arbitration never gets it.
    #[test]
    fn the_digest_pump_never_holds_digests_while_waiting_for_streams() {
        let inner = service().inner.clone();
        let streams = inner.streams.lock();
        let pump = {
            let inner = inner.clone();
            std::thread::spawn(move || inner.pump_digests(0))
        };
        std::thread::sleep(Duration::from_millis(100));
        let got = inner.digests.try_lock_for(Duration::from_secs(1)).is_some();
        drop(streams);
        pump.join().expect("the pump ran");
        assert!(
            got,
            "the pump held `digests` while waiting for `streams`: lock-order deadlock"
        );
    }
}
