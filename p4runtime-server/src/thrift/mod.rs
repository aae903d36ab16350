//! BMv2's Thrift runtime API, served so that `simple_switch_CLI` and other clients of BMv2's
//! runtime (its `standard`, `simple_pre_lag` and `simple_switch` services) drive the switch
//! unchanged.
//!
//! The transport is BMv2's: one TCP connection per client, Thrift's binary protocol over a
//! buffered (unframed) transport, method names multiplexed as `service:method`. Every write goes
//! through the P4Runtime service's local door ([`Service::write_local`]), so what a Thrift client
//! writes a P4Runtime client reads, and the other way round.
//!
//! BMv2's handles: an entry's handle is its entry id in the engine, which it keeps while it
//! exists; action profile members and groups are their P4Runtime ids, the smallest free one
//! when BMv2's API creates one; a multicast group's handle is its id (as BMv2's); nodes live
//! here and each group is rewritten as a P4Runtime group when its nodes change. What is refused,
//! and how, is in docs/bmv2.md ("The runtime CLI").
//!
//! [`RuntimeApi`] is the same API without a socket: `simple_switch_CLI`'s command language
//! read in process ([`RuntimeApi::run_commands`], what `pisa-switch --entries` takes with a
//! BMv2 program), each line turned into the call the CLI would send and answered by the same
//! handlers, so both doors share one implementation and one set of nodes and handles.

mod cli;
mod externs;
mod pre;
mod program;
mod standard;
pub mod value;

use std::io::{self, BufReader, BufWriter};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::Mutex;
use pipeline::control::{Atomicity, Control, Update, WriteError};

use crate::server::Service;
use program::View;
use value::{Message, MessageType, Reader, Struct, Value, Writer};

/// Runs a text command of the switch's admin language (queue settings), for the
/// `simple_switch` service's queue methods.
pub type Admin = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// What the runtime server knows of its switch.
#[derive(Clone)]
pub struct Options {
    /// The device id `bm_mgmt_get_info` reports.
    pub device_id: u64,
    /// The switch's ports: (port number, interface name).
    pub ports: Vec<(u32, String)>,
    /// The admin command runner (queue depth and rate), if the switch has one.
    pub admin: Option<Admin>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("device_id", &self.device_id)
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

/// Error codes of BMv2's runtime exceptions (its `standard.thrift`, `simple_pre_lag.thrift`
/// and `simple_switch.thrift`), each used only with its own exception.
pub(crate) mod code {
    // TableOperationErrorCode.
    pub(crate) const TABLE_FULL: i32 = 1;
    pub(crate) const INVALID_HANDLE: i32 = 2;
    pub(crate) const COUNTERS_DISABLED: i32 = 4;
    pub(crate) const METERS_DISABLED: i32 = 5;
    pub(crate) const AGEING_DISABLED: i32 = 6;
    pub(crate) const INVALID_TABLE_NAME: i32 = 7;
    pub(crate) const INVALID_ACTION_NAME: i32 = 8;
    pub(crate) const WRONG_TABLE_TYPE: i32 = 9;
    pub(crate) const INVALID_MBR_HANDLE: i32 = 10;
    pub(crate) const MBR_STILL_USED: i32 = 11;
    pub(crate) const MBR_ALREADY_IN_GRP: i32 = 12;
    pub(crate) const MBR_NOT_IN_GRP: i32 = 13;
    pub(crate) const INVALID_GRP_HANDLE: i32 = 14;
    pub(crate) const GRP_STILL_USED: i32 = 15;
    pub(crate) const DUPLICATE_ENTRY: i32 = 17;
    pub(crate) const BAD_MATCH_KEY: i32 = 18;
    pub(crate) const INVALID_METER_OPERATION: i32 = 19;
    pub(crate) const DEFAULT_ACTION_IS_CONST: i32 = 20;
    pub(crate) const INVALID_ACTION_PROFILE_NAME: i32 = 23;
    pub(crate) const NO_ACTION_PROFILE_SELECTION: i32 = 24;
    pub(crate) const IMMUTABLE_TABLE_ENTRIES: i32 = 25;
    pub(crate) const BAD_ACTION_DATA: i32 = 26;
    pub(crate) const TABLE_ERROR: i32 = 100;
    // Counter-, Register-, ParseVSet- and LearnOperationErrorCode.
    pub(crate) const INVALID_NAME: i32 = 1;
    pub(crate) const INVALID_INDEX: i32 = 2;
    pub(crate) const EXTERN_ERROR: i32 = 3;
    // MeterOperationErrorCode (INVALID_NAME and INVALID_INDEX as above).
    pub(crate) const BAD_RATES_LIST: i32 = 3;
    pub(crate) const INVALID_INFO_RATE_VALUE: i32 = 4;
    pub(crate) const INVALID_BURST_SIZE_VALUE: i32 = 5;
    pub(crate) const METER_ERROR: i32 = 6;
    // McOperationErrorCode.
    pub(crate) const MC_TABLE_FULL: i32 = 1;
    pub(crate) const MC_INVALID_MGID: i32 = 2;
    pub(crate) const MC_INVALID_MGRP_HANDLE: i32 = 3;
    pub(crate) const MC_INVALID_L1_HANDLE: i32 = 4;
    pub(crate) const MC_ERROR: i32 = 5;
    // MirroringOperationErrorCode.
    pub(crate) const SESSION_NOT_FOUND: i32 = 1;
    // DevMgrErrorCode, SwapOperationErrorCode (CONFIG_SWAP_DISABLED), CrcErrorCode.
    pub(crate) const DEV_MGR_ERROR: i32 = 1;
    pub(crate) const CONFIG_SWAP_DISABLED: i32 = 1;
    pub(crate) const CRC_WRONG_TYPE: i32 = 2;
}

/// How a call failed.
#[derive(Debug)]
pub(crate) enum Fail {
    /// The method's declared exception (its result's field 1) with this code, and why.
    Code(i32, String),
    /// A TApplicationException: a malformed call, or a method not served.
    App(String),
    /// A method this server does not have.
    Unknown(String),
}

impl From<value::FieldError> for Fail {
    fn from(e: value::FieldError) -> Self {
        Fail::App(format!("bad arguments: {e}"))
    }
}

type Reply = Result<Option<Value>, Fail>;

/// The runtime API's state, shared by the server's connections and the in-process commands.
struct Runtime {
    service: Service,
    /// The port its server listens on (0 before it is served).
    port: AtomicU16,
    opts: Options,
    started: Instant,
    view: Mutex<Option<Arc<View>>>,
    pre: Mutex<pre::State>,
}

impl Runtime {
    /// The running program's view (rebuilt when a program was loaded since).
    fn view(&self) -> Arc<View> {
        let (control, config) = self.service.program();
        let mut v = self.view.lock();
        if let Some(v) = &*v
            && Arc::ptr_eq(&v.control, &control)
        {
            return v.clone();
        }
        let fresh = Arc::new(View::new(control, &config));
        *v = Some(fresh.clone());
        fresh
    }

