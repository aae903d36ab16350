//! The host side of the experiment toolkit (issue 11 §1): `pisa-traffic serve` and
//! `pisa-traffic client`, run inside host namespaces. Every flow is a kernel TCP connection with
//! the run's congestion control, the namespace's ECN setting, and its class tag in the IPv4 ToS or
//! IPv6 traffic class byte.
//!
//! **The exchange.** The client connects and sends an 18-byte header (`P`, the kind, the flow id,
//! the size) and then the flow's bytes.
//! - A *sized* flow's receiver reads `size` bytes, reads its own `TCP_INFO`, and answers with one
//!   16-byte message (a tag and the receiver's out-of-order packet and data segment counts), written
//!   at once. **FCT** is the time from just before the client creates its socket (so it includes
//!   the handshake) until it has read that answer: the sender then knows that the receiver has
//!   every byte. It includes one extra half RTT for the answer, as the papers' FCT (last byte
//!   acknowledged) includes the last ACK's; the 18 header bytes are not counted in the size.
//! - A *paced* flow (for DBB) sets `TCP_MAXSEG` before connecting and caps its pacing rate
//!   (`SO_MAX_PACING_RATE`), writes for its duration, and shuts its side down. The receiver counts
//!   bytes until EOF and the time from the first byte to EOF, and answers with both and its
//!   out-of-order count. Goodput is bytes × 8 over the receiver's interval.
//!
//! **Per flow** the client records the sender's `TCP_INFO`, read just before close:
//! retransmitted segments (`tcpi_total_retrans`), reordering events seen (`tcpi_reord_seen`) and
//! the reordering degree (`tcpi_reordering`), DSACKed duplicates (`tcpi_dsack_dups`), CE-echoed
//! deliveries (`tcpi_delivered_ce`) and the smoothed RTT; and the receiver's out-of-order packets
//! (`tcpi_rcv_ooopack`). Linux does not count duplicate ACKs in `TCP_INFO`; each out-of-order
//! packet makes the receiver send one at once, so `rcv_ooopack` stands for the DUPACKs, and
//! `dsack_dups` counts the DSACKs.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dataplane::sockopt::{self, TcpInfo};
use sim::traffic::Class;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::dctcp::{self, Dctcp};

mod records;

pub use records::*;

/// The port `pisa-traffic serve` listens on by default.
pub const PORT: u16 = 5201;

const HEADER: usize = 18;
const ANSWER: usize = 16;
const KIND_SIZED: u8 = 0;
const KIND_PACED: u8 = 1;
/// How far ahead of its start a flow's thread is started.
const LEAD: Duration = Duration::from_millis(20);

/// One job of a host's schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Job {
    /// A flow of a given size; its FCT is measured.
    Sized {
        /// Flow id.
        id: u64,
        /// The destination host's name (for the records).
        dst: String,
        /// Its server.
        addr: SocketAddr,
        /// Start, ns after the epoch.
        start_ns: u64,
        /// Bytes.
        size: u64,
        /// Class.
        class: Class,
        /// ToS / traffic class.
        tos: u8,
    },
    /// A long-lived paced flow.
    Paced {
        /// Flow id.
        id: u64,
        /// The destination host's name.
        dst: String,
        /// Its server.
        addr: SocketAddr,
        /// Start, ns after the epoch.
        start_ns: u64,
        /// How long it sends, ns.
        duration_ns: u64,
        /// Pacing cap, bits/s.
        rate_bps: u64,
        /// MSS (`TCP_MAXSEG`), bytes; 0 leaves the kernel's.
        mss: u32,
        /// ToS / traffic class.
        tos: u8,
    },
}

impl Job {
    /// Its start, ns after the epoch.
    pub fn start_ns(&self) -> u64 {
        match self {
            Job::Sized { start_ns, .. } | Job::Paced { start_ns, .. } => *start_ns,
        }
    }

