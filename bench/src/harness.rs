//! The veth line-rate harness shared by `pisa-linerate` and `pisa-p4rt-bench`: namespaces
//! `h1 --[p1] sw [p2]-- h2`, an AF_XDP generator on h1 (CPU 0) and, as the sink on h2, a native XDP
//! drop program that the kernel counts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pisa_fabric::{Netns, Process, run, veth, workspace_bin};

/// The MAC the switch routes for.
pub const ROUTER: &str = "02:00:00:00:00:fe";
/// The sink host's MAC.
pub const H2_MAC: &str = "02:00:00:00:02:01";

/// `h1 --[p1] sw [p2]-- h2` with the generator on h1 and the XDP-drop sink on h2.
#[derive(Debug)]
pub struct Topo {
    /// The generator's namespace.
    pub h1: Netns,
    /// The forwarder's namespace.
    pub sw: Netns,
    /// The sink's namespace.
    pub h2: Netns,
    /// The generator's interface (in h1).
    pub gen_if: String,
    /// The forwarder's port toward h1.
    pub p1: String,
    /// The forwarder's port toward h2.
    pub p2: String,
    /// The sink's interface (in h2).
    pub sink_if: String,
    /// Scratch directory for logs and objects.
    pub dir: PathBuf,
}

/// Builds the topology (namespaces, veths, the sink's XDP program).
pub fn topo() -> Topo {
    let h1 = Netns::new("g1").expect("ns");
    let sw = Netns::new("sw").expect("ns");
    let h2 = Netns::new("k2").expect("ns");
    let (gen_if, p1) = veth(&h1, &sw).expect("veth");
    let (p2, sink_if) = veth(&sw, &h2).expect("veth");
    h2.exec("ip", &["link", "set", &sink_if, "address", H2_MAC])
        .unwrap();
    let dir = std::env::temp_dir().join(sw.name());
    std::fs::create_dir_all(&dir).unwrap();
    attach_drop_sink(&h2, &sink_if, &dir);
    Topo {
        h1,
        sw,
        h2,
        gen_if,
        p1,
        p2,
        sink_if,
        dir,
    }
}

/// Attaches the sink, a native XDP program that drops every frame (`bpf/xdp_drop.c`, compiled
/// into `dir`), to `iface` in `ns`; [`xdp_drops`] reads its count.
pub fn attach_drop_sink(ns: &pisa_fabric::Netns, iface: &str, dir: &Path) {
    let obj = dir.join("xdp_drop.o");
    compile_bpf(
        concat!(env!("CARGO_MANIFEST_DIR"), "/bpf/xdp_drop.c"),
        &obj,
        &[],
    );
    let obj = obj.to_str().expect("utf-8 path");
    ns.exec(
        "ip",
        &["link", "set", "dev", iface, "xdp", "obj", obj, "sec", "xdp"],
    )
    .expect("attach the sink");
}

/// Compiles the XDP program `src` to `obj` with clang (extra `-D` flags in `defines`).
fn compile_bpf(src: &str, obj: &Path, defines: &[&str]) {
    let mut args = vec!["-O2", "-g0", "-target", "bpf"];
    args.extend_from_slice(defines);
    args.extend(["-I/usr/include/x86_64-linux-gnu", "-c", src, "-o"]);
    args.push(obj.to_str().expect("utf-8 path"));
    run("clang", &args).expect("clang");
}

/// How many runs of how long, and where the report goes: the flags the harnesses share.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Runs per case (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seconds of traffic per run.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Also write the report to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// A workspace binary's path.
pub fn bin(name: &str) -> String {
    workspace_bin(name).display().to_string()
}

/// Frames the sink has dropped so far (its native XDP program's counter).
pub fn sink_count(t: &Topo) -> u64 {
    xdp_drops(&t.h2, &t.sink_if)
}

