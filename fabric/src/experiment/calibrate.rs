//! The fabric's measured base RTT and the flowlet gap every scheme of an experiment shares.
//!
//! Once per output directory, before the first point: the topology is brought up with `basic`
//! (routing only: the base RTT does not depend on the scheme), and the first host pings the last
//! host on another switch 50 times. From the replies:
//! - `rtt_us`, the median: the plans' RTT-derived defaults use it (P4TE's rate-control bytes);
//! - `flowlet_gap_us` [I], for every scheme alike (seed-spec E2: "All use flowlets", one gap):
//!   P4TE's rule, 40/70 of the RTT (its App. A.1: 40 ms at 70 ms), but at least the spread of
//!   the replies (p90 minus min). A gap must exceed the delay difference between parallel paths
//!   (baselines.md (a)); on an idle software fabric that difference is the scheduling jitter,
//!   which here exceeds 40/70 of the RTT.
//!
//! Both go to `DIR/calibration` so that a resumed experiment uses the same values.
//! `--set rtt_us=N` or `--set flowlet_gap_us=N` replaces the measured value.

use super::*;

/// Pings sent.
const PINGS: usize = 50;

/// Per-reply times (µs) in `ping`'s output.
pub fn ping_times_us(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| {
            let t = l.split("time=").nth(1)?;
            let ms: f64 = t.split_whitespace().next()?.parse().ok()?;
            Some(ms * 1000.0)
        })
        .collect()
}

/// What the calibration gives every point's plans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Calibration {
    /// The median RTT, µs.
    pub(super) rtt_us: u64,
    /// The flowlet gap, µs.
    pub(super) gap_us: u64,
}

impl Calibration {
    /// From reply times, µs (at least one).
    pub(super) fn from_times(mut times: Vec<f64>) -> Calibration {
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        let rtt_us = at(0.5).round().max(1.0) as u64;
        let spread = (at(0.9) - at(0.0)).round().max(0.0) as u64;
        Calibration {
            rtt_us,
            gap_us: (rtt_us * 40 / 70).max(spread).max(1),
        }
    }

    fn text(&self) -> String {
        format!("rtt_us {}\nflowlet_gap_us {}\n", self.rtt_us, self.gap_us)
    }

    fn parse(text: &str) -> Option<Calibration> {
        let get = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        };
        Some(Calibration {
            rtt_us: get("rtt_us ")?,
            gap_us: get("flowlet_gap_us ")?,
        })
    }
}

/// The calibration of `e`: `DIR/calibration` if a run stored one, else measured (and stored).
pub(super) fn calibrate(
    e: &Experiment,
    cancel: &Arc<AtomicBool>,
    up: &dyn Fn(&Topology, &Options) -> Result<Fabric, String>,
) -> Result<Calibration, String> {
    let stored = e.out.join("calibration");
    if let Some(c) = std::fs::read_to_string(&stored)
        .ok()
        .and_then(|s| Calibration::parse(&s))
    {
        return Ok(c);
    }
    let mut topo = e.base.clone();
    for s in &mut topo.switches {
        s.program = "basic".into();
    }
    // The first host, and the last host attached to another switch (in a leaf-spine or
    // fat-tree as far as any).
    let first = topo.hosts.first().ok_or("the topology has no hosts")?;
    let at = topo.host_attachment(&first.name).map(|a| a.0.to_string());
    let other = topo
        .hosts
        .iter()
        .rev()
        .find(|h| topo.host_attachment(&h.name).map(|a| a.0.to_string()) != at)
        .ok_or("every host is on one switch: no path across the fabric to time")?;
    let opts = Options {
        name: e.name.clone(),
        io: "af-xdp".into(),
        dir: e.out.join("calibration-run"),
        cancel: cancel.clone(),
        capture: false,
        links: e.links,
    };
    eprintln!(
        "experiment: measuring the base RTT ({} -> {}, {PINGS} pings, idle fabric)",
        first.name, other.name
    );
    let f = up(&topo, &opts)?;
    f.program()?;
    let count = PINGS.to_string();
    let dst = other.ipv4.to_string();
    let out = f
        .ns(&first.name)
        .exec("ping", &["-c", &count, "-i", "0.02", "-W", "1", &dst])
        .map_err(|err| err.to_string())?;
    drop(f);
    let times = ping_times_us(&String::from_utf8_lossy(&out.stdout));
    if times.len() < PINGS / 2 {
        return Err(format!(
            "RTT calibration: {} of {PINGS} pings answered",
            times.len()
        ));
    }
    let (lo, hi) = times
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), &t| (a.min(t), b.max(t)));
    let c = Calibration::from_times(times);
    eprintln!(
        "experiment: base RTT {} us (median; min {lo:.0} us, max {hi:.0} us); calibrated flowlet \
         gap {} us",
        c.rtt_us, c.gap_us
    );
    std::fs::write(&stored, c.text()).map_err(|err| err.to_string())?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_times_are_read_from_ping_output() {
        let out = "PING 10.0.4.4 (10.0.4.4) 56(84) bytes of data.\n\
                   64 bytes from 10.0.4.4: icmp_seq=1 ttl=61 time=1.52 ms\n\
                   64 bytes from 10.0.4.4: icmp_seq=2 ttl=61 time=0.874 ms\n\
                   \n--- 10.0.4.4 ping statistics ---\n\
                   rtt min/avg/max/mdev = 0.874/1.197/1.520/0.323 ms\n";
        assert_eq!(ping_times_us(out), vec![1520.0, 874.0]);
    }

    #[test]
    fn the_gap_is_40_70_of_the_rtt_or_the_spread_of_the_replies() {
        // Steady replies: P4TE's rule.
        let c = Calibration::from_times(vec![700.0; 50]);
        assert_eq!(
            c,
            Calibration {
                rtt_us: 700,
                gap_us: 400
            }
        );
        // Jittery replies: 16% of them 3 ms late; the spread wins.
        let mut t = vec![400.0; 42];
        t.extend([3400.0; 8]);
        let c = Calibration::from_times(t);
        assert_eq!(c.rtt_us, 400);
        assert_eq!(c.gap_us, 3000);
        assert_eq!(Calibration::parse(&c.text()), Some(c));
        assert_eq!(Calibration::parse("rtt_us 5\n"), None);
    }
}
