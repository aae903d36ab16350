//! `pisa-latency`: round-trip times through pisa-switch at idle gaps and under load, side by side
//! with a direct veth pair and Linux routers (issue 17; docs/performance.md, "Per-hop latency").
//!
//! 1. One switch ([`bench::latency::OneSwitch`]): at each idle gap between pings (default 1 ms,
//!    10 ms, 50 ms and 1 s), a direct veth pair, a Linux router, and pisa-switch with its
//!    default wait (an adaptive window of up to 2 ms, yielding), spinning in that window
//!    (`--poll-spin`), sleeping at once (`--poll-window-us 0`), the fabric tooling's wait, and
//!    `--busy-poll`, in turn within each run.
//! 2. Under load: the switch's capacity (64-byte frames flat out from a second host pair through
//!    the same switch), then pings 10 ms apart at 50% and 90% of it.
//! 3. A 3-hop leaf-spine path (h1 - leaf - spine - leaf - h2), built by the fabric tooling with
//!    `basic` (its switches wait as the tooling sets them) against `kernel` routers.
//!
//! Each cell is the median over `--runs` of each run's p50, p99 and max. Needs root, iproute2,
//! iputils-ping, ethtool, clang and the workspace's release binaries.

use std::time::Duration;

use bench::harness::median;
use bench::latency::{OneSwitch, ping, summary, warm_up};
use clap::Parser;
use pisa_fabric::fabric::{Fabric, Options, SWITCH_WAIT};
use topo::Topology;