    /// Writes what `build` makes, all or none, on program `expected` (the one the call's names
    /// were resolved in): `build` runs under the service's write lock, so that the state it
    /// reads is the state the write changes, and a program loaded meanwhile refuses the write.
    fn write_with<E>(
        &self,
        expected: &Control,
        build: impl FnOnce() -> Result<Vec<Update>, E>,
    ) -> Result<Result<(), WriteError>, E> {
        let results = self
            .service
            .write_local(expected, Atomicity::RollbackOnError, build)?;
        Ok(results
            .into_iter()
            .find_map(Result::err)
            .map_or(Ok(()), Err))
    }

    fn call(&self, method: &str, a: &Struct) -> Reply {
        if let Some(r) = standard::call(self, method, a) {
            return r;
        }
        if let Some(r) = pre::call(self, method, a) {
            return r;
        }
        Err(Fail::Unknown(method.to_string()))
    }
}

/// A running Thrift runtime server.
#[derive(Debug)]
pub struct ThriftServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ThriftServer {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections (open ones end with their clients).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// BMv2's runtime API for one switch: its Thrift server ([`RuntimeApi::serve`]) and
/// `simple_switch_CLI`'s commands run in process ([`RuntimeApi::run_commands`]), on one state
/// (multicast nodes, the mirroring sessions that follow groups), so that a node a command file
/// created is the node a CLI connected later associates.
#[derive(Clone)]
pub struct RuntimeApi {
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for RuntimeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeApi")
            .field("opts", &self.rt.opts)
            .finish_non_exhaustive()
    }
}

impl RuntimeApi {
    /// The runtime API of `service`'s switch.
    pub fn new(service: Service, opts: Options) -> RuntimeApi {
        RuntimeApi {
            rt: Arc::new(Runtime {
                service,
                port: AtomicU16::new(0),
                opts,
                started: Instant::now(),
                view: Mutex::new(None),
                pre: Mutex::new(pre::State::default()),
            }),
        }
    }

    /// Runs one line of `simple_switch_CLI`'s command language (docs/bmv2.md, "`--entries`
    /// with a BMv2 program"): what the CLI would print for it, or why it failed.
    pub fn run_command(&self, line: &str) -> Result<Said, String> {
        cli::run_line(&self.rt, line)
    }