/// Frames a native XDP program on `iface` (in `ns`) has dropped so far, as the kernel counts
/// them (`ethtool -S`).
pub fn xdp_drops(ns: &pisa_fabric::Netns, iface: &str) -> u64 {
    let out = ns.exec("ethtool", &["-S", iface]).expect("ethtool -S");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("rx_queue_0_xdp_drops:")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Runs the generator at `pps` (0 = flat out); returns the frames/s the sink received over the
/// middle `seconds` of the run.
pub fn measure(t: &Topo, size: usize, pps: u64, seconds: f64) -> f64 {
    measure_offered(t, size, pps, seconds).0
}

/// [`measure`], and the rate the generator sent at over its whole run (the offered load).
pub fn measure_offered(t: &Topo, size: usize, pps: u64, seconds: f64) -> (f64, f64) {
    let gen_log = t.dir.join("gen.log");
    let gen_secs = format!("{}", seconds + 2.0);
    let (size_s, pps_s) = (size.to_string(), pps.to_string());
    let mut generator = Process::spawn(
        &t.h1,
        "taskset",
        &[
            "-c",
            "0",
            &bin("pisa-gen"),
            "--iface",
            &t.gen_if,
            "--size",
            &size_s,
            "--pps",
            &pps_s,
            "--seconds",
            &gen_secs,
            "--dst-mac",
            ROUTER,
        ],
        &gen_log,
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let (c0, t0) = (sink_count(t), std::time::Instant::now());
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let (c1, t1) = (sink_count(t), std::time::Instant::now());
    let _ = generator.wait(Duration::from_secs(10));
    // "sent N frames in S s"
    let log = std::fs::read_to_string(&gen_log).unwrap_or_default();
    let words: Vec<&str> = log.split_whitespace().collect();
    let offered = words
        .iter()
        .position(|w| *w == "sent")
        .and_then(|i| {
            let n: f64 = words.get(i + 1)?.parse().ok()?;
            let s: f64 = words.get(i + 4)?.parse().ok()?;
            Some(n / s)
        })
        .unwrap_or(0.0);
    (
        c1.saturating_sub(c0) as f64 / (t1 - t0).as_secs_f64(),
        offered,
    )
}

/// Waits until `log` contains `word`.
pub fn wait_for(log: &Path, word: &str) {
    for _ in 0..500 {
        if std::fs::read_to_string(log).is_ok_and(|t| t.contains(word)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!(
        "{} never said {word}: {}",
        log.display(),
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// [`sim::traffic::median`] of `v`; 0 when it has no finite value (a rate that was never measured).
pub fn median(v: Vec<f64>) -> f64 {
    sim::traffic::median(&v).unwrap_or(0.0)
}

/// What forwards between p1 and p2.
#[derive(Debug)]
pub enum Forwarder {
    /// `pisa-fwd`.
    Bare,
    /// The kernel's XDP_REDIRECT.
    Kernel,
    /// `pisa-switch` with this many workers.
    Switch(usize),
    /// `pisa-switch` running a P4 program in BMv2 JSON with this many workers.
    Json(usize, JsonProgram),
    /// BMv2's `simple_switch` (this binary) running the same program, on these CPUs (a
    /// taskset list).
    Bmv2(PathBuf, &'static str, JsonProgram),
}

/// A P4 program in p4c's BMv2 JSON with the runtime CLI commands that program it, sent
/// through `simple_switch_CLI` on BMv2's Thrift port to whichever switch runs it.
#[derive(Debug, Clone)]
pub struct JsonProgram {
    /// The JSON.
    pub json: PathBuf,
    /// `simple_switch_CLI` commands.
    pub commands: PathBuf,
    /// `simple_switch_CLI`.
    pub cli: PathBuf,
}

/// The Thrift port the JSON-program forwarders serve in `sw`.
const THRIFT_PORT: &str = "9090";

/// Sends `p`'s commands through `simple_switch_CLI` to the switch in `t.sw`; panics on a
/// command the switch refused.
fn program_cli(t: &Topo, p: &JsonProgram) {
    let script = format!(
        "{} --thrift-port {THRIFT_PORT} < {}",
        p.cli.display(),
        p.commands.display()
    );
    let out =
        t.sw.exec("sh", &["-c", &script])
            .expect("simple_switch_CLI");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("Error") && !text.contains("Invalid"),
        "simple_switch_CLI: {text}"
    );
}

/// Starts a forwarder in `sw`; returns its process (None for the kernel program).
pub fn start(t: &Topo, f: &Forwarder) -> Option<Process> {
    match f {
        Forwarder::Bare => {
            let log = t.dir.join("fwd.log");
            let p = Process::spawn(
                &t.sw,
                "taskset",
                &["-c", "1", &bin("pisa-fwd"), "--a", &t.p1, "--b", &t.p2],
                &log,
            )
            .unwrap();
            wait_for(&log, "ready");
            Some(p)
        }
        Forwarder::Kernel => {
            let out =
                t.sw.exec("cat", &[&format!("/sys/class/net/{}/ifindex", t.p2)])
                    .unwrap();
            let ifindex = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let obj = t.dir.join("xdp_redirect.o");
            compile_bpf(
                concat!(env!("CARGO_MANIFEST_DIR"), "/bpf/xdp_redirect.c"),
                &obj,
                &[&format!("-DTARGET_IFINDEX={ifindex}")],
            );
            let native = t.sw.exec(
                "ip",
                &[
                    "link",
                    "set",
                    "dev",
                    &t.p1,
                    "xdp",
                    "obj",
                    obj.to_str().unwrap(),
                    "sec",
                    "xdp",
                ],
            );
            if native.is_err() {
                t.sw.exec(
                    "ip",
                    &[
                        "link",
                        "set",
                        "dev",
                        &t.p1,
                        "xdpgeneric",
                        "obj",
                        obj.to_str().unwrap(),
                        "sec",
                        "xdp",
                    ],
                )
                .expect("attach XDP redirect");
            }
            None
        }
        Forwarder::Switch(workers) => {
            let cpus = if *workers == 1 { "1" } else { "0,1" };
            Some(start_switch(t, *workers, cpus, &[]))
        }
        Forwarder::Json(workers, p) => {
            let cpus = if *workers == 1 { "1" } else { "0,1" };
            let log = t.dir.join("switch.log");
            let sock = t.dir.join("admin.sock");
            let _ = std::fs::remove_file(&sock);
            let (p1, p2, w) = (
                format!("1@{}", t.p1),
                format!("2@{}", t.p2),
                workers.to_string(),
            );
            let bin = bin("pisa-switch");
            let argv = [
                "-c",
                cpus,
                bin.as_str(),
                p.json.to_str().expect("utf-8 path"),
                "-i",
                &p1,
                "-i",
                &p2,
                "--io",
                "af-xdp",
                "--workers",
                &w,
                "--queue-depth",
                "4096",
                "--thrift-port",
                THRIFT_PORT,
                "--grpc-addr",
                "none",
                "--admin-socket",
                sock.to_str().expect("utf-8 path"),
            ];
            let proc = Process::spawn(&t.sw, "taskset", &argv, &log).unwrap();
            wait_for(&log, "running on");
            program_cli(t, p);
            Some(proc)
        }
        Forwarder::Bmv2(path, cpus, p) => {
            let log = t.dir.join("bmv2.log");
            let (p1, p2) = (format!("1@{}", t.p1), format!("2@{}", t.p2));
            let argv = [
                "-c",
                cpus,
                path.to_str().expect("utf-8 path"),
                "-i",
                &p1,
                "-i",
                &p2,
                "--thrift-port",
                THRIFT_PORT,
                p.json.to_str().expect("utf-8 path"),
            ];
            let proc = Process::spawn(&t.sw, "taskset", &argv, &log).unwrap();
            t.sw.wait_listening(9090, Duration::from_secs(30))
                .expect("simple_switch's Thrift port");
            program_cli(t, p);
            Some(proc)
        }
    }
}

/// The highest rate the generator offered at which the sink received at least 99.9% of it
/// (the loss-free rate, RFC 2544's throughput with a 0.1% tolerance for the veth harness), by
/// bisection over `probes` runs of `seconds` between 0 and `hi` frames/s.
pub fn loss_free(t: &Topo, size: usize, hi: f64, seconds: f64, probes: usize) -> f64 {
    let (mut lo, mut hi, mut best) = (0.0f64, hi, 0.0f64);
    for _ in 0..probes {
        let mid = (lo + hi) / 2.0;
        let (got, sent) = measure_offered(t, size, mid.max(1.0) as u64, seconds);
        eprintln!("  offered {mid:.0} (sent {sent:.0}) -> delivered {got:.0} frames/s");
        if sent > 0.0 && got >= 0.999 * sent {
            lo = mid;
            best = best.max(sent.min(mid));
        } else {
            hi = mid;
        }
    }
    best
}

/// Starts `pisa-switch --program basic` (AF_XDP) in `sw` with `workers` workers on CPUs `cpus`
/// (a taskset list for the whole process) and `extra` flags, routing h1 <-> h2.
pub fn start_switch(t: &Topo, workers: usize, cpus: &str, extra: &[&str]) -> Process {
    let log = t.dir.join("switch.log");
    let entries = t.dir.join("entries.txt");
    std::fs::write(&entries, format!("act_prof_create_member ecmp_selector 1 set_nhop {H2_MAC} {ROUTER} 2\ntable_indirect_add ipv4_lpm 10.0.2.0/24 => 1\nact_prof_create_member ecmp_selector 2 set_nhop 02:00:00:00:01:01 {ROUTER} 1\ntable_indirect_add ipv4_lpm 10.0.1.0/24 => 2\n")).unwrap();
    let sock = t.dir.join("admin.sock");
    let _ = std::fs::remove_file(&sock);
    let w = workers.to_string();
    let (p1, p2, e, s) = (
        format!("1@{}", t.p1),
        format!("2@{}", t.p2),
        entries.display().to_string(),
        sock.display().to_string(),
    );
    let bin = bin("pisa-switch");
    let mut argv = vec![
        "-c",
        cpus,
        bin.as_str(),
        "--program",
        "basic",
        "--io",
        "af-xdp",
        "--workers",
        &w,
        "-i",
        &p1,
        "-i",
        &p2,
        "--entries",
        &e,
        "--admin-socket",
        &s,
        "--queue-depth",
        "4096",
    ];
    argv.extend(extra);
    let p = Process::spawn(&t.sw, "taskset", &argv, &log).unwrap();
    for i in 0..=500 {
        if sock.exists() {
            break;
        }
        assert!(
            i < 500,
            "pisa-switch did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    p
}

/// Stops a forwarder.
pub fn stop(t: &Topo, f: &Forwarder, p: Option<Process>) {
    if let Some(mut p) = p {
        let _ = p.terminate(Duration::from_secs(5));
    }
    if let Forwarder::Kernel = f {
        let _ =
            t.sw.exec("ip", &["link", "set", "dev", &t.p1, "xdp", "off"]);
        let _ =
            t.sw.exec("ip", &["link", "set", "dev", &t.p1, "xdpgeneric", "off"]);
    }
}
