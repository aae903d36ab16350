//! Our DCTCP (`pisa_fabric::dctcp`, BPF struct_ops): it loads, registers and unregisters with its
//! guard, sockets select it, and over a path where a pisa-switch marks CE it negotiates ECN and
//! holds the queue below the switch's buffer without retransmissions, where cubic without ECN on
//! the same path overflows it. Needs root, a kernel with BTF and BPF struct_ops, iproute2 and the
//! workspace binaries (pisa-switch, pisa-fabric, pisa-traffic).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dataplane::sockopt;
use pisa_fabric::dctcp::{self, Dctcp, NAME};
use socket2::{Domain, Protocol, Socket, Type};

/// The registration is global to the kernel: the tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The name to ourselves: one test at a time, and no other process holding it.
fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    let g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert!(
        !dctcp::registered(),
        "{NAME} is registered by another process: this test needs it free"
    );
    g
}

#[test]
fn our_dctcp_registers_with_its_guard_carries_a_loopback_flow_and_unregisters() {
    let _g = exclusive();
    let d = Dctcp::ensure().expect("loading our DCTCP");
    assert!(d.owned(), "{d:?}");
    assert!(dctcp::registered());
    // A second guard borrows the registration; its drop leaves it in place.
    let borrowed = Dctcp::ensure().expect("borrowing");
    assert!(!borrowed.owned());
    drop(borrowed);
    assert!(dctcp::registered());

    // A loopback flow with pisa_dctcp on both ends: init, the ACK events and Reno's growth run,
    // and the flow completes.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    sockopt::set_congestion(&l, NAME).expect("selecting pisa_dctcp on the listener");
    // Selected before connecting, so that the SYN asks for ECN.
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
    sockopt::set_congestion(&sock, NAME).expect("selecting pisa_dctcp");
    sock.connect(&l.local_addr().unwrap().into()).unwrap();
    let mut c: TcpStream = sock.into();
    let (mut s, _) = l.accept().unwrap();
    assert_eq!(sockopt::congestion(&c).unwrap(), NAME);
    assert_eq!(sockopt::congestion(&s).unwrap(), NAME);
    let size = 20_000_000usize;
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0usize;
        while got < size {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "EOF after {got} bytes");
            got += n;
        }
        s
    });
    let chunk = vec![1u8; 1 << 16];
    let mut sent = 0;
    while sent < size {
        let n = chunk.len().min(size - sent);
        c.write_all(&chunk[..n]).unwrap();
        sent += n;
    }
    let s = reader.join().unwrap();
    let rx = sockopt::tcp_info(&s).unwrap();
    assert_eq!(rx.bytes_received, size as u64);
    wait_for("all bytes acknowledged", || {
        sockopt::tcp_info(&c).unwrap().bytes_acked > size as u64
    });
    let tx = sockopt::tcp_info(&c).unwrap();
    // TCP_CONG_NEEDS_ECN: the client asks for ECN whatever net.ipv4.tcp_ecn says, and the
    // server (pisa_dctcp too) agrees.
    assert_ne!(
        tx.options & sockopt::TCPI_OPT_ECN,
        0,
        "ECN not negotiated: {tx:?}"
    );
    assert!(tx.snd_cwnd >= 10, "{tx:?}");
    drop((c, s, l));

    drop(d);
    wait_for("pisa_dctcp to be unregistered", || !dctcp::registered());
}

// ---- A flow through a marking switch ----

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pisa_fabric::experiment::port_queues;
use pisa_fabric::fabric::{Fabric, Options};
use pisa_fabric::{Netns, Process, workspace_bin};
use topo::Topology;

/// h1's link (the sender's) and h2's, the bottleneck, where leaf1's port 2 queues.
const FAST: u64 = 100_000_000;
const SLOW: u64 = 40_000_000;
/// The bottleneck port's buffer, packets, and the switch's marking threshold K.
const BUFFER: u64 = 200;
const K: u64 = 12;

/// One `ecmp` switch that marks CE above K packets, h1 -> leaf1 -> h2 with the queue at port 2.
fn marking_path() -> Topology {
    let text = format!(
        "switch leaf1 program=ecmp role=leaf ecn_k={K}\n\
         host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\n\
         host h2 ipv4=10.0.1.2 ipv6=fd00::1:2\n\
         link leaf1:1 h1 rate={FAST} buffer={BUFFER}\n\
         link leaf1:2 h2 rate={SLOW} buffer={BUFFER}\n"
    );
    Topology::parse(&text).expect("topology")
}

type Row = BTreeMap<String, String>;

fn rows(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            head.iter()
                .map(|k| k.to_string())
                .zip(l.split(',').map(str::to_string))
                .collect()
        })
        .collect()
}

/// (enqueued, dropped, marked, depth) of leaf1's port 2.
fn port2(sock: &Path) -> [u64; 4] {
    port_queues(sock, 2).expect("show_queues")
}

