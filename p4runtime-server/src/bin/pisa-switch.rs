//! `pisa-switch`: one software switch, with BMv2's command-line habits.
//!
//! ```text
//! pisa-switch --program basic -i 1@veth1 -i 2@veth2 --entries commands.txt --pcap /tmp/cap
//! pisa-switch router.json -i 1@veth1 -i 2@veth2 --entries commands.txt
//! ```
//! The second form runs a P4 program compiled by p4c for BMv2 (`--target bmv2 --arch v1model`),
//! and its `--entries` file is in `simple_switch_CLI`'s command language (docs/bmv2.md).
//! Runs until SIGINT or SIGTERM, then stops the workers, flushes captures and prints counters.

use std::path::PathBuf;
use std::sync::Arc;

use std::sync::Mutex;

use anyhow::{Context, anyhow, bail};
use clap::Parser;
use dataplane::io::packet::PacketPort;
use dataplane::io::shm::ShmPort;
use dataplane::io::xdp::{XdpMode, XdpSpec};
use dataplane::switch::{PortIo, PortSpec, Switch, SwitchConfig};
use dataplane::tm::{PortConfig, Shaping, SharedBuffer};
use p4runtime_server::arbitration::Election;
use p4runtime_server::server::{DeviceIo, Loader, ServerConfig, Service, Tls, serve_with};
use pipeline::metadata::PortId;
use pipeline::program::Program;
use pipeline::runtime::{Config, Pipeline};

/// How the P4Runtime primary is elected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ElectionArg {
    /// The spec: the highest election id ever seen.
    Spec,
    /// BMv2's server (PI): the highest among live streams; an unset election id counts as 0,
    /// and requests without one pass while no stream has arbitrated (PI's demo controller).
    LiveHighest,
}

/// How ports move frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Io {
    /// AF_XDP sockets sharing one UMEM (copy mode on veth).
    AfXdp,
    /// AF_PACKET raw sockets.
    AfPacket,
}

/// Where the XDP program runs (AF_XDP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum XdpModeArg {
    /// Generic (skb) XDP: works on any interface and any MTU.
    Generic,
    /// Native (driver) XDP.
    Native,
}

