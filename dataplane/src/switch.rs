//! A running switch: ports, worker threads, the traffic manager, the CPU and recirculation paths.
//!
//! # Threads (design.md section 7)
//!
//! `workers` threads (one per core by default). Each port belongs to one worker, which receives
//! on it, runs ingress, and queues the copies in the traffic manager for their egress ports
//! (whichever worker owns those); and which transmits on it: dequeues by priority and shaping,
//! runs egress, holds frames for the port's propagation delay, and sends. The CPU port and the
//! recirculation path belong to worker 0. A worker with nothing to do sleeps in poll() on its
//! ports' descriptors and its own eventfd, until the next traffic-manager deadline; a worker that
//! queues a packet for an idle port of another worker writes that worker's eventfd.
//!
//! Per packet there is no allocation, lock or syscall beyond the batched port I/O: buffers come
//! from a per-worker cache, the table snapshot is loaded once per batch, and the traffic manager's
//! queues are lock-free.

use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam::channel::{Receiver, Sender};
use pipeline::driver::{Buffers, Driver, Env, PortTx, Received, frame_bytes};
use pipeline::metadata::{PortId, StdMeta};
use pipeline::runtime::{Pipeline, Worker};
use pipeline::tm::{PortConfig, SharedBuffer, TrafficManager, TxState};

use crate::io::mem::MemPort;
use crate::io::packet::PacketPort;
use crate::io::xdp::{XdpPort, XdpSpec};
use crate::io::{BATCH, Frame};
use crate::pcap::PcapWriter;
use crate::pktgen::{self, Pktgen, Schedule};
use crate::pool::{Buf, HEADROOM, LocalCache, Pool};

/// How a port moves frames.
#[derive(Debug)]
pub enum PortIo {
    /// An AF_XDP socket to open when the switch starts (on the switch's UMEM).
    XdpSpec(XdpSpec),
    /// An open AF_XDP socket.
    Xdp(XdpPort),
    /// An AF_PACKET socket.
    Packet(PacketPort),
    /// An in-memory link (tests, generators).
    Mem(MemPort),
}

impl PortIo {
    fn fd(&self) -> RawFd {
        match self {
            PortIo::Xdp(x) => x.fd(),
            PortIo::Packet(p) => p.fd(),
            PortIo::Mem(m) => m.fd(),
            PortIo::XdpSpec(_) => -1,
        }
    }
}

/// A switch port: its number and its I/O.
#[derive(Debug)]
pub struct PortSpec {
    /// Port number seen by the program.
    pub id: PortId,
    /// Its I/O.
    pub io: PortIo,
}

/// Settings of a switch.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// Worker threads.
    pub workers: usize,
    /// Spin instead of sleeping when idle (benchmarks).
    pub busy_poll: bool,
    /// After traffic, keep polling this long before sleeping (ns; 0 = sleep at once). With a
    /// window longer than the gaps between packets the worker never sleeps while traffic flows
    /// (busy-poll latency, a core's worth of CPU) and still sleeps when the switch is idle.
    pub poll_window_ns: u64,
    /// Pin worker i to CPU `pin[i % pin.len()]` (empty: no pinning).
    pub pin: Vec<usize>,
    /// Write `port<N>-in.pcap` / `port<N>-out.pcap` here.
    pub pcap_dir: Option<PathBuf>,
    /// Print a per-packet trace to stderr.
    pub trace: bool,
    /// Buffers in the pool.
    pub buffers: u32,
    /// Bytes per buffer.
    pub buffer_size: usize,
    /// Traffic manager settings of every port.
    pub port_config: PortConfig,
    /// Shared-buffer mode.
    pub shared_buffer: Option<SharedBuffer>,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            busy_poll: false,
            poll_window_ns: 0,
            pin: Vec::new(),
            pcap_dir: None,
            trace: false,
            buffers: 8192,
            buffer_size: 4096,
            port_config: PortConfig::default(),
            shared_buffer: None,
        }
    }
}