#[derive(Parser, Debug)]
#[command(
    about = "RTT through pisa-switch at idle gaps and under load, against direct veth and Linux routers"
)]
struct Args {
    /// Idle gaps between probes (ms, or s with a suffix).
    #[arg(long, value_delimiter = ',', default_value = "1ms,10ms,50ms,1s")]
    gaps: Vec<String>,
    /// Probes per gap and forwarder in a run...
    #[arg(long, default_value_t = 200)]
    count: usize,
    /// ...but at most this many seconds of them.
    #[arg(long, default_value_t = 30.0)]
    max_seconds: f64,
    /// Runs (each cell is the median over runs).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Background loads, % of the switch's measured capacity (empty: none).
    #[arg(long, value_delimiter = ',', default_value = "50,90")]
    loads: Vec<u32>,
    /// Skip the 3-hop leaf-spine part.
    #[arg(long)]
    no_fabric: bool,
    /// Instead: where a probe's time goes through one switch (kernel tracepoints recorded with
    /// `perf` while pinging at each gap; bench/src/trace.rs), for the switch's waits.
    #[arg(long)]
    trace: bool,
    /// Also write the report here.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

fn parse_gap(s: &str) -> Duration {
    let (n, unit) = s.trim().split_at(
        s.trim()
            .find(|c: char| c.is_alphabetic())
            .unwrap_or(s.len()),
    );
    let n: f64 = n.parse().unwrap_or_else(|_| panic!("bad gap {s}"));
    Duration::from_secs_f64(match unit {
        "s" => n,
        "ms" | "" => n / 1e3,
        "us" => n / 1e6,
        _ => panic!("bad gap {s}"),
    })
}

/// Rows of (name, per gap: per run [p50, p99, max]).
type Rows = Vec<(String, Vec<Vec<[f64; 3]>>)>;

fn table(title: &str, gaps: &[String], rows: &Rows, base: usize) -> String {
    let mut s = format!("\n{title}\n\n| forwarder |");
    for g in gaps {
        s += &format!(" {g}: p50 / p99 / max (us) |");
    }
    s += "\n|---|";
    s += &"---|".repeat(gaps.len());
    s += "\n";
    let med = |r: &Vec<[f64; 3]>, k: usize| median(r.iter().map(|x| x[k]).collect());
    for (name, per_gap) in rows {
        s += &format!("| {name} |");
        for r in per_gap {
            s += &format!(" {:.0} / {:.0} / {:.0} |", med(r, 0), med(r, 1), med(r, 2));
        }
        s += "\n";
    }
    let (bname, b) = (&rows[base].0, &rows[base].1);
    s += &format!("\nRatios to {bname} (p50, p99):\n\n| forwarder |");
    for g in gaps {
        s += &format!(" {g} |");
    }
    s += "\n|---|";
    s += &"---|".repeat(gaps.len());
    s += "\n";
    for (name, per_gap) in rows.iter().filter(|r| &r.0 != bname) {
        s += &format!("| {name} |");
        for (r, bb) in per_gap.iter().zip(b) {
            s += &format!(
                " {:.2} / {:.2} |",
                med(r, 0) / med(bb, 0).max(1e-9),
                med(r, 1) / med(bb, 1).max(1e-9)
            );
        }
        s += "\n";
    }
    s
}

/// Medians of each segment of the probes' paths, per gap and switch wait.
fn trace_report(t: &OneSwitch, names: &[String], gaps: &[Duration], count: usize) -> String {
    let waits: [(&str, &[&str]); 3] = [
        ("default", &[]),
        ("sleeps at once", &["--poll-window-us", "0"]),
        ("--busy-poll", &["--busy-poll"]),
    ];
    let mut s = format!(
        "\nWhere the time goes through one switch (medians over {count} probes, us; perf \
         tracepoints, which slow every path somewhat)\n\n| segment |"
    );
    let mut cols = Vec::new();
    for (name, gap) in names.iter().zip(gaps) {
        for (wait, flags) in &waits {
            let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
            let mut p = t.start_switch(&flags);
            let data = t.dir.join("perf.data");
            let gap_s = format!("{:.6}", gap.as_secs_f64());
            let n = count.to_string();
            warm_up(&t.h1, "10.0.2.1");
            let script = bench::trace::record(
                &data,
                &[
                    "ip",
                    "netns",
                    "exec",
                    t.h1.name(),
                    "ping",
                    "-q",
                    "-i",
                    &gap_s,
                    "-c",
                    &n,
                    "10.0.2.1",
                ],
            )
            .expect("perf");
            let _ = p.terminate(Duration::from_secs(5));
            let probes = bench::trace::probes(&script, &t.ports[0], &t.h1_if);
            s += &format!(" {name}, {wait} |");
            cols.push(probes);
        }
    }
    s += "\n|---|";
    s += &"---|".repeat(cols.len());
    s += "\n";
    for (k, seg) in bench::trace::SEGMENTS.iter().enumerate() {
        s += &format!("| {seg} |");
        for probes in &cols {
            let v: Vec<f64> = probes
                .iter()
                .filter_map(|p| p.seg[k])
                .map(|n| n as f64 / 1e3)
                .collect();
            s += &if v.is_empty() {
                " - |".to_string()
            } else {
                format!(" {:.1} |", median(v))
            };
        }
        s += "\n";
    }
    s += "| total (median of sums) |";
    for probes in &cols {
        let v: Vec<f64> = probes
            .iter()
            .map(|p| p.seg.iter().flatten().sum::<u64>() as f64 / 1e3)
            .collect();
        s += &format!(" {:.1} |", median(v));
    }
    s += "\n| probes traced; wake-ups that found the CPU idle |";
    for probes in &cols {
        let woke: Vec<bool> = probes.iter().filter_map(|p| p.halted).collect();
        s += &format!(
            " {}; {}/{} |",
            probes.len(),
            woke.iter().filter(|h| **h).count(),
            woke.len()
        );
    }
    s + "\n"
}

fn main() {
    let args = Args::parse();
    let gaps: Vec<Duration> = args.gaps.iter().map(|g| parse_gap(g)).collect();
    let count = |gap: Duration| {
        args.count
            .min((args.max_seconds / gap.as_secs_f64()) as usize)
            .max(5)
    };
    let mut report = format!(
        "pisa-latency: {} runs, gaps {}, up to {} probes or {} s per gap\n",
        args.runs,
        args.gaps.join(","),
        args.count,
        args.max_seconds
    );
    let t = OneSwitch::new();
    if args.trace {
        report += &trace_report(&t, &args.gaps, &gaps, args.count.min(100));
        println!("{report}");
        if let Some(out) = &args.out {
            std::fs::write(out, &report)
                .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
        }
        return;
    }
    let fabric_wait: Vec<String> = SWITCH_WAIT.iter().map(|s| s.to_string()).collect();
    let switches: Vec<(String, Vec<String>)> = vec![
        ("pisa-switch, default".into(), vec![]),
        (
            "pisa-switch, spinning in the window (--poll-spin)".into(),
            vec!["--poll-spin".into()],
        ),
        (
            "pisa-switch, sleeps at once (--poll-window-us 0)".into(),
            vec!["--poll-window-us".into(), "0".into()],
        ),
        (
            format!(
                "pisa-switch, fabric tooling's wait ({})",
                SWITCH_WAIT.join(" ")
            ),
            fabric_wait,
        ),
        (
            "pisa-switch, --busy-poll".into(),
            vec!["--busy-poll".into()],
        ),
    ];
    let mut rows: Rows = vec![
        ("direct veth".into(), vec![Vec::new(); gaps.len()]),
        ("Linux router".into(), vec![Vec::new(); gaps.len()]),
    ];
    rows.extend(
        switches
            .iter()
            .map(|(n, _)| (n.clone(), vec![Vec::new(); gaps.len()])),
    );
    for run in 0..args.runs {
        eprintln!("pisa-latency: one switch, run {}/{}", run + 1, args.runs);
        let mut probe = |row: usize, ns: &pisa_fabric::Netns, dst: &str| {
            for (g, gap) in gaps.iter().enumerate() {
                let v = ping(ns, dst, *gap, count(*gap));
                rows[row].1[g].push(summary(&v));
            }
        };
        probe(0, &t.d1, "192.0.2.2");
        t.kernel_router(true);
        probe(1, &t.h1, "10.0.2.1");
        t.kernel_router(false);
        for (i, (_, flags)) in switches.iter().enumerate() {
            let mut p = t.start_switch(flags);
            probe(2 + i, &t.h1, "10.0.2.1");
            let _ = p.terminate(Duration::from_secs(5));
        }
    }
    report += &table(
        "One switch, idle (two traversals per probe)",
        &args.gaps,
        &rows,
        0,
    );

    if !args.loads.is_empty() {
        let gap = Duration::from_millis(10);
        let n = 100;
        // The worker on CPU 1, the generator on CPU 0, as in pisa-linerate.
        let pin = |f: &[&str]| -> Vec<String> {
            f.iter()
                .chain(&["--pin", "1"])
                .map(|s| s.to_string())
                .collect()
        };
        let mut p = t.start_switch(&pin(&[]));
        let mut bg = t.background(0, 4.0);
        std::thread::sleep(Duration::from_secs(1));
        let capacity = t.delivered(2.0);
        let _ = bg.wait(Duration::from_secs(10));
        let _ = p.terminate(Duration::from_secs(5));
        report += &format!(
            "\nUnder load: pisa-switch (default, worker on CPU 1) forwards {:.3} Mpps of 64-byte frames flat out \
             (g1 -> g2 through the same worker); probes 10 ms apart, {n} per run, while g1 sends \
             at a share of that.\n\n| forwarder | load | background delivered (Mpps) | p50 / p99 / max (us) |\n|---|---|---|---|\n",
            capacity / 1e6
        );
        let fwds: [(&str, Option<Vec<String>>); 3] = [
            ("Linux router", None),
            ("pisa-switch, default, worker on CPU 1", Some(pin(&[]))),
            (
                "pisa-switch, --busy-poll, worker on CPU 1",
                Some(pin(&["--busy-poll"])),
            ),
        ];
        for load in &args.loads {
            let pps = (capacity * f64::from(*load) / 100.0) as u64;
            for (name, flags) in &fwds {
                let (mut sums, mut got) = (Vec::new(), Vec::new());
                for _ in 0..args.runs {
                    let sw = match flags {
                        Some(f) => Some(t.start_switch(f)),
                        None => {
                            t.kernel_router(true);
                            None
                        }
                    };
                    let secs = gap.as_secs_f64() * n as f64 + 3.0;
                    let mut bg = t.background(pps, secs);
                    std::thread::sleep(Duration::from_millis(500));
                    let c0 = (t.sink_count(), std::time::Instant::now());
                    sums.push(summary(&ping(&t.h1, "10.0.2.1", gap, n)));
                    got.push(
                        t.sink_count().saturating_sub(c0.0) as f64 / c0.1.elapsed().as_secs_f64(),
                    );
                    let _ = bg.wait(Duration::from_secs(10));
                    match sw {
                        Some(mut p) => {
                            let _ = p.terminate(Duration::from_secs(5));
                        }
                        None => t.kernel_router(false),
                    }
                }
                let med = |k: usize| median(sums.iter().map(|x| x[k]).collect());
                report += &format!(
                    "| {name} | {load}% ({:.3} Mpps) | {:.3} | {:.0} / {:.0} / {:.0} |\n",
                    pps as f64 / 1e6,
                    median(got) / 1e6,
                    med(0),
                    med(1),
                    med(2)
                );
            }
        }
    }
    drop(t);

    if !args.no_fabric {
        let mut rows: Rows = Vec::new();
        for (name, program) in [
            ("Linux routers", "kernel"),
            ("pisa-switch (basic)", "basic"),
        ] {
            let text = format!(
                "defaults rate=10G buffer=256\nswitch l1 program={program} role=leaf\n\
                 switch sp program={program} role=spine\nswitch l2 program={program} role=leaf\n\
                 host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\nhost h2 ipv4=10.0.2.1 ipv6=fd00::2:1\n\
                 link l1:1 h1\nlink l1:2 sp:1\nlink sp:2 l2:2\nlink l2:1 h2\n"
            );
            let topo = Topology::parse(&text).expect("topology");
            let f =
                Fabric::up(&topo, &Options::for_test('L'), |m| eprintln!("{m}")).expect("bring-up");
            eprint!("{}", f.program().expect("programming over P4Runtime"));
            let mut per_gap = vec![Vec::new(); gaps.len()];
            for run in 0..args.runs {
                eprintln!("pisa-latency: 3-hop, {name}, run {}/{}", run + 1, args.runs);
                for (g, gap) in gaps.iter().enumerate() {
                    per_gap[g].push(summary(&ping(f.ns("h1"), "10.0.2.1", *gap, count(*gap))));
                }
            }
            rows.push((name.to_string(), per_gap));
        }
        report += &table(
            "3-hop leaf-spine path (h1 - leaf - spine - leaf - h2; six traversals per probe), as \
             the fabric tooling brings it up",
            &args.gaps,
            &rows,
            0,
        );
        let p50 = |r: &Vec<[f64; 3]>| median(r.iter().map(|x| x[0]).collect());
        report += "\nWhat a pisa-switch traversal adds over a Linux router's, p50 (us): ";
        for (g, name) in args.gaps.iter().enumerate() {
            report += &format!(
                "{name} {:.1}; ",
                (p50(&rows[1].1[g]) - p50(&rows[0].1[g])) / 6.0
            );
        }
        report += "\n";
    }
    println!("{report}");
    if let Some(out) = &args.out {
        std::fs::write(out, &report).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
    }
}