    /// Its schedule line.
    pub fn line(&self) -> String {
        match self {
            Job::Sized {
                id,
                dst,
                addr,
                start_ns,
                size,
                class,
                tos,
            } => format!(
                "flow {id} {dst} {addr} {start_ns} {size} {} {tos:#04x}",
                class.name()
            ),
            Job::Paced {
                id,
                dst,
                addr,
                start_ns,
                duration_ns,
                rate_bps,
                mss,
                tos,
            } => format!(
                "paced {id} {dst} {addr} {start_ns} {duration_ns} {rate_bps} {mss} {tos:#04x}"
            ),
        }
    }
}

fn parse_tos(s: &str) -> Result<u8, String> {
    let v = match s.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16),
        None => s.parse(),
    };
    v.map_err(|_| format!("tos {s}: 0-255"))
}

/// Parses schedule lines:
/// `flow ID DST ADDR:PORT START_NS SIZE short|large TOS` and
/// `paced ID DST ADDR:PORT START_NS DURATION_NS RATE_BPS MSS TOS` (`#` comments). Sorted by start.
pub fn parse_schedule(text: &str) -> Result<Vec<Job>, String> {
    let mut jobs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |e: String| format!("schedule line {}: {e}", n + 1);
        let w: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> Result<u64, String> {
            w.get(i)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| at(format!("field {} is not a number", i + 1)))
        };
        let addr = |i: usize| -> Result<SocketAddr, String> {
            w.get(i)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| at(format!("field {} is not ADDR:PORT", i + 1)))
        };
        let job = match (w.first().copied(), w.len()) {
            (Some("flow"), 8) => Job::Sized {
                id: num(1)?,
                dst: w[2].to_string(),
                addr: addr(3)?,
                start_ns: num(4)?,
                size: num(5)?,
                class: w[6].parse().map_err(at)?,
                tos: parse_tos(w[7]).map_err(at)?,
            },
            (Some("paced"), 9) => Job::Paced {
                id: num(1)?,
                dst: w[2].to_string(),
                addr: addr(3)?,
                start_ns: num(4)?,
                duration_ns: num(5)?,
                rate_bps: num(6)?,
                mss: u32::try_from(num(7)?).map_err(|e| at(e.to_string()))?,
                tos: parse_tos(w[8]).map_err(at)?,
            },
            _ => {
                return Err(at(
                    "expected `flow ID DST ADDR:PORT START SIZE CLASS TOS` or \
                     `paced ID DST ADDR:PORT START DURATION RATE MSS TOS`"
                        .into(),
                ));
            }
        };
        jobs.push(job);
    }
    jobs.sort_by_key(Job::start_ns);
    Ok(jobs)
}

/// The run's transport settings, recorded with every result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transport {
    /// Congestion control (`TCP_CONGESTION`).
    pub cc: String,
    /// `net.ipv4.tcp_ecn` of the namespace (0 off, 1 on, 2 only when asked).
    pub ecn: u8,
    /// `net.ipv4.tcp_reordering` of the namespace (the DUPACKs before a fast retransmit, and
    /// the reordering degree TCP starts from); `None` keeps the kernel's (3).
    pub reordering: Option<u32>,
}

/// The sysctls that decide how TCP takes reordering, recorded with every run that sprays.
pub const REORDERING_SYSCTLS: &[&str] = &[
    "tcp_reordering",
    "tcp_max_reordering",
    "tcp_recovery",
    "tcp_sack",
    "tcp_dsack",
    "tcp_early_retrans",
];

/// Sysctls (`net.ipv4.tcp_sack`, ...) as namespace `ns` sees them; an unreadable one is empty.
pub fn sysctls_of(ns: &crate::Netns, keys: &[&str]) -> BTreeMap<String, String> {
    keys.iter()
        .map(|k| {
            let path = format!("/proc/sys/{}", k.replace('.', "/"));
            let v = ns
                .exec("cat", &[&path])
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default();
            (k.to_string(), v)
        })
        .collect()
}

