//! `pisa-traffic`: the host traffic tool of the experiment toolkit (issue 11).
//!
//! ```text
//! pisa-traffic sample --workload websearch|datamining|hadoop --n N [--seed S]
//! ```
//!
//! `sample` prints N flow sizes (bytes), one per line, drawn from the workload's published CDF by
//! piecewise-linear interpolation (`pipeline::workload`), deterministically for a seed. The flow
//! generator and server of the toolkit (Poisson arrivals, patterns, TCP flows with per-flow
//! records) are not here yet.

use std::io::Write;

use clap::{Parser, Subcommand};
use pipeline::externs::Rng;
use pipeline::workload::Cdf;

#[derive(Parser, Debug)]
#[command(version, about = "Host traffic for pisa-switch experiments")]
struct Args {
    #[command(subcommand)]
    command: Command,
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
}

fn main() {
    let Command::Sample { workload, n, seed } = Args::parse().command;
    let cdf = match Cdf::named(&workload) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pisa-traffic: {e}");
            std::process::exit(2);
        }
    };
    let mut rng = Rng::new(seed);
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    for _ in 0..n {
        if writeln!(out, "{}", cdf.sample(&mut rng)).is_err() {
            // A closed pipe (e.g. `| head`) ends the output.
            return;
        }
    }
    let _ = out.flush();
}
