//! `pisa-fabric`: fabrics of `pisa-switch` processes and real hosts in network namespaces.
//!
//! ```text
//! pisa-fabric gen leaf-spine --leaves 4 --spines 4 --hosts-per-leaf 4 --oversub 2 > ls.topo
//! pisa-fabric gen fat-tree --k 4 > ft.topo          # also: p4qcn, dbb
//! pisa-fabric up ls.topo --name ls                  # brings it up, programs it, leaves it running
//! ip netns exec pfls-h1 ping 10.0.4.4               # use it
//! pisa-fabric down ls                               # removes everything (also after a crash)
//! pisa-fabric demo                                  # the README's main job: a 4x4 leaf-spine end to end
//! pisa-fabric experiment --schemes basic,ecmp --workload websearch --loads 0.2,0.5 --out DIR
//! pisa-fabric e10 --link 7M --where sim --out DIR     # P4QCN's E10; --sweep 5,8,11 for Fig. 17
//! pisa-fabric e11 --loads 0.5 --out DIR              # PINT's E11 (HPCC) in namespaces
//! pisa-fabric dbb --experiment e8 --out DIR          # DBB's E8 / E9 with kernel TCP
//! ```
//! `program`, `counters` and `health` are what the controller runs inside the management
//! namespace. Every P4Runtime call they make has a deadline (`--timeout`, 10 s by default): a
//! switch that does not answer fails the command with its name and how long it was waited for.

mod dbb;
mod demo;
mod e10;
mod e11;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use clap::{Parser, Subcommand};
use dbb::{DbbArgs, dbb_experiment};
use demo::{DemoArgs, demo};
use e10::{E10Args, e10};
use e11::{E11Args, e11};
use p4runtime_server::client::{Client, ClientError, Deadlines, health_check};
use p4runtime_server::proto::p4::v1 as p4;
use pisa_fabric::fabric::{self, GRPC_PORT, Options, mgmt_addrs};
use pisa_fabric::sweep;
use topo::{self, End, GenProps, LinkProps, Topology};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Fabrics of pisa-switch processes and hosts in network namespaces"
)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Debug, Clone)]
struct LinkArgs {
    /// Host link rate (K/M/G suffixes).
    #[arg(long, default_value = "1G")]
    host_rate: String,
    /// Switch-to-switch link rate (fat-tree, p4qcn, dbb).
    #[arg(long, default_value = "1G")]
    fabric_rate: String,
    /// Propagation delay of every link (us or ms suffix).
    #[arg(long, default_value = "0us")]
    delay: String,
    /// Egress queue depth of every link, packets.
    #[arg(long, default_value_t = 256)]
    buffer: u32,
}