/// Namespace `ns`'s [`REORDERING_SYSCTLS`], as `name=value` words on one line (`?` where
/// unreadable).
pub fn reordering_settings_of(ns: &crate::Netns) -> String {
    let keys: Vec<String> = REORDERING_SYSCTLS
        .iter()
        .map(|n| format!("net.ipv4.{n}"))
        .collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let vals = sysctls_of(ns, &keys);
    REORDERING_SYSCTLS
        .iter()
        .zip(&keys)
        .map(|(n, k)| match vals.get(*k).map(String::as_str) {
            Some(v) if !v.is_empty() => format!("{n}={v}"),
            _ => format!("{n}=?"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The congestion controls this kernel offers.
pub fn available_congestion_controls() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

impl Transport {
    /// The transport a run asks for made real: `dctcp` (or `pisa_dctcp`) is our BPF DCTCP
    /// ([`crate::dctcp`]), registered unless it is already, with ECN on (`tcp_ecn=1`); the
    /// returned guard keeps it registered and must live as long as the run. Where it cannot be
    /// loaded, the run uses cubic with RFC 3168 ECN instead and `who` says so in one line on
    /// stderr; the returned transport is what runs, for the records.
    pub fn resolve(&self, who: &str) -> (Transport, Option<Dctcp>) {
        if self.cc != "dctcp" && self.cc != dctcp::NAME {
            return (self.clone(), None);
        }
        match Dctcp::ensure() {
            Ok(guard) => (
                Transport {
                    cc: dctcp::NAME.into(),
                    ecn: 1,
                    reordering: self.reordering,
                },
                Some(guard),
            ),
            Err(e) => {
                eprintln!(
                    "{who}: DCTCP (BPF struct_ops {}) could not be loaded: {e}; using cubic with \
                     RFC 3168 ECN instead (cc=cubic, ecn=1 in the records)",
                    dctcp::NAME
                );
                (
                    Transport {
                        cc: "cubic".into(),
                        ecn: 1,
                        reordering: self.reordering,
                    },
                    None,
                )
            }
        }
    }

    /// The `pisa-traffic` options that ask for this transport.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            "--cc".to_string(),
            self.cc.clone(),
            "--ecn".into(),
            self.ecn.to_string(),
        ];
        if let Some(r) = self.reordering {
            a.extend(["--tcp-reordering".into(), r.to_string()]);
        }
        a
    }

    /// Checks that the congestion control exists here and sets this namespace's ECN (and
    /// reordering) sysctls.
    pub fn apply(&self) -> Result<(), String> {
        let have = available_congestion_controls();
        if !have.contains(&self.cc) {
            return Err(format!(
                "congestion control {} is not available on this kernel (have: {}; dctcp is ours, \
                 through BPF, see Transport::resolve)",
                self.cc,
                have.join(" ")
            ));
        }
        if self.ecn > 2 {
            return Err(format!("ecn {}: 0, 1 or 2", self.ecn));
        }
        std::fs::write("/proc/sys/net/ipv4/tcp_ecn", format!("{}\n", self.ecn))
            .map_err(|e| format!("setting net.ipv4.tcp_ecn: {e}"))?;
        match self.reordering {
            Some(0) => Err("tcp_reordering: at least 1".into()),
            Some(r) => std::fs::write("/proc/sys/net/ipv4/tcp_reordering", format!("{r}\n"))
                .map_err(|e| format!("setting net.ipv4.tcp_reordering: {e}")),
            None => Ok(()),
        }
    }
}

/// A zero-filled chunk the flows write from.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

fn header(kind: u8, id: u64, size: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[0] = b'P';
    h[1] = kind;
    h[2..10].copy_from_slice(&id.to_le_bytes());
    h[10..18].copy_from_slice(&size.to_le_bytes());
    h
}

/// Serves flows on `listener` until the process ends: one thread per connection.
pub fn serve(listener: TcpListener) -> std::io::Result<()> {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let _ = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || {
                let _ = serve_one(conn);
            });
    }
    Ok(())
}