/// Counters of one port, kept by its worker.
#[derive(Debug, Default)]
pub struct PortCounters {
    /// Frames received.
    pub rx: AtomicU64,
    /// Frames transmitted.
    pub tx: AtomicU64,
    /// Frames refused by the port (too large, send errors).
    pub errors: AtomicU64,
    /// PFC frames received.
    pub pfc_rx: AtomicU64,
    /// PFC frames sent.
    pub pfc_tx: AtomicU64,
}

/// A capture file, written by the worker that owns the port (the lock is uncontended).
type Capture = Mutex<PcapWriter<io::BufWriter<std::fs::File>>>;

fn capture(c: &Capture, now: u64, bytes: &[u8]) {
    if let Ok(mut w) = c.lock() {
        let _ = w.write(now, bytes);
    }
}

/// What is shared by the workers.
#[derive(Debug)]
struct Shared {
    pipeline: Arc<Pipeline>,
    pktgen: Pktgen,
    tm: TrafficManager<Frame>,
    pool: Pool,
    stop: AtomicBool,
    epoch: Instant,
    /// Per port id: the worker that owns it (usize::MAX = none).
    owner: Vec<usize>,
    /// Per worker: its eventfd.
    wake: Vec<OwnedFd>,
    counters: Vec<PortCounters>,
    packet_in: Sender<Vec<u8>>,
    packet_out: Receiver<Vec<u8>>,
    /// Packet-outs refused because `packet_out` was full.
    packet_out_dropped: AtomicU64,
    /// Per port: capture of what it received and what it sent.
    pcap: Vec<Option<(Capture, Capture)>>,
    trace: Option<Mutex<io::Stderr>>,
    busy_poll: bool,
    poll_window_ns: u64,
    traced: AtomicU64,
    /// The switch-local agent's packet-ins (a copy of each while an agent is attached), bounded
    /// and counted separately from the controller's, so neither starves the other.
    agent_in: (Sender<Vec<u8>>, Receiver<Vec<u8>>),
    agent_attached: AtomicBool,
    /// A doorbell is waiting in `agent_in` (digests for the agent).
    agent_doorbell: AtomicBool,
    /// Packet-ins the agent's full queue refused.
    agent_in_dropped: AtomicU64,
    /// Kernel thread ids of the workers.
    tids: Mutex<Vec<libc::pid_t>>,
}

/// Packet-ins waiting for the agent at most.
pub const AGENT_QUEUE: usize = 1024;

impl Shared {
    /// Tells the agent digests wait for it (an empty frame on its queue; one at a time).
    fn ring_agent_doorbell(&self) {
        let externs = self.pipeline.control.externs();
        if !externs.agent_digests.is_empty() && !self.agent_doorbell.swap(true, Ordering::AcqRel) {
            let _ = self.agent_in.0.try_send(Vec::new());
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn wake(&self, worker: usize) {
        if let Some(fd) = self.wake.get(worker) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live array to an eventfd.
            let _ = unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
        }
    }
}

/// The controller side of the CPU port: packet-ins out, packet-outs in.
#[derive(Debug, Clone)]
pub struct CpuPort {
    /// Frames the switch sent to the CPU port (with the program's packet_in header).
    pub packet_in: Receiver<Vec<u8>>,
    /// Frames to inject from the CPU port (with the program's packet_out header).
    packet_out: Sender<Vec<u8>>,
    shared: Arc<Shared>,
}

impl CpuPort {
    /// Injects a frame as if the controller sent it (it enters ingress on the CPU port). Never
    /// blocks: it is called from the P4Runtime service's async runtime, where a blocking send
    /// would stall every other call while worker 0 is slow. Returns false, and counts the frame
    /// in [`CpuPort::dropped`], when the queue to the data plane is full (or the switch stopped).
    pub fn send(&self, frame: Vec<u8>) -> bool {
        match self.packet_out.try_send(frame) {
            Ok(()) => {
                self.shared.wake(0);
                true
            }
            Err(_) => {
                self.shared
                    .packet_out_dropped
                    .fetch_add(1, Ordering::Relaxed);
                // Worker 0 may be asleep with a full queue: wake it so that it drains.
                self.shared.wake(0);
                false
            }
        }
    }

