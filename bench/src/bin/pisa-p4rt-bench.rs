//! `pisa-p4rt-bench`: P4Runtime write throughput and the forwarding rate during a write storm
//! (issue 4). In the line-rate harness's namespaces (`h1 --[p1] sw [p2]-- h2`, AF_XDP generator,
//! XDP-drop sink counted by the kernel) it runs `pisa-switch --program basic` with its worker
//! pinned to CPU 1 and:
//! 1. writes `--routes` IPv4 LPM routes over P4Runtime in batches of 1, 100 and 1000 (and deletes
//!    them), reporting entries/s;
//! 2. measures the delivered frames/s at 64 B flat out and at half that rate, without and with a
//!    write storm (100k routes inserted and deleted in batches of 1000, over and over).
//!
//! The P4Runtime client runs inside the switch's namespace as `pisa-p4rt-bench client ...`.
//! Needs root, iproute2, ethtool, clang.

use std::time::{Duration, Instant};

use bench::harness::{
    Forwarder, RunArgs, measure, measure_offered, median, start_switch, stop, topo,
};
use clap::{Parser, Subcommand};
use p4runtime_server::client::Client;
use p4runtime_server::convert;
use p4runtime_server::proto::p4::v1 as p4;
use pipeline::control::{Entity, TableAction, TableEntry, Update, UpdateKind};
use pipeline::table::FieldMatch;
use pisa_fabric::Process;

#[derive(Parser, Debug)]
#[command(about = "P4Runtime write throughput and forwarding during a write storm (root)")]
struct Args {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Routes per throughput run.
    #[arg(long, default_value_t = 100_000)]
    routes: u32,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// The P4Runtime side (run inside the switch's namespace).
    Client {
        /// The switch's P4Runtime address.
        #[arg(long, default_value = "127.0.0.1:9559")]
        addr: String,
        /// Routes.
        #[arg(long)]
        routes: u32,
        /// Batch sizes to measure, in turn.
        #[arg(long, value_delimiter = ',')]
        batches: Vec<usize>,
        /// Instead: insert and delete the routes in batches of 1000 for this many seconds.
        #[arg(long)]
        storm: Option<f64>,
    },
}

/// Route `i`: a /32 in 20.0.0.0/8, pointing at ECMP member 1 (the harness's entries make it).
fn route(table_id: u32, kind: UpdateKind, i: u32) -> Update {
    Update {
        kind,
        entity: Entity::TableEntry(TableEntry {
            table_id,
            matches: vec![(
                1,
                FieldMatch::Lpm {
                    value: u128::from(0x1400_0000 | (i & 0x00ff_ffff)),
                    prefix_len: 32,
                },
            )],
            action: (kind != UpdateKind::Delete).then_some(TableAction::Member(1)),
            ..TableEntry::default()
        }),
    }
}

/// Writes `routes` routes as `kind` in batches of `batch`; returns entries/s.
async fn write_all(c: &mut Client, msgs: &[p4::Update], batch: usize) -> f64 {
    let start = Instant::now();
    for chunk in msgs.chunks(batch) {
        c.write(
            chunk.to_vec(),
            p4::write_request::Atomicity::ContinueOnError,
        )
        .await
        .expect("write");
    }
    msgs.len() as f64 / start.elapsed().as_secs_f64()
}

async fn client(addr: &str, routes: u32, batches: &[usize], storm: Option<f64>) {
    let mut c = Client::connect(addr, 1, 1).await.expect("connect");
    let schema = c.schema().await.expect("schema");
    let table = schema.tables[schema.table_by_name("ipv4_lpm").expect("ipv4_lpm")].id;
    let msgs = |kind| -> Vec<p4::Update> {
        (0..routes)
            .map(|i| convert::update_msg(&schema, &route(table, kind, i)))
            .collect()
    };
    let (inserts, deletes) = (msgs(UpdateKind::Insert), msgs(UpdateKind::Delete));
    if let Some(seconds) = storm {
        let start = Instant::now();
        let mut written = 0usize;
        while start.elapsed().as_secs_f64() < seconds {
            write_all(&mut c, &inserts, 1000).await;
            write_all(&mut c, &deletes, 1000).await;
            written += inserts.len() + deletes.len();
        }
        println!(
            "storm entries={written} rate={:.0}",
            written as f64 / start.elapsed().as_secs_f64()
        );
        return;
    }
    for &b in batches {
        let ins = write_all(&mut c, &inserts, b).await;
        let del = write_all(&mut c, &deletes, b).await;
        println!("batch={b} insert_rate={ins:.0} delete_rate={del:.0}");
    }
}

fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
        .unwrap_or(0.0)
}

