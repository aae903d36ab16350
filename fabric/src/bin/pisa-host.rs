//! `pisa-host`: P4QCN's hosts in namespaces (issue 14; P4QCN §3.1.2, §4).
//!
//! ```text
//! pisa-host rp-send --to ADDR:PORT --rate RATE --seconds S [--size B] [--link RATE]
//!     [--r-ai RATE] [--byte-counter B] [--no-rp] [--flow ID] [--trace FILE] [--out FILE]
//! pisa-host sink --listen ADDR:PORT --seconds S [--np] [--np-interval-us N] [--out FILE]
//! pisa-host background --hosts IP,IP,... --self IP --rates 2M,3M,4M,5M --seconds S
//!     [--mean-size B] [--seed N] [--port P] [--size B] [--qcn-link RATE] [--out FILE]
//! pisa-host hpcc-send --cc hpcc-pint|hpcc-int --line RATE --rtt-us T
//!     (--to ADDR:PORT --bytes N | --schedule FILE) [--size L] [--slots N] [--flow ID]
//!     [--bind IP] [--max-seconds S] [--out FILE]
//! pisa-host hpcc-recv --listen ADDR:PORT --seconds S [--out FILE]
//! ```
//!
//! - `rp-send`: a UDP flow paced by QCN's reaction point (N = 5, β = 1; R_AI = 5 Mb/s and the byte
//!   counter 150 KB, scaled from the paper's 7 Mb/s and QCN's 10 Gb/s to `--link`, which defaults
//!   to `--rate`). Rates count whole frames (UDP payload + 42 bytes). `--no-rp` sends at the rate
//!   regardless of feedback (plain UDP). The trace is the RP's every rate change, as CSV
//!   `t_us,rc_bps,rt_bps,state`.
//! - `sink`: receives for S seconds and reports per flow (source address and flow id) the
//!   packets received, lost (of the sequence numbers seen), reordered, one-way latency
//!   p50/p99/max and CE marks. `--np` makes it QCN's notification point (three-point baseline):
//!   it answers CE-marked packets with an ECN = 11 datagram to the source.
//! - `background`: the paper's random traffic model from this host: back-to-back flows to random
//!   other hosts' sinks, sizes exponential with mean `--mean-size` (frame bytes), rates drawn from
//!   `--rates`; every host computes the same schedule from the same `--hosts` and `--seed`.
//!   `--qcn-link` paces each flow by a reaction point too.
//!
//! - `hpcc-send` (issue 15): HPCC flows of a given size to `hpcc-recv`, paced and windowed by
//!   `hosts::hpcc::Hpcc` (`HpccConfig::scaled(--line, --rtt-us)`) fed by the shim the receiver
//!   echoes; selective-repeat retransmission (`pisa_fabric::host::hpcc`; docs/pint.md). One
//!   flow (`--to`, `--bytes`) or a schedule, one flow a line: `START_US DST:PORT BYTES [ID]`.
//!   `--size` is the IPv4 length of a full datagram (default 1000), `--slots` the INT slots
//!   reserved (the fabric's longest path in switches; default 5 for INT, 0 for PINT).
//! - `hpcc-recv`: answers every HPCC datagram with the shim and stamp it carried, for S seconds.
//!
//! Each prints its report as JSON (to `--out` if given).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use hosts::json::Json;
use hosts::qcn::Rp;
use pisa_fabric::host::hpcc::{self, Planned, SendOpts, TxConfig};
use pisa_fabric::host::{self, BackgroundOpts, Flow, SinkOpts, TosSocket};
use topo::parse_rate;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "P4QCN's hosts (RP sender, sink and NP, background traffic) and HPCC's (sender, receiver)"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

fn rate(s: &str) -> Result<u64, String> {
    parse_rate(s)
}

