//! A running switch: ports, worker threads, the traffic manager, the CPU and recirculation paths.
//!
//! # Threads (docs/architecture.md, docs/dataplane.md)
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
//!
//! This module builds and stops the switch; [`worker`] is a worker's loop, [`cpu`] the CPU port
//! and the agent's copies, [`capture`] the pcap files, [`fidelity`] the sockets' drop counters
//! and the loop times, and [`sys`] every system call the switch's threads make.

mod capture;
mod cpu;
mod fidelity;
mod idle;
pub(crate) mod sys;
mod worker;

pub use cpu::{
    AGENT_QUEUE, CPU_CLASSES, CpuClass, CpuClassStats, CpuPort, PACKET_IN_QUEUE, PacketOutRefused,
};
pub use fidelity::{InputCounters, InputStats};

use capture::{Capture, capture};
use worker::WorkerLoop;

use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam::channel::{Receiver, Sender};
use pipeline::driver::{Buffers, Driver, Env, PortTx, Received, frame_bytes};
use pipeline::hist::{Histogram, Snapshot};
use pipeline::metadata::{InstanceType, PortId, StdMeta};
use pipeline::runtime::{Pipeline, Worker};
use pipeline::tm::{PortConfig, SharedBuffer, TrafficManager, TxState};

use crate::io::mem::MemPort;
use crate::io::packet::PacketPort;
use crate::io::shm::ShmPort;
use crate::io::xdp::{XdpPort, XdpSpec};
use crate::io::{BATCH, CopyIn, Frame, copy_in};
use crate::pktgen::{self, Pktgen, Schedule};
use crate::pool::{Buf, CACHE_MAX, HEADROOM, LocalCache, Pool};

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
    /// A shared-memory link to another switch process.
    Shm(ShmPort),
}

