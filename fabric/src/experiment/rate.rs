//! `pisa-fabric experiment --calibrate-rate RATES` (issue 30 §2): the highest host-link rate at
//! which every scheme of a sweep keeps fidelity ([`super::fidelity`]) at the sweep's highest load.
//!
//! The procedure, for each candidate rate from the highest down:
//! - the topology is the sweep's with every link's rate scaled by `candidate / host rate` (the
//!   host rate being the fastest host link), so oversubscription, buffers (in packets) and
//!   delays stay as they are and loads keep their meaning;
//! - each scheme runs one point, at the sweep's highest load, rep 1, for the probe's window
//!   (`--probe-seconds`, then `--drain`), on the sweep driver ([`crate::sweep`]), in
//!   `OUT/rate-<R>/<scheme>/`: a probe that was finished is not run again;
//! - the candidate is accepted when every scheme's point is `ok`; the first scheme that comes
//!   out `degraded` rejects it, and the schemes after it are not probed at that rate.
//!
//! The first accepted candidate is the answer: the search assumes that a rate at which the
//! emulator keeps up is kept up at every lower rate (the CPU work per second falls with the
//! rate, and every fidelity threshold is relative to the rate's frame time or to the gaps
//! between flows, which grow as the rate falls). It writes `OUT/rate-calibration.md` (every
//! probe's verdict, worst link, CPU and run queue) and `OUT/calibrated-rate` (`host_rate R`, or
//! `host_rate none`).
//!
//! One probe per scheme and rate is a sample of one: a rate accepted by a lucky probe can still
//! give degraded points in a sweep with more reps, which the sweep's own verdicts then show.

use std::fmt::Write as _;

use anyhow::Context as _;

use super::*;

/// What `--calibrate-rate` is given.
#[derive(Clone, Debug, PartialEq)]
pub struct RateProbe {
    /// Candidate host-link rates, bit/s (any order; tried from the highest).
    pub rates: Vec<u64>,
    /// Each probe's arrival window, seconds.
    pub seconds: f64,
    /// Seconds after the window before unfinished flows are recorded.
    pub drain: f64,
}

/// One probe's outcome.
#[derive(Clone, Debug, PartialEq)]
struct Probed {
    /// The candidate host-link rate, bit/s.
    rate: u64,
    /// The scheme.
    scheme: String,
    /// `ok` or `degraded: ...`.
    fidelity: String,
    /// The worst link's p99 lateness in full-frame times, and the port (`switch:port`).
    link_late: String,
    /// CPU busy, 0-1.
    cpu_busy: String,
    /// Mean run queue.
    runq_mean: String,
}

impl Probed {
    /// Whether the point kept fidelity.
    fn ok(&self) -> bool {
        self.fidelity == "ok"
    }
}

/// The host rate of a topology: its fastest host link, bit/s (0 without hosts).
pub fn host_rate(t: &Topology) -> u64 {
    t.links
        .iter()
        .filter(|l| matches!(l.a, End::Host(_)) || matches!(l.b, End::Host(_)))
        .map(|l| l.props.rate_bps)
        .max()
        .unwrap_or(0)
}

/// `t` with every link's rate scaled so that its host rate ([`host_rate`]) becomes `rate`.
pub fn at_host_rate(t: &Topology, rate: u64) -> Topology {
    let from = host_rate(t).max(1) as u128;
    let mut t = t.clone();
    for l in &mut t.links {
        l.props.rate_bps = (l.props.rate_bps as u128 * rate as u128 / from) as u64;
    }
    t
}

/// The probe of `rate` and `scheme`: one point of `e`'s highest load, rep 1.
fn probe_experiment(e: &Fct, p: &RateProbe, rate: u64, scheme: &str) -> Fct {
    let top = e.loads.iter().copied().fold(0.0, f64::max);
    Fct {
        base: at_host_rate(&e.base, rate),
        schemes: vec![scheme.to_string()],
        loads: vec![top],
        reps: 1,
        seconds: p.seconds,
        drain: p.drain,
        out: e
            .out
            .join(format!("rate-{}", topo::fmt_rate(rate)))
            .join(scheme),
        require_fidelity: false,
        retry_degraded: 0,
        ..e.clone()
    }
}