fn main() {
    let args = Args::parse();
    if let Some(Cmd::Client {
        addr,
        routes,
        batches,
        storm,
    }) = &args.cmd
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(client(addr, *routes, batches, *storm));
        return;
    }
    let t = topo();
    let me = std::env::current_exe().expect("own path");
    let me = me.to_str().expect("utf-8 path");
    // The worker on CPU 1; the P4Runtime threads, generator and client share CPU 0.
    let sw = start_switch(&t, 1, "0,1", &["--pin", "1"]);
    let mut report = String::new();

    // 1. Write throughput.
    let routes = args.routes.to_string();
    let log = t.dir.join("client.log");
    let mut p = Process::spawn(
        &t.sw,
        "taskset",
        &[
            "-c",
            "0",
            me,
            "client",
            "--routes",
            &routes,
            "--batches",
            "1,100,1000",
        ],
        &log,
    )
    .expect("client");
    p.wait(Duration::from_secs(600))
        .expect("the client finishes");
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    eprint!("{out}");
    report += &format!(
        "P4Runtime write throughput, {} IPv4 LPM routes (/32, to an ECMP member), one client:\n\n\
         | batch | insert entries/s | delete entries/s |\n|---|---|---|\n",
        args.routes
    );
    for line in out.lines().filter(|l| l.starts_with("batch=")) {
        report += &format!(
            "| {} | {:.0} | {:.0} |\n",
            field(line, "batch"),
            field(line, "insert_rate"),
            field(line, "delete_rate")
        );
    }

    // 2. Forwarding without and with a write storm, flat out and at half rate.
    let storm_secs = args.run.seconds + 3.0;
    let mut rows = Vec::new();
    let mut storm_rates = Vec::new();
    let flat: Vec<f64> = (0..args.run.runs)
        .map(|_| measure(&t, 64, 0, args.run.seconds))
        .collect();
    let flat = median(flat);
    let half = (flat / 2.0) as u64;
    for (name, pps) in [("flat out", 0u64), ("half rate", half)] {
        let quiet: Vec<(f64, f64)> = (0..args.run.runs)
            .map(|_| measure_offered(&t, 64, pps, args.run.seconds))
            .collect();
        let mut stormy = Vec::new();
        for _ in 0..args.run.runs {
            let log = t.dir.join("storm.log");
            let secs = storm_secs.to_string();
            let mut s = Process::spawn(
                &t.sw,
                "taskset",
                &[
                    "-c", "0", me, "client", "--routes", "100000", "--storm", &secs,
                ],
                &log,
            )
            .expect("storm client");
            stormy.push(measure_offered(&t, 64, pps, args.run.seconds));
            s.wait(Duration::from_secs(120)).expect("the storm ends");
            let out = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(l) = out.lines().find(|l| l.starts_with("storm")) {
                storm_rates.push(field(l, "rate"));
            }
        }
        eprintln!("{name}: quiet {quiet:.0?}, storm {stormy:.0?}");
        let m = |v: &[(f64, f64)], k: usize| {
            median(v.iter().map(|r| if k == 0 { r.0 } else { r.1 }).collect())
        };
        rows.push((
            name,
            pps,
            m(&quiet, 0),
            m(&quiet, 1),
            m(&stormy, 0),
            m(&stormy, 1),
        ));
    }
    stop(&t, &Forwarder::Switch(1), Some(sw));
    report += &format!(
        "\nForwarding at 64 B (1 worker pinned to CPU 1) without and with a write storm of 100k \
         routes inserted and deleted in batches of 1000 ({:.0} entries/s during the runs); \
         medians of {} runs (delivered, and in brackets what the generator sent: on 2 cores it \
         shares CPU 0 with the storm):\n\n| offered | without storm | with storm | ratio | \
         delivered/sent without, with storm |\n|---|---|---|---|---|\n",
        if storm_rates.is_empty() {
            0.0
        } else {
            median(storm_rates)
        },
        args.run.runs
    );
    for (name, pps, quiet, quiet_sent, stormy, stormy_sent) in rows {
        let offered = if pps == 0 {
            name.to_string()
        } else {
            format!("{name} ({:.3} Mpps)", pps as f64 / 1e6)
        };
        report += &format!(
            "| {offered} | {:.3} Mpps ({:.3}) | {:.3} Mpps ({:.3}) | {:.3} | {:.3}, {:.3} |\n",
            quiet / 1e6,
            quiet_sent / 1e6,
            stormy / 1e6,
            stormy_sent / 1e6,
            stormy / quiet.max(1.0),
            quiet / quiet_sent.max(1.0),
            stormy / stormy_sent.max(1.0)
        );
    }
    println!("{report}");
    if let Some(path) = args.run.out {
        std::fs::write(&path, &report)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}