/// A dual-stack listener on `port` (IPv4 and IPv6) whose connections use congestion control
/// `cc` (the receiver's half of DCTCP, its ECE echo, runs in the receiving socket).
pub fn listen(port: u16, cc: &str) -> std::io::Result<TcpListener> {
    let s = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
    sockopt::set_congestion(&s, cc)?;
    s.set_only_v6(false)?;
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(SocketAddr::from((
        std::net::Ipv6Addr::UNSPECIFIED,
        port,
    ))))?;
    s.listen(4096)?;
    Ok(s.into())
}

fn serve_one(mut c: TcpStream) -> std::io::Result<()> {
    let mut h = [0u8; HEADER];
    c.read_exact(&mut h)?;
    if h[0] != b'P' {
        return Ok(());
    }
    let size = u64::from_le_bytes(h[10..18].try_into().unwrap_or_default());
    let mut buf = vec![0u8; 64 * 1024];
    match h[1] {
        KIND_SIZED => {
            let mut left = size;
            while left > 0 {
                let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                let n = c.read(&mut buf[..want])?;
                if n == 0 {
                    return Ok(()); // the sender gave up
                }
                left -= n as u64;
            }
            let info = sockopt::tcp_info(&c).unwrap_or_default();
            let mut a = [0u8; ANSWER];
            a[..4].copy_from_slice(b"ACK1");
            a[4..8].copy_from_slice(&info.rcv_ooopack.to_le_bytes());
            a[8..12].copy_from_slice(&info.data_segs_in.to_le_bytes());
            c.write_all(&a)?;
            // Wait for the sender to close, so that our FIN does not race its last read.
            let _ = c.read(&mut buf[..1]);
        }
        KIND_PACED => {
            let (mut bytes, mut first) = (0u64, None);
            loop {
                let n = c.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                first.get_or_insert_with(Instant::now);
                bytes += n as u64;
            }
            let ns = first.map_or(0, |t| t.elapsed().as_nanos() as u64);
            let info = sockopt::tcp_info(&c).unwrap_or_default();
            let mut a = [0u8; 24];
            a[..8].copy_from_slice(&bytes.to_le_bytes());
            a[8..16].copy_from_slice(&ns.to_le_bytes());
            a[16..20].copy_from_slice(&info.rcv_ooopack.to_le_bytes());
            a[20..24].copy_from_slice(&info.data_segs_in.to_le_bytes());
            c.write_all(&a)?;
        }
        _ => {}
    }
    Ok(())
}

/// A socket for `addr` with the job's options set before connecting.
fn socket_for(addr: SocketAddr, tos: u8, t: &Transport, mss: u32) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv4() {
        s.set_tos_v4(u32::from(tos))?;
    } else {
        s.set_tclass_v6(u32::from(tos))?;
    }
    sockopt::set_congestion(&s, &t.cc)?;
    if mss > 0 {
        sockopt::set_mss(&s, mss)?;
    }
    s.set_tcp_nodelay(true)?;
    Ok(s)
}

fn connect(s: Socket, addr: SocketAddr, deadline: Instant) -> std::io::Result<TcpStream> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    s.connect_timeout(&SockAddr::from(addr), left)?;
    let c: TcpStream = s.into();
    // Blocking calls give up at the deadline (checked again between writes).
    c.set_read_timeout(Some(left))?;
    c.set_write_timeout(Some(left))?;
    Ok(c)
}

fn sized(
    addr: SocketAddr,
    id: u64,
    size: u64,
    tos: u8,
    t: &Transport,
    deadline: Instant,
    rec: &mut FlowRecord,
) -> std::io::Result<()> {
    let began = Instant::now();
    let s = socket_for(addr, tos, t, 0)?;
    let mut c = connect(s, addr, deadline)?;
    c.write_all(&header(KIND_SIZED, id, size))?;
    let mut left = size;
    while left > 0 {
        if Instant::now() > deadline {
            rec.tx = sockopt::tcp_info(&c).unwrap_or_default();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "deadline",
            ));
        }
        let n = ZEROS.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        c.write_all(&ZEROS[..n])?;
        left -= n as u64;
    }
    let mut a = [0u8; ANSWER];
    let got = c.read_exact(&mut a);
    let fct = began.elapsed();
    rec.tx = sockopt::tcp_info(&c).unwrap_or_default();
    got?;
    if &a[..4] != b"ACK1" {
        return Err(std::io::Error::other("bad answer"));
    }
    rec.rcv_ooopack = u32::from_le_bytes(a[4..8].try_into().unwrap_or_default());
    rec.fct_us = Some(fct.as_secs_f64() * 1e6);
    rec.finished = true;
    Ok(())
}