/// Reads the one row of a probe's `summary.csv`.
fn probed(summary: &Path, rate: u64, scheme: &str) -> anyhow::Result<Probed> {
    let text = std::fs::read_to_string(summary)
        .with_context(|| format!("reading {}", summary.display()))?;
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let row: Vec<&str> = lines
        .next()
        .ok_or_else(|| anyhow!("{}: no point", summary.display()))?
        .split(',')
        .collect();
    let get = |k: &str| -> anyhow::Result<String> {
        head.iter()
            .position(|h| *h == k)
            .and_then(|i| row.get(i))
            .map(|v| v.to_string())
            .ok_or_else(|| anyhow!("{}: no column {k}", summary.display()))
    };
    let port = get("link_late_port")?;
    Ok(Probed {
        rate,
        scheme: scheme.to_string(),
        fidelity: get("fidelity")?,
        link_late: match get("link_late_p99_frames")? {
            v if v.is_empty() => "-".into(),
            v if port.is_empty() => v,
            v => format!("{v} ({port})"),
        },
        cpu_busy: get("cpu_busy")?,
        runq_mean: get("runq_mean")?,
    })
}

/// The table of `OUT/rate-calibration.md`.
fn report(e: &Fct, p: &RateProbe, probes: &[Probed], answer: Option<u64>) -> String {
    let top = e.loads.iter().copied().fold(0.0, f64::max);
    let mut s = format!(
        "# Host-link rate calibration\n\n- Command: `{}`\n- Schemes: {}; load {top} ({} of {}, \
         {} pattern); a {} s window and {} s of drain per probe, 1 rep\n- Candidates: {}\n- \
         Answer: **{}**\n\n| host rate | scheme | fidelity | worst link p99 (full frames) | CPU \
         busy | run queue (mean) |\n|---|---|---|---|---|---|\n",
        crate::sweep::command_line(),
        e.schemes.join(", "),
        e.workload,
        match e.load_of {
            LoadOf::Host => "host links",
            LoadOf::Fabric => "the fabric",
        },
        e.pattern,
        p.seconds,
        p.drain,
        p.rates
            .iter()
            .map(|r| topo::fmt_rate(*r))
            .collect::<Vec<_>>()
            .join(", "),
        match answer {
            Some(r) => format!(
                "{} host links: every scheme kept fidelity",
                topo::fmt_rate(r)
            ),
            None => "none of the candidates: every one had a degraded scheme".into(),
        }
    );
    for x in probes {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            topo::fmt_rate(x.rate),
            x.scheme,
            x.fidelity,
            x.link_late,
            x.cpu_busy,
            x.runq_mean
        );
    }
    s
}

