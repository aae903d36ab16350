//! `pisa-linerate`: the veth line-rate harness (issue 3). In namespaces it builds
//! `h1 --[p1] sw [p2]-- h2`, with an AF_XDP generator on h1 (CPU 0) and, as the sink on h2, a
//! native XDP drop program that the kernel counts (no userspace CPU), and measures the frames/s
//! delivered to the sink through, side by side in one run:
//! (a) the bare AF_XDP forwarder (`pisa-fwd`: descriptor passing, no pipeline),
//! (b) the kernel's own XDP_REDIRECT p1 -> p2 (native XDP, generic as a fallback),
//! (c) `pisa-switch --program basic` (AF_XDP), with 1 and 2 workers,
//! with `--json`, (d) `pisa-switch PROGRAM.json`, a P4 program in p4c's BMv2 JSON programmed
//! through BMv2's runtime CLI (`--commands`, sent by `simple_switch_CLI`), with 1 and 2 workers,
//! and with `--bmv2`, (e) BMv2's `simple_switch` running the same JSON with the same commands,
//! at 64 and 1500 bytes; with `--loss-free`, each switch's loss-free rate; then idle ping latency
//! through the switch against a direct veth pair, and the delivered rate under a flood against the
//! peak over a ramp of offered rates. Medians of `--runs` runs. Needs root, iproute2, ethtool,
//! clang (for the two XDP programs), and for (d) and (e) the `bmcli` venv
//! (scripts/py-clients.sh).

use std::time::Duration;

use std::path::PathBuf;

use bench::harness::{
    Forwarder, JsonProgram, ROUTER, RunArgs, loss_free, measure, median, start, start_switch, stop,
    topo,
};
use clap::Parser;
use pisa_fabric::{Netns, veth};