#[derive(Subcommand, Debug)]
enum Gen {
    /// Leaf-spine: every leaf to every spine.
    LeafSpine {
        #[command(flatten)]
        shape: Shape,
        /// Oversubscription (host capacity : uplink capacity per leaf).
        #[arg(long, default_value_t = 2.0)]
        oversub: f64,
        #[command(flatten)]
        links: LinkArgs,
    },
    /// k-ary fat-tree.
    FatTree {
        #[arg(long, default_value_t = 4)]
        k: usize,
        #[command(flatten)]
        links: LinkArgs,
    },
    /// P4QCN's 2 spines, 4 leaves, 4 ToRs.
    P4qcn {
        #[arg(long, default_value_t = 2)]
        hosts_per_tor: usize,
        #[command(flatten)]
        links: LinkArgs,
    },
    /// DBB's 8 switches and 12 hosts.
    Dbb {
        #[command(flatten)]
        links: LinkArgs,
    },
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Prints a generated topology.
    Gen {
        #[command(subcommand)]
        kind: Gen,
    },
    /// Brings a fabric up, programs it and leaves it running.
    Up {
        /// Topology file.
        topology: PathBuf,
        /// Fabric name (1-6 letters and digits): namespaces are pf<NAME>-<node>.
        #[arg(long, default_value = "f")]
        name: String,
        /// Switch port I/O.
        #[arg(long, default_value = "af-xdp")]
        io: String,
        /// How switches are linked to each other: veth pairs, or shared-memory rings between
        /// pisa-switch processes (links to hosts stay veth).
        #[arg(long, default_value = "shm")]
        links: pisa_fabric::fabric::Links,
        /// Run every switch with this program instead of the one its line names (`kernel`:
        /// Linux routers).
        #[arg(long)]
        program: Option<String>,
        /// Run the switches' workers in SCHED_FIFO at this priority (0: normal scheduling;
        /// docs/dataplane.md, "Real-time workers").
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=99))]
        rt_priority: u8,
    },
    /// Tears a fabric down.
    Down {
        /// Fabric name.
        #[arg(default_value = "f")]
        name: String,
    },
    /// Programs every switch over P4Runtime (run in the management namespace).
    Program {
        /// Topology file.
        topology: PathBuf,
        /// Seconds to wait for each switch's answer to each call.
        #[arg(long, default_value_t = 10.0, value_parser = parse_seconds)]
        timeout: f64,
    },
    /// Prints a counter's non-zero cells on every switch, `SWITCH INDEX PACKETS BYTES` (run in
    /// the management namespace). Switches whose program lacks a named counter are skipped.
    Counters {
        /// Topology file.
        topology: PathBuf,
        /// The counter (every program has the default, its ports' transmit counters).
        #[arg(long, default_value = "egress.port_tx")]
        counter: String,
        /// Seconds to wait for each switch's answer to each call.
        #[arg(long, default_value_t = 10.0, value_parser = parse_seconds)]
        timeout: f64,
    },
    /// Asks every switch's gRPC health service whether it answers (run in the management
    /// namespace); fails naming the switches that do not.
    Health {
        /// Topology file.
        topology: PathBuf,
        /// Seconds to wait for each switch.
        #[arg(long, default_value_t = 2.0, value_parser = parse_seconds)]
        timeout: f64,
    },
    /// The main job: a leaf-spine end to end (bring-up, all pairs, iperf3 across the spines,
    /// uplink load and a plot, teardown).
    Demo(DemoArgs),
    /// Runs a workload per (scheme, load, rep) on a fresh fabric each, with FCTs, uplink balance,
    /// drops and queues in CSVs and plots; resumes, skipping finished points.
    Experiment(Box<ExperimentArgs>),
    /// P4QCN's E10: six configurations on the paper's topology, in pisa-sim or namespaces, or
    /// the threshold sweep of its Fig. 17 (--sweep).
    E10(Box<E10Args>),
    /// PINT's E11: HPCC(INT) against HPCC(PINT) with pisa-host on a small leaf-spine.
    E11(Box<E11Args>),
    /// DBB's E8 and E9 (issue 13): paced TCP flows, scenarios A-D, in namespaces.
    Dbb(Box<DbbArgs>),
}