    /// Packet-outs dropped because the queue to the data plane was full.
    pub fn dropped(&self) -> u64 {
        self.shared.packet_out_dropped.load(Ordering::Relaxed)
    }
}

/// A running switch.
#[derive(Debug)]
pub struct Switch {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    cpu: CpuPort,
    ports: Vec<PortId>,
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked before use.
    let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

impl Switch {
    /// Starts `pipeline` on `ports` with `config`.
    pub fn start(
        pipeline: Arc<Pipeline>,
        ports: Vec<PortSpec>,
        config: SwitchConfig,
    ) -> io::Result<Switch> {
        let workers = config.workers.max(1);
        let cpu_port = pipeline.config.cpu_port;
        let max_port = ports
            .iter()
            .map(|p| p.id)
            .chain([
                cpu_port,
                pipeline.config.recirc_port,
                pipeline.config.pktgen_port,
            ])
            .max()
            .unwrap_or(0);
        let nports = usize::from(max_port) + 1;
        let mut owner = vec![usize::MAX; nports];
        let mut per_worker: Vec<Vec<PortSpec>> = (0..workers).map(|_| Vec::new()).collect();
        let mut ids = Vec::new();
        let reserved = [
            (cpu_port, "the CPU port"),
            (pipeline.config.recirc_port, "the recirculation port"),
            (pipeline.config.pktgen_port, "the packet generator's port"),
        ];
        for (i, p) in ports.into_iter().enumerate() {
            if let Some((_, what)) = reserved.iter().find(|r| r.0 == p.id) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("port {} is {what}", p.id),
                ));
            }
            if owner[usize::from(p.id)] != usize::MAX {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("port {} given twice", p.id),
                ));
            }
            owner[usize::from(p.id)] = i % workers;
            ids.push(p.id);
            per_worker[i % workers].push(p);
        }
        owner[usize::from(cpu_port)] = 0;
        let mut pcap = Vec::new();
        pcap.resize_with(nports, || None);
        if let Some(dir) = &config.pcap_dir {
            std::fs::create_dir_all(dir)?;
            for &id in &ids {
                let open = |dir: &str| -> io::Result<_> {
                    let f = std::fs::File::create(
                        config
                            .pcap_dir
                            .as_ref()
                            .map_or_else(PathBuf::new, |d| d.join(format!("port{id}-{dir}.pcap"))),
                    )?;
                    Ok(Mutex::new(PcapWriter::new(io::BufWriter::new(f))?))
                };
                pcap[usize::from(id)] = Some((open("in")?, open("out")?));
            }
        }
        // One socket per interface: a second would break the first's XDP program and rings.
        let mut names = std::collections::HashSet::new();
        for p in per_worker.iter().flatten() {
            if let PortIo::XdpSpec(spec) = &p.io
                && !names.insert(spec.ifname.clone())
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("interface {} given twice", spec.ifname),
                ));
            }
        }
        // AF_XDP ports share one UMEM: then the whole pool is that UMEM.
        let xdp = per_worker
            .iter()
            .flatten()
            .any(|p| matches!(p.io, PortIo::XdpSpec(_)));
        let pool = if xdp {
            // Each AF_XDP port keeps up to 1024 frames in its fill ring and 2048 in its TX ring.
            let xdp_ports = per_worker
                .iter()
                .flatten()
                .filter(|p| matches!(p.io, PortIo::XdpSpec(_)))
                .count();
            let need = u32::try_from(xdp_ports * 3072 + 4096).unwrap_or(u32::MAX);
            Pool::umem(config.buffers.max(need))?
        } else {
            Pool::new(config.buffers, config.buffer_size)
        };
        let mut cache = LocalCache::default();
        for p in per_worker.iter_mut().flatten() {
            if let PortIo::XdpSpec(spec) = &p.io {
                let port = XdpPort::open(spec, &pool, &mut cache)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", spec.ifname)))?;
                p.io = PortIo::Xdp(port);
            }
        }
        cache.flush(&pool);
        let (in_tx, in_rx) = crossbeam::channel::bounded(4096);
        let (out_tx, out_rx) = crossbeam::channel::bounded(4096);
        let wake: Vec<OwnedFd> = (0..workers).map(|_| eventfd()).collect::<io::Result<_>>()?;
        // A changed generator setting wakes worker 0, which runs the generator.
        let wake0 = wake[0].try_clone()?;
        let pktgen = Pktgen::new(
            pool.buf_size() - HEADROOM,
            Box::new(move || {
                let one = 1u64.to_ne_bytes();
                // SAFETY: writes 8 bytes from a live array to an eventfd this closure owns.
                let _ = unsafe { libc::write(wake0.as_raw_fd(), one.as_ptr().cast(), 8) };
            }),
        );
        let shared = Arc::new(Shared {
            pktgen,
            tm: TrafficManager::new(nports, config.port_config, config.shared_buffer),
            pool,
            stop: AtomicBool::new(false),
            epoch: Instant::now(),
            owner,
            wake,
            counters: (0..nports).map(|_| PortCounters::default()).collect(),
            packet_in: in_tx,
            packet_out: out_rx,
            packet_out_dropped: AtomicU64::new(0),
            pcap,
            trace: config.trace.then(|| Mutex::new(io::stderr())),
            busy_poll: config.busy_poll,
            poll_window_ns: config.poll_window_ns,
            traced: AtomicU64::new(0),
            agent_in: crossbeam::channel::bounded(AGENT_QUEUE),
            agent_attached: AtomicBool::new(false),
            agent_doorbell: AtomicBool::new(false),
            agent_in_dropped: AtomicU64::new(0),
            tids: Mutex::new(Vec::new()),
            pipeline,
        });
        let mut threads = Vec::new();
        for (w, ports) in per_worker.into_iter().enumerate() {
            let shared = shared.clone();
            let cpu = (!config.pin.is_empty()).then(|| config.pin[w % config.pin.len()]);
            let t = std::thread::Builder::new()
                .name(format!("pisa-worker-{w}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        pin_to_cpu(cpu);
                    }
                    // SAFETY: prctl with integer arguments; sets this thread's timer slack to
                    // 1 ns so that shaping deadlines are met to the microsecond.
                    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
                    // SAFETY: gettid takes no arguments and cannot fail.
                    let tid = unsafe { libc::gettid() };
                    if let Ok(mut t) = shared.tids.lock() {
                        t.push(tid);
                    }
                    WorkerLoop::new(shared, w, ports).run();
                })?;
            threads.push(t);
        }
        let cpu = CpuPort {
            packet_in: in_rx,
            packet_out: out_tx,
            shared: shared.clone(),
        };
        Ok(Switch {
            shared,
            threads,
            cpu,
            ports: ids,
        })
    }

    /// The packet generator.
    pub fn pktgen(&self) -> &Pktgen {
        &self.shared.pktgen
    }

    /// The data plane's clock: ns since the switch started, the time base of hit times, digests
    /// and traces.
    pub fn clock(&self) -> impl Fn() -> u64 + Send + Sync + 'static {
        let epoch = self.shared.epoch;
        move || u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Attaches a switch-local agent: from now on it gets a copy of every packet-in and digest.
    /// Returns its queue: packet-ins, and empty frames that mean "digests are waiting" (call
    /// the closure of [`Switch::agent_doorbell`] before draining them).
    pub fn attach_agent(&self) -> Receiver<Vec<u8>> {
        self.shared
            .pipeline
            .control
            .externs()
            .agent_attached
            .store(true, Ordering::Release);
        self.shared.agent_attached.store(true, Ordering::Release);
        self.shared.agent_in.1.clone()
    }

    /// What the agent calls when it took the doorbell and is about to drain the digests.
    pub fn agent_doorbell(&self) -> impl Fn() + Send + 'static {
        let shared = self.shared.clone();
        move || shared.agent_doorbell.store(false, Ordering::Release)
    }

    /// Packet-ins the agent's full queue refused.
    pub fn agent_packet_ins_dropped(&self) -> u64 {
        self.shared.agent_in_dropped.load(Ordering::Relaxed)
    }

    /// The CPU port's controller side.
    pub fn cpu_port(&self) -> &CpuPort {
        &self.cpu
    }

    /// The pipeline (its control plane included).
    pub fn pipeline(&self) -> &Arc<Pipeline> {
        &self.shared.pipeline
    }

    /// The traffic manager (run-time queue settings and depths).
    pub fn tm(&self) -> &TrafficManager<Frame> {
        &self.shared.tm
    }

    /// Counters of port `id`.
    pub fn counters(&self, id: PortId) -> Option<&PortCounters> {
        self.shared.counters.get(usize::from(id))
    }

    /// CPU time the worker threads have used so far (from /proc; Linux only).
    pub fn worker_cpu_time(&self) -> std::time::Duration {
        // SAFETY: sysconf with a constant argument.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let tids = self
            .shared
            .tids
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default();
        let mut ticks = 0u64;
        for tid in tids {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
                continue;
            };
            // After the parenthesised name: utime and stime are the 12th and 13th fields.
            let Some(rest) = stat.rsplit(") ").next() else {
                continue;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            ticks += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            ticks += f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
        std::time::Duration::from_secs_f64(ticks as f64 / hz)
    }

    /// The data ports.
    pub fn ports(&self) -> &[PortId] {
        &self.ports
    }

    /// Stops the workers and flushes capture files.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for w in 0..self.shared.wake.len() {
            self.shared.wake(w);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for (i, o) in self.shared.pcap.iter().enumerate() {
            if let Some((a, b)) = o {
                for w in [a, b] {
                    if let Ok(mut w) = w.lock()
                        && let Err(e) = w.flush()
                    {
                        eprintln!("pcap of port {i}: {e}");
                    }
                }
            }
        }
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.halt();
    }
}

