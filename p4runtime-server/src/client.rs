//! A P4Runtime client: one controller session with a switch (the StreamChannel with its
//! arbitration, Write, Read, pipeline config, packet I/O), plus the BMv2-style command language
//! of [`pipeline::commands`] sent as P4Runtime writes. `pisa-ctl`, the fabric controller and the
//! tests use it; it speaks to any P4Runtime server, not only pisa-switch.
//!
//! Every call has a deadline ([`Deadlines`]): a switch that stops answering (a deadlock, a
//! stopped process, a dead link) turns into [`ClientError::Timeout`], naming the address, the
//! call and how long it waited, instead of a hang. TCP alone cannot tell: a stopped process's
//! kernel still accepts connections and acknowledges data.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use pipeline::commands::{self, Command};
use pipeline::schema::Schema;
use prost::Message;
use tokio::sync::{mpsc, watch};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

use crate::convert;
use crate::proto::google::rpc;
use crate::proto::p4::config::v1 as p4i;
use crate::proto::p4::v1 as p4;
use crate::proto::p4::v1::p4_runtime_client::P4RuntimeClient;

/// What went wrong talking to a switch.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection could not be made.
    #[error("connect to {0}: {1}")]
    Connect(String, tonic::transport::Error),
    /// The switch did not answer a call within its deadline.
    #[error("{addr}: no answer to {call} within {:.1} s", waited.as_secs_f64())]
    Timeout {
        /// The switch's address.
        addr: String,
        /// The call (StreamChannel, Write, Read, ...).
        call: &'static str,
        /// How long the client waited.
        waited: Duration,
    },
    /// An RPC failed as a whole.
    #[error("{}: {}", .0.code(), .0.message())]
    Rpc(tonic::Status),
    /// Some updates of a Write failed: one entry per update, `None` for those that succeeded.
    #[error("write failed: {summary}")]
    Write {
        /// The server's summary.
        summary: String,
        /// Per update: the canonical code and message of its failure.
        errors: Vec<Option<(Code, String)>>,
    },
    /// The arbitration did not complete.
    #[error("arbitration: {0}")]
    Arbitration(String),
    /// A command or name could not be understood.
    #[error("{0}")]
    Usage(String),
}

impl From<tonic::Status> for ClientError {
    fn from(s: tonic::Status) -> Self {
        ClientError::Rpc(s)
    }
}

/// Shorthand.
pub type Result<T> = std::result::Result<T, ClientError>;

/// The per-update errors carried in a failed Write's `grpc-status-details-bin`: one per update
/// in order (entries past the last failure may be missing), or, for a batch too large for that,
/// only the failed ones, each naming its index (space [`crate::server::UPDATE_INDEX_SPACE`]).
pub fn write_errors(status: &tonic::Status) -> Option<Vec<Option<(Code, String)>>> {
    let s = rpc::Status::decode(status.details()).ok()?;
    if s.details.is_empty() {
        return None;
    }
    let errors: Vec<p4::Error> = s
        .details
        .iter()
        .map(|any| p4::Error::decode(any.value.as_slice()).unwrap_or_default())
        .collect();
    let entry = |e: &p4::Error| {
        (e.canonical_code != 0).then(|| (Code::from_i32(e.canonical_code), e.message.clone()))
    };
    if errors
        .iter()
        .all(|e| e.space == crate::server::UPDATE_INDEX_SPACE)
    {
        let mut out = Vec::new();
        for e in &errors {
            // A batch has at most a few million updates: no larger index is believed.
            let i = usize::try_from(e.code).ok().filter(|&i| i < 1 << 24)?;
            if i >= out.len() {
                out.resize(i + 1, None);
            }
            out[i] = entry(e);
        }
        return Some(out);
    }
    Some(errors.iter().map(entry).collect())
}

/// How long a client waits for each kind of call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    /// Connecting: TCP, opening the stream channel and the arbitration's answer.
    pub connect: Duration,
    /// Write, Read, the pipeline config calls, and queueing a stream message.
    pub call: Duration,
    /// Capabilities and the health check: cheap calls a live server answers at once.
    pub probe: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            connect: Duration::from_secs(5),
            call: Duration::from_secs(10),
            probe: Duration::from_secs(2),
        }
    }
}

impl Deadlines {
    /// `d` for connecting and for calls, and at most `d` (2 s by default) for probes.
    pub fn all(d: Duration) -> Self {
        Deadlines {
            connect: d,
            call: d,
            probe: d.min(Deadlines::default().probe),
        }
    }
}

