//! `pisa-traffic`: the host traffic tool of the experiment toolkit (issue 11).
//!
//! ```text
//! pisa-traffic sample --workload websearch|datamining|hadoop --n N [--seed S]
//! pisa-traffic serve [--port 5201] [--cc cubic] [--ecn 2] [--tcp-reordering N]
//! pisa-traffic client --schedule FILE --src NAME --out flows.csv [--paced-out paced.csv]
//!     [--cc cubic] [--ecn 1] [--tcp-reordering N] [--epoch-ns NS] [--drain SECS]
//! ```
//!
//! `sample` prints N flow sizes (bytes), one per line, drawn from the workload's published CDF by
//! piecewise-linear interpolation (`sim::workload`), deterministically for a seed.
//!
//! `serve` and `client` run inside host namespaces: every flow of the client's schedule is a
//! kernel TCP connection to a `serve` on the destination, with the run's congestion control (both
//! ends; `dctcp` is our BPF DCTCP, registered by whichever runs first, see
//! `pisa_fabric::dctcp`) and the namespace's ECN setting (`net.ipv4.tcp_ecn`, which both set in
//! their own namespace; likewise `net.ipv4.tcp_reordering` when given). The
//! client starts each flow at the epoch (Unix ns, shared by all hosts so that their schedules line
//! up) plus its start, records every flow as a CSV row (see `pisa_fabric::traffic` for the FCT
//! definition and the `TCP_INFO` fields), and gives up on flows still running `--drain` seconds
//! after the last start (`finished=false`).

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use pipeline::externs::Rng;
use pisa_fabric::traffic::{self, Transport};
use sim::workload::Cdf;

#[derive(Parser, Debug)]
#[command(version, about = "Host traffic for pisa-switch experiments")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug)]
struct TransportArgs {
    /// Congestion control: reno, cubic, bbr, or dctcp (our BPF DCTCP, `pisa_dctcp`, with ECN;
    /// cubic with RFC 3168 ECN where it cannot be loaded).
    #[arg(long, default_value = "cubic")]
    cc: String,
    /// net.ipv4.tcp_ecn for this namespace: 0 off, 1 on (request and accept), 2 accept only.
    #[arg(long, default_value_t = 2)]
    ecn: u8,
    /// net.ipv4.tcp_reordering for this namespace (the kernel's default is 3).
    #[arg(long)]
    tcp_reordering: Option<u32>,
}

