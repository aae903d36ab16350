//! `pisa-fabric`: fabrics of `pisa-switch` processes and real hosts in network namespaces.
//!
//! ```text
//! pisa-fabric gen leaf-spine --leaves 4 --spines 4 --hosts-per-leaf 4 --oversub 2 > ls.topo
//! pisa-fabric gen fat-tree --k 4 > ft.topo          # also: p4qcn, dbb
//! pisa-fabric up ls.topo --name ls                  # brings it up, programs it, leaves it running
//! ip netns exec pfls-h1 ping 10.0.4.4               # use it
//! pisa-fabric down ls                               # removes everything (also after a crash)
//! pisa-fabric demo                                  # the README's main job: a 4x4 leaf-spine end to end
//! ```
//! `program` and `counters` are what the controller runs inside the management namespace.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use netns_tests::fabric::topo::{self, End, GenProps, LinkProps, Topology};
use netns_tests::fabric::{self, Fabric, GRPC_PORT, Options, mgmt_addrs};
use p4runtime_server::client::Client;
use p4runtime_server::proto::p4::v1 as p4;

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
    },
    /// Prints every switch port's transmit counters (run in the management namespace).
    Counters {
        /// Topology file.
        topology: PathBuf,
    },
    /// The main job: a leaf-spine end to end (bring-up, all pairs, iperf3 across the spines,
    /// uplink load and a plot, teardown).
    Demo(DemoArgs),
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

