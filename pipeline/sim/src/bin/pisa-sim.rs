//! `pisa-sim`: a whole fabric in virtual time (see `sim::fabric`).
//!
//! ```text
//! pisa-sim TOPOLOGY --duration-ms T --seed N [--flow SPEC]... [--out FILE] [--pint-records FILE]
//!          [--link-down SWITCH:PORT@MS]... [--link-up SWITCH:PORT@MS]...
//! ```
//!
//! Prints the JSON report (or writes it to `--out`); the same seed gives the same bytes. The
//! speed of the run (packet-hops per wall-clock second) goes to stderr.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use sim::fabric::{LinkEvent, Options, Sim, Stalls};
use sim::flow::FlowSpec;
use topo::Topology;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Simulates a fabric of pisa-switch programs in virtual time, deterministically"
)]
struct Args {
    /// The topology file (the format pisa-fabric reads; `pisa-fabric gen` writes one).
    topology: PathBuf,
    /// Sources send for this long (virtual ms); then the fabric drains for up to 1 s.
    #[arg(long)]
    duration_ms: f64,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A flow: "SRC>DST rate=RATE [size=BYTES] [start_ms=X] [stop_ms=Y] [proto=udp|tcp]
    /// [sport=P] [dport=P] [tos=T] [pattern=constant|poisson|onoff] [cc=NAME]". Repeatable.
    #[arg(long = "flow")]
    flows: Vec<String>,
    /// Write the report here instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write every PINT record the sinks export here, one per line (`pisa-pint decode` reads it).
    #[arg(long)]
    pint_records: Option<PathBuf>,
    /// Frames reach a link's far end once all of them has crossed (serialisation time plus
    /// delay), as on a wire; without it, as between namespaces, they arrive as they start to
    /// leave plus the delay.
    #[arg(long)]
    store_and_forward: bool,
    /// A switch-to-switch link fails at a virtual time: SWITCH:PORT@MS (either end). Frames
    /// sent onto it are lost; both switches' agents are told at once. Repeatable.
    #[arg(long, value_name = "SWITCH:PORT@MS")]
    link_down: Vec<String>,
    /// A failed link comes back: SWITCH:PORT@MS. Repeatable.
    #[arg(long, value_name = "SWITCH:PORT@MS")]
    link_up: Vec<String>,
    /// Every switch stalls now and then, as a software switch's process waiting for a CPU:
    /// RATE stalls a second of running time, each of MEAN_US µs on average (both exponential);
    /// what arrives meanwhile waits. Off by default.
    #[arg(long, value_name = "RATE:MEAN_US")]
    stalls: Option<Stalls>,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("pisa-sim: {e:#}");
        std::process::exit(1);
    }
}

fn run(a: Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&a.topology)
        .with_context(|| format!("reading {}", a.topology.display()))?;
    let topo = Topology::parse(&text)
        .map_err(anyhow::Error::msg)
        .with_context(|| a.topology.display().to_string())?;
    if !(a.duration_ms.is_finite() && a.duration_ms >= 0.0) {
        bail!("--duration-ms must be a non-negative number");
    }
    let mut opts = Options::new((a.duration_ms * 1e6) as u64, a.seed);
    opts.store_and_forward = a.store_and_forward;
    opts.stalls = a.stalls;
    for (list, up) in [(&a.link_down, false), (&a.link_up, true)] {
        for e in list {
            opts.link_events
                .push(LinkEvent::parse(e, up).map_err(anyhow::Error::msg)?);
        }
    }
    for (i, f) in a.flows.iter().enumerate() {
        opts.flows.push(
            FlowSpec::parse(f, i)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("--flow {f:?}"))?,
        );
    }
    let started = Instant::now();
    let mut sim = Sim::new(&topo, opts)
        .map_err(anyhow::Error::msg)
        .with_context(|| a.topology.display().to_string())?;
    if a.pint_records.is_some() {
        sim.keep_pint_records();
    }
    let report = sim.run().pretty();
    if let Some(path) = &a.pint_records {
        let mut text = String::new();
        for r in sim.pint_records() {
            text.push_str(&r.to_line());
            text.push('\n');
        }
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let wall = started.elapsed().as_secs_f64();
    eprintln!(
        "pisa-sim: {} packet-hops in {wall:.2} s of wall time: {:.2} M packet-hops/s",
        sim.hops(),
        sim.hops() as f64 / wall.max(1e-9) / 1e6
    );
    match a.out {
        Some(path) => {
            std::fs::write(&path, report).with_context(|| format!("writing {}", path.display()))
        }
        None => {
            print!("{report}");
            Ok(())
        }
    }
}