#[derive(clap::Args, Debug)]
struct ExperimentArgs {
    /// A topology file (else a generated leaf-spine, or --fat-tree).
    #[arg(long)]
    topology: Option<PathBuf>,
    /// How switches are linked to each other: veth pairs, or shared-memory rings between
    /// pisa-switch processes (links to hosts stay veth).
    #[arg(long, default_value = "shm")]
    links: pisa_fabric::fabric::Links,
    #[command(flatten)]
    shape: Shape,
    /// A k-ary fat-tree instead of a leaf-spine.
    #[arg(long)]
    fat_tree: Option<usize>,
    /// Oversubscription of a generated leaf-spine.
    #[arg(long, default_value_t = 2.0)]
    oversub: f64,
    /// Egress queue depth of every generated link, packets.
    #[arg(long, default_value_t = 256)]
    buffer: u32,
    /// Host link rate of a generated topology (fat-tree links too).
    #[arg(long, default_value = "100M")]
    host_rate: String,
    /// Schemes, comma-separated: program names (basic, ecmp, ...), or kernel (Linux routers);
    /// a program may take plan parameters of its own after colons, over --set's
    /// (p4te:routing=static:ecn=1), so variants of one program pair like other schemes.
    #[arg(long, default_value = "ecmp")]
    schemes: String,
    /// A fabric-plan parameter for every switch (repeatable), e.g. flowlet_gap_us=200.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// websearch, datamining or hadoop.
    #[arg(long, default_value = "websearch")]
    workload: String,
    /// Loads, comma-separated fractions.
    #[arg(long, default_value = "0.2,0.4,0.6,0.8")]
    loads: String,
    /// The capacity loads refer to: host (each host's link, HPCC) or fabric (each leaf's
    /// uplinks shared by its hosts, CONGA).
    #[arg(long, default_value = "host")]
    load_of: String,
    /// stride, random, permutation, all-to-all, incast, or flows:FILE (explicit `SRC DST SIZE
    /// START` lines: host names, bytes, seconds; loads then only label the points).
    #[arg(long, default_value = "random")]
    pattern: String,
    /// Incast groups (COUNTxSIZE[:CLASS],...): one synchronised incast per second.
    #[arg(long, default_value = "24x512Ki:short,8x1024Ki:large")]
    incast: String,
    /// Arrival window, seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Seconds after the window before unfinished flows are recorded (finished=false).
    #[arg(long, default_value_t = 10.0)]
    drain: f64,
    /// Repetitions.
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Output directory.
    #[arg(long, default_value = "experiment")]
    out: PathBuf,
    /// Congestion control: reno, cubic, bbr, or dctcp (our BPF DCTCP, `pisa_dctcp`, with ECN;
    /// cubic with RFC 3168 ECN where it cannot be loaded).
    #[arg(long, default_value = "cubic")]
    cc: String,
    /// net.ipv4.tcp_ecn of every host: 0, 1 or 2.
    #[arg(long, default_value_t = 1)]
    ecn: u8,
    /// net.ipv4.tcp_reordering of every host (the kernel's default is 3): how much reordering
    /// TCP tolerates before a fast retransmit, for the spraying schemes.
    #[arg(long)]
    tcp_reordering: Option<u32>,
    /// ToS of short flows (at most the workload's p90).
    #[arg(long, default_value = "0x08", value_parser = parse_tos)]
    short_tos: u8,
    /// ToS of large flows.
    #[arg(long, default_value = "0x10", value_parser = parse_tos)]
    large_tos: u8,
    /// Seed of the schedules.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How a point's flows are seeded: `value` (from the workload, pattern, load and rep, so a
    /// load gets the same flows in every sweep) or `position` (from the load's position in
    /// --loads: the sweeps recorded before 2026-11-26).
    #[arg(long, default_value = "value")]
    seeding: pisa_fabric::experiment::Seeding,
    /// Fabric name (1-6 letters and digits).
    #[arg(long, default_value = "exp")]
    name: String,
    /// Records a program counter (e.g. p4te's egress.facks) on every switch whose program has
    /// it at the end of each point, into points/*/counters.csv and DIR/counters.csv; repeatable.
    #[arg(long = "record-counter")]
    record_counters: Vec<String>,
    /// Fail at a point whose fidelity is degraded (the emulator fell behind: late links,
    /// kernel-side drops, late flow starts, a saturated CPU) instead of warning.
    #[arg(long)]
    require_fidelity: bool,
    /// Measure a point whose fidelity was degraded again (the same flows), up to N times; the
    /// degraded attempts stay in points/<point>.attempt<K>/ and are listed in OUT/retries.csv.
    /// Resuming a finished sweep with it re-measures only its degraded points.
    #[arg(long, default_value_t = 0, value_name = "N")]
    retry_degraded: usize,
    /// Where the points run: `namespaces` (pisa-switch processes, Linux TCP) or `sim` (pisa-sim
    /// in virtual time with its Linux-like TCP hosts: the same flows, the same outputs, no
    /// fidelity verdict; docs/sim.md).
    #[arg(long = "where", default_value = "namespaces")]
    place: pisa_fabric::experiment::Place,
    /// With --where sim: what each switch traversal takes, µs (0: nothing, as an ASIC; to
    /// compare with namespaces, their calibration's per_hop_us).
    #[arg(long, default_value_t = 0)]
    sim_hop_us: u64,
    /// With --where sim: frames cross links store-and-forward (their serialisation time added
    /// after they start to leave, as on a wire); without it, as between namespaces.
    #[arg(long)]
    sim_store_and_forward: bool,
    /// With --where sim: every switch stalls now and then, as a pisa-switch process waiting
    /// for a CPU in namespaces: RATE stalls a second of running time, MEAN_US µs each on
    /// average (both exponential); what arrives meanwhile waits (docs/sim.md, "Stalls")
    #[arg(long, value_name = "RATE:MEAN_US")]
    sim_stalls: Option<sim::fabric::Stalls>,
    /// IP version of the flows: 4, or 6 (the hosts' IPv6 addresses; the ToS goes in the traffic
    /// class).
    #[arg(long, default_value = "4", value_parser = ["4", "6"])]
    ip: String,
    /// With --where sim: how many points run at once, each on a core of its own (0: one per
    /// core). Every point is deterministic, so the results do not depend on it.
    #[arg(long, default_value_t = 0)]
    jobs: usize,
    /// Instead of the sweep: find the highest host-link rate, among these comma-separated
    /// candidates (e.g. 100M,50M,20M,10M), at which every scheme keeps fidelity at the highest
    /// of --loads, with one short probe per scheme and rate (every link scaled alike; writes
    /// OUT/rate-calibration.md and OUT/calibrated-rate; docs/experiments.md).
    #[arg(long, value_name = "RATES")]
    calibrate_rate: Option<String>,
    /// Run the switches' workers in SCHED_FIFO at this priority (0: the normal scheduler), so
    /// that a worker woken for a frame or a shaping deadline preempts the hosts' threads at once
    /// (docs/dataplane.md, "Real-time workers"; docs/experiments.md, "Fidelity").
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=99))]
    switch_rt_priority: u8,
    /// The arrival window of each --calibrate-rate probe, seconds (then --drain).
    #[arg(long, default_value_t = 10.0)]
    probe_seconds: f64,
}