fn pin_to_cpu(cpu: usize) {
    // SAFETY: `set` is a plain bit set initialised by CPU_ZERO; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut set);
        let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// A port as a worker holds it: its I/O and its transmit side on the packet path.
#[derive(Debug)]
struct OwnedPort {
    io: PortIo,
    tx: PortTx<Buf>,
}

/// The data plane's side of the packet path for one worker: the shared pool through this
/// worker's cache, port ownership, wake-ups, capture, counters and trace output.
struct DpEnv<'a> {
    sh: &'a Shared,
    cache: &'a mut LocalCache,
    me: usize,
}

impl Buffers for DpEnv<'_> {
    type Buf = Buf;
    #[inline]
    fn bytes<'a>(&'a self, b: &'a Buf) -> &'a [u8] {
        self.sh.pool.bytes(b)
    }
    #[inline]
    fn bytes_mut<'a>(&'a self, b: &'a mut Buf) -> &'a mut [u8] {
        self.sh.pool.bytes_mut(b)
    }
    #[inline]
    fn alloc(&mut self) -> Option<Buf> {
        self.cache.alloc(&self.sh.pool)
    }
    #[inline]
    fn free(&mut self, b: Buf) {
        self.cache.free(&self.sh.pool, b);
    }
    #[inline]
    fn headroom(&self) -> usize {
        HEADROOM
    }
}