/// Runs `fut` for at most `limit`; past it, a [`ClientError::Timeout`] naming `addr` and `call`.
async fn within<T>(
    addr: &str,
    call: &'static str,
    limit: Duration,
    fut: impl Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(ClientError::Timeout {
            addr: addr.to_string(),
            call,
            waited: limit,
        }),
    }
}

fn endpoint(addr: &str, connect: Duration) -> Result<Endpoint> {
    let uri = if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    };
    Ok(Endpoint::from_shared(uri)
        .map_err(|e| ClientError::Connect(addr.into(), e))?
        .connect_timeout(connect)
        .tcp_nodelay(true))
}

/// Asks the standard gRPC health service (grpc.health.v1) of the server at `addr` whether it
/// serves; no stream channel, no arbitration. Returns how long the answer took.
pub async fn health_check(addr: &str, timeout: Duration) -> Result<Duration> {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let start = std::time::Instant::now();
    within(addr, "Health.Check", timeout, async {
        let channel = endpoint(addr, timeout)?
            .connect()
            .await
            .map_err(|e| ClientError::Connect(addr.into(), e))?;
        let r = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await?
            .into_inner();
        if r.status == ServingStatus::Serving as i32 {
            Ok(start.elapsed())
        } else {
            Err(ClientError::Rpc(tonic::Status::unavailable(format!(
                "health status {}",
                r.status
            ))))
        }
    })
    .await
}

/// The arbitration outcome last told to this client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArbitrationState {
    /// OK (primary), ALREADY_EXISTS (backup) or NOT_FOUND (no primary).
    pub status: Code,
    /// The election id the server reported (the primary's).
    pub election_id: u128,
}

/// One controller session with one switch.
#[derive(Debug)]
pub struct Client {
    rpc: P4RuntimeClient<Channel>,
    addr: String,
    deadlines: Deadlines,
    device_id: u64,
    election_id: u128,
    stream_tx: mpsc::Sender<p4::StreamMessageRequest>,
    events: Events,
    arbitration: watch::Receiver<Option<ArbitrationState>>,
    schema: Option<Arc<Schema>>,
}

/// The server's stream messages other than arbitration, in order; `Err` ends the stream.
type Events = mpsc::Receiver<std::result::Result<p4::StreamMessageResponse, tonic::Status>>;

fn uint128(v: u128) -> p4::Uint128 {
    p4::Uint128 {
        high: (v >> 64) as u64,
        low: v as u64,
    }
}

impl Client {
    /// Connects to `addr` (`host:port`), opens the stream channel and arbitrates with
    /// `election_id`, with the default [`Deadlines`].
    pub async fn connect(addr: &str, device_id: u64, election_id: u128) -> Result<Client> {
        Self::connect_with(addr, device_id, election_id, Deadlines::default()).await
    }

    /// Connects as [`Client::connect`] does, with `deadlines` for this and every later call.
    pub async fn connect_with(
        addr: &str,
        device_id: u64,
        election_id: u128,
        deadlines: Deadlines,
    ) -> Result<Client> {
        let (rpc, stream_tx, events, arbitration) =
            within(addr, "StreamChannel", deadlines.connect, async {
                let channel = endpoint(addr, deadlines.connect)?
                    .connect()
                    .await
                    .map_err(|e| ClientError::Connect(addr.into(), e))?;
                let mut rpc = P4RuntimeClient::new(channel)
                    .max_decoding_message_size(crate::server::MAX_MESSAGE_BYTES)
                    .max_encoding_message_size(crate::server::MAX_MESSAGE_BYTES);
                let (stream_tx, stream_rx) = mpsc::channel(1024);
                let inbound = rpc
                    .stream_channel(ReceiverStream::new(stream_rx))
                    .await?
                    .into_inner();
                let (events, arbitration) = Self::pump_stream(inbound);
                Ok((rpc, stream_tx, events, arbitration))
            })
            .await?;
        let mut client = Client {
            rpc,
            addr: addr.to_string(),
            deadlines,
            device_id,
            election_id,
            stream_tx,
            events,
            arbitration,
            schema: None,
        };
        client.arbitrate(election_id).await?;
        Ok(client)
    }