fn parse_tos(s: &str) -> Result<u8, String> {
    match s.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|_| format!("{s}: a byte, decimal or 0x.."))
}

fn experiment(a: &ExperimentArgs, cancel: Arc<AtomicBool>) -> anyhow::Result<()> {
    let host = LinkProps {
        rate_bps: topo::parse_rate(&a.host_rate).map_err(anyhow::Error::msg)?,
        delay_us: 0,
        buffer: a.buffer,
    };
    let base = match (&a.topology, a.fat_tree) {
        (Some(path), _) => read_topology(path)?,
        (None, Some(k)) => topo::fat_tree(k, GenProps { host, fabric: host }),
        (None, None) => topo::leaf_spine(
            a.shape.leaves,
            a.shape.spines,
            a.shape.hosts_per_leaf,
            a.oversub,
            host,
        ),
    };
    let sets = a
        .sets
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| anyhow!("--set {kv}: KEY=VALUE"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let loads = a
        .loads
        .split(',')
        .map(|l| l.trim().parse::<f64>().map_err(|_| anyhow!("--loads: {l}")))
        .collect::<Result<Vec<_>, _>>()?;
    let e = pisa_fabric::experiment::Fct {
        base,
        schemes: a.schemes.split(',').map(|s| s.trim().to_string()).collect(),
        sets,
        workload: a.workload.clone(),
        loads,
        pattern: a.pattern.clone(),
        incast: a.incast.clone(),
        load_of: a.load_of.parse().map_err(anyhow::Error::msg)?,
        seconds: a.seconds,
        drain: a.drain,
        reps: a.reps,
        out: a.out.clone(),
        transport: pisa_fabric::traffic::Transport {
            cc: a.cc.clone(),
            ecn: a.ecn,
            reordering: a.tcp_reordering,
        },
        short_tos: a.short_tos,
        large_tos: a.large_tos,
        seed: a.seed,
        seeding: a.seeding,
        name: a.name.clone(),
        links: a.links,
        counters: a.record_counters.clone(),
        require_fidelity: a.require_fidelity,
        retry_degraded: a.retry_degraded,
        place: a.place,
        sim_hop_us: a.sim_hop_us,
        sim_stalls: a.sim_stalls,
        sim_store_and_forward: a.sim_store_and_forward,
        ipv6: a.ip == "6",
        jobs: match a.jobs {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            j => j,
        },
        rt_priority: a.switch_rt_priority,
    };
    if let Some(rates) = &a.calibrate_rate {
        let rates = rates
            .split(',')
            .map(|r| topo::parse_rate(r.trim()).map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let probe = pisa_fabric::experiment::RateProbe {
            rates,
            seconds: a.probe_seconds,
            drain: a.drain,
        };
        pisa_fabric::experiment::calibrate_rate(&e, &probe, &cancel)?;
        return Ok(());
    }
    pisa_fabric::experiment::run(&e, &cancel)?;
    // The table: the analysis package's (one definition of each statistic), which needs only
    // the standard library.
    let scripts = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts");
    let table = std::process::Command::new("python3")
        .args(["-m", "pisa_analysis", "fct-table"])
        .arg(&a.out)
        .env("PYTHONPATH", scripts)
        .output()
        .context("python3 -m pisa_analysis fct-table")?;
    if !table.status.success() {
        bail!(
            "python3 -m pisa_analysis fct-table {}: {}",
            a.out.display(),
            String::from_utf8_lossy(&table.stderr).trim()
        );
    }
    print!("{}", String::from_utf8_lossy(&table.stdout));
    println!(
        "results: {} (flows.csv, summary.csv, uplinks.csv; `scripts/analysis fct-table {}` \
         prints this table again)",
        a.out.display(),
        a.out.display()
    );
    let venv =
        std::env::var("PISA_VENV_DIR").unwrap_or_else(|_| "/var/cache/pisa-switch/venvs".into());
    let python = PathBuf::from(venv).join("plot/bin/python");
    match std::process::Command::new(&python)
        .args(["-m", "pisa_analysis", "experiment-plots"])
        .arg(&a.out)
        .env("PYTHONPATH", scripts)
        .status()
    {
        Ok(s) if s.success() => println!(
            "plots: {}/fct_vs_load.png, fct_cdf.png, uplink_balance.png",
            a.out.display()
        ),
        _ => println!(
            "no plots: {} could not run `-m pisa_analysis experiment-plots` from scripts/ \
             (run scripts/py-clients.sh)",
            python.display()
        ),
    }
    Ok(())
}

/// Prints a sweep's table file and where it is.
fn print_table(path: &std::path::Path) -> anyhow::Result<()> {
    let md =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    println!("{md}\n(written to {})", path.display());
    Ok(())
}

/// The size of a leaf-spine.
#[derive(clap::Args, Debug, Clone, Copy)]
struct Shape {
    #[arg(long, default_value_t = 4)]
    leaves: usize,
    #[arg(long, default_value_t = 4)]
    spines: usize,
    #[arg(long, default_value_t = 4)]
    hosts_per_leaf: usize,
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!("{s}: seconds, more than 0 and at most 86400")),
    }
}