fn paced(
    job: &Job,
    t: &Transport,
    deadline: Instant,
    rec: &mut PacedRecord,
) -> std::io::Result<()> {
    let Job::Paced {
        id,
        addr,
        duration_ns,
        rate_bps,
        mss,
        tos,
        ..
    } = job
    else {
        return Ok(());
    };
    let s = socket_for(*addr, *tos, t, *mss)?;
    if *rate_bps > 0 {
        sockopt::set_max_pacing_rate(&s, rate_bps / 8)?;
    }
    let mut c = connect(s, *addr, deadline)?;
    let began = Instant::now();
    let until = began + Duration::from_nanos(*duration_ns);
    c.write_all(&header(KIND_PACED, *id, 0))?;
    // Small writes, so that the duration is kept to within one chunk at the paced rate.
    let chunk = usize::try_from((rate_bps / 8 / 100).clamp(1448, ZEROS.len() as u64))
        .unwrap_or(ZEROS.len());
    while Instant::now() < until.min(deadline) {
        c.write_all(&ZEROS[..chunk])?;
    }
    c.shutdown(Shutdown::Write)?;
    let mut a = [0u8; 24];
    let got = c.read_exact(&mut a);
    rec.tx = sockopt::tcp_info(&c).unwrap_or_default();
    got?;
    rec.bytes = u64::from_le_bytes(a[..8].try_into().unwrap_or_default());
    let ns = u64::from_le_bytes(a[8..16].try_into().unwrap_or_default());
    rec.rcv_ooopack = u32::from_le_bytes(a[16..20].try_into().unwrap_or_default());
    rec.rcv_segs = u32::from_le_bytes(a[20..24].try_into().unwrap_or_default());
    rec.goodput_bps = if ns > 0 {
        rec.bytes as f64 * 8.0 / (ns as f64 / 1e9)
    } else {
        0.0
    };
    rec.finished = true;
    Ok(())
}

/// The results of a client run.
#[derive(Clone, Debug, Default)]
pub struct ClientResults {
    /// Sized flows, by id.
    pub flows: Vec<FlowRecord>,
    /// Paced flows, by id.
    pub paced: Vec<PacedRecord>,
}

#[derive(Clone)]
enum Done {
    Flow(FlowRecord),
    Paced(PacedRecord),
}

impl Done {
    /// The record of `job` before it has run: unfinished, with the deadline as the reason.
    fn placeholder(job: &Job, src: &str) -> Done {
        let error = "not finished by the deadline".to_string();
        match job {
            Job::Sized {
                id,
                dst,
                start_ns,
                size,
                class,
                tos,
                ..
            } => Done::Flow(FlowRecord {
                id: *id,
                src: src.to_string(),
                dst: dst.clone(),
                start_ns: *start_ns,
                size: *size,
                class: class.name().into(),
                tos: *tos,
                error,
                ..Default::default()
            }),
            Job::Paced {
                id,
                dst,
                start_ns,
                duration_ns,
                rate_bps,
                mss,
                tos,
                ..
            } => Done::Paced(PacedRecord {
                id: *id,
                src: src.to_string(),
                dst: dst.clone(),
                start_ns: *start_ns,
                duration_ns: *duration_ns,
                rate_bps: *rate_bps,
                mss: *mss,
                tos: *tos,
                error,
                ..Default::default()
            }),
        }
    }