#[derive(Parser, Debug)]
#[command(version, about = "A PISA software switch (one process = one switch)")]
struct Args {
    /// A P4 program as p4c compiles it for BMv2 (`--target bmv2 --arch v1model`): its JSON is
    /// loaded and run in place of a hard-wired `--program` (docs/bmv2.md).
    #[arg(value_name = "JSON")]
    json: Option<PathBuf>,
    /// Start without a program (dropping every frame) and wait for a controller to load one
    /// with SetForwardingPipelineConfig (a P4Info and p4c's BMv2 JSON), as
    /// `simple_switch_grpc --no-p4`.
    #[arg(long, conflicts_with = "json")]
    no_p4: bool,
    /// The hard-wired program to run (without a JSON program).
    #[arg(long, default_value = "basic")]
    program: String,
    /// A port: NUMBER@INTERFACE (repeatable), e.g. -i 1@veth1; or NUMBER@shm:FILE:a|b, one end
    /// of a shared-memory link to another switch process (FILE in /dev/shm, created if missing;
    /// the other process opens the other end).
    #[arg(short = 'i', long = "interface", value_parser = parse_port)]
    interfaces: Vec<(PortId, String)>,
    /// Port I/O.
    #[arg(long, value_enum, default_value = "af-xdp")]
    io: Io,
    /// XDP mode of AF_XDP ports.
    #[arg(long, value_enum, default_value = "generic")]
    xdp_mode: XdpModeArg,
    /// Ask for zero-copy AF_XDP (where the driver supports it; veth does not).
    #[arg(long)]
    zero_copy: bool,
    /// Worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Spin instead of sleeping when idle (benchmarks).
    #[arg(long)]
    busy_poll: bool,
    /// The longest an idle worker polls before it sleeps, microseconds (0: sleep at once). The
    /// window adapts: it grows while the worker keeps sleeping through gaps shorter than this,
    /// so traffic with such gaps is polled through (busy-poll latency, at the CPU it costs), and
    /// shrinks to nothing when the gaps are longer, so an idle switch, or one that sees a frame
    /// every few milliseconds, costs no polling (docs/performance.md, "Per-hop latency").
    #[arg(long, default_value_t = 2000)]
    poll_window_us: u64,
    /// Spin within the poll window instead of yielding the CPU (sched_yield) between loops. A
    /// yielding worker lets other runnable threads on its CPU go first (a traffic generator,
    /// another worker, the other switches of a fabric); a spinning one answers a few µs sooner
    /// but takes the CPU from them.
    #[arg(long)]
    poll_spin: bool,
    /// Pin the workers: `--pin` puts worker i on CPU i; `--pin 1,3` puts them on CPUs 1 and 3
    /// in turn (the P4Runtime and admin threads stay unpinned).
    #[arg(long, num_args = 0.., value_delimiter = ',')]
    pin: Option<Vec<usize>>,
    /// Run the workers in SCHED_FIFO at this priority (1-99; 0: the normal scheduler), so that
    /// a worker woken for a frame or a shaping deadline preempts normal threads at once. For
    /// emulation beside hosts on few CPUs (docs/dataplane.md, "Real-time workers"); needs
    /// CAP_SYS_NICE, else the workers stay normal and say so.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=99))]
    rt_priority: u8,
    /// The P4Runtime device id clients must use (default 1; 0 with a JSON program or --no-p4,
    /// as BMv2).
    #[arg(long)]
    device_id: Option<u64>,
    /// Serve P4Runtime here (`none` to not serve it). Default 127.0.0.1:9559; with a JSON
    /// program or --no-p4, simple_switch_grpc's 0.0.0.0:9559 (or its `-- --grpc-server-addr`).
    #[arg(long)]
    grpc_addr: Option<String>,
    /// Serve P4Runtime over TLS with this certificate chain (PEM); needs --tls-key. Without it
    /// the control channel is plaintext.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Mutual TLS: serve only clients whose certificate one of these CAs (PEM) issued; needs
    /// --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// P4Runtime primary election rule.
    #[arg(long, value_enum, default_value = "spec")]
    election_compat: ElectionArg,
    /// Send packet-in metadata padded to each field's width, as stratum_bmv2 does (controllers
    /// written against it compare the bytes), rather than in the canonical form the P4Runtime
    /// spec asks of a server's replies (8.3) and simple_switch_grpc sends.
    #[arg(long)]
    padded_packet_in: bool,
    /// The CPU port number (also simple_switch_grpc's `-- --cpu-port`).
    #[arg(long)]
    cpu_port: Option<PortId>,
    /// Most recirculations of one packet.
    #[arg(long, default_value_t = 8)]
    max_recirculations: u8,
    /// Write per-port pcap files here (`--pcap` alone: the current directory). Files are
    /// `port<N>-in.pcap`/`port<N>-out.pcap`, or BMv2's `<interface>_in.pcap`/`_out.pcap` with a
    /// JSON program or --no-p4.
    #[arg(long, num_args = 0..=1, default_missing_value = ".")]
    pcap: Option<PathBuf>,
    /// Print a structured per-packet trace to stderr.
    #[arg(long)]
    trace: bool,
    /// Commands to run at start (table entries, multicast, mirroring, queue settings). With a
    /// JSON program or --no-p4: simple_switch_CLI's command language, with BMv2's meanings (a
    /// commands.txt piped into simple_switch_CLI, unchanged: handles, nodes, BMv2 priorities);
    /// with a hard-wired --program: the switch's own (table_delete by key, mc_group_create).
    #[arg(long)]
    entries: Option<PathBuf>,
    /// Serve the same commands on this Unix socket at run time.
    #[arg(long)]
    admin_socket: Option<PathBuf>,
    /// Queue depth per queue, packets.
    #[arg(long, default_value_t = 1024)]
    queue_depth: u32,
    /// Shape every port to this many packets/s.
    #[arg(long)]
    queue_rate: Option<u64>,
    /// Shape every port to this many bits/s.
    #[arg(long)]
    port_rate: Option<u64>,
    /// Propagation delay of every port, microseconds.
    #[arg(long, default_value_t = 0)]
    port_delay_us: u64,
    /// Mark ECN CE above this queue depth (packets).
    #[arg(long)]
    ecn_threshold: Option<u32>,
    /// Shared-buffer mode with a pool of this many bytes.
    #[arg(long)]
    shared_buffer: Option<u64>,
    /// Shared buffer: send PFC XOFF when an ingress port holds this many bytes.
    #[arg(long)]
    pfc_xoff: Option<u64>,
    /// Shared buffer: send PFC XON when it falls to this many bytes.
    #[arg(long, default_value_t = 0)]
    pfc_xon: u64,
    /// Honour PAUSE/PFC frames received on every port (always on with --pfc-xoff; off
    /// otherwise, so that a peer cannot stop a port not set up for flow control).
    #[arg(long)]
    pfc: bool,
    /// Do not run the program's switch-local agent (leave its work to an external controller).
    #[arg(long)]
    no_agent: bool,
    /// Print what the program would need on an RMT/Tofino-class target (stages, PHV, SRAM,
    /// TCAM) and exit.
    #[arg(long)]
    resources: bool,
    /// Log level (error, warn, info, debug, trace, off).
    #[arg(short = 'L', long, default_value = "info")]
    log_level: String,
    /// Log to standard output instead of standard error, with the per-packet trace (BMv2's
    /// `--log-console`).
    #[arg(long, conflicts_with = "log_file")]
    log_console: bool,
    /// Log to this file (BMv2's `--log-file`).
    #[arg(long)]
    log_file: Option<PathBuf>,
    /// The port of BMv2's Thrift runtime API (simple_switch_CLI's), on every address; 9090 by
    /// default with a JSON program or --no-p4, as BMv2's, and none otherwise.
    #[arg(long)]
    thrift_port: Option<u16>,
    /// simple_switch_grpc's own options, after `--`: `--grpc-server-addr H:P`, `--cpu-port C`,
    /// `--drop-port 511`, `--priority-queues N` (at most 8).
    #[arg(last = true)]
    target_args: Vec<String>,
}

