//! `pisa-linerate`: the veth line-rate harness (issue 3). In namespaces it builds
//! `h1 --[p1] sw [p2]-- h2`, with an AF_XDP generator on h1 (CPU 0) and, as the sink on h2, a
//! native XDP drop program that the kernel counts (no userspace CPU), and measures the frames/s
//! delivered to the sink through, side by side in one run:
//! (a) the bare AF_XDP forwarder (`pisa-fwd`: descriptor passing, no pipeline),
//! (b) the kernel's own XDP_REDIRECT p1 -> p2 (native XDP, generic as a fallback),
//! (c) `pisa-switch --program basic` (AF_XDP), with 1 and 2 workers,
//! at 64 and 1500 bytes; then idle ping latency through the switch against a direct veth pair, and
//! the delivered rate under a flood against the peak over a ramp of offered rates.
//! Medians of `--runs` runs. Needs root, iproute2, ethtool, clang (for the two XDP programs).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use netns_tests::{Netns, Process, run, veth, workspace_bin};

#[derive(Parser, Debug)]
struct Args {
    /// Runs per case (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seconds of traffic per run.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Also write the report to this file.
    #[arg(long)]
    out: Option<PathBuf>,
}

const ROUTER: &str = "02:00:00:00:00:fe";
const H2_MAC: &str = "02:00:00:00:02:01";

struct Topo {
    h1: Netns,
    sw: Netns,
    h2: Netns,
    gen_if: String,
    p1: String,
    p2: String,
    sink_if: String,
    dir: PathBuf,
}