fn link_props(l: &LinkArgs, rate: &str) -> Result<LinkProps, String> {
    Ok(LinkProps {
        rate_bps: topo::parse_rate(rate)?,
        delay_us: topo::parse_delay(&l.delay)?,
        buffer: l.buffer,
    })
}

fn generate(kind: &Gen) -> Result<(Topology, String), String> {
    Ok(match kind {
        Gen::LeafSpine {
            shape:
                Shape {
                    leaves,
                    spines,
                    hosts_per_leaf,
                },
            oversub,
            links,
        } => (
            topo::leaf_spine(
                *leaves,
                *spines,
                *hosts_per_leaf,
                *oversub,
                link_props(links, &links.host_rate)?,
            ),
            format!(
                "leaf-spine: {leaves} leaves, {spines} spines, {hosts_per_leaf} hosts per leaf, \
                 {oversub}:1 oversubscription"
            ),
        ),
        Gen::FatTree { k, links } => (
            topo::fat_tree(
                *k,
                GenProps {
                    host: link_props(links, &links.host_rate)?,
                    fabric: link_props(links, &links.fabric_rate)?,
                },
            ),
            format!("fat-tree, k={k}"),
        ),
        Gen::P4qcn {
            hosts_per_tor,
            links,
        } => (
            topo::p4qcn(
                *hosts_per_tor,
                GenProps {
                    host: link_props(links, &links.host_rate)?,
                    fabric: link_props(links, &links.fabric_rate)?,
                },
            ),
            "P4QCN: 2 spines, 4 leaves, 4 ToRs".into(),
        ),
        Gen::Dbb { links } => (
            topo::dbb(GenProps {
                host: link_props(links, &links.host_rate)?,
                fabric: link_props(links, &links.fabric_rate)?,
            }),
            "DBB: 8 switches, 12 hosts".into(),
        ),
    })
}