/// The options simple_switch_grpc takes after `--` that this switch has.
#[derive(Debug, Default, PartialEq, Eq)]
struct TargetArgs {
    grpc_server_addr: Option<String>,
    cpu_port: Option<PortId>,
}

/// Reads simple_switch_grpc's options after `--`; refuses those this switch does not have.
fn target_args(words: &[String]) -> anyhow::Result<TargetArgs> {
    let mut t = TargetArgs::default();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (w.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| anyhow!("-- {flag} needs a value"))
        };
        match flag {
            "--grpc-server-addr" => t.grpc_server_addr = Some(value()?),
            "--cpu-port" => {
                let v = value()?;
                let port: PortId = v.parse().map_err(|_| anyhow!("-- --cpu-port {v}"))?;
                if port == 0 || port >= 511 {
                    bail!("-- --cpu-port {port}: 1 to 510 (0 is not a port, 511 drops)");
                }
                t.cpu_port = Some(port);
            }
            "--drop-port" => {
                let v = value()?;
                if v != "511" {
                    bail!("-- --drop-port {v}: this switch's drop port is 511");
                }
            }
            "--priority-queues" => {
                let v = value()?;
                match v.parse::<u8>() {
                    Ok(n) if (1..=8).contains(&n) => {}
                    _ => bail!("-- --priority-queues {v}: this switch has 8 queues per port"),
                }
            }
            other => bail!(
                "-- {other}: not an option of this switch (it takes --grpc-server-addr, \
                 --cpu-port, --drop-port 511, --priority-queues 1-8)"
            ),
        }
    }
    Ok(t)
}