/// Runs the calibration (see the module documentation); returns the accepted rate, if any.
pub fn calibrate_rate(
    e: &Fct,
    p: &RateProbe,
    cancel: &Arc<AtomicBool>,
) -> anyhow::Result<Option<u64>> {
    if e.schemes.is_empty() {
        bail!("--calibrate-rate: no schemes to probe");
    }
    if e.place == Place::Sim {
        bail!("--calibrate-rate: the simulator keeps up at any rate; calibrate in namespaces");
    }
    if p.rates.is_empty() || p.rates.contains(&0) {
        bail!("--calibrate-rate: one or more rates above 0, e.g. 100M,50M,20M");
    }
    if host_rate(&e.base) == 0 {
        bail!("--calibrate-rate: the topology has no host link with a rate");
    }
    let mut rates = p.rates.clone();
    rates.sort_unstable_by(|a, b| b.cmp(a));
    rates.dedup();
    std::fs::create_dir_all(&e.out).with_context(|| format!("creating {}", e.out.display()))?;
    let mut probes = Vec::new();
    let mut answer = None;
    'rates: for &rate in &rates {
        for scheme in &e.schemes {
            let x = probe_experiment(e, p, rate, scheme);
            std::fs::create_dir_all(&x.out)
                .with_context(|| format!("creating {}", x.out.display()))?;
            // The fabric's base RTT and flowlet gap (calibrate.rs) do not depend on the scheme:
            // the first scheme's probe at this rate measured them for the others.
            let first = probe_experiment(e, p, rate, &e.schemes[0]).out;
            let measured = first.join("calibration");
            if first != x.out && measured.exists() && !x.out.join("calibration").exists() {
                std::fs::copy(&measured, x.out.join("calibration"))
                    .with_context(|| format!("copying {}", measured.display()))?;
            }
            eprintln!(
                "calibrate-rate: {} host links, {scheme}, load {}",
                topo::fmt_rate(rate),
                x.loads[0]
            );
            // A probe that fails (flows not done in time, a switch that died) is a rate too
            // high as much as a degraded one; only a cancel stops the search.
            let got = match run(&x, cancel) {
                Ok(_) => probed(&x.out.join("summary.csv"), rate, scheme)?,
                Err(_) if cancel.load(Ordering::Relaxed) => bail!("cancelled"),
                Err(err) => Probed {
                    rate,
                    scheme: scheme.clone(),
                    fidelity: format!("failed: {:#}", err).replace(['\n', '|'], " "),
                    link_late: "-".into(),
                    cpu_busy: "-".into(),
                    runq_mean: "-".into(),
                },
            };
            eprintln!("calibrate-rate: {} -> {}", scheme, got.fidelity);
            let ok = got.ok();
            probes.push(got);
            if !ok {
                continue 'rates;
            }
        }
        answer = Some(rate);
        break;
    }
    let md = report(e, p, &probes, answer);
    let path = e.out.join("rate-calibration.md");
    std::fs::write(&path, &md).with_context(|| format!("writing {}", path.display()))?;
    let rec = e.out.join("calibrated-rate");
    let text = match answer {
        Some(r) => format!("host_rate {}\n", topo::fmt_rate(r)),
        None => "host_rate none\n".into(),
    };
    std::fs::write(&rec, text).with_context(|| format!("writing {}", rec.display()))?;
    println!(
        "{md}\n(written to {} and {})",
        path.display(),
        rec.display()
    );
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo::{LinkProps, leaf_spine};

    #[test]
    fn a_candidate_rate_scales_every_link_and_keeps_the_oversubscription() {
        let host = LinkProps {
            rate_bps: 100_000_000,
            delay_us: 7,
            buffer: 256,
        };
        let t = leaf_spine(4, 4, 4, 2.0, host);
        assert_eq!(host_rate(&t), 100_000_000);
        let s = at_host_rate(&t, 20_000_000);
        assert_eq!(host_rate(&s), 20_000_000);
        // The same as generating it at 20 Mb/s: uplinks at 10 Mb/s, buffers and delays kept.
        let want = leaf_spine(
            4,
            4,
            4,
            2.0,
            LinkProps {
                rate_bps: 20_000_000,
                ..host
            },
        );
        assert_eq!(s, want);
    }

    #[test]
    fn a_probe_is_one_point_at_the_highest_load_in_its_own_directory() {
        let t = leaf_spine(2, 2, 2, 1.0, LinkProps::default());
        let mut e = super::super::tests::exp(at_host_rate(&t, 100_000_000));
        e.loads = vec![0.2, 0.8, 0.5];
        e.require_fidelity = true;
        e.out = PathBuf::from("/tmp/x");
        let p = RateProbe {
            rates: vec![20_000_000],
            seconds: 8.0,
            drain: 4.0,
        };
        let x = probe_experiment(&e, &p, 20_000_000, "hula");
        assert_eq!(x.loads, vec![0.8]);
        assert_eq!((x.reps, x.seconds, x.drain), (1, 8.0, 4.0));
        assert_eq!(x.schemes, vec!["hula".to_string()]);
        assert_eq!(x.out, PathBuf::from("/tmp/x/rate-20M/hula"));
        assert_eq!(host_rate(&x.base), 20_000_000);
        assert!(!x.require_fidelity);
    }

    #[test]
    fn a_probe_row_is_read_from_its_summary() {
        let dir = std::env::temp_dir().join(format!("pisa-rate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("summary.csv");
        std::fs::write(
            &path,
            "scheme,fidelity,cpu_busy,runq_mean,link_late_p99_frames,link_late_port\n\
             ecmp,degraded: link leaf4:4 p99 departure 7.6 full-frame times late,0.921,7.1,7.56,leaf4:4\n",
        )
        .unwrap();
        let x = probed(&path, 100_000_000, "ecmp").unwrap();
        assert!(!x.ok());
        assert_eq!(x.link_late, "7.56 (leaf4:4)");
        assert_eq!(
            (x.cpu_busy.as_str(), x.runq_mean.as_str()),
            ("0.921", "7.1")
        );
        std::fs::write(
            &path,
            "scheme,fidelity,cpu_busy,runq_mean,link_late_p99_frames,link_late_port\n\
             kernel,ok,0.5,2.0,,\n",
        )
        .unwrap();
        let x = probed(&path, 1, "kernel").unwrap();
        assert!(x.ok());
        assert_eq!(x.link_late, "-");
        std::fs::write(&path, "scheme,fidelity\n").unwrap();
        assert!(probed(&path, 1, "kernel").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