#[derive(Subcommand, Debug)]
enum Command {
    /// A UDP flow paced by QCN's reaction point.
    RpSend {
        /// Destination.
        #[arg(long)]
        to: SocketAddrV4,
        /// The rate the application asks for (frame bits per second), e.g. 4M.
        #[arg(long, value_parser = rate)]
        rate: u64,
        /// How long.
        #[arg(long)]
        seconds: f64,
        /// UDP payload bytes.
        #[arg(long, default_value_t = 1000)]
        size: usize,
        /// The host's link rate, which R_AI and the byte counter scale with (default: --rate).
        #[arg(long, value_parser = rate)]
        link: Option<u64>,
        /// R_AI (default 5 Mb/s x link / 7 Mb/s).
        #[arg(long, value_parser = rate)]
        r_ai: Option<u64>,
        /// Byte counter (default 150 KB x link / 10 Gb/s).
        #[arg(long)]
        byte_counter: Option<u64>,
        /// Ignore feedback: plain UDP at --rate.
        #[arg(long)]
        no_rp: bool,
        /// The flow id in the stamps.
        #[arg(long, default_value_t = 1)]
        flow: u32,
        /// Local address to send from.
        #[arg(long, default_value = "0.0.0.0:0")]
        bind: SocketAddrV4,
        /// Write the RP's rate changes here (CSV t_us,rc_bps,rt_bps,state).
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Write the JSON report here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Receives and reports per flow; optionally QCN's NP.
    Sink {
        /// Where to listen.
        #[arg(long)]
        listen: SocketAddrV4,
        /// How long.
        #[arg(long)]
        seconds: f64,
        /// Answer CE-marked packets with ECN = 11 feedback (the three-point baseline's NP).
        #[arg(long)]
        np: bool,
        /// At most one answer per flow per this many µs (0: every CE packet).
        #[arg(long, default_value_t = 0)]
        np_interval_us: u64,
        /// The end of the measurement window, ns since the Unix epoch: each flow also reports
        /// the packets that arrived by then (`received_in_window`).
        #[arg(long)]
        window_end_ns: Option<u64>,
        /// Write the JSON report here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// The paper's random background traffic from this host.
    Background {
        /// Every host of the run, comma-separated, in the same order everywhere.
        #[arg(long, value_delimiter = ',')]
        hosts: Vec<Ipv4Addr>,
        /// This host's address (one of --hosts).
        #[arg(long = "self")]
        me: Ipv4Addr,
        /// Rates each flow draws from, comma-separated (frame bits per second).
        #[arg(long, value_delimiter = ',', value_parser = rate)]
        rates: Vec<u64>,
        /// How long.
        #[arg(long)]
        seconds: f64,
        /// Mean flow size, frame bytes (exponential).
        #[arg(long, default_value_t = 100_000)]
        mean_size: u64,
        /// Seed of the schedule.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The sinks' port.
        #[arg(long, default_value_t = 9000)]
        port: u16,
        /// UDP payload bytes.
        #[arg(long, default_value_t = 1000)]
        size: usize,
        /// Pace every flow by a reaction point for a link of this rate.
        #[arg(long, value_parser = rate)]
        qcn_link: Option<u64>,
        /// Write the JSON report here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// HPCC flows (PINT's digest or INT's records), windowed and paced by HPCC's controller.
    HpccSend {
        /// hpcc-pint or hpcc-int.
        #[arg(long)]
        cc: String,
        /// The host's line rate (W_init = line × T), e.g. 100M.
        #[arg(long, value_parser = rate)]
        line: u64,
        /// T, the fabric's base RTT, µs (the switches' pint_hpcc_rtt_us).
        #[arg(long)]
        rtt_us: u64,
        /// One flow's receiver.
        #[arg(long)]
        to: Option<SocketAddrV4>,
        /// One flow's application bytes.
        #[arg(long)]
        bytes: Option<u64>,
        /// Flows from a file: `START_US DST:PORT BYTES [ID]` a line.
        #[arg(long, conflicts_with_all = ["to", "bytes"])]
        schedule: Option<PathBuf>,
        /// IPv4 length of a full datagram.
        #[arg(long, default_value_t = 1000)]
        size: usize,
        /// INT slots reserved (default 5 for INT, 0 for PINT; PINT with slots pads).
        #[arg(long)]
        slots: Option<u8>,
        /// The flow id of a single flow.
        #[arg(long, default_value_t = 1)]
        flow: u32,
        /// Local address.
        #[arg(long, default_value = "0.0.0.0")]
        bind: Ipv4Addr,
        /// Stop flows not done after this long (reported incomplete).
        #[arg(long, default_value_t = 60.0)]
        max_seconds: f64,
        /// Write the JSON report here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// HPCC's receiver: an ACK echoing the shim for every datagram.
    HpccRecv {
        /// Where to listen (the fabric's HPCC port, 4791 by default).
        #[arg(long)]
        listen: SocketAddrV4,
        /// How long.
        #[arg(long)]
        seconds: f64,
        /// Write the JSON report here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pisa-host: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn write(out: Option<PathBuf>, j: &Json) -> anyhow::Result<()> {
    match out {
        Some(p) => {
            std::fs::write(&p, j.pretty()).with_context(|| format!("writing {}", p.display()))
        }
        None => {
            print!("{}", j.pretty());
            Ok(())
        }
    }
}

/// A duration the tools can wait for (`Duration::from_secs_f64` panics on others).
fn seconds_ok(s: f64) -> bool {
    s.is_finite() && s > 0.0 && s < 1e9
}

fn run(c: Command) -> anyhow::Result<()> {
    match c {
        Command::RpSend {
            to,
            rate,
            seconds,
            size,
            link,
            r_ai,
            byte_counter,
            no_rp,
            flow,
            bind,
            trace,
            out,
        } => {
            if size < hosts::stamp::STAMP_LEN {
                bail!(
                    "--size {size}: at least {} bytes (the stamp)",
                    hosts::stamp::STAMP_LEN
                );
            }
            let mut sock = TosSocket::bind(bind).with_context(|| format!("binding {bind}"))?;
            sock.set_tos(host::ECT0)
                .with_context(|| format!("setting ECT(0) on the socket bound to {bind}"))?;
            let mut rp = Rp::new(host::rp_config(
                link.unwrap_or(rate),
                rate,
                r_ai,
                byte_counter,
            ));
            let mut rows = Vec::new();
            let t0 = Instant::now();
            let f = Flow {
                to,
                id: flow,
                size,
                rate_bps: rate,
                until: t0 + Duration::from_secs_f64(seconds),
            };
            let s = host::paced(&mut sock, &f, (!no_rp).then_some(&mut rp), &mut rows, t0)
                .with_context(|| format!("sending from {bind} to {to}"))?;
            let mut j = host::sent_json(
                Json::object()
                    .with("to", to.to_string())
                    .with("flow", u64::from(flow))
                    .with("rate_bps", rate)
                    .with("size", size as u64)
                    .with("seconds", seconds),
                &s,
            );
            if !no_rp {
                j = j.with("qcn_rp", rp.report());
            }
            if let Some(p) = trace {
                std::fs::write(&p, host::trace_csv(&rows))
                    .with_context(|| format!("writing {}", p.display()))?;
            }
            write(out, &j)
        }
        Command::Sink {
            listen,
            seconds,
            np,
            np_interval_us,
            window_end_ns,
            out,
        } => {
            let j = host::sink(&SinkOpts {
                listen,
                seconds,
                np,
                np_interval_us,
                window_end_ns,
            })
            .with_context(|| format!("sink on {listen}"))?;
            write(out, &j)
        }
        Command::Background {
            hosts,
            me,
            rates,
            seconds,
            mean_size,
            seed,
            port,
            size,
            qcn_link,
            out,
        } => {
            let Some(me) = hosts.iter().position(|h| *h == me) else {
                bail!("--self {me} is not in --hosts");
            };
            if rates.is_empty() || size < hosts::stamp::STAMP_LEN {
                bail!("--rates must name a rate and --size hold the stamp");
            }
            let who = hosts[me];
            let j = host::background(&BackgroundOpts {
                hosts,
                me,
                rates,
                seconds,
                mean_bytes: mean_size,
                seed,
                port,
                size,
                rp_link_bps: qcn_link,
            })
            .with_context(|| format!("background traffic from {who}"))?;
            write(out, &j)
        }
        Command::HpccSend {
            cc,
            line,
            rtt_us,
            to,
            bytes,
            schedule,
            size,
            slots,
            flow,
            bind,
            max_seconds,
            out,
        } => {
            let int = match cc.as_str() {
                "hpcc-int" => true,
                "hpcc-pint" => false,
                _ => bail!("--cc {cc}: hpcc-pint or hpcc-int"),
            };
            let flows = match (schedule, to, bytes) {
                (Some(p), _, _) => hpcc::parse_schedule(
                    &std::fs::read_to_string(&p)
                        .with_context(|| format!("reading {}", p.display()))?,
                )
                .map_err(anyhow::Error::msg)
                .with_context(|| p.display().to_string())?,
                (None, Some(to), Some(bytes)) => vec![Planned {
                    start_ns: 0,
                    to,
                    bytes,
                    id: flow,
                }],
                _ => bail!("give --to and --bytes, or --schedule"),
            };
            if rtt_us == 0 || !seconds_ok(max_seconds) {
                bail!("--rtt-us and --max-seconds must be positive");
            }
            let template = TxConfig {
                id: flow,
                bytes: 0,
                ip_len: size,
                int,
                slots: slots.unwrap_or(if int { 5 } else { 0 }),
                hpcc: hosts::hpcc::HpccConfig::scaled(line, rtt_us * 1000),
            };
            if template.per_packet().is_none() {
                bail!("--size {size}: no room for the shim and the stamp");
            }
            let j = hpcc::send(&SendOpts {
                flows,
                template,
                bind,
                max_seconds,
            })
            .with_context(|| format!("HPCC flows from {bind}"))?;
            write(out, &j)
        }
        Command::HpccRecv {
            listen,
            seconds,
            out,
        } => {
            if !seconds_ok(seconds) {
                bail!("--seconds {seconds}: a positive number of seconds");
            }
            let j = hpcc::recv(listen, seconds)
                .with_context(|| format!("HPCC receiver on {listen}"))?;
            write(out, &j)
        }
    }
}