    fn id(&self) -> u64 {
        match self {
            Done::Flow(r) => r.id,
            Done::Paced(r) => r.id,
        }
    }

    fn set_error(&mut self, e: String) {
        match self {
            Done::Flow(r) => r.error = e,
            Done::Paced(r) => r.error = e,
        }
    }
}

/// Runs `jobs` from host `src`: each starts at `epoch` + its start (one thread per flow), and
/// every flow still running at `deadline` is recorded unfinished.
pub fn run_client(
    jobs: &[Job],
    src: &str,
    t: &Transport,
    epoch: SystemTime,
    deadline: SystemTime,
) -> ClientResults {
    // Wall-clock epoch (shared by every host namespace) to this process's monotonic clock.
    let to_instant = |at: SystemTime| {
        let now_wall = SystemTime::now();
        let now = Instant::now();
        match at.duration_since(now_wall) {
            Ok(ahead) => now + ahead,
            Err(e) => now.checked_sub(e.duration()).unwrap_or(now),
        }
    };
    let base = to_instant(epoch);
    let end = to_instant(deadline);
    let (tx, rx) = mpsc::channel::<Done>();
    let mut results = ClientResults::default();
    let mut pending: std::collections::BTreeMap<u64, Done> = Default::default();
    // Flow threads started and not yet reported.
    let mut outstanding = 0usize;
    for job in jobs {
        let at = base + Duration::from_nanos(job.start_ns());
        let placeholder = Done::placeholder(job, src);
        let id = placeholder.id();
        if at >= end {
            let mut p = placeholder;
            p.set_error("not started: its start is past the deadline".into());
            pending.insert(id, p);
            continue;
        }
        // Each flow's thread is started up to LEAD ahead and waits for the start itself, so
        // that flows due at the same instant (an incast) start together, not one spawn apart.
        let now = Instant::now();
        if at > now + LEAD {
            std::thread::sleep(at - now - LEAD);
        }
        let (job, t, tx) = (job.clone(), t.clone(), tx.clone());
        let mut rec = placeholder.clone();
        pending.insert(id, placeholder);
        let spawned = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || {
                let now = Instant::now();
                if at > now {
                    std::thread::sleep(at - now);
                }
                if let Done::Flow(r) = &mut rec {
                    r.lag_us = at.elapsed().as_secs_f64() * 1e6;
                }
                let r = match (&job, &mut rec) {
                    (
                        Job::Sized {
                            addr,
                            id,
                            size,
                            tos,
                            ..
                        },
                        Done::Flow(rec),
                    ) => sized(*addr, *id, *size, *tos, &t, end, rec),
                    (Job::Paced { .. }, Done::Paced(rec)) => paced(&job, &t, end, rec),
                    _ => Ok(()),
                };
                rec.set_error(r.err().map(|e| e.to_string()).unwrap_or_default());
                let _ = tx.send(rec);
            });
        match spawned {
            Ok(_) => outstanding += 1,
            Err(e) => {
                if let Some(p) = pending.get_mut(&id) {
                    p.set_error(format!("no thread: {e}"));
                }
            }
        }
        // Collect what has finished meanwhile, so that the channel does not grow.
        while let Ok(d) = rx.try_recv() {
            store(&mut pending, d);
            outstanding -= 1;
        }
    }
    drop(tx);
    while outstanding > 0 {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left) {
            Ok(d) => {
                store(&mut pending, d);
                outstanding -= 1;
            }
            Err(_) => break,
        }
    }
    for (_, d) in pending {
        match d {
            Done::Flow(r) => results.flows.push(r),
            Done::Paced(r) => results.paced.push(r),
        }
    }
    results
}

fn store(p: &mut std::collections::BTreeMap<u64, Done>, d: Done) {
    p.insert(d.id(), d);
}