    /// Runs `text`, lines of `simple_switch_CLI`'s command language, in order, stopping at the
    /// first that fails: the number of commands run, or `origin:line: why`. What the CLI would
    /// print (handles) is logged at debug level, commands that only read at info.
    pub fn run_commands(&self, text: &str, origin: &str) -> Result<usize, String> {
        let mut n = 0;
        for (i, line) in text.lines().enumerate() {
            match self.run_command(line) {
                Ok(Said::Nothing) => {}
                Ok(Said::Done(out)) => {
                    n += 1;
                    if let Some(out) = out {
                        tracing::debug!("{origin}:{}: {out}", i + 1);
                    }
                }
                Ok(Said::Skipped(why)) => {
                    n += 1;
                    tracing::info!("{origin}:{}: {why}", i + 1);
                }
                Err(why) => return Err(format!("{origin}:{}: {why}", i + 1)),
            }
        }
        Ok(n)
    }

    /// [`RuntimeApi::run_commands`] on a file's text.
    pub fn run_file(&self, path: &std::path::Path) -> Result<usize, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        self.run_commands(&text, &path.display().to_string())
    }

    /// Serves the API on `addr`, on threads of its own.
    pub fn serve(&self, addr: SocketAddr) -> io::Result<ThriftServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        self.rt.port.store(addr.port(), Ordering::Release);
        let rt = self.rt.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("thrift".into())
            .spawn(move || accept(&rt, &listener, &stopping))?;
        Ok(ThriftServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

pub use cli::Said;

/// Serves BMv2's runtime API for `service` on `addr`, on threads of its own.
pub fn serve(service: Service, addr: SocketAddr, opts: Options) -> io::Result<ThriftServer> {
    RuntimeApi::new(service, opts).serve(addr)
}

fn accept(rt: &Arc<Runtime>, listener: &TcpListener, stopping: &AtomicBool) {
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for conn in listener.incoming() {
        if stopping.load(Ordering::Acquire) {
            break;
        }
        let conn = match conn {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors, say: wait rather than spin.
                tracing::warn!("thrift accept: {e}");
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
        };
        if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!("thrift: {MAX_CONNECTIONS} connections open, one refused");
            continue;
        }
        let (rt, done) = (rt.clone(), open.clone());
        let spawned = std::thread::Builder::new()
            .name("thrift-conn".into())
            .spawn(move || {
                if let Err(e) = connection(&rt, conn) {
                    tracing::debug!("thrift connection ended: {e}");
                }
                done.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!("thrift: no thread for a connection");
        }
    }
}

/// The most clients at once (each has a thread).
const MAX_CONNECTIONS: usize = 64;

/// TApplicationException types.
const UNKNOWN_METHOD: i32 = 1;
const PROTOCOL_ERROR: i32 = 7;

fn connection(rt: &Runtime, conn: TcpStream) -> io::Result<()> {
    conn.set_nodelay(true)?;
    let mut r = Reader::new(BufReader::new(conn.try_clone()?));
    let mut out = BufWriter::new(conn);
    let mut w = Writer::default();
    loop {
        let m = match r.message() {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        // A request whose arguments cannot be read leaves the stream unusable: the
        // connection ends there.
        let args = r.strukt()?;
        if !matches!(m.kind, MessageType::Call | MessageType::Oneway) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a client sent a reply",
            ));
        }
        let method = m.name.rsplit(':').next().unwrap_or(&m.name);
        let result = rt.call(method, &args);
        if m.kind == MessageType::Oneway {
            continue;
        }
        let (kind, body) = match result {
            Ok(v) => (
                MessageType::Reply,
                v.map_or_else(Struct::new, |v| Struct::new().with(0, v)),
            ),
            Err(Fail::Code(code, why)) => {
                tracing::info!("thrift {method}: {why}");
                let exc = Struct::new().with(1, Value::I32(code));
                (
                    MessageType::Reply,
                    Struct::new().with(1, Value::Struct(exc)),
                )
            }
            Err(Fail::App(why)) => (MessageType::Exception, app_error(&why, PROTOCOL_ERROR)),
            Err(Fail::Unknown(name)) => (
                MessageType::Exception,
                app_error(&format!("Invalid method name: '{name}'"), UNKNOWN_METHOD),
            ),
        };
        w.message(&Message {
            name: m.name.clone(),
            kind,
            seq: m.seq,
        });
        w.strukt(&body);
        w.flush_to(&mut out)?;
    }
}

fn app_error(message: &str, kind: i32) -> Struct {
    Struct::new()
        .with(1, Value::str(message))
        .with(2, Value::I32(kind))
}