impl PortIo {
    fn fd(&self) -> RawFd {
        match self {
            PortIo::Xdp(x) => x.fd(),
            PortIo::Packet(p) => p.fd(),
            PortIo::Mem(m) => m.fd(),
            PortIo::Shm(m) => m.fd(),
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

impl PortSpec {
    /// In-memory ports `ids`, each with the far end of its link (tests, generators).
    pub fn mem_pairs(
        ids: impl IntoIterator<Item = PortId>,
    ) -> io::Result<(Vec<PortSpec>, Vec<crate::io::mem::MemLink>)> {
        let mut ports = Vec::new();
        let mut links = Vec::new();
        for id in ids {
            let (p, l) = crate::io::mem::pair()?;
            ports.push(PortSpec {
                id,
                io: PortIo::Mem(p),
            });
            links.push(l);
        }
        Ok((ports, links))
    }
}

/// Settings of a switch.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// Worker threads.
    pub workers: usize,
    /// Spin instead of sleeping when idle (benchmarks).
    pub busy_poll: bool,
    /// The longest an idle worker polls before it sleeps (ns; 0 = sleep at once). The window
    /// adapts ([`idle`]): it grows while the worker keeps sleeping through gaps shorter than
    /// this, so regular traffic with such gaps is polled through (busy-poll latency, the CPU
    /// it costs), and shrinks to 0 when the lulls are longer, so an idle switch or sparse
    /// frames (probes, pings every 10 ms) cost no polling.
    pub poll_window_ns: u64,
    /// Within the poll window, yield the CPU between loops (`sched_yield`): other runnable
    /// threads on the CPU go first, and the worker stays off every wait queue.
    pub yield_in_window: bool,
    /// Pin worker i to CPU `pin[i % pin.len()]` (empty: no pinning).
    pub pin: Vec<usize>,
    /// Run the workers in `SCHED_FIFO` at this priority (1-99; 0: the normal scheduler). A
    /// worker woken for a frame or a shaping deadline then takes its CPU from any normal
    /// thread (a host's sender, another process) at once instead of waiting for the fair
    /// scheduler's slice, as a hardware switch's pipeline never waits for a host. The kernel's
    /// real-time throttling (`sched_rt_runtime_us`, 95% by default) still leaves normal threads
    /// their share when workers stay busy. docs/dataplane.md, "Real-time workers".
    pub rt_priority: u8,
    /// Write `port<N>-in.pcap` / `port<N>-out.pcap` here.
    pub pcap_dir: Option<PathBuf>,
    /// Ports whose capture files are named as BMv2 names them, `<name>_in.pcap` and
    /// `<name>_out.pcap` (the interface's name), instead.
    pub pcap_names: std::collections::HashMap<PortId, String>,
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
            poll_window_ns: 2_000_000,
            yield_in_window: true,
            pin: Vec::new(),
            rt_priority: 0,
            pcap_dir: None,
            pcap_names: std::collections::HashMap::new(),
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

/// The share of the pool one egress port may hold in its traffic-manager queues and its
/// propagation-delay line together (issue 10, defect 4). Reception must always find buffers, so
/// the pool first keeps back what receiving and sending hold outside the queues: every AF_XDP
/// port's fill and TX rings (1,024 + 2,048), every worker's cache ([`CACHE_MAX`]) and receive
/// batch, and a batch per port (generated frames, packet-outs and frames on their way out). The
/// rest is split evenly between the egress ports, the data ports and the CPU port, so that all
/// of them congested at once still leave reception its buffers. At least 16 per port.
fn port_buffers(pool: &Pool, workers: usize, ports: &[Vec<PortSpec>], data_ports: usize) -> u32 {
    let xdp_ports = ports
        .iter()
        .flatten()
        .filter(|p| matches!(p.io, PortIo::Xdp(_) | PortIo::XdpSpec(_)))
        .count();
    let reserve = xdp_ports * 3072 + workers * (CACHE_MAX + BATCH) + (data_ports + 1) * BATCH;
    let egress_ports = data_ports + 1;
    let share = (pool.count() as usize).saturating_sub(reserve) / egress_ports;
    u32::try_from(share.max(16)).unwrap_or(u32::MAX)
}

/// What is shared by the workers.
#[derive(Debug)]
struct Shared {
    /// The running pipeline; [`Switch::swap_pipeline`] replaces it.
    pipeline: arc_swap::ArcSwap<Pipeline>,
    /// Its settings (CPU, recirculation and generator ports), the same for every pipeline.
    config: pipeline::runtime::Config,
    /// Bumped by each swap; `running[w]` is the generation worker `w` runs.
    generation: AtomicU64,
    running: Vec<AtomicU64>,
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
    /// Packet-outs refused because they were longer than a buffer carries.
    packet_out_too_long: AtomicU64,
    /// Per port: capture of what it received and what it sent.
    pcap: Vec<Option<(Capture, Capture)>>,
    trace: Option<Mutex<io::Stderr>>,
    busy_poll: bool,
    poll_window_ns: u64,
    yield_in_window: bool,
    traced: AtomicU64,
    /// The switch-local agent's packet-ins (a copy of each while an agent is attached), bounded
    /// and counted separately from the controller's, so neither starves the other.
    agent_in: (Sender<Vec<u8>>, Receiver<Vec<u8>>),
    agent_attached: AtomicBool,
    /// A doorbell is waiting in `agent_in` (digests for the agent).
    agent_doorbell: AtomicBool,
    /// Packet-ins the agent's full queue refused.
    agent_in_dropped: AtomicU64,
    /// What the attached agent's thread has done (`show_agent`).
    agent_stats: parking_lot::Mutex<Option<Arc<crate::agent::AgentStats>>>,
    /// Packet-in classes: limits and counters.
    cpu_classes: cpu::CpuClasses,
    /// Kernel thread ids of the workers.
    tids: Mutex<Vec<libc::pid_t>>,
    /// Per data port: how to read its socket's drop counters (emptied when the switch stops).
    inputs: Mutex<Vec<fidelity::Input>>,
    /// Per worker: how long its loop iterations that did work took, ns (the worker records).
    loop_ns: Vec<Histogram>,
}

impl Shared {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn wake(&self, worker: usize) {
        if let Some(fd) = self.wake.get(worker) {
            sys::signal(fd);
        }
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
        owner[usize::from(pipeline.config.recirc_port)] = 0;
        let pcap = capture::open(config.pcap_dir.as_deref(), &config.pcap_names, &ids, nports)?;
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
        let mut inputs = per_worker
            .iter()
            .flatten()
            .map(|p| fidelity::Input::new(p.id, &p.io))
            .collect::<io::Result<Vec<_>>>()?;
        inputs.sort_by_key(|i| i.port());
        let (in_tx, in_rx) = crossbeam::channel::bounded(PACKET_IN_QUEUE);
        let (out_tx, out_rx) = crossbeam::channel::bounded(4096);
        let wake: Vec<OwnedFd> = (0..workers)
            .map(|_| sys::eventfd())
            .collect::<io::Result<_>>()?;
        // A changed generator setting wakes worker 0, which runs the generator.
        let wake0 = wake[0].try_clone()?;
        let pktgen = Pktgen::new(
            pool.buf_size() - HEADROOM,
            Box::new(move || sys::signal(&wake0)),
        );
        let tm = TrafficManager::new(nports, config.port_config, config.shared_buffer);
        tm.set_port_buffers(port_buffers(&pool, workers, &per_worker, ids.len()));
        let shared = Arc::new(Shared {
            pktgen,
            tm,
            pool,
            stop: AtomicBool::new(false),
            epoch: Instant::now(),
            owner,
            wake,
            counters: (0..nports).map(|_| PortCounters::default()).collect(),
            packet_in: in_tx,
            packet_out: out_rx,
            packet_out_dropped: AtomicU64::new(0),
            packet_out_too_long: AtomicU64::new(0),
            pcap,
            trace: config.trace.then(|| Mutex::new(io::stderr())),
            busy_poll: config.busy_poll,
            poll_window_ns: config.poll_window_ns,
            yield_in_window: config.yield_in_window,
            traced: AtomicU64::new(0),
            agent_in: crossbeam::channel::bounded(AGENT_QUEUE),
            agent_attached: AtomicBool::new(false),
            agent_doorbell: AtomicBool::new(false),
            agent_in_dropped: AtomicU64::new(0),
            agent_stats: parking_lot::Mutex::new(None),
            cpu_classes: cpu::CpuClasses::default(),
            tids: Mutex::new(Vec::new()),
            inputs: Mutex::new(inputs),
            loop_ns: (0..workers).map(|_| Histogram::default()).collect(),
            config: pipeline.config,
            pipeline: arc_swap::ArcSwap::new(pipeline),
            generation: AtomicU64::new(0),
            running: (0..workers).map(|_| AtomicU64::new(0)).collect(),
        });
        let mut threads = Vec::new();
        for (w, ports) in per_worker.into_iter().enumerate() {
            let shared = shared.clone();
            let cpu = (!config.pin.is_empty()).then(|| config.pin[w % config.pin.len()]);
            let rt = config.rt_priority;
            let t = std::thread::Builder::new()
                .name(format!("pisa-worker-{w}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        sys::pin_to_cpu(cpu);
                    }
                    if rt > 0
                        && let Err(e) = sys::set_fifo(i32::from(rt))
                    {
                        eprintln!("pisa-worker-{w}: SCHED_FIFO {rt}: {e}; normal scheduling");
                    }
                    // Shaping deadlines are met to the microsecond.
                    sys::set_timer_slack_ns(1);
                    let tid = sys::gettid();
                    if let Ok(mut t) = shared.tids.lock() {
                        t.push(tid);
                    }
                    // A worker that panics would leave its ports silent in a switch that looks
                    // alive: end the whole process instead, so that whoever runs it (the fabric
                    // tooling, a supervisor) sees a dead switch and says so.
                    let run = std::panic::AssertUnwindSafe(|| WorkerLoop::new(shared, w, ports).run());
                    if std::panic::catch_unwind(run).is_err() {
                        eprintln!("pisa-worker-{w} panicked: stopping the switch (a bug; please report it)");
                        std::process::abort();
                    }
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
            .load()
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

    /// The attached agent thread's statistics (None: no agent thread has run).
    pub fn agent_stats(&self) -> Option<Arc<crate::agent::AgentStats>> {
        self.shared.agent_stats.lock().clone()
    }

    /// Where the agent thread keeps its statistics ([`crate::agent::AgentThread::spawn`]).
    pub(crate) fn set_agent_stats(&self, stats: Arc<crate::agent::AgentStats>) {
        *self.shared.agent_stats.lock() = Some(stats);
    }

    /// The CPU port's controller side.
    pub fn cpu_port(&self) -> &CpuPort {
        &self.cpu
    }

    /// The running pipeline (its control plane included).
    pub fn pipeline(&self) -> Arc<Pipeline> {
        self.shared.pipeline.load_full()
    }

    /// Runs `pipeline` from now on (P4Runtime's SetForwardingPipelineConfig with a new program):
    /// each worker takes it at the top of its next loop, and this returns once all have. The
    /// ports, queues, counters of ports and the clock stay; frames queued under the old
    /// program go through the new one's egress, which drops what it does not recognise (a
    /// BMv2 JSON program drops frames without its own bridge). Refused if `pipeline`'s
    /// settings (CPU, recirculation and generator ports) differ from the running one's.
    pub fn swap_pipeline(&self, pipeline: Arc<Pipeline>) -> Result<(), String> {
        let sh = &self.shared;
        if pipeline.config != sh.config {
            return Err(format!(
                "the new pipeline's settings {:?} are not the switch's {:?}",
                pipeline.config, sh.config
            ));
        }
        pipeline.control.set_pause(std::thread::yield_now);
        sh.pipeline.store(pipeline);
        let generation = sh.generation.fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let behind: Vec<usize> = (0..sh.running.len())
                .filter(|&w| sh.running[w].load(Ordering::Acquire) < generation)
                .collect();
            if behind.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline || sh.stop.load(Ordering::Acquire) {
                return Err(format!("workers {behind:?} did not take the new pipeline"));
            }
            for w in behind {
                sh.wake(w);
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
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
        let hz = sys::clock_ticks_per_sec();
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

    /// The kernel's drop counters of every data port's socket, by port (empty once the switch
    /// is stopping).
    pub fn input_stats(&self) -> Vec<InputStats> {
        let mut inputs = self.shared.inputs.lock().unwrap_or_else(|e| e.into_inner());
        inputs.iter_mut().map(fidelity::Input::read).collect()
    }

    /// Per worker, how long its loop iterations that did work took, ns.
    pub fn loop_times(&self) -> Vec<Snapshot> {
        self.shared
            .loop_ns
            .iter()
            .map(Histogram::snapshot)
            .collect()
    }

    /// Stops the workers and flushes capture files.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        // The counters' duplicate descriptors go first, so the sockets close with their ports.
        self.shared
            .inputs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
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