/// What one sender's `ss -ti` line said (iproute2 6.1's ss prints no TCP options, ECN among
/// them, on this kernel: the flow's record says whether ECN was negotiated).
#[derive(Debug, Default, Clone)]
struct Ss {
    cc: String,
    cwnd: u32,
    ssthresh: u32,
}

/// The sender's connections to `port`, from `ss -tinH` in `ns`.
fn ss(ns: &Netns, port: u16) -> Vec<Ss> {
    let out = ns
        .exec("ss", &["-tinH", "state", "established"])
        .expect("ss");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut found = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let peer = format!(":{port}");
        if l.starts_with(char::is_whitespace) || !l.split_whitespace().any(|w| w.ends_with(&peer)) {
            continue;
        }
        let Some(info) = lines.next_if(|n| n.starts_with(char::is_whitespace)) else {
            continue;
        };
        let mut s = Ss::default();
        let words: Vec<&str> = info.split_whitespace().collect();
        for w in &words {
            if let Some(v) = w.strip_prefix("cwnd:") {
                s.cwnd = v.parse().unwrap_or(0);
            } else if let Some(v) = w.strip_prefix("ssthresh:") {
                s.ssthresh = v.parse().unwrap_or(0);
            } else if ["pisa_dctcp", "cubic", "reno", "bbr"].contains(w) {
                s.cc = w.to_string();
            }
        }
        found.push(s);
    }
    found
}

/// One sized flow h1 -> h2 and what the switch and the sender showed meanwhile.
#[derive(Debug)]
struct Run {
    row: Row,
    ss: Vec<Ss>,
    /// The bottleneck queue while the flow was up (ss saw it), packets.
    depths: Vec<u64>,
    dropped: u64,
}

impl Run {
    fn mean_depth(&self) -> f64 {
        self.depths.iter().sum::<u64>() as f64 / self.depths.len().max(1) as f64
    }
    fn max_depth(&self) -> u64 {
        self.depths.iter().copied().max().unwrap_or(0)
    }
    fn sd_depth(&self) -> f64 {
        let m = self.mean_depth();
        let n = self.depths.len().max(1) as f64;
        (self
            .depths
            .iter()
            .map(|&d| (d as f64 - m).powi(2))
            .sum::<f64>()
            / n)
            .sqrt()
    }
    fn mean_cwnd(&self) -> f64 {
        self.ss.iter().map(|s| f64::from(s.cwnd)).sum::<f64>() / self.ss.len().max(1) as f64
    }
    /// The mean of ssthresh / cwnd over the samples after the first reduction.
    fn reduction(&self) -> f64 {
        let r: Vec<f64> = self
            .ss
            .iter()
            .filter(|s| s.ssthresh > 0 && s.cwnd > 0)
            .map(|s| f64::from(s.ssthresh) / f64::from(s.cwnd))
            .collect();
        r.iter().sum::<f64>() / r.len().max(1) as f64
    }
    fn goodput_mbps(&self, size: u64) -> f64 {
        size as f64 * 8.0 / self.row["fct_us"].parse::<f64>().unwrap()
    }
}