    /// Splits the server's side of the stream: arbitration updates into a watch, the rest into
    /// an event queue.
    fn pump_stream(
        mut inbound: tonic::Streaming<p4::StreamMessageResponse>,
    ) -> (Events, watch::Receiver<Option<ArbitrationState>>) {
        let (events_tx, events) = mpsc::channel(4096);
        let (arb_tx, arbitration) = watch::channel(None);
        tokio::spawn(async move {
            while let Some(msg) = inbound.next().await {
                if let Ok(p4::StreamMessageResponse {
                    update: Some(p4::stream_message_response::Update::Arbitration(a)),
                }) = &msg
                {
                    let status = a
                        .status
                        .as_ref()
                        .map_or(Code::Ok, |s| Code::from_i32(s.code));
                    let election_id = a
                        .election_id
                        .as_ref()
                        .map_or(0, |e| (u128::from(e.high) << 64) | u128::from(e.low));
                    let _ = arb_tx.send(Some(ArbitrationState {
                        status,
                        election_id,
                    }));
                    continue;
                }
                let failed = msg.is_err();
                if events_tx.send(msg).await.is_err() || failed {
                    break;
                }
            }
        });
        (events, arbitration)
    }

    /// The address this client talks to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The deadlines of this client's calls.
    pub fn deadlines(&self) -> Deadlines {
        self.deadlines
    }

    /// Sends one stream message, waiting at most the call deadline for room (the server stops
    /// taking messages when it stops reading).
    async fn stream_send(&self, msg: p4::StreamMessageRequest) -> Result<()> {
        within(
            &self.addr,
            "StreamChannel send",
            self.deadlines.call,
            async {
                self.stream_tx
                    .send(msg)
                    .await
                    .map_err(|_| ClientError::Arbitration("stream closed".into()))
            },
        )
        .await
    }

    /// (Re)advertises `election_id` and waits for the server's answer.
    pub async fn arbitrate(&mut self, election_id: u128) -> Result<ArbitrationState> {
        self.election_id = election_id;
        self.arbitration.mark_unchanged();
        let msg = p4::StreamMessageRequest {
            update: Some(p4::stream_message_request::Update::Arbitration(
                p4::MasterArbitrationUpdate {
                    device_id: self.device_id,
                    election_id: Some(uint128(election_id)),
                    ..Default::default()
                },
            )),
        };
        self.stream_send(msg).await?;
        let wait = async {
            loop {
                if self.arbitration.changed().await.is_err() {
                    return None;
                }
                if let Some(s) = *self.arbitration.borrow_and_update() {
                    return Some(s);
                }
            }
        };
        let limit = self.deadlines.connect;
        match tokio::time::timeout(limit, wait).await {
            Ok(Some(s)) => Ok(s),
            Ok(None) => {
                // The stream ended: the server refused us. Its status is the first event.
                let why = match self.events.try_recv() {
                    Ok(Err(status)) => format!("{}: {}", status.code(), status.message()),
                    _ => "the server closed the stream".into(),
                };
                Err(ClientError::Arbitration(why))
            }
            Err(_) => Err(ClientError::Timeout {
                addr: self.addr.clone(),
                call: "MasterArbitrationUpdate",
                waited: limit,
            }),
        }
    }

    /// The arbitration state the server last reported.
    pub fn arbitration(&self) -> Option<ArbitrationState> {
        *self.arbitration.borrow()
    }

    /// Whether this client is the primary.
    pub fn is_primary(&self) -> bool {
        self.arbitration().is_some_and(|s| s.status == Code::Ok)
    }

    /// Waits up to `timeout` for an arbitration update (e.g. a failover).
    pub async fn arbitration_changed(&mut self, timeout: Duration) -> Option<ArbitrationState> {
        match tokio::time::timeout(timeout, self.arbitration.changed()).await {
            Ok(Ok(())) => *self.arbitration.borrow_and_update(),
            _ => None,
        }
    }

    /// The election id this client uses.
    pub fn election_id(&self) -> u128 {
        self.election_id
    }

    /// The server's P4Runtime version.
    pub async fn capabilities(&mut self) -> Result<String> {
        let req = p4::CapabilitiesRequest {
            device_id: self.device_id,
        };
        let rpc = &mut self.rpc;
        within(&self.addr, "Capabilities", self.deadlines.probe, async {
            Ok(rpc
                .capabilities(req)
                .await?
                .into_inner()
                .p4runtime_api_version)
        })
        .await
    }

    /// The switch's P4Info and cookie.
    pub async fn get_pipeline(&mut self) -> Result<(Option<p4i::P4Info>, Option<u64>)> {
        use p4::get_forwarding_pipeline_config_request::ResponseType;
        let req = p4::GetForwardingPipelineConfigRequest {
            device_id: self.device_id,
            response_type: ResponseType::P4infoAndCookie as i32,
        };
        let rpc = &mut self.rpc;
        let r = within(
            &self.addr,
            "GetForwardingPipelineConfig",
            self.deadlines.call,
            async { Ok(rpc.get_forwarding_pipeline_config(req).await?.into_inner()) },
        )
        .await?;
        let config = r.config.unwrap_or_default();
        Ok((config.p4info, config.cookie.map(|c| c.cookie)))
    }