/// Gives every switch of `t` program `p` (a registry name, or `kernel`).
fn set_program(t: &mut Topology, p: &str) -> anyhow::Result<()> {
    if programs::lookup(p).is_none() && !programs::is_kernel(p) {
        bail!(
            "--program {p}: no such program (this build has: {}, and `{}` for Linux routers)",
            programs::names().collect::<Vec<_>>().join(", "),
            programs::KERNEL
        );
    }
    for s in &mut t.switches {
        s.program = p.to_string();
    }
    Ok(())
}

fn read_topology(path: &PathBuf) -> anyhow::Result<Topology> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    Topology::parse(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// Connects to switch `i` (named `name`) with `deadlines`. A refused connection is retried (the
/// switch may still be starting) until the connect deadline; a switch that accepts but does not
/// answer is not.
async fn connect(i: usize, name: &str, deadlines: Deadlines) -> anyhow::Result<Client> {
    let (_, addr) = mgmt_addrs(i);
    let addr = format!("{addr}:{GRPC_PORT}");
    let start = Instant::now();
    loop {
        match Client::connect_with(&addr, 1, 1, deadlines).await {
            Ok(c) => return Ok(c),
            Err(ClientError::Connect(..)) if start.elapsed() < deadlines.connect => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                bail!(
                    "switch {name} did not answer ({e}; {:.1} s after the first try)",
                    start.elapsed().as_secs_f64()
                );
            }
        }
    }
}

/// `e` from a call to switch `name`.
fn from_switch(name: &str, e: &ClientError) -> anyhow::Error {
    match e {
        ClientError::Timeout { .. } => anyhow!("switch {name} did not answer: {e}"),
        _ => anyhow!("switch {name}: {e}"),
    }
}