impl TransportArgs {
    fn transport(&self) -> Transport {
        Transport {
            cc: self.cc.clone(),
            ecn: self.ecn,
            reordering: self.tcp_reordering,
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Prints sampled flow sizes, one per line.
    Sample {
        /// websearch, datamining or hadoop.
        #[arg(long)]
        workload: String,
        /// How many.
        #[arg(long)]
        n: u64,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Receives flows (IPv4 and IPv6) until killed.
    Serve {
        /// Port.
        #[arg(long, default_value_t = traffic::PORT)]
        port: u16,
        #[command(flatten)]
        transport: TransportArgs,
    },
    /// Runs a schedule of flows and writes one CSV row per flow.
    Client {
        /// Schedule file (`flow ...` and `paced ...` lines).
        #[arg(long)]
        schedule: PathBuf,
        /// This host's name, for the records.
        #[arg(long)]
        src: String,
        /// CSV of the sized flows.
        #[arg(long)]
        out: PathBuf,
        /// CSV of the paced flows (when the schedule has any).
        #[arg(long)]
        paced_out: Option<PathBuf>,
        #[command(flatten)]
        transport: TransportArgs,
        /// The schedule's time zero, ns since the Unix epoch (default: 200 ms from now).
        #[arg(long)]
        epoch_ns: Option<u64>,
        /// Seconds after the last start before unfinished flows are given up.
        #[arg(long, default_value_t = 10.0)]
        drain: f64,
    },
}

fn sample(workload: &str, n: u64, seed: u64) -> anyhow::Result<()> {
    let cdf = Cdf::named(workload).map_err(anyhow::Error::msg)?;
    let mut rng = Rng::new(seed);
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    for _ in 0..n {
        if writeln!(out, "{}", cdf.sample(&mut rng)).is_err() {
            // A closed pipe (e.g. `| head`) ends the output.
            return Ok(());
        }
    }
    let _ = out.flush();
    Ok(())
}

#[allow(clippy::too_many_arguments, reason = "one per command-line option")]
fn client(
    schedule: &PathBuf,
    src: &str,
    out: &PathBuf,
    paced_out: Option<&PathBuf>,
    t: &Transport,
    epoch_ns: Option<u64>,
    drain: f64,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(schedule)
        .with_context(|| format!("reading {}", schedule.display()))?;
    let jobs = traffic::parse_schedule(&text)
        .map_err(anyhow::Error::msg)
        .with_context(|| schedule.display().to_string())?;
    let has_paced = jobs.iter().any(|j| matches!(j, traffic::Job::Paced { .. }));
    if has_paced && paced_out.is_none() {
        bail!("the schedule has paced flows: give --paced-out");
    }
    if !(drain.is_finite() && drain >= 0.0) {
        bail!("--drain {drain}: seconds, at least 0");
    }
    let (t, _dctcp) = t.resolve("pisa-traffic");
    let t = &t;
    t.apply().map_err(anyhow::Error::msg)?;
    let epoch = UNIX_EPOCH
        + Duration::from_nanos(epoch_ns.unwrap_or_else(|| traffic::unix_now_ns() + 200_000_000));
    let last = jobs
        .iter()
        .map(|j| match j {
            traffic::Job::Paced {
                start_ns,
                duration_ns,
                ..
            } => start_ns + duration_ns,
            traffic::Job::Sized { start_ns, .. } => *start_ns,
        })
        .max()
        .unwrap_or(0);
    let deadline: SystemTime = epoch + Duration::from_nanos(last) + Duration::from_secs_f64(drain);
    let r = traffic::run_client(&jobs, src, t, epoch, deadline);
    let mut csv = String::from(traffic::FLOW_CSV_HEADER);
    csv.push('\n');
    for f in &r.flows {
        csv += &f.csv(t);
        csv.push('\n');
    }
    std::fs::write(out, csv).with_context(|| format!("writing {}", out.display()))?;
    if let Some(p) = paced_out {
        let mut csv = String::from(traffic::PACED_CSV_HEADER);
        csv.push('\n');
        for f in &r.paced {
            csv += &f.csv(t);
            csv.push('\n');
        }
        std::fs::write(p, csv).with_context(|| format!("writing {}", p.display()))?;
    }
    let done = r.flows.iter().filter(|f| f.finished).count()
        + r.paced.iter().filter(|f| f.finished).count();
    eprintln!(
        "pisa-traffic client {src}: {done}/{} flows finished (cc {}, ecn {})",
        r.flows.len() + r.paced.len(),
        t.cc,
        t.ecn
    );
    Ok(())
}

fn main() {
    // A parent that blocks SIGTERM (pisa-fabric does, to tear down on it) passes the mask on
    // through exec; a server must still end on SIGTERM.
    dataplane::signals::unblock_termination();
    let result = match Args::parse().command {
        Command::Sample { workload, n, seed } => sample(&workload, n, seed),
        Command::Serve { port, transport } => {
            let (t, _dctcp) = transport.transport().resolve("pisa-traffic");
            t.apply().map_err(anyhow::Error::msg).and_then(|()| {
                let l =
                    traffic::listen(port, &t.cc).with_context(|| format!("listening on {port}"))?;
                traffic::serve(l).with_context(|| format!("serving on {port}"))
            })
        }
        Command::Client {
            schedule,
            src,
            out,
            paced_out,
            transport,
            epoch_ns,
            drain,
        } => client(
            &schedule,
            &src,
            &out,
            paced_out.as_ref(),
            &transport.transport(),
            epoch_ns,
            drain,
        ),
    };
    if let Err(e) = result {
        eprintln!("pisa-traffic: {e:#}");
        std::process::exit(2);
    }
    // Flows abandoned at the deadline may still hold threads: end them with the process.
    std::process::exit(0);
}