    /// Sets the pipeline config.
    pub async fn set_pipeline(
        &mut self,
        action: p4::set_forwarding_pipeline_config_request::Action,
        p4info: p4i::P4Info,
        device_config: Vec<u8>,
        cookie: Option<u64>,
    ) -> Result<()> {
        let req = p4::SetForwardingPipelineConfigRequest {
            device_id: self.device_id,
            election_id: Some(uint128(self.election_id)),
            action: action as i32,
            config: Some(p4::ForwardingPipelineConfig {
                p4info: Some(p4info),
                p4_device_config: device_config,
                cookie: cookie.map(|cookie| p4::forwarding_pipeline_config::Cookie { cookie }),
            }),
            ..Default::default()
        };
        self.send_pipeline(req).await
    }

    /// COMMIT: runs the config saved by VERIFY_AND_SAVE (the request carries no config).
    pub async fn commit(&mut self) -> Result<()> {
        let req = p4::SetForwardingPipelineConfigRequest {
            device_id: self.device_id,
            election_id: Some(uint128(self.election_id)),
            action: p4::set_forwarding_pipeline_config_request::Action::Commit as i32,
            ..Default::default()
        };
        self.send_pipeline(req).await
    }

    async fn send_pipeline(&mut self, req: p4::SetForwardingPipelineConfigRequest) -> Result<()> {
        let rpc = &mut self.rpc;
        within(
            &self.addr,
            "SetForwardingPipelineConfig",
            self.deadlines.call,
            async {
                rpc.set_forwarding_pipeline_config(req).await?;
                Ok(())
            },
        )
        .await
    }

    /// The schema of the program the switch runs (known to this workspace by its P4Info's
    /// `pkg_info.name`), checked against the switch's P4Info.
    pub async fn schema(&mut self) -> Result<Arc<Schema>> {
        if let Some(s) = &self.schema {
            return Ok(s.clone());
        }
        let (p4info, _) = self.get_pipeline().await?;
        let p4info = p4info.ok_or_else(|| ClientError::Usage("the switch has no P4Info".into()))?;
        let name = p4info
            .pkg_info
            .as_ref()
            .map(|p| p.name.clone())
            .unwrap_or_default();
        let program = programs::by_name(&name).ok_or_else(|| {
            ClientError::Usage(format!(
                "the switch runs {name:?}, a program this tool does not know"
            ))
        })?;
        let schema = program.schema().clone();
        let ours = crate::server::fingerprint(&crate::p4info::p4info(&schema));
        if ours != crate::server::fingerprint(&p4info) {
            return Err(ClientError::Usage(format!(
                "the switch's P4Info for {name:?} differs from this tool's"
            )));
        }
        self.schema = Some(schema.clone());
        Ok(schema)
    }

    /// Writes `updates` as one batch.
    pub async fn write(
        &mut self,
        updates: Vec<p4::Update>,
        atomicity: p4::write_request::Atomicity,
    ) -> Result<()> {
        let req = p4::WriteRequest {
            device_id: self.device_id,
            election_id: Some(uint128(self.election_id)),
            updates,
            atomicity: atomicity as i32,
            ..Default::default()
        };
        let rpc = &mut self.rpc;
        let n = req.updates.len();
        within(&self.addr, "Write", self.deadlines.call, async {
            match rpc.write(req).await {
                Ok(_) => Ok(()),
                Err(status) => match write_errors(&status) {
                    Some(mut errors) => Err(ClientError::Write {
                        summary: status.message().to_string(),
                        errors: {
                            errors.resize(n.max(errors.len()), None);
                            errors
                        },
                    }),
                    None => Err(ClientError::Rpc(status)),
                },
            }
        })
        .await
    }

    /// Reads `entities` (wildcards as P4Runtime defines them).
    /// The whole answer, every ReadResponse of it, must arrive within the call deadline.
    pub async fn read(&mut self, entities: Vec<p4::Entity>) -> Result<Vec<p4::Entity>> {
        let req = p4::ReadRequest {
            device_id: self.device_id,
            entities,
            ..Default::default()
        };
        let rpc = &mut self.rpc;
        within(&self.addr, "Read", self.deadlines.call, async {
            let mut stream = rpc.read(req).await?.into_inner();
            let mut out = Vec::new();
            while let Some(r) = stream.next().await {
                out.extend(r?.entities);
            }
            Ok(out)
        })
        .await
    }

