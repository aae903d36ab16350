//! The P4Runtime service of one fixed-program switch.
//!
//! It runs on its own tokio runtime (never on a data-plane worker) and reaches the data plane
//! only through the pipeline's [`Control`] (every write) and a [`DeviceIo`] (packet-out, packet-in,
//! the data plane's clock). Two plain threads feed the stream channel: one carries packet-ins
//! from the CPU port to the primary; the other batches digests and watches idle timeouts.
//!
//! What real clients need of it, item by item, is docs/p4runtime.md, "What real clients need of a
//! server"; the tests say which item each covers.
//!
//! This module holds the service's state, its entry points and the server; the work is in
//! [`write`] (Write), [`oneshot`] (one-shot action sets), [`read`] (Read), [`config`]
//! (pipeline config), [`stream`] (the stream channel) and [`notify`] (packet-ins, digests and
//! idle timeouts towards the primary).

mod config;
mod device;
mod notify;
mod oneshot;
mod read;
mod stream;
mod write;

pub use device::{BuildFn, DEFAULT_MAX_PACKET_OUT, DeviceIo, InstallFn, Loader};
pub use write::UPDATE_INDEX_SPACE;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use pipeline::control::{self, Atomicity, Control, Entity, Update, UpdateKind, WriteError};
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

/// ReadResponses a Read queues for a slow client before it waits.
const READ_QUEUE: usize = 4;

/// Most entities one ReadRequest may name (RESOURCE_EXHAUSTED beyond). A 2 MB request could
/// otherwise repeat a wildcard 300,000 times.
pub const MAX_READ_ENTITIES: usize = 10_000;

/// Most entities one Read answers (RESOURCE_EXHAUSTED, after that many, beyond): 16 times the
/// largest table of the programs, far more than all of a switch's state.
pub const MAX_READ_RESULTS: usize = 1 << 21;

/// Responses queued per stream before packet-ins to it are dropped.
const STREAM_QUEUE: usize = 4096;

/// Largest encoded error details (google.rpc.Status) of a failed Write, whatever the batch's
/// size: `-bin` trailers travel base64-encoded (4/3 larger: 6,828 bytes), the summary travels
/// again in grpc-message (at most 259 ASCII characters), and p4runtime-shell and tonic keep
/// gRPC's default limit of 8 KiB for all of a reply's metadata.
pub const MAX_DETAILS_BYTES: usize = 5 * 1024;

/// Settings of the service.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The device id clients must use (p4runtime.md item 7: PTF scripts use 0).
    pub device_id: u64,
    /// How the primary is elected.
    pub election: Election,
    /// Packet-in metadata padded to its field's width, as stratum_bmv2 sends it (controllers
    /// written against it, such as ngsdn-tutorial's PTF tests, compare the bytes), instead of
    /// the canonical form the spec asks of a server's replies (8.3).
    pub padded_packet_in: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            device_id: 1,
            election: Election::Spec,
            padded_packet_in: false,
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
    /// Packet-outs refused (bad metadata, too long, or not from the primary).
    pub packet_outs_refused: AtomicU64,
    /// Of those, packet-outs longer than the data plane's buffers carry (INVALID_ARGUMENT).
    pub packet_outs_too_long: AtomicU64,
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
    saved: Option<Saved>,
}

/// A config VERIFY_AND_SAVE'd: its cookie and device config, and, when it is another program,
/// that program built and its P4Info.
#[derive(Debug, Clone)]
struct Saved {
    cookie: Option<u64>,
    device_config: Vec<u8>,
    program: Option<(Arc<pipeline::runtime::Pipeline>, p4i::P4Info)>,
}

/// The program the service serves: its control plane, schema and P4Info. A program loaded by
/// SetForwardingPipelineConfig replaces it whole.
struct Prog {
    control: Arc<Control>,
    schema: Arc<Schema>,
    /// Its device config (a JSON program's text), empty for a hard-wired program.
    device_config: Arc<[u8]>,
    /// The P4Info as the controller gave it (or as generated from the schema).
    p4info: p4i::P4Info,
    fingerprint: Vec<String>,
}