fn parse_port(s: &str) -> Result<(PortId, String), String> {
    let (n, name) = s.split_once('@').ok_or("expected NUMBER@INTERFACE")?;
    let n: PortId = n.parse().map_err(|_| format!("bad port number {n}"))?;
    if n >= 511 {
        return Err("port numbers are 0..=510 (9 bits, 511 is reserved)".into());
    }
    Ok((n, name.to_string()))
}

/// The TLS files the flags name, read.
fn tls_files(args: &Args) -> anyhow::Result<Option<Tls>> {
    let read = |p: &PathBuf| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    Ok(Some(Tls {
        cert_pem: read(cert)?,
        key_pem: read(key)?,
        client_ca_pem: args.tls_client_ca.as_ref().map(read).transpose()?,
    }))
}

fn main() {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::new(&args.log_level);
    let log = tracing_subscriber::fmt().with_env_filter(filter);
    if args.log_console {
        log.with_writer(std::io::stdout).init();
    } else if let Some(path) = &args.log_file {
        match std::fs::File::create(path) {
            Ok(f) => log.with_ansi(false).with_writer(Mutex::new(f)).init(),
            Err(e) => {
                eprintln!("--log-file {}: {e}", path.display());
                std::process::exit(1);
            }
        }
    } else {
        log.with_writer(std::io::stderr).init();
    }
    if let Err(e) = run(args) {
        tracing::error!("{e:#}");
        std::process::exit(1);
    }
}

/// The program to run and its name: a BMv2 JSON program, or one of the registry's.
fn program(args: &Args) -> anyhow::Result<(Arc<dyn Program>, String)> {
    if args.no_p4 {
        return Ok((Arc::new(bmv2::Empty::new()), "none".into()));
    }
    if let Some(path) = &args.json {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let name = path
            .file_stem()
            .map_or("program".into(), |s| s.to_string_lossy().into_owned());
        let p = bmv2::load(&text, &name).with_context(|| format!("loading {}", path.display()))?;
        return Ok((Arc::new(p), name));
    }
    let p = programs::by_name(&args.program).ok_or_else(|| {
        anyhow!(
            "no program {} (have: {})",
            args.program,
            programs::names().collect::<Vec<_>>().join(", ")
        )
    })?;
    Ok((p, args.program.clone()))
}

/// Runs the `--entries` file: with a BMv2 program (a JSON program or `--no-p4`) in
/// `simple_switch_CLI`'s command language, with BMv2's meanings (handles, nodes), through the
/// runtime API the Thrift server serves; with a hard-wired program in the switch's own language
/// (`pipeline::commands`, `dataplane::admin`). The number of commands, and the language's name.
fn entries(
    sw: &Switch,
    runtime: &p4runtime_server::thrift::RuntimeApi,
    bmv2: bool,
    path: &std::path::Path,
) -> anyhow::Result<(usize, &'static str)> {
    let (n, language) = if bmv2 {
        (runtime.run_file(path), "simple_switch_CLI's language")
    } else {
        (
            dataplane::admin::run_file(sw, path),
            "the switch's language",
        )
    };
    let n = n.map_err(anyhow::Error::msg).context("--entries")?;
    Ok((n, language))
}