fn topo() -> Topo {
    let h1 = Netns::new("g1").expect("ns");
    let sw = Netns::new("sw").expect("ns");
    let h2 = Netns::new("k2").expect("ns");
    let (gen_if, p1) = veth(&h1, &sw).expect("veth");
    let (p2, sink_if) = veth(&sw, &h2).expect("veth");
    h2.exec("ip", &["link", "set", &sink_if, "address", H2_MAC])
        .unwrap();
    let dir = std::env::temp_dir().join(sw.name());
    std::fs::create_dir_all(&dir).unwrap();
    // The sink: a native XDP drop program counted by the kernel.
    let obj = dir.join("xdp_drop.o");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/bpf/xdp_drop.c");
    run(
        "clang",
        &[
            "-O2",
            "-g0",
            "-target",
            "bpf",
            "-I/usr/include/x86_64-linux-gnu",
            "-c",
            src,
            "-o",
            obj.to_str().unwrap(),
        ],
    )
    .expect("clang");
    h2.exec(
        "ip",
        &[
            "link",
            "set",
            "dev",
            &sink_if,
            "xdp",
            "obj",
            obj.to_str().unwrap(),
            "sec",
            "xdp",
        ],
    )
    .expect("attach the sink");
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

fn bin(name: &str) -> String {
    workspace_bin(name).display().to_string()
}

/// Frames the sink has dropped so far (its native XDP program's counter).
fn sink_count(t: &Topo) -> u64 {
    let out =
        t.h2.exec("ethtool", &["-S", &t.sink_if])
            .expect("ethtool -S");
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
fn measure(t: &Topo, size: usize, pps: u64, seconds: f64) -> f64 {
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
    c1.saturating_sub(c0) as f64 / (t1 - t0).as_secs_f64()
}

fn wait_for(log: &Path, word: &str) {
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

enum Forwarder {
    Bare,
    Kernel,
    Switch(usize),
    /// One worker spinning instead of sleeping (`--busy-poll`).
    SwitchBusy,
}

/// Starts a forwarder in `sw`; returns its process (None for the kernel program).
fn start(t: &Topo, f: &Forwarder) -> Option<Process> {
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
            let src = concat!(env!("CARGO_MANIFEST_DIR"), "/bpf/xdp_redirect.c");
            run(
                "clang",
                &[
                    "-O2",
                    "-g0",
                    "-target",
                    "bpf",
                    &format!("-DTARGET_IFINDEX={ifindex}"),
                    "-I/usr/include/x86_64-linux-gnu",
                    "-c",
                    src,
                    "-o",
                    obj.to_str().unwrap(),
                ],
            )
            .expect("clang");
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
        Forwarder::Switch(_) | Forwarder::SwitchBusy => {
            let workers = match f {
                Forwarder::Switch(w) => *w,
                _ => 1,
            };
            let log = t.dir.join("switch.log");
            let entries = t.dir.join("entries.txt");
            std::fs::write(&entries, format!("act_prof_create_member ecmp_selector 1 set_nhop {H2_MAC} {ROUTER} 2\ntable_indirect_add ipv4_lpm 10.0.2.0/24 => 1\nact_prof_create_member ecmp_selector 2 set_nhop 02:00:00:00:01:01 {ROUTER} 1\ntable_indirect_add ipv4_lpm 10.0.1.0/24 => 2\n")).unwrap();
            let sock = t.dir.join("admin.sock");
            let _ = std::fs::remove_file(&sock);
            let cpus = if workers == 1 { "1" } else { "0,1" };
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
            ];
            argv.extend([
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
            ]);
            if matches!(f, Forwarder::SwitchBusy) {
                argv.push("--busy-poll");
            }
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
            Some(p)
        }
    }
}

fn stop(t: &Topo, f: &Forwarder, p: Option<Process>) {
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

/// Ping RTTs (ms): p50 and p99 of `n` pings.
fn ping_percentiles(from: &Netns, to: &str, n: usize) -> (f64, f64) {
    // ping exits 1 when a reply is missing: read what it printed anyway.
    let out = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            from.name(),
            "ping",
            "-c",
            &n.to_string(),
            "-i",
            "0.01",
            "-W",
            "1",
            to,
        ])
        .output()
        .expect("ping");
    let mut rtts: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split("time=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect();
    rtts.sort_by(|a, b| a.total_cmp(b));
    if rtts.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let p = |q: f64| rtts[((rtts.len() as f64 - 1.0) * q).round() as usize];
    (p(0.5), p(0.99))
}

fn main() {
    let args = Args::parse();
    let t = topo();
    let mut report = String::from("| path | 64 B | 1500 B |\n|---|---|---|\n");
    let cases: [(&str, Forwarder); 4] = [
        ("(a) bare AF_XDP forwarder", Forwarder::Bare),
        ("(b) kernel XDP_REDIRECT", Forwarder::Kernel),
        ("(c) pisa-switch basic, 1 worker", Forwarder::Switch(1)),
        ("(c) pisa-switch basic, 2 workers", Forwarder::Switch(2)),
    ];
    let mut results = Vec::new();
    for (name, f) in &cases {
        let mut row = Vec::new();
        for size in [64usize, 1500] {
            let p = start(&t, f);
            std::thread::sleep(Duration::from_millis(200));
            let rates: Vec<f64> = (0..args.runs)
                .map(|_| measure(&t, size, 0, args.seconds))
                .collect();
            stop(&t, f, p);
            let m = median(rates.clone());
            eprintln!("{name} {size} B: runs {rates:.0?} -> median {m:.0} frames/s");
            row.push(m);
        }
        report += &format!(
            "| {name} | {:.3} Mpps | {:.3} Mpps |\n",
            row[0] / 1e6,
            row[1] / 1e6
        );
        results.push(row);
    }
    let ratio = |c: usize, base: usize, s: usize| results[c][s] / results[base][s].max(1.0);
    report += &format!(
        "\nRatios at 64 B: (c,1w)/(a) = {:.2}, (c,2w)/(a) = {:.2}, (c,1w)/(b) = {:.2}, (c,2w)/(b) = {:.2}\n",
        ratio(2, 0, 0),
        ratio(3, 0, 0),
        ratio(2, 1, 0),
        ratio(3, 1, 0)
    );
    report += &format!(
        "Ratios at 1500 B: (c,1w)/(a) = {:.2}, (c,2w)/(a) = {:.2}, (c,1w)/(b) = {:.2}, (c,2w)/(b) = {:.2}\n",
        ratio(2, 0, 1),
        ratio(3, 0, 1),
        ratio(2, 1, 1),
        ratio(3, 1, 1)
    );

    // Flood: offered rate ramp through the 1-worker switch at 64 B; peak vs the unlimited flood.
    let f = Forwarder::Switch(1);
    let p = start(&t, &f);
    let mut ramp = Vec::new();
    for pps in [100_000u64, 200_000, 400_000, 600_000, 800_000] {
        let r = measure(&t, 64, pps, args.seconds);
        eprintln!("offered {pps} pps -> delivered {r:.0}");
        ramp.push((pps, r));
    }
    let flood: Vec<f64> = (0..args.runs)
        .map(|_| measure(&t, 64, 0, args.seconds))
        .collect();
    let flood = median(flood);
    stop(&t, &f, p);
    let peak = ramp.iter().map(|r| r.1).fold(flood, f64::max);
    report += &format!(
        "\nFlood (1 worker, 64 B): peak delivered {:.3} Mpps over the ramp {}, delivered under an unlimited flood {:.3} Mpps: {:.0}% of the peak\n",
        peak / 1e6,
        ramp.iter()
            .map(|(o, d)| format!("{}k->{:.0}k", o / 1000, d / 1000.0))
            .collect::<Vec<_>>()
            .join(", "),
        flood / 1e6,
        100.0 * flood / peak.max(1.0)
    );

    // Idle latency: ping through the switch (routed) against a direct veth pair.
    let d1 = Netns::new("d1").unwrap();
    let d2 = Netns::new("d2").unwrap();
    let (x, y) = veth(&d1, &d2).unwrap();
    d1.exec("ip", &["addr", "add", "192.0.2.1/24", "dev", &x])
        .unwrap();
    d2.exec("ip", &["addr", "add", "192.0.2.2/24", "dev", &y])
        .unwrap();
    let (dp50, dp99) = ping_percentiles(&d1, "192.0.2.2", 200);
    // The sink's drop program would eat the pings.
    let _ =
        t.h2.exec("ip", &["link", "set", "dev", &t.sink_if, "xdp", "off"]);
    t.h1.exec(
        "ip",
        &["link", "set", &t.gen_if, "address", "02:00:00:00:01:01"],
    )
    .unwrap();
    t.h1.exec("ip", &["addr", "add", "10.0.1.1/24", "dev", &t.gen_if])
        .unwrap();
    t.h1.exec("ip", &["route", "add", "10.0.2.0/24", "via", "10.0.1.254"])
        .unwrap();
    t.h1.exec(
        "ip",
        &[
            "neigh",
            "add",
            "10.0.1.254",
            "lladdr",
            ROUTER,
            "dev",
            &t.gen_if,
        ],
    )
    .unwrap();
    t.h2.exec("ip", &["addr", "add", "10.0.2.1/24", "dev", &t.sink_if])
        .unwrap();
    t.h2.exec("ip", &["route", "add", "10.0.1.0/24", "via", "10.0.2.254"])
        .unwrap();
    t.h2.exec(
        "ip",
        &[
            "neigh",
            "add",
            "10.0.2.254",
            "lladdr",
            ROUTER,
            "dev",
            &t.sink_if,
        ],
    )
    .unwrap();
    let p = start(&t, &Forwarder::Switch(1));
    let (sp50, sp99) = ping_percentiles(&t.h1, "10.0.2.1", 200);
    stop(&t, &Forwarder::Switch(1), p);
    let p = start(&t, &Forwarder::SwitchBusy);
    let (bp50, bp99) = ping_percentiles(&t.h1, "10.0.2.1", 200);
    stop(&t, &Forwarder::SwitchBusy, p);
    report += &format!(
        "\nIdle ping RTT (200 pings, two switch traversals per ping): direct veth p50 {:.0} us, p99 {:.0} us; \
         through pisa-switch (sleeping when idle) p50 {:.0} us, p99 {:.0} us: p50 ratio {:.2}; \
         with --busy-poll p50 {:.0} us, p99 {:.0} us: p50 ratio {:.2}\n",
        dp50 * 1000.0,
        dp99 * 1000.0,
        sp50 * 1000.0,
        sp99 * 1000.0,
        sp50 / dp50.max(1e-9),
        bp50 * 1000.0,
        bp99 * 1000.0,
        bp50 / dp50.max(1e-9)
    );
    println!("{report}");
    if let Some(out) = &args.out {
        std::fs::write(out, &report).expect("write report");
    }
}