struct Inner {
    config: ServerConfig,
    prog: arc_swap::ArcSwap<Prog>,
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
            .field("program", &self.schema().name)
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
    for v in &p.value_sets {
        let md = fields(
            v.r#match
                .iter()
                .map(|m| (m.id, m.name.as_str(), m.bitwidth)),
        );
        // Not the size: a P4Info without one leaves the program's (BMv2's: unbounded).
        out.push(format!("value_set {} [{md}]", pre(v.preamble.as_ref())));
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
    /// A parser value set's new members (checked to fit: applying them cannot fail).
    ValueSet(usize, Vec<u128>),
}

impl Service {
    /// The service for `control` (the running program's) with `io`.
    pub fn new(control: Arc<Control>, io: DeviceIo, config: ServerConfig) -> Self {
        let running_config = io
            .loader
            .as_ref()
            .map(|l| l.running.clone())
            .unwrap_or_default();
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
                prog: arc_swap::ArcSwap::from_pointee(Prog {
                    control,
                    schema,
                    device_config: Arc::from(running_config.clone()),
                    p4info,
                    fingerprint,
                }),
                io,
                pipeline_config: Mutex::new(PipelineConfig {
                    device_config: running_config,
                    ..PipelineConfig::default()
                }),
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
    pub fn p4info(&self) -> p4i::P4Info {
        self.inner.prog.load().p4info.clone()
    }

    /// The running program's control plane, for a local control plane (the Thrift runtime
    /// server). A program loaded later replaces it: fetch it again for each request.
    pub fn control(&self) -> Arc<Control> {
        self.inner.control()
    }

    /// The running program's control plane and device config (a JSON program's text; empty
    /// for a hard-wired program), as one pair: a program loaded later replaces both.
    pub fn program(&self) -> (Arc<Control>, Arc<[u8]>) {
        let p = self.inner.prog.load();
        (p.control.clone(), p.device_config.clone())
    }

    /// Writes what `build` makes as one batch of a local control plane (the Thrift runtime
    /// server): one at a time with P4Runtime writes and program loads, with `build` run under
    /// the same lock, so that what it reads is what the batch changes. `expected` is the control
    /// plane the caller resolved its names in; if another program was loaded since, the batch is
    /// refused (ABORTED) and `build` does not run.
    pub fn write_local<E>(
        &self,
        expected: &Control,
        atomicity: Atomicity,
        build: impl FnOnce() -> Result<Vec<Update>, E>,
    ) -> Result<Vec<Result<(), WriteError>>, E> {
        let _serial = self.inner.write_lock.lock();
        let control = self.inner.control();
        if !std::ptr::eq(&*control, expected) {
            return Ok(vec![Err(WriteError::Aborted(
                "another program was loaded during the call".into(),
            ))]);
        }
        let updates = build()?;
        control.set_now((self.inner.io.clock)());
        Ok(control.write(&updates, atomicity))
    }

    /// Clears the forwarding state as a fresh commit does (BMv2's `reset_state`).
    pub fn reset_state(&self) {
        let _serial = self.inner.write_lock.lock();
        self.inner.commit_fresh();
    }

    /// A Write as the primary's, for in-process drivers that have no StreamChannel (the fuzz
    /// targets): the primary check is skipped, everything else (device, role, staging,
    /// validation, one-shot sets, digest configs, error details) is what a client's Write gets.
    pub fn write_as_primary(&self, req: &p4::WriteRequest) -> Result<(), Status> {
        self.inner.write_checked(req, false)
    }

    /// A Read, answered in full on the calling thread (in-process drivers; must not run inside
    /// an async runtime): every ReadResponse, then the error that ended it, if any.
    pub fn read_blocking(&self, req: &p4::ReadRequest) -> Vec<Result<p4::ReadResponse, Status>> {
        if let Err(e) = self.inner.check_read(req) {
            return vec![Err(e)];
        }
        // Room for the largest answer (MAX_READ_RESULTS in chunks) and its error, so that the
        // reader never waits for a consumer.
        let (tx, mut rx) = mpsc::channel(MAX_READ_RESULTS / READ_CHUNK + 2);
        self.inner.read(req, &tx);
        drop(tx);
        let mut out = Vec::new();
        while let Ok(r) = rx.try_recv() {
            out.push(r);
        }
        out
    }
}

impl Inner {
    /// The program's control plane (for one request: a program loaded meanwhile replaces it).
    fn control(&self) -> Arc<Control> {
        self.prog.load().control.clone()
    }