async fn program(t: &Topology, deadlines: Deadlines) -> anyhow::Result<()> {
    let plans = programs::fabric_plan(t)?;
    let started = Instant::now();
    let mut entries = 0;
    let mut programmed = 0;
    for (i, s) in t.switches.iter().enumerate() {
        if programs::is_kernel(&s.program) {
            println!("  {:<8} a Linux router (routed at bring-up)", s.name);
            continue;
        }
        programmed += 1;
        let mut c = connect(i, &s.name, deadlines).await?;
        let lines: Vec<&str> = plans[&s.name].routes.iter().map(String::as_str).collect();
        let n = c
            .run_commands(&lines)
            .await
            .map_err(|e| from_switch(&s.name, &e))?;
        entries += n;
        println!("  {:<8} {n} entries", s.name);
    }
    println!(
        "programmed {programmed} switches with {entries} entries over P4Runtime in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn counters(t: &Topology, name: &str, deadlines: Deadlines) -> anyhow::Result<()> {
    let required = name == pisa_fabric::experiment::PORT_TX;
    for (i, s) in t.switches.iter().enumerate() {
        if programs::is_kernel(&s.program) {
            continue; // a Linux router: its interfaces count (`kernel::port_tx`)
        }
        let mut c = connect(i, &s.name, deadlines).await?;
        let schema = c.schema().await.map_err(|e| from_switch(&s.name, &e))?;
        let id = match schema.counter_by_name(name) {
            Some(c) => c.id,
            None if required => {
                bail!("{}: the program has no {name} counter", s.name);
            }
            None => continue,
        };
        let cells = c
            .read_one(p4::entity::Entity::CounterEntry(p4::CounterEntry {
                counter_id: id,
                ..Default::default()
            }))
            .await
            .map_err(|e| from_switch(&s.name, &e))?;
        for e in cells {
            if let Some(p4::entity::Entity::CounterEntry(ce)) = e.entity {
                let d = ce.data.unwrap_or_default();
                if d.packet_count > 0 {
                    let port = ce.index.map_or(0, |x| x.index);
                    println!("{} {port} {} {}", s.name, d.packet_count, d.byte_count);
                }
            }
        }
    }
    Ok(())
}

/// Probes every switch's health service at once; fails naming every switch that did not answer.
async fn health(t: &Topology, timeout: Duration) -> anyhow::Result<()> {
    let probes: Vec<_> = t
        .switches
        .iter()
        .enumerate()
        .filter(|(_, s)| !programs::is_kernel(&s.program))
        .map(|(i, s)| {
            let addr = format!("{}:{GRPC_PORT}", mgmt_addrs(i).1);
            let name = s.name.clone();
            tokio::spawn(async move { (name, health_check(&addr, timeout).await) })
        })
        .collect();
    let mut dead = Vec::new();
    for p in probes {
        match p.await {
            Ok((name, Ok(took))) => {
                println!("{name} serving ({:.1} ms)", took.as_secs_f64() * 1e3);
            }
            Ok((name, Err(e))) => dead.push(from_switch(&name, &e).to_string()),
            Err(e) => dead.push(e.to_string()),
        }
    }
    if dead.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(dead.join("; ")))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn main() {
    let args = Args::parse();
    let result: anyhow::Result<()> = match &args.cmd {
        Cmd::Gen { kind } => generate(kind)
            .and_then(|(t, c)| t.check().map(|()| (t, c)))
            .map(|(t, c)| print!("{}", t.to_text(&c)))
            .map_err(anyhow::Error::msg),
        Cmd::Program { topology, timeout } => read_topology(topology).and_then(|t| {
            runtime().block_on(program(
                &t,
                Deadlines::all(Duration::from_secs_f64(*timeout)),
            ))
        }),
        Cmd::Counters {
            topology,
            counter,
            timeout,
        } => read_topology(topology).and_then(|t| {
            runtime().block_on(counters(
                &t,
                counter,
                Deadlines::all(Duration::from_secs_f64(*timeout)),
            ))
        }),
        Cmd::Health { topology, timeout } => read_topology(topology)
            .and_then(|t| runtime().block_on(health(&t, Duration::from_secs_f64(*timeout)))),
        Cmd::Down { name } => {
            let n = fabric::teardown(name);
            println!("removed {n} namespaces");
            Ok(())
        }
        Cmd::Up {
            topology,
            name,
            io,
            links,
            program,
            rt_priority,
        } => sweep::with_cleanup(name, |cancel| {
            let mut t = read_topology(topology)?;
            if let Some(p) = program {
                set_program(&mut t, p)?;
            }
            let opts = Options {
                name: name.clone(),
                io: io.clone(),
                dir: std::env::temp_dir().join(format!("pisa-fabric-{name}")),
                cancel,
                capture: false,
                links: *links,
                rt_priority: *rt_priority,
            };
            let f = sweep::bring_up(&t, &opts, |m| println!("{m}"))?;
            print!("{}", f.program()?);
            println!(
                "fabric {name} is up: hosts are namespaces pf{name}-<host>; logs in {}; \
                 `pisa-fabric down {name}` removes it",
                opts.dir.display()
            );
            f.keep();
            Ok(())
        }),
        Cmd::Demo(a) => sweep::with_cleanup(&a.name, |cancel| demo(a, cancel)),
        Cmd::Experiment(a) => sweep::with_cleanup(&a.name, |cancel| experiment(a, cancel)),
        Cmd::E10(a) => sweep::with_cleanup(&a.name, |cancel| e10(a, cancel)),
        Cmd::E11(a) => sweep::with_cleanup(&a.name, |cancel| e11(a, cancel)),
        Cmd::Dbb(a) => sweep::with_cleanup(&a.name, |cancel| dbb_experiment(a, cancel)),
    };
    if let Err(e) = result {
        eprintln!("pisa-fabric: {e:#}");
        std::process::exit(1);
    }
}