#[derive(Parser, Debug)]
#[command(
    about = "The veth line-rate harness: bare AF_XDP, kernel XDP_REDIRECT and pisa-switch side by side (root)"
)]
struct Args {
    #[command(flatten)]
    run: RunArgs,
    /// Only the idle-latency part.
    #[arg(long)]
    latency_only: bool,
    /// Only the throughput table (and the loss-free rates): no flood ramp, no latency.
    #[arg(long, conflicts_with = "latency_only")]
    throughput_only: bool,
    /// A P4 program in p4c's BMv2 JSON to measure beside `basic` (e.g. behavioral-model's
    /// mininet/simple_router.json).
    #[arg(long, requires = "commands")]
    json: Option<PathBuf>,
    /// The `simple_switch_CLI` commands that program `--json` (e.g. bench/bmv2/simple_router.txt).
    #[arg(long, requires = "json")]
    commands: Option<PathBuf>,
    /// BMv2's `simple_switch` (scripts/bmv2-build.sh builds one): the same program through it.
    #[arg(long, requires = "json")]
    bmv2: Option<PathBuf>,
    /// `simple_switch_CLI` [default: the bmcli venv's].
    #[arg(long)]
    cli: Option<PathBuf>,
    /// Also find each switch's loss-free rate: the highest offered rate losing at most 0.1%,
    /// by bisection over 7 runs below 1.2x its median delivered rate.
    #[arg(long)]
    loss_free: bool,
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
    let mut report = String::new();
    if !args.latency_only {
        report += "| path | 64 B | 1500 B |\n|---|---|---|\n";
        let mut cases: Vec<(String, Forwarder)> = vec![
            ("(a) bare AF_XDP forwarder".into(), Forwarder::Bare),
            ("(b) kernel XDP_REDIRECT".into(), Forwarder::Kernel),
            (
                "(c) pisa-switch basic, 1 worker".into(),
                Forwarder::Switch(1),
            ),
            (
                "(c) pisa-switch basic, 2 workers".into(),
                Forwarder::Switch(2),
            ),
        ];
        let program = args.json.as_ref().map(|json| JsonProgram {
            json: json.clone(),
            commands: args.commands.clone().expect("--commands"),
            cli: args.cli.clone().unwrap_or_else(|| {
                let root = std::env::var_os("PISA_VENV_DIR").map_or_else(
                    || PathBuf::from("/var/cache/pisa-switch/venvs"),
                    PathBuf::from,
                );
                root.join("bmcli/bin/simple_switch_CLI")
            }),
        });
        if let Some(p) = &program {
            let name = p.json.file_name().unwrap_or_default().to_string_lossy();
            for w in [1, 2] {
                let label = format!(
                    "(d) pisa-switch {name}, {w} worker{}",
                    if w == 1 { "" } else { "s" }
                );
                cases.push((label, Forwarder::Json(w, p.clone())));
            }
            if let Some(bin) = &args.bmv2 {
                // On CPU 1 as the 1-worker switches, and on both CPUs (BMv2 runs a thread per
                // stage and per queue).
                for (cpus, label) in [("1", "CPU 1"), ("0,1", "CPUs 0-1")] {
                    cases.push((
                        format!("(e) BMv2 simple_switch {name}, {label}"),
                        Forwarder::Bmv2(bin.clone(), cpus, p.clone()),
                    ));
                }
            }
        }
        let mut results = Vec::new();
        let mut lossless = Vec::new();
        for (name, f) in &cases {
            let mut row = Vec::new();
            let mut free = Vec::new();
            for size in [64usize, 1500] {
                let p = start(&t, f);
                std::thread::sleep(Duration::from_millis(200));
                let rates: Vec<f64> = (0..args.run.runs)
                    .map(|_| measure(&t, size, 0, args.run.seconds))
                    .collect();
                let m = median(rates.clone());
                eprintln!("{name} {size} B: runs {rates:.0?} -> median {m:.0} frames/s");
                // The loss-free rate of the switches (not of the bare forwarder or the kernel).
                if args.loss_free
                    && matches!(
                        f,
                        Forwarder::Switch(1) | Forwarder::Json(1, _) | Forwarder::Bmv2(..)
                    )
                {
                    eprintln!("{name} {size} B: loss-free rate");
                    free.push(loss_free(&t, size, 1.2 * m, args.run.seconds, 7));
                }
                stop(&t, f, p);
                row.push(m);
            }
            report += &format!(
                "| {name} | {:.3} Mpps | {:.3} Mpps |\n",
                row[0] / 1e6,
                row[1] / 1e6
            );
            if !free.is_empty() {
                lossless.push((name.clone(), free));
            }
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
        if program.is_some() {
            for (s, size) in [(0, "64 B"), (1, "1500 B")] {
                report += &format!(
                    "Ratios at {size}: (d,1w)/(c,1w) = {:.2}, (d,2w)/(c,2w) = {:.2}",
                    ratio(4, 2, s),
                    ratio(5, 3, s)
                );
                if args.bmv2.is_some() {
                    report += &format!(
                        ", (d,1w)/(e,CPU 1) = {:.1}, (d,2w)/(e,CPUs 0-1) = {:.1}",
                        ratio(4, 6, s),
                        ratio(5, 7, s)
                    );
                }
                report += "\n";
            }
        }
        if !lossless.is_empty() {
            report += "\nLoss-free rates (at most 0.1% lost, bisection over 7 runs):\n\n| switch | 64 B | 1500 B |\n|---|---|---|\n";
            for (name, free) in &lossless {
                report += &format!(
                    "| {name} | {:.3} Mpps | {:.3} Mpps |\n",
                    free[0] / 1e6,
                    free[1] / 1e6
                );
            }
        }
        if args.throughput_only {
            println!("{report}");
            if let Some(out) = &args.run.out {
                std::fs::write(out, &report)
                    .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
            }
            return;
        }

        // Flood: offered rate ramp through the 1-worker switch at 64 B; peak vs the unlimited flood.
        let f = Forwarder::Switch(1);
        let p = start(&t, &f);
        let mut ramp = Vec::new();
        for pps in [100_000u64, 200_000, 400_000, 600_000, 800_000] {
            let r = measure(&t, 64, pps, args.run.seconds);
            eprintln!("offered {pps} pps -> delivered {r:.0}");
            ramp.push((pps, r));
        }
        let flood: Vec<f64> = (0..args.run.runs)
            .map(|_| measure(&t, 64, 0, args.run.seconds))
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
    }

    // Idle latency: ping through the switch (routed) against a direct veth pair.
    let d1 = Netns::new("d1").unwrap();
    let d2 = Netns::new("d2").unwrap();
    let (x, y) = veth(&d1, &d2).unwrap();
    d1.exec("ip", &["addr", "add", "192.0.2.1/24", "dev", &x])
        .unwrap();
    d2.exec("ip", &["addr", "add", "192.0.2.2/24", "dev", &y])
        .unwrap();
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
    // Side by side, `runs` times: direct veth; the switch with its default wait, on
    // CPU 1 as in the throughput runs and unpinned (its adaptive window, up to 2 ms, does not
    // cover 10 ms gaps); a window of up to 20 ms, which grows to cover them; busy-polling.
    let switches: [(&str, &str, &[&str]); 4] = [
        (
            "pisa-switch, default (adaptive window up to 2 ms: sleeps at 10 ms gaps), on CPU 1",
            "1",
            &[],
        ),
        (
            "pisa-switch, default (adaptive window up to 2 ms: sleeps at 10 ms gaps), unpinned",
            "0,1",
            &[],
        ),
        (
            "pisa-switch, --poll-window-us 20000 (adaptive window up to 20 ms: grows to cover 10 ms gaps), on CPU 1",
            "1",
            &["--poll-window-us", "20000"],
        ),
        ("pisa-switch, --busy-poll, on CPU 1", "1", &["--busy-poll"]),
    ];
    let mut direct = Vec::new();
    let mut through: Vec<Vec<(f64, f64)>> = vec![Vec::new(); switches.len()];
    for _ in 0..args.run.runs {
        direct.push(ping_percentiles(&d1, "192.0.2.2", 200));
        for (i, (_, cpus, extra)) in switches.iter().enumerate() {
            let p = start_switch(&t, 1, cpus, extra);
            through[i].push(ping_percentiles(&t.h1, "10.0.2.1", 200));
            stop(&t, &Forwarder::Switch(1), Some(p));
        }
    }
    let p50 = |v: &[(f64, f64)]| median(v.iter().map(|x| x.0).collect());
    let p99 = |v: &[(f64, f64)]| median(v.iter().map(|x| x.1).collect());
    let dp50 = p50(&direct);
    report += &format!(
        "\nIdle ping RTT (200 pings at 100/s, two switch traversals per ping; medians of {} runs): \
         direct veth p50 {:.0} us, p99 {:.0} us\n",
        args.run.runs,
        dp50 * 1000.0,
        p99(&direct) * 1000.0
    );
    for ((name, _, _), v) in switches.iter().zip(&through) {
        report += &format!(
            "- {name}: p50 {:.0} us, p99 {:.0} us: p50 ratio {:.2}\n",
            p50(v) * 1000.0,
            p99(v) * 1000.0,
            p50(v) / dp50.max(1e-9)
        );
    }
    println!("{report}");
    if let Some(out) = &args.run.out {
        std::fs::write(out, &report).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
    }
}