    /// The program's schema.
    fn schema(&self) -> Arc<Schema> {
        self.prog.load().schema.clone()
    }

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

    // ----- Read -----

    // ----- Pipeline config -----

    // ----- Stream channel -----

    // ----- Background: packet-ins, digests, idle timeouts -----
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
        inner.check_read(&req)?;
        // The answer is made on the blocking pool and streamed as it is made, with at most
        // READ_QUEUE chunks waiting for the client: memory stays bounded however much a request
        // asks for, and a client that goes away stops the work.
        let (tx, rx) = mpsc::channel(READ_QUEUE);
        tokio::task::spawn_blocking(move || inner.read(&req, &tx));
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

/// TLS for the control channel: PEM files' contents.
#[derive(Clone, Debug)]
pub struct Tls {
    /// The server's certificate chain.
    pub cert_pem: Vec<u8>,
    /// The server's private key.
    pub key_pem: Vec<u8>,
    /// Mutual TLS: only clients with a certificate issued by one of these CAs are served.
    pub client_ca_pem: Option<Vec<u8>>,
}

impl Tls {
    fn config(&self) -> tonic::transport::ServerTlsConfig {
        use tonic::transport::{Certificate, Identity, ServerTlsConfig};
        let mut c =
            ServerTlsConfig::new().identity(Identity::from_pem(&self.cert_pem, &self.key_pem));
        if let Some(ca) = &self.client_ca_pem {
            c = c.client_ca_root(Certificate::from_pem(ca));
        }
        c
    }
}

/// Starts serving `service` on `addr` (port 0 picks a free port) on a runtime of its own,
/// in plaintext.
pub fn serve(service: Service, addr: SocketAddr) -> std::io::Result<Running> {
    serve_with(service, addr, None)
}

/// Starts serving as [`serve`] does, over TLS when `tls` is given. A certificate, key or CA that
/// cannot be used is an error here, before anything listens.
pub fn serve_with(
    service: Service,
    addr: SocketAddr,
    tls: Option<Tls>,
) -> std::io::Result<Running> {
    let tls = tls.map(|t| t.config());
    if let Some(c) = &tls {
        tonic::transport::Server::builder()
            .tls_config(c.clone())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, tls_error(&e)))?;
    }
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
                    let mut builder = tonic::transport::Server::builder().tcp_nodelay(true);
                    if let Some(c) = tls {
                        builder = match builder.tls_config(c) {
                            Ok(b) => b,
                            Err(e) => {
                                tracing::error!("P4Runtime TLS: {}", tls_error(&e));
                                return;
                            }
                        };
                    }
                    let serving = builder
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

/// A transport error with its causes (tonic's own message is only "transport error").
fn tls_error(e: &tonic::transport::Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> Service {
        let program = programs::by_name("basic").expect("basic");
        let pipe =
            pipeline::runtime::Pipeline::new(program, 1, pipeline::runtime::Config::default());
        let (_in_tx, in_rx) = crossbeam::channel::unbounded();
        let io = DeviceIo {
            packet_out: Box::new(|_| true),
            max_packet_out: DEFAULT_MAX_PACKET_OUT,
            packet_in: in_rx,
            clock: Arc::new(|| 0),
            loader: None,
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