/// Nanoseconds since the Unix epoch, now.
pub fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_lines_round_trip() {
        let jobs = vec![
            Job::Paced {
                id: 2,
                dst: "h9".into(),
                addr: "[fd00::2:1]:5201".parse().unwrap(),
                start_ns: 0,
                duration_ns: 5_000_000_000,
                rate_bps: 20_000_000,
                mss: 1000,
                tos: 0,
            },
            Job::Sized {
                id: 1,
                dst: "h2".into(),
                addr: "10.0.1.2:5201".parse().unwrap(),
                start_ns: 1500,
                size: 3_000_000,
                class: Class::Short,
                tos: 0x08,
            },
        ];
        let text: String = jobs.iter().map(|j| j.line() + "\n").collect();
        assert_eq!(parse_schedule(&text).unwrap(), jobs);
        assert!(parse_schedule("flow 1 h2 10.0.1.2:5201 0 10 tiny 0x08").is_err());
        assert!(parse_schedule("flow 1 h2 10.0.1.2 0 10 short 0x08").is_err());
        assert!(parse_schedule("burst 1").is_err());
    }

    #[test]
    fn a_sized_and_a_paced_flow_over_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || serve(l));
        let t = Transport {
            cc: "reno".into(),
            ecn: 2,
            reordering: None,
        };
        let jobs = vec![
            Job::Sized {
                id: 0,
                dst: "lo".into(),
                addr,
                start_ns: 0,
                size: 1_000_000,
                class: Class::Short,
                tos: 0x08,
            },
            Job::Paced {
                id: 1,
                dst: "lo".into(),
                addr,
                start_ns: 0,
                duration_ns: 300_000_000,
                rate_bps: 8_000_000,
                mss: 1000,
                tos: 0x10,
            },
        ];
        let now = SystemTime::now();
        let r = run_client(&jobs, "lo", &t, now, now + Duration::from_secs(10));
        let f = &r.flows[0];
        assert!(f.finished, "{f:?}");
        assert!(f.fct_us.unwrap() > 0.0);
        // The root namespace's tcp_ecn decides ecn_ok here (it is not ours to set).
        assert!(f.csv(&t).contains(",reno,2,"));
        let p = &r.paced[0];
        assert!(p.finished, "{p:?}");
        // 1 MB/s for 0.3 s: about 300 kB (the first burst and the final drain blur the edges).
        assert!((150_000..600_000).contains(&p.bytes), "{p:?}");
        assert!(p.tx.snd_mss <= 1000, "{p:?}");
        assert_eq!(
            p.csv(&t).split(',').count(),
            PACED_CSV_HEADER.split(',').count()
        );
        assert_eq!(
            f.csv(&t).split(',').count(),
            FLOW_CSV_HEADER.split(',').count()
        );
    }

    #[test]
    fn flows_past_the_deadline_are_recorded_unfinished() {
        // A server that accepts and never reads.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let _hold = std::thread::spawn(move || {
            let c = l.accept();
            std::thread::sleep(Duration::from_secs(5));
            drop(c);
        });
        let t = Transport {
            cc: "cubic".into(),
            ecn: 0,
            reordering: None,
        };
        let jobs = vec![Job::Sized {
            id: 7,
            dst: "lo".into(),
            addr,
            start_ns: 0,
            size: 200_000_000,
            class: Class::Large,
            tos: 0x10,
        }];
        let now = SystemTime::now();
        let mut jobs = jobs;
        let mut late = jobs[0].clone();
        if let Job::Sized { id, start_ns, .. } = &mut late {
            *id = 8;
            *start_ns = 60_000_000_000;
        }
        jobs.push(late);
        let r = run_client(&jobs, "lo", &t, now, now + Duration::from_millis(500));
        assert_eq!(r.flows.len(), 2);
        assert!(!r.flows[0].finished);
        assert_eq!(r.flows[0].fct_us, None);
        assert!(!r.flows[0].error.is_empty());
        // A flow whose start is past the deadline is recorded, unstarted.
        assert_eq!(r.flows[1].id, 8);
        assert!(!r.flows[1].finished);
        assert!(
            r.flows[1].error.starts_with("not started"),
            "{:?}",
            r.flows[1]
        );
    }
}