#[allow(
    clippy::too_many_arguments,
    reason = "the run's parameters, named at the call"
)]
fn run_flow(
    f: &Fabric,
    dir: &Path,
    sock: &Path,
    tag: &str,
    port: u16,
    cc: &str,
    ecn: &str,
    size: u64,
) -> Run {
    let (h1, h2) = (f.ns("h1"), "10.0.1.2");
    let sched = dir.join(format!("{tag}.sched"));
    std::fs::write(
        &sched,
        format!("flow 0 h2 {h2}:{port} 0 {size} large 0x00\n"),
    )
    .unwrap();
    let out: PathBuf = dir.join(format!("{tag}.csv"));
    let before = port2(sock);
    let bin = workspace_bin("pisa-traffic");
    let mut client = Process::spawn(
        h1,
        bin.to_str().unwrap(),
        &[
            "client",
            "--schedule",
            sched.to_str().unwrap(),
            "--src",
            "h1",
            "--out",
            out.to_str().unwrap(),
            "--cc",
            cc,
            "--ecn",
            ecn,
            "--drain",
            "30",
        ],
        &dir.join(format!("client-{tag}.log")),
    )
    .expect("pisa-traffic client");
    let (mut samples, mut depths) = (Vec::new(), Vec::new());
    while client.running() {
        let depth = port2(sock)[3];
        let seen = ss(h1, port);
        if !seen.is_empty() {
            depths.push(depth);
        }
        samples.extend(seen);
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = port2(sock);
    eprint!(
        "{}",
        std::fs::read_to_string(dir.join(format!("client-{tag}.log"))).unwrap_or_default()
    );
    let row = rows(&out).pop().expect("the flow's record");
    Run {
        row,
        ss: samples,
        depths,
        dropped: after[1] - before[1],
    }
}

fn serve(f: &Fabric, dir: &Path, port: u16, cc: &str) -> Process {
    let bin = workspace_bin("pisa-traffic");
    let p = Process::spawn(
        f.ns("h2"),
        bin.to_str().unwrap(),
        &[
            "serve",
            "--port",
            &port.to_string(),
            "--cc",
            cc,
            "--ecn",
            "1",
        ],
        &dir.join(format!("serve-{port}.log")),
    )
    .expect("pisa-traffic serve");
    wait_for("the server to listen", || {
        let out = f.ns("h2").exec("ss", &["-ltnH"]).expect("ss");
        String::from_utf8_lossy(&out.stdout).contains(&format!(":{port} "))
    });
    p
}

#[test]
fn dctcp_keeps_a_marking_switchs_queue_short_without_loss_where_cubic_without_ecn_overflows_it() {
    let _g = exclusive();
    let t = marking_path();
    let f = Fabric::up(&t, &Options::for_test('D'), |m| eprintln!("{m}")).expect("bring-up");
    eprint!("{}", f.program().expect("programming over P4Runtime"));
    let dir = f.opts.dir.clone();
    let sock = dir.join("leaf1.sock");
    // pisa-traffic run alone loads our DCTCP itself (the server here, first up) and holds it
    // while it runs; the client finds it registered.
    let mut dctcp_server = serve(&f, &dir, 5201, "dctcp");
    assert!(
        dctcp::registered(),
        "pisa-traffic serve --cc dctcp did not register {NAME}"
    );
    let _cubic_server = serve(&f, &dir, 5202, "cubic");

    let size: u64 = 10_000_000;
    let d = run_flow(&f, &dir, &sock, "dctcp", 5201, "dctcp", "1", size);
    let ce = run_flow(&f, &dir, &sock, "cubic-ecn", 5202, "cubic", "1", size);
    let c = run_flow(&f, &dir, &sock, "cubic", 5202, "cubic", "0", size);
    for (name, r) in [("pisa_dctcp", &d), ("cubic+ECN", &ce), ("cubic", &c)] {
        eprintln!(
            "{name}: fct {} us ({:.1} Mb/s of {} Mb/s), retransmits {}, delivered_ce {}; switch: \
             {} dropped, queue mean {:.1} sd {:.1} max {} packets (K {K}, buffer {BUFFER}); \
             sender cwnd mean {:.1}, ssthresh/cwnd {:.2}, {} samples",
            r.row["fct_us"],
            r.goodput_mbps(size),
            SLOW / 1_000_000,
            r.row["retransmits"],
            r.row["delivered_ce"],
            r.dropped,
            r.mean_depth(),
            r.sd_depth(),
            r.max_depth(),
            r.mean_cwnd(),
            r.reduction(),
            r.ss.len()
        );
    }
    // The records say what ran.
    assert_eq!(
        (d.row["cc"].as_str(), d.row["ecn"].as_str()),
        (NAME, "1"),
        "{:?}",
        d.row
    );
    assert_eq!(c.row["cc"], "cubic");
    for r in [&d, &ce, &c] {
        assert_eq!(r.row["finished"], "true", "{:?}", r.row);
        assert!(r.ss.len() >= 10, "too few ss samples: {r:?}");
    }
    // The sender's socket ran our DCTCP with ECN negotiated, and the switch's marks came back
    // as ECE.
    assert!(d.ss.iter().all(|s| s.cc == NAME), "{:?}", d.ss);
    assert_eq!(d.row["ecn_ok"], "1", "ECN not negotiated: {:?}", d.row);
    assert!(
        d.row["delivered_ce"].parse::<u64>().unwrap() > 0,
        "{:?}",
        d.row
    );
    // DCTCP reacted: no loss, the queue hovered near K and stayed far below the buffer.
    assert_eq!(d.dropped, 0, "{d:?}");
    assert_eq!(d.row["retransmits"], "0", "{:?}", d.row);
    assert!(
        d.max_depth() < BUFFER / 2,
        "queue reached {}: {:?}",
        d.max_depth(),
        d.depths
    );
    assert!(
        d.mean_depth() < 3.0 * K as f64,
        "mean queue {:.1}",
        d.mean_depth()
    );
    // ... and proportionally: with a fraction of each window marked, DCTCP cuts cwnd by alpha/2,
    // far less than cubic's 30% per marked window with RFC 3168 ECN, so its ssthresh stays
    // closer to its cwnd.
    assert!(
        d.reduction() > ce.reduction(),
        "ssthresh/cwnd: DCTCP {:.2}, cubic+ECN {:.2}",
        d.reduction(),
        ce.reduction()
    );
    // The same path without ECN: cubic fills the buffer until it drops.
    assert!(c.ss.iter().all(|s| s.cc == "cubic"), "{:?}", c.ss);
    assert_eq!(c.row["ecn_ok"], "0", "{:?}", c.row);
    assert!(c.dropped > 0 && c.row["retransmits"] != "0", "{c:?}");
    assert!(
        c.max_depth() > d.max_depth(),
        "cubic's queue {} vs DCTCP's {}",
        c.max_depth(),
        d.max_depth()
    );

    // The server held the registration; it ends with it.
    dctcp_server.terminate(Duration::from_secs(5));
    wait_for("pisa_dctcp to be unregistered", || !dctcp::registered());
}