#[derive(clap::Args, Debug)]
struct DemoArgs {
    #[command(flatten)]
    shape: Shape,
    /// Host link rate; uplinks get hosts_per_leaf * rate / (spines * 2): 2:1 oversubscribed.
    #[arg(long, default_value = "100M")]
    host_rate: String,
    /// iperf3 flows (from hosts of the first half of the leaves to hosts of the second half).
    #[arg(long, default_value_t = 8)]
    flows: usize,
    /// Seconds of iperf3.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Where the report, CSV and plot go.
    #[arg(long, default_value = "fabric-demo")]
    out: PathBuf,
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

fn read_topology(path: &PathBuf) -> Result<Topology, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Topology::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Connects to switch `i`'s P4Runtime server, retrying while it starts.
async fn connect(i: usize) -> Result<Client, String> {
    let (_, addr) = mgmt_addrs(i);
    let addr = format!("{addr}:{GRPC_PORT}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match Client::connect(&addr, 1, 1).await {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() > deadline => return Err(format!("{addr}: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn program(t: &Topology) -> Result<(), String> {
    let plans = pipeline::program::fabric_plan(t)?;
    let started = Instant::now();
    let mut entries = 0;
    for (i, s) in t.switches.iter().enumerate() {
        let mut c = connect(i).await?;
        let lines: Vec<&str> = plans[&s.name].routes.iter().map(String::as_str).collect();
        let n = c
            .run_commands(&lines)
            .await
            .map_err(|e| format!("{}: {e}", s.name))?;
        entries += n;
        println!("  {:<8} {n} entries", s.name);
    }
    println!(
        "programmed {} switches with {entries} entries over P4Runtime in {:.2} s",
        t.switches.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn counters(t: &Topology) -> Result<(), String> {
    for (i, s) in t.switches.iter().enumerate() {
        let mut c = connect(i).await?;
        let schema = c.schema().await.map_err(|e| e.to_string())?;
        let id = schema
            .counter_by_name("egress.port_tx")
            .ok_or("the program has no egress.port_tx counter")?
            .id;
        let cells = c
            .read_one(p4::entity::Entity::CounterEntry(p4::CounterEntry {
                counter_id: id,
                ..Default::default()
            }))
            .await
            .map_err(|e| e.to_string())?;
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

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// (switch, port) -> tx bytes, read through the controller in the management namespace.
fn read_counters(f: &Fabric) -> Result<BTreeMap<(String, u16), u64>, String> {
    let topo_file = f.opts.dir.join("topology.txt");
    let bin = netns_tests::workspace_bin("pisa-fabric");
    let out = f
        .mgmt()
        .exec(
            bin.to_str().unwrap_or_default(),
            &["counters", topo_file.to_str().unwrap_or_default()],
        )
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some((
                (w.first()?.to_string(), w.get(1)?.parse().ok()?),
                w.get(3)?.parse().ok()?,
            ))
        })
        .collect())
}

fn mbits(line: &str) -> Option<f64> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let i = w.iter().position(|x| *x == "Mbits/sec")?;
    w.get(i.checked_sub(1)?)?.parse().ok()
}

fn demo(a: &DemoArgs, cancel: Arc<AtomicBool>) -> Result<(), String> {
    let Shape {
        leaves,
        spines,
        hosts_per_leaf,
    } = a.shape;
    if leaves < 2 || spines < 1 || hosts_per_leaf < 1 {
        return Err("the demo needs at least 2 leaves, 1 spine and 1 host per leaf".into());
    }
    let (host_rate, seconds, out) = (a.host_rate.as_str(), a.seconds, &a.out);
    let t0 = Instant::now();
    let step = |msg: &str| println!("[{:6.1} s] {msg}", t0.elapsed().as_secs_f64());
    let host = LinkProps {
        rate_bps: topo::parse_rate(host_rate)?,
        ..LinkProps::default()
    };
    let t = topo::leaf_spine(leaves, spines, hosts_per_leaf, 2.0, host);
    std::fs::create_dir_all(out).map_err(|e| e.to_string())?;
    let opts = Options {
        name: "demo".into(),
        io: "af-xdp".into(),
        dir: out.join("run"),
        cancel,
    };
    step(&format!(
        "bringing up a {leaves}x{spines} leaf-spine, {hosts_per_leaf} hosts per leaf, host links \
         {host_rate}b/s, uplinks {:.0} Mb/s (2:1)",
        host.rate_bps as f64 * hosts_per_leaf as f64 / (spines as f64 * 2.0) / 1e6
    ));
    let mut f = bring_up(&t, &opts, |m| step(m))?;
    step("programming the switches over P4Runtime (from the management namespace)");
    print!("{}", f.program()?);
    step("all pairs, IPv4 and IPv6");
    for v6 in [false, true] {
        let (ok, total, failed) = f.all_pairs(v6);
        step(&format!(
            "  {}: {ok}/{total} pairs answered{}",
            if v6 { "IPv6" } else { "IPv4" },
            if failed.is_empty() {
                String::new()
            } else {
                format!(" (failed: {})", failed.join(", "))
            }
        ));
        if ok != total || total == 0 {
            return Err("not every pair reached every other".into());
        }
    }
    // Flows: host i of the first half of the leaves to a host of the second half.
    let n = t.hosts.len();
    let half = (leaves / 2).max(1) * hosts_per_leaf;
    let pairs: Vec<(usize, usize)> = (0..a.flows.min(half))
        .map(|i| (i, half + (i * 5 + 1) % (n - half).max(1)))
        .collect();
    step(&format!(
        "{} iperf3 TCP flows for {seconds} s across the spines",
        pairs.len()
    ));
    let before = read_counters(&f)?;
    let mut servers = Vec::new();
    for &(_, d) in &pairs {
        let h = &t.hosts[d];
        let log = opts.dir.join(format!("iperf-s-{}.log", h.name));
        let addr = h.ipv4.to_string();
        servers.push(
            netns_tests::Process::spawn(f.ns(&h.name), "iperf3", &["-s", "-1", "-B", &addr], &log)
                .map_err(|e| e.to_string())?,
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    let secs = seconds.to_string();
    let mut clients = Vec::new();
    for &(s, d) in &pairs {
        let (src, dst) = (&t.hosts[s], &t.hosts[d]);
        let child = std::process::Command::new("ip")
            .args(["netns", "exec", f.ns(&src.name).name(), "iperf3", "-c"])
            .arg(dst.ipv4.to_string())
            .args(["-t", &secs, "-f", "m"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        clients.push((src.name.clone(), dst.name.clone(), child));
    }
    let flow_start = Instant::now();
    let mut results = Vec::new();
    for (src, dst, child) in clients {
        let o = child.wait_with_output().map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&o.stdout);
        let rate = text
            .lines()
            .filter(|l| l.contains("receiver"))
            .find_map(mbits);
        results.push((src, dst, rate));
    }
    let elapsed = flow_start.elapsed().as_secs_f64().max(1.0);
    drop(servers);
    let after = read_counters(&f)?;
    // Uplinks: leaf ports that face a spine.
    let ports = t.ports();
    let mut uplinks = Vec::new();
    for (sw, ps) in &ports {
        if !sw.starts_with("leaf") {
            continue;
        }
        for (p, (other, _)) in ps {
            if let End::Switch(spine, _) = other {
                let key = (sw.to_string(), *p);
                let bytes = after
                    .get(&key)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(before.get(&key).copied().unwrap_or(0));
                uplinks.push((
                    sw.to_string(),
                    *p,
                    spine.clone(),
                    bytes as f64 * 8.0 / elapsed / 1e6,
                ));
            }
        }
    }
    let mut report = String::new();
    report += &format!("\nPer-flow throughput (iperf3 TCP, {seconds} s):\n");
    for (s, d, r) in &results {
        report += &format!(
            "  {s:>4} -> {d:<4} {}\n",
            r.map_or("failed".into(), |r| format!("{r:7.1} Mb/s"))
        );
    }
    let total: f64 = results.iter().filter_map(|r| r.2).sum();
    report += &format!("  total {total:.1} Mb/s\n\nUplink load (leaf -> spine, Mb/s):\n");
    for (leaf, p, spine, mb) in &uplinks {
        report += &format!("  {leaf}:{p} -> {spine:<7} {mb:7.1}\n");
    }
    print!("{report}");
    std::fs::write(out.join("report.txt"), &report).map_err(|e| e.to_string())?;
    let csv: String = std::iter::once("leaf,port,spine,mbps\n".to_string())
        .chain(
            uplinks
                .iter()
                .map(|(l, p, s, m)| format!("{l},{p},{s},{m:.3}\n")),
        )
        .collect();
    let csv_path = out.join("uplinks.csv");
    std::fs::write(&csv_path, csv).map_err(|e| e.to_string())?;
    let png = out.join("uplinks.png");
    let venv =
        std::env::var("PISA_VENV_DIR").unwrap_or_else(|_| "/var/cache/pisa-switch/venvs".into());
    let python = PathBuf::from(venv).join("plot/bin/python");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/plot-uplinks.py");
    match std::process::Command::new(&python)
        .args([
            script,
            csv_path.to_str().unwrap_or_default(),
            png.to_str().unwrap_or_default(),
        ])
        .status()
    {
        Ok(s) if s.success() => step(&format!("plot of the uplink load: {}", png.display())),
        _ => step(&format!(
            "no plot: {} could not run scripts/plot-uplinks.py (run scripts/py-clients.sh)",
            python.display()
        )),
    }
    if results.iter().any(|r| r.2.is_none()) {
        return Err("an iperf3 flow failed".into());
    }
    step("tearing down");
    let clean = f.stop_switches();
    drop(f);
    let left = fabric::teardown(&opts.name);
    step(&format!(
        "done: {clean}/{} switches stopped cleanly, {left} namespaces left behind",
        t.switches.len()
    ));
    Ok(())
}

fn main() {
    let args = Args::parse();
    let result = match &args.cmd {
        Cmd::Gen { kind } => generate(kind)
            .and_then(|(t, c)| t.check().map(|()| (t, c)))
            .map(|(t, c)| print!("{}", t.to_text(&c))),
        Cmd::Program { topology } => {
            read_topology(topology).and_then(|t| runtime().block_on(program(&t)))
        }
        Cmd::Counters { topology } => {
            read_topology(topology).and_then(|t| runtime().block_on(counters(&t)))
        }
        Cmd::Down { name } => {
            let n = fabric::teardown(name);
            println!("removed {n} namespaces");
            Ok(())
        }
        Cmd::Up { topology, name, io } => with_cleanup(name, |cancel| {
            let t = read_topology(topology)?;
            let opts = Options {
                name: name.clone(),
                io: io.clone(),
                dir: std::env::temp_dir().join(format!("pisa-fabric-{name}")),
                cancel,
            };
            let f = bring_up(&t, &opts, |m| println!("{m}"))?;
            print!("{}", f.program()?);
            println!(
                "fabric {name} is up: hosts are namespaces pf{name}-<host>; logs in {}; \
                 `pisa-fabric down {name}` removes it",
                opts.dir.display()
            );
            f.keep();
            Ok(())
        }),
        Cmd::Demo(a) => with_cleanup("demo", |cancel| demo(a, cancel)),
    };
    if let Err(e) = result {
        eprintln!("pisa-fabric: {e}");
        std::process::exit(1);
    }
}

/// Held while a fabric is being brought up: a teardown waits for the bring-up to stop, so that
/// no switch starts after the teardown has looked for processes.
static BRINGUP: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Brings `t` up under [`BRINGUP`], cancellable through `opts.cancel`.
fn bring_up(t: &Topology, opts: &Options, progress: impl FnMut(&str)) -> Result<Fabric, String> {
    let _g = BRINGUP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Fabric::up(t, opts, progress)
}

/// Runs `f` with a cancel flag; on SIGINT/SIGTERM meanwhile, or when `f` fails, removes fabric
/// `name`.
fn with_cleanup(
    name: &str,
    f: impl FnOnce(Arc<AtomicBool>) -> Result<(), String>,
) -> Result<(), String> {
    dataplane::signals::block_termination();
    let n = name.to_string();
    let cancel = Arc::new(AtomicBool::new(false));
    let c = cancel.clone();
    std::thread::spawn(move || {
        let sig = dataplane::signals::wait_for_termination();
        eprintln!("pisa-fabric: signal {sig}: tearing fabric {n} down");
        c.store(true, Ordering::Relaxed);
        let _g = BRINGUP
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        fabric::teardown(&n);
        std::process::exit(130);
    });
    let r = f(cancel);
    if r.is_err() {
        fabric::teardown(name);
    }
    r
}