    /// Reads one kind of entity.
    pub async fn read_one(&mut self, entity: p4::entity::Entity) -> Result<Vec<p4::Entity>> {
        self.read(vec![p4::Entity {
            entity: Some(entity),
        }])
        .await
    }

    /// Runs BMv2-style command lines (`table_add ...`, see [`pipeline::commands`]) as one
    /// P4Runtime write batch.
    pub async fn run_commands(&mut self, lines: &[&str]) -> Result<usize> {
        let schema = self.schema().await?;
        let mut updates = Vec::new();
        for line in lines {
            match commands::parse_line(&schema, line)
                .map_err(|e| ClientError::Usage(format!("{line}: {e}")))?
            {
                Command::Nothing => {}
                Command::Write(us) => {
                    updates.extend(us.iter().map(|u| convert::update_msg(&schema, u)));
                }
                Command::Other(verb, _) => {
                    return Err(ClientError::Usage(format!(
                        "{verb}: not a P4Runtime write (queue settings go to the admin socket)"
                    )));
                }
            }
        }
        let n = updates.len();
        if n > 0 {
            self.write(updates, p4::write_request::Atomicity::ContinueOnError)
                .await?;
        }
        Ok(n)
    }

    /// Sends a packet-out with `(metadata id, value)` pairs.
    pub async fn packet_out(&self, payload: Vec<u8>, metadata: &[(u32, u128)]) -> Result<()> {
        let msg = p4::StreamMessageRequest {
            update: Some(p4::stream_message_request::Update::Packet(p4::PacketOut {
                payload,
                metadata: metadata
                    .iter()
                    .map(|&(metadata_id, v)| p4::PacketMetadata {
                        metadata_id,
                        value: crate::bytestring::canonical(v),
                    })
                    .collect(),
            })),
        };
        self.stream_send(msg).await
    }

    /// Enables the digest `name` of the switch's program: inserts its `DigestEntry` (lists of up
    /// to `max_list_size` entries, sent at the latest `max_timeout_ns` after the first, the next
    /// one `ack_timeout_ns` after an unacked list) and returns the digest's id.
    pub async fn enable_digest(
        &mut self,
        name: &str,
        max_list_size: i32,
        max_timeout_ns: i64,
        ack_timeout_ns: i64,
    ) -> Result<u32> {
        let schema = self.schema().await?;
        let id = schema
            .digests
            .iter()
            .find(|d| d.name == name)
            .map(|d| d.id)
            .ok_or_else(|| ClientError::Usage(format!("the program has no digest {name:?}")))?;
        let entry = p4::DigestEntry {
            digest_id: id,
            config: Some(p4::digest_entry::Config {
                max_timeout_ns,
                max_list_size,
                ack_timeout_ns,
            }),
        };
        let update = p4::Update {
            r#type: p4::update::Type::Insert as i32,
            entity: Some(p4::Entity {
                entity: Some(p4::entity::Entity::DigestEntry(entry)),
            }),
        };
        self.write(vec![update], p4::write_request::Atomicity::ContinueOnError)
            .await?;
        Ok(id)
    }

    /// Acknowledges a digest list.
    pub async fn ack_digest(&self, digest_id: u32, list_id: u64) -> Result<()> {
        let msg = p4::StreamMessageRequest {
            update: Some(p4::stream_message_request::Update::DigestAck(
                p4::DigestListAck { digest_id, list_id },
            )),
        };
        self.stream_send(msg).await
    }

    /// The next stream message other than arbitration (packet-in, digest, idle timeout, stream
    /// error), waiting up to `timeout`. `Err` when the server ended the stream with a status.
    pub async fn next_event(
        &mut self,
        timeout: Duration,
    ) -> Option<std::result::Result<p4::StreamMessageResponse, tonic::Status>> {
        tokio::time::timeout(timeout, self.events.recv())
            .await
            .ok()
            .flatten()
    }

    /// Ends the session: half-closes the stream (the server then ends its side).
    pub fn close(self) {
        drop(self);
    }
}

/// The field values of one digest entry (a struct of bitstrings, as the server sends them);
/// `None` for any other shape.
pub fn digest_values(d: &p4::P4Data) -> Option<Vec<u128>> {
    use p4::p4_data::Data;
    match &d.data {
        Some(Data::Struct(s)) => s
            .members
            .iter()
            .map(|m| match &m.data {
                Some(Data::Bitstring(b)) => crate::bytestring::to_u128(b, 128).ok(),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}