impl Env for DpEnv<'_> {
    #[inline]
    fn has_port(&self, port: PortId) -> bool {
        self.sh
            .owner
            .get(usize::from(port))
            .is_some_and(|&o| o != usize::MAX)
    }

    #[inline]
    fn wake(&mut self, port: PortId) {
        let owner = self
            .sh
            .owner
            .get(usize::from(port))
            .copied()
            .unwrap_or(usize::MAX);
        if owner != self.me && owner != usize::MAX {
            self.sh.wake(owner);
        }
    }

    #[inline]
    fn departing(&mut self, port: PortId, frame: &Frame, now: u64) {
        if let Some(Some((_, c))) = self.sh.pcap.get(usize::from(port)) {
            capture(c, now, frame_bytes(self, frame));
        }
    }

    fn pfc_sent(&mut self, port: PortId) {
        if let Some(c) = self.sh.counters.get(usize::from(port)) {
            c.pfc_tx.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn trace(&mut self, port: PortId, lines: Vec<String>) {
        let Some(t) = &self.sh.trace else { return };
        let n = self.sh.traced.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut out) = t.lock() {
            for l in lines {
                let _ = writeln!(out, "trace pkt={n} worker={} port={port} {l}", self.me);
            }
        }
    }
}

struct WorkerLoop {
    sh: Arc<Shared>,
    id: usize,
    ports: Vec<OwnedPort>,
    driver: Driver<Buf>,
    cache: LocalCache,
    rx: Vec<Frame>,
    /// Worker 0: the CPU port's transmit state.
    cpu_tx: Option<TxState<Frame>>,
    /// Worker 0: the packet generator's schedule.
    schedule: Schedule,
}