/// Loads the programs controllers send: p4c's BMv2 JSON with the ids of their P4Info, swapped
/// into the running switch.
fn loader(sw: &Arc<Switch>, workers: usize, config: Config, running: Vec<u8>) -> Loader {
    let weak = Arc::downgrade(sw);
    Loader {
        build: Box::new(move |p4info, device_config| {
            let text = std::str::from_utf8(device_config)
                .map_err(|e| format!("the device config is not BMv2 JSON text: {e}"))?;
            let name = p4info
                .pkg_info
                .as_ref()
                .map(|p| p.name.as_str())
                .filter(|n| !n.is_empty())
                .unwrap_or("program");
            let ids = p4runtime_server::p4info::program_ids(p4info);
            let program = bmv2::load_with_ids(text, name, Some(&ids)).map_err(|e| e.to_string())?;
            Ok(Pipeline::new(Arc::new(program), workers, config))
        }),
        install: Box::new(move |pipeline| {
            let sw = weak.upgrade().ok_or("the switch is stopping")?;
            sw.swap_pipeline(pipeline)?;
            tracing::info!("{} loaded", sw.pipeline().control.schema().name);
            Ok(())
        }),
        running,
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let (program, name) = program(&args)?;
    // The JSON the switch starts with: a controller sending it again sends the same program.
    let json_text = match &args.json {
        Some(path) => std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
        None => Vec::new(),
    };
    // A JSON program or --no-p4: simple_switch_grpc's habits (device 0, gRPC on every address,
    // pcap files named by interface).
    let bmv2 = args.json.is_some() || args.no_p4;
    let target = target_args(&args.target_args)?;
    if !args.target_args.is_empty() && !bmv2 {
        bail!("options after -- are simple_switch_grpc's: give a JSON program or --no-p4");
    }
    // BMv2 serves its runtime API on 9090 unless told otherwise.
    let thrift_port = args.thrift_port.or(bmv2.then_some(9090));
    let device_id = args.device_id.unwrap_or(if bmv2 { 0 } else { 1 });
    let grpc_addr = args
        .grpc_addr
        .clone()
        .or(target.grpc_server_addr)
        .unwrap_or_else(|| {
            if bmv2 {
                "0.0.0.0:9559".into()
            } else {
                "127.0.0.1:9559".into()
            }
        });
    let cpu_port = args.cpu_port.or(target.cpu_port).unwrap_or(510);
    if args.resources {
        let layout = program.layout().ok_or_else(|| {
            anyhow!("program {name} declares no table dependency graph for an estimate")
        })?;
        let e = pipeline::resources::estimate(program.schema(), &layout)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("estimating {name}'s resources"))?;
        print!("{}", pipeline::resources::report(&name, &e));
        return Ok(());
    }
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let config = Config {
        cpu_port,
        max_recirculations: args.max_recirculations,
        ..Config::default()
    };
    let pipe = Pipeline::new(program, workers, config);
    // Workers run on threads: a writer waiting for one to drop its snapshot yields the CPU.
    pipe.control.set_pause(std::thread::yield_now);
    let mut ports = Vec::new();
    for (id, name) in &args.interfaces {
        if let Some(spec) = dataplane::io::shm::parse_spec(name) {
            let (path, side) = spec
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("port {id}"))?;
            let link = ShmPort::open(&path, side).with_context(|| format!("port {id}@{name}"))?;
            ports.push(PortSpec {
                id: *id,
                io: PortIo::Shm(link),
            });
            continue;
        }
        let io = match args.io {
            Io::AfXdp => PortIo::XdpSpec(XdpSpec {
                ifname: name.clone(),
                mode: match args.xdp_mode {
                    XdpModeArg::Generic => XdpMode::Generic,
                    XdpModeArg::Native => XdpMode::Native,
                },
                zero_copy: args.zero_copy,
            }),
            Io::AfPacket => {
                PortIo::Packet(PacketPort::open(name).with_context(|| format!("port {id}@{name}"))?)
            }
        };
        ports.push(PortSpec { id: *id, io });
    }
    let shaping = match (args.port_rate, args.queue_rate) {
        (Some(bps), _) => Shaping::BitsPerSec(bps),
        (None, Some(pps)) => Shaping::PacketsPerSec(pps),
        (None, None) => Shaping::None,
    };
    let port_config = PortConfig {
        max_packets: args.queue_depth,
        max_bytes: u64::from(args.queue_depth) * 9216,
        ecn_threshold: args.ecn_threshold,
        shaping,
        burst: match shaping {
            Shaping::BitsPerSec(_) => 1514,
            _ => 1,
        },
        delay_ns: args.port_delay_us * 1000,
        link_bps: args.port_rate.unwrap_or(10_000_000_000),
        pfc: args.pfc,
        pfc_xoff: None,
        pfc_xon: None,
    };
    let shared_buffer = args.shared_buffer.map(|total_bytes| SharedBuffer {
        total_bytes,
        xoff_bytes: args.pfc_xoff,
        xon_bytes: args.pfc_xon,
        pause_quanta: 0xffff,
    });
    dataplane::signals::block_termination();
    let cfg = SwitchConfig {
        workers,
        busy_poll: args.busy_poll,
        poll_window_ns: args.poll_window_us * 1000,
        yield_in_window: !args.poll_spin,
        pin: match &args.pin {
            Some(cpus) if cpus.is_empty() => (0..workers).collect(),
            Some(cpus) => cpus.clone(),
            None => Vec::new(),
        },
        rt_priority: args.rt_priority,
        pcap_dir: args.pcap.clone(),
        pcap_names: if bmv2 {
            args.interfaces.iter().cloned().collect()
        } else {
            Default::default()
        },
        trace: args.trace || args.log_console,
        port_config,
        shared_buffer,
        ..SwitchConfig::default()
    };
    let sw = Arc::new(Switch::start(pipe, ports, cfg).context("start")?);
    let service = {
        let cpu = sw.cpu_port().clone();
        let io = DeviceIo {
            packet_in: cpu.packet_in.clone(),
            max_packet_out: cpu.max_frame(),
            packet_out: Box::new(move |frame| cpu.send(frame).is_ok()),
            clock: Arc::new(sw.clock()),
            loader: (args.json.is_some() || args.no_p4)
                .then(|| loader(&sw, workers, config, json_text.clone())),
        };
        let config = ServerConfig {
            device_id,
            election: match args.election_compat {
                ElectionArg::Spec => Election::Spec,
                ElectionArg::LiveHighest => Election::LiveHighest,
            },
            padded_packet_in: args.padded_packet_in,
        };
        Service::new(sw.pipeline().control.clone(), io, config)
    };
    // BMv2's runtime API, for its Thrift server and, with a BMv2 program, for --entries.
    let runtime = {
        let weak = Arc::downgrade(&sw);
        let opts = p4runtime_server::thrift::Options {
            device_id,
            ports: args
                .interfaces
                .iter()
                .map(|(p, n)| (u32::from(*p), n.clone()))
                .collect(),
            admin: Some(Arc::new(move |line: &str| {
                let sw = weak.upgrade().ok_or("the switch is stopping")?;
                dataplane::admin::run(&sw, line)
            })),
        };
        p4runtime_server::thrift::RuntimeApi::new(service.clone(), opts)
    };
    if let Some(path) = &args.entries {
        let (n, language) = entries(&sw, &runtime, bmv2, path)?;
        tracing::info!("{n} commands from {} ({language})", path.display());
    }
    let grpc = if grpc_addr == "none" {
        None
    } else {
        let addr: std::net::SocketAddr = grpc_addr
            .parse()
            .with_context(|| format!("--grpc-addr {grpc_addr}"))?;
        let tls = tls_files(&args)?;
        let security = match &tls {
            None => "plaintext",
            Some(t) if t.client_ca_pem.is_some() => "mutual TLS",
            Some(_) => "TLS",
        };
        let running = serve_with(service.clone(), addr, tls)
            .with_context(|| format!("P4Runtime on {addr}"))?;
        tracing::info!(
            "P4Runtime on {} ({security}, device id {})",
            running.addr,
            device_id
        );
        Some(running)
    };
    let thrift = match thrift_port {
        Some(port) => {
            let addr = std::net::SocketAddr::from(([0, 0, 0, 0], port));
            let t = runtime
                .serve(addr)
                .with_context(|| format!("the Thrift runtime server on {addr}"))?;
            tracing::info!("Thrift runtime server on {}", t.local_addr());
            Some(t)
        }
        None => None,
    };
    drop(runtime);
    drop(service);
    // The program's agent, on its own thread, unless told otherwise.
    let registry = args.json.is_none().then(|| programs::lookup(&args.program));
    let agent = match registry.flatten().and_then(|e| e.agent) {
        Some(build) if !args.no_agent => {
            let a =
                dataplane::agent::AgentThread::spawn(&sw, build(sw.pipeline().program.schema()))
                    .context("agent")?;
            tracing::info!("{name}'s agent running");
            Some(a)
        }
        _ => None,
    };
    if let Some(path) = &args.admin_socket {
        dataplane::admin::serve(&sw, path)
            .with_context(|| format!("admin socket {}", path.display()))?;
    }
    tracing::info!(
        "{name} running on {} port(s) with {workers} worker(s)",
        args.interfaces.len()
    );
    let sig = dataplane::signals::wait_for_termination();
    tracing::info!("signal {sig}: stopping");
    for cmd in ["show_ports", "show_drops", "show_fidelity"] {
        if let Ok(text) = dataplane::admin::run(&sw, cmd) {
            eprint!("{text}");
        }
    }
    if let Some(path) = &args.admin_socket {
        let _ = std::fs::remove_file(path);
    }
    if let Some(g) = grpc {
        g.stop();
    }
    if let Some(t) = thrift {
        t.stop();
    }
    if let Some(a) = agent {
        eprint!("{}", a.stats().line(sw.agent_packet_ins_dropped()));
        a.stop();
    }
    // An admin command still running holds the switch for a moment: wait for it.
    let mut sw = sw;
    loop {
        match Arc::try_unwrap(sw) {
            Ok(s) => {
                s.stop();
                break;
            }
            Err(s) => {
                sw = s;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn simple_switch_grpc_options_after_the_double_dash() {
        let t = target_args(&words("--grpc-server-addr 0.0.0.0:50051 --cpu-port=255")).unwrap();
        assert_eq!(t.grpc_server_addr.as_deref(), Some("0.0.0.0:50051"));
        assert_eq!(t.cpu_port, Some(255));
        assert!(target_args(&words("--drop-port 511 --priority-queues 8")).is_ok());
        for bad in [
            "--cpu-port 0",
            "--cpu-port",
            "--drop-port 400",
            "--priority-queues 9",
            "--dp-grpc-server-addr 0.0.0.0:50052",
        ] {
            assert!(target_args(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_simple_switch_grpc_command_line_parses() {
        let a = Args::try_parse_from(words(
            "pisa-switch -i 1@veth1 -i 2@veth2 --pcap --log-console -L debug --thrift-port 9090 \
             --device-id 3 main.json -- --grpc-server-addr 127.0.0.1:50051 --cpu-port 255",
        ))
        .unwrap();
        assert_eq!(a.json.as_deref(), Some(std::path::Path::new("main.json")));
        assert_eq!(a.pcap.as_deref(), Some(std::path::Path::new(".")));
        assert!(a.log_console);
        assert_eq!(a.log_level, "debug");
        assert_eq!(a.thrift_port, Some(9090));
        assert_eq!(a.device_id, Some(3));
        assert_eq!(a.interfaces.len(), 2);
        assert_eq!(a.target_args.len(), 4);
        let a =
            Args::try_parse_from(words("pisa-switch --no-p4 -i 1@veth1 --pcap /tmp/cap")).unwrap();
        assert!(a.no_p4);
        assert_eq!(a.pcap.as_deref(), Some(std::path::Path::new("/tmp/cap")));
    }
}