impl WorkerLoop {
    fn new(sh: Arc<Shared>, id: usize, ports: Vec<PortSpec>) -> Self {
        let ports = ports
            .into_iter()
            .map(|p| OwnedPort {
                tx: PortTx::new(&sh.tm, p.id),
                io: p.io,
            })
            .collect();
        let mut worker = Worker::new(sh.pipeline.clone(), id, 0x9e37_79b9_7f4a_7c15 ^ id as u64);
        worker.set_tracing(sh.trace.is_some());
        WorkerLoop {
            sh,
            id,
            ports,
            driver: Driver::new(worker),
            cache: LocalCache::default(),
            rx: Vec::with_capacity(BATCH),
            cpu_tx: None,
            schedule: Schedule::default(),
        }
    }

    fn run(mut self) {
        let cpu_port = self.sh.pipeline.config.cpu_port;
        // One reference for the whole loop: the per-packet paths take `&Shared` instead of
        // cloning the Arc (an atomic on a line every worker shares) per packet.
        let shared = self.sh.clone();
        let sh = &*shared;
        let mut last_active = 0u64;
        while !sh.stop.load(Ordering::Acquire) {
            let now = sh.now();
            self.driver.begin_batch();
            let mut busy = false;
            for i in 0..self.ports.len() {
                busy |= self.receive(sh, i, now);
            }
            if self.id == 0 {
                for _ in 0..BATCH {
                    let Ok(bytes) = sh.packet_out.try_recv() else {
                        break;
                    };
                    busy = true;
                    if let Some(mut b) = self.cache.alloc(&sh.pool) {
                        let len = bytes.len().min(sh.pool.buf_size() - HEADROOM);
                        sh.pool.bytes_mut(&mut b)[HEADROOM..HEADROOM + len]
                            .copy_from_slice(&bytes[..len]);
                        let md = StdMeta::new(cpu_port, len, now);
                        self.driver.inject(
                            Frame {
                                buf: b,
                                start: HEADROOM,
                                len,
                            },
                            md,
                        );
                    }
                }
            }
            let mut next: Option<u64> = None;
            if self.id == 0 {
                next = self.generate(sh, now);
            }
            let mut env = DpEnv {
                sh,
                cache: &mut self.cache,
                me: self.id,
            };
            busy |= self.driver.run_pending(&mut env, &sh.tm, now, BATCH);
            for i in 0..self.ports.len() {
                let (b, n) = self.transmit(sh, i, now);
                busy |= b;
                next = match (next, n) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            if self.id == 0 {
                busy |= self.transmit_cpu(sh, now);
            }
            if busy && sh.agent_attached.load(Ordering::Relaxed) {
                sh.ring_agent_doorbell();
            }
            self.driver.end_batch();
            if busy || self.driver.pending() {
                last_active = now;
            } else if !sh.busy_poll && now.saturating_sub(last_active) >= sh.poll_window_ns {
                self.sleep(now, next);
            }
        }
        // Give every buffer back (queued frames die with the switch).
        for p in &mut self.ports {
            for f in p.tx.drain() {
                self.cache.free(&self.sh.pool, f.buf);
            }
        }
        for f in self.driver.drain() {
            self.cache.free(&self.sh.pool, f.buf);
        }
        self.cache.flush(&self.sh.pool);
    }

    fn generate(&mut self, sh: &Shared, now: u64) -> Option<u64> {
        let port = sh.pipeline.config.pktgen_port;
        let mut schedule = std::mem::take(&mut self.schedule);
        let (cache, driver) = (&mut self.cache, &mut self.driver);
        let next = schedule.run(&sh.pktgen, now, |app, c, batch, packet| {
            let Some(stats) = sh.pktgen.stats(app) else {
                return;
            };
            let Some(mut b) = cache.alloc(&sh.pool) else {
                stats.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let bytes = sh.pool.bytes_mut(&mut b);
            let mut len = 0;
            if c.header {
                bytes[HEADROOM..HEADROOM + pktgen::HEADER_LEN]
                    .copy_from_slice(&pktgen::header(app, batch, packet));
                len = pktgen::HEADER_LEN;
            }
            // The template fits: its length was checked against the buffer size.
            bytes[HEADROOM + len..HEADROOM + len + c.template.len()].copy_from_slice(&c.template);
            len += c.template.len();
            let md = StdMeta::new(port, len, now);
            let frame = Frame {
                buf: b,
                start: HEADROOM,
                len,
            };
            driver.inject(frame, md);
            stats.generated.fetch_add(1, Ordering::Relaxed);
        });
        self.schedule = schedule;
        next
    }

    fn sleep(&mut self, now: u64, next: Option<u64>) {
        let mut fds: Vec<libc::pollfd> = self
            .ports
            .iter()
            .map(|p| libc::pollfd {
                fd: p.io.fd(),
                events: libc::POLLIN
                    | if p.tx.out.is_empty() {
                        0
                    } else {
                        libc::POLLOUT
                    },
                revents: 0,
            })
            .collect();
        fds.push(libc::pollfd {
            fd: self.sh.wake[self.id].as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        // Sleep until the next traffic-manager deadline (ns precision: worker threads run with
        // a 1 ns timer slack), at most 100 ms so that a stop is noticed.
        let wait = next.map_or(100_000_000, |at| at.saturating_sub(now).min(100_000_000));
        let ts = libc::timespec {
            tv_sec: (wait / 1_000_000_000) as libc::time_t,
            tv_nsec: (wait % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: `fds` is a live array of `fds.len()` pollfd entries and `ts` a live timespec.
        let _ = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if fds.last().is_some_and(|f| f.revents & libc::POLLIN != 0) {
            let mut b = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a live array.
            let _ =
                unsafe { libc::read(self.sh.wake[self.id].as_raw_fd(), b.as_mut_ptr().cast(), 8) };
        }
    }

    /// Receives a batch on port `i` and runs ingress on it; returns whether anything arrived.
    /// Receives a batch on port `i` and runs ingress on it; returns whether anything arrived.
    fn receive(&mut self, sh: &Shared, i: usize, now: u64) -> bool {
        let p = &mut self.ports[i];
        let mut rx = std::mem::take(&mut self.rx);
        let (got, oversize) = match &mut p.io {
            PortIo::Xdp(x) => (x.recv(&sh.pool, &mut self.cache, &mut rx), 0),
            PortIo::XdpSpec(_) => (0, 0),
            PortIo::Packet(s) => s.recv(&sh.pool, &mut self.cache, &mut rx).unwrap_or((0, 0)),
            PortIo::Mem(m) => m.recv(&sh.pool, &mut self.cache, &mut rx, BATCH),
        };
        let id = p.tx.id();
        let c = &sh.counters[usize::from(id)];
        c.rx.fetch_add(got as u64, Ordering::Relaxed);
        c.errors.fetch_add(oversize as u64, Ordering::Relaxed);
        let mut env = DpEnv {
            sh,
            cache: &mut self.cache,
            me: self.id,
        };
        for f in rx.drain(..) {
            if let Some((c, _)) = &sh.pcap[usize::from(id)] {
                capture(c, now, &sh.pool.bytes(&f.buf)[f.start..f.start + f.len]);
            }
            if self.driver.receive(&mut env, &sh.tm, id, f, now) == Received::Pause {
                c.pfc_rx.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.rx = rx;
        got > 0
    }

    /// Port `i`'s turn on the packet path (PFC, dequeue, egress, delay), then sends what is
    /// ready; returns (did work, next deadline).
    fn transmit(&mut self, sh: &Shared, i: usize, now: u64) -> (bool, Option<u64>) {
        // Frames that left the traffic manager but not the port stay few: the backlog stays in
        // the queues, where limits, ECN and PFC act on it.
        let room = (4 * BATCH)
            .saturating_sub(self.ports[i].tx.out.len())
            .min(BATCH);
        let mut env = DpEnv {
            sh,
            cache: &mut self.cache,
            me: self.id,
        };
        let (mut busy, mut next) =
            self.driver
                .transmit(&mut env, &sh.tm, &mut self.ports[i].tx, now, room);
        let p = &self.ports[i];
        let reclaim = matches!(&p.io, PortIo::Xdp(x) if x.in_flight() > 0);
        if !p.tx.out.is_empty() || reclaim {
            busy |= self.flush(sh, i);
        }
        // Frames still in an AF_XDP TX ring need another kick soon (copy mode sends only when
        // kicked); frames the port refused are retried when it polls writable.
        if matches!(&self.ports[i].io, PortIo::Xdp(x) if x.in_flight() > 0) {
            next = Some(next.map_or(now + 50_000, |n: u64| n.min(now + 50_000)));
        }
        (busy, next)
    }

    fn flush(&mut self, sh: &Shared, i: usize) -> bool {
        let p = &mut self.ports[i];
        let id = p.tx.id();
        let c = &sh.counters[usize::from(id)];
        let mut sent = 0usize;
        match &mut p.io {
            PortIo::Xdp(x) => loop {
                // At least once: reclaims completions and kicks the TX ring.
                let n = x.send(&sh.pool, &mut self.cache, &mut p.tx.out);
                sent += n;
                if n == 0 || p.tx.out.is_empty() {
                    break;
                }
            },
            PortIo::XdpSpec(_) => {}
            PortIo::Packet(s) => {
                while !p.tx.out.is_empty() {
                    match s.send(&sh.pool, &mut self.cache, &mut p.tx.out) {
                        Ok(0) => break,
                        Ok(n) => sent += n,
                        Err(_) => {
                            c.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            PortIo::Mem(m) => {
                for f in p.tx.out.drain(..) {
                    m.send(&sh.pool, &mut self.cache, f);
                    sent += 1;
                }
            }
        }
        c.tx.fetch_add(sent as u64, Ordering::Relaxed);
        sent > 0
    }

    /// Dequeues what is bound for the CPU port and hands it to the controller side.
    /// Dequeues what is bound for the CPU port and hands it to the controller side.
    fn transmit_cpu(&mut self, sh: &Shared, now: u64) -> bool {
        let cpu = sh.pipeline.config.cpu_port;
        let mut tx = self.cpu_tx.take().unwrap_or_else(|| sh.tm.tx_state(cpu));
        let mut env = DpEnv {
            sh,
            cache: &mut self.cache,
            me: self.id,
        };
        let c = &sh.counters[usize::from(cpu)];
        let busy = self
            .driver
            .transmit_cpu(&mut env, &sh.tm, &mut tx, now, BATCH, |bytes| {
                if sh.packet_in.try_send(bytes.to_vec()).is_err() {
                    c.errors.fetch_add(1, Ordering::Relaxed);
                } else {
                    c.tx.fetch_add(1, Ordering::Relaxed);
                }
                if sh.agent_attached.load(Ordering::Relaxed)
                    && sh.agent_in.0.try_send(bytes.to_vec()).is_err()
                {
                    sh.agent_in_dropped.fetch_add(1, Ordering::Relaxed);
                }
            });
        self.cpu_tx = Some(tx);
        busy
    }
}
