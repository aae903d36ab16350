//! The fabric's measured base RTT and the flowlet gap every scheme of an experiment shares.
//!
//! Once per output directory, before the first point: the topology is brought up with `basic`
//! (routing only: the base RTT does not depend on the scheme), and the first host pings the last
//! host on another switch 50 times. From the replies:
//! - `rtt_us`, the median: the plans' RTT-derived defaults use it (P4TE's rate-control bytes);
//! - `flowlet_gap_us` [I], for every scheme alike (P4TE §7: "All use flowlets", one gap):
//!   P4TE's rule, 40/70 of the RTT (its App. A.1: 40 ms at 70 ms), but at least the spread of
//!   the replies (p90 minus min) plus the standing queues of a loaded path. A gap must exceed
//!   the delay difference between parallel paths (FLARE; docs/ecmp.md). On an idle software fabric
//!   that difference is the scheduling jitter; under load it is the queues, which DCTCP holds
//!   near the marking threshold K: so the gap adds K full frames at each egress port of the
//!   timed path, at that port's rate (K by the rule the `ecmp` plan uses). Counting every port
//!   of the path, shared ones included, is conservative on purpose: DCTCP's queues overshoot K.
//!   On the 4x4 leaf-spine with 50 Mb/s uplinks this gives about 2.9 ms, where the measured gap
//!   sweep (docs/experiments.md) found 1 ms reordering about 25 times per flow and 3 ms about
//!   once.
//!
//! Both go to `DIR/calibration` so that a resumed experiment uses the same values, with the
//! number of switches the timed path crosses and the RTT per traversal (`path_switches`,
//! `per_hop_us`: an upper bound on what each switch adds, the hosts' stacks included).
//! `--set rtt_us=N` or `--set flowlet_gap_us=N` replaces the measured value.

use anyhow::{anyhow, bail};

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
    /// From reply times, µs (at least one), and the timed path's standing queues, µs.
    pub(super) fn from_times(mut times: Vec<f64>, queues_us: u64) -> Calibration {
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        let rtt_us = at(0.5).round().max(1.0) as u64;
        let spread = (at(0.9) - at(0.0)).round().max(0.0) as u64;
        Calibration {
            rtt_us,
            gap_us: (rtt_us * 40 / 70).max(spread + queues_us).max(1),
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

/// Full frames' worth of standing queue per port: the DCTCP marking threshold K of the port's
/// rate, in 1514-byte frames, as time at that rate (µs), summed over the switch egress ports on
/// one shortest path from host `from` to host `to` (indices into `t.hosts`); and how many
/// switches that path crosses.
pub(super) fn standing_queues_us(t: &Topology, from: usize, to: usize) -> (u64, usize) {
    let w = walk(t, from, to);
    (w.queues_us, w.switches)
}

/// What [`walk`] finds on a path.
struct Walk {
    queues_us: u64,
    switches: usize,
    /// The propagation delay from host to host, µs.
    delay_us: u64,
}

/// One shortest path from host `from` to host `to`: its standing queues (see
/// [`standing_queues_us`]), switches and one-way propagation delay.
fn walk(t: &Topology, from: usize, to: usize) -> Walk {
    let hops = topo::plan::next_hops(t);
    let ports = t.ports();
    let mut w = Walk {
        queues_us: 0,
        switches: 0,
        delay_us: 0,
    };
    let Some((mut at, first_port)) = t.host_attachment(&t.hosts[from].name) else {
        return w;
    };
    if let Some((_, props)) = ports.get(at).and_then(|p| p.get(&first_port)) {
        w.delay_us += props.delay_us;
    }
    let (mut total, mut switches) = (0u64, 0);
    for _ in 0..t.switches.len() {
        let Some(port) = hops.get(at).and_then(|h| {
            h.iter()
                .find(|(host, _)| *host == to)
                .and_then(|(_, ps)| ps.first().copied())
        }) else {
            break;
        };
        let Some((end, props)) = ports.get(at).and_then(|p| p.get(&port)) else {
            break;
        };
        switches += 1;
        w.delay_us += props.delay_us;
        if props.rate_bps > 0 {
            let k = programs::ecmp::dctcp_k(props.rate_bps);
            total += k * 1514 * 8 * 1_000_000 / props.rate_bps;
        }
        match end {
            topo::End::Switch(next, _) => at = next.as_str(),
            topo::End::Host(_) => break,
        }
    }
    w.queues_us = total;
    w.switches = switches;
    w
}

/// The first host and the last host attached to another switch (in a leaf-spine or fat-tree
/// as far as any): the pair the calibration times.
fn timed_pair(t: &Topology) -> anyhow::Result<(usize, usize)> {
    let first = t
        .hosts
        .first()
        .ok_or_else(|| anyhow!("the topology has no hosts"))?;
    let at = t.host_attachment(&first.name).map(|a| a.0.to_string());
    let other = t
        .hosts
        .iter()
        .rposition(|h| t.host_attachment(&h.name).map(|a| a.0.to_string()) != at)
        .ok_or_else(|| anyhow!("every host is on one switch: no path across the fabric to time"))?;
    Ok((0, other))
}

/// The calibration of `e` for `--where sim`: `DIR/calibration` if there is one (copy a
/// namespace run's there to give the simulated programs its values), else from the topology:
/// the base RTT is twice the timed path's propagation delay (the simulator's switches and
/// hosts add no time to a lone packet), at least 1 µs, with no spread, and the gap by
/// [`Calibration::from_times`]'s rule.
pub(super) fn calibrate_sim(e: &Fct) -> anyhow::Result<Calibration> {
    let stored = e.out.join("calibration");
    if let Some(c) = std::fs::read_to_string(&stored)
        .ok()
        .and_then(|s| Calibration::parse(&s))
    {
        return Ok(c);
    }
    let (a, b) = timed_pair(&e.base)?;
    let w = walk(&e.base, a, b);
    let c = Calibration::from_times(vec![(2 * w.delay_us) as f64], w.queues_us);
    eprintln!(
        "experiment: simulated base RTT {} us (propagation across {} switches); standing queues \
         of the path {} us; flowlet gap {} us",
        c.rtt_us, w.switches, w.queues_us, c.gap_us
    );
    let text = c.text() + &format!("path_switches {}\nper_hop_us 0\n", w.switches);
    std::fs::write(&stored, text).with_context(|| format!("writing {}", stored.display()))?;
    Ok(c)
}

/// The calibration of `e`: `DIR/calibration` if a run stored one, else measured (and stored).
pub(super) fn calibrate(e: &Fct, ctx: &crate::sweep::Ctx) -> anyhow::Result<Calibration> {
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
    let (first_index, other_index) = timed_pair(&topo)?;
    let (first, other) = (&topo.hosts[first_index], &topo.hosts[other_index]);
    let opts = ctx.options(&e.out.join("calibration-run"));
    eprintln!(
        "experiment: measuring the base RTT ({} -> {}, {PINGS} pings, idle fabric)",
        first.name, other.name
    );
    let f = ctx.up(&topo, &opts)?;
    f.program()?;
    let count = PINGS.to_string();
    let dst = other.ipv4.to_string();
    let out = f
        .ns(&first.name)
        .exec("ping", &["-c", &count, "-i", "0.02", "-W", "1", &dst])
        .with_context(|| format!("RTT calibration: ping {dst} from host {}", first.name))?;
    drop(f);
    let times = ping_times_us(&String::from_utf8_lossy(&out.stdout));
    if times.len() < PINGS / 2 {
        bail!("RTT calibration: {} of {PINGS} pings answered", times.len());
    }
    let (lo, hi) = times
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), &t| (a.min(t), b.max(t)));
    let (queues_us, switches) = standing_queues_us(&topo, first_index, other_index);
    let c = Calibration::from_times(times, queues_us);
    // What each switch adds, at most: the RTT crosses the path's switches twice (the hosts'
    // stacks are in it too; pisa-latency separates them, docs/performance.md).
    let per_hop_us = c.rtt_us / (2 * switches.max(1) as u64);
    eprintln!(
        "experiment: base RTT {} us (median; min {lo:.0} us, max {hi:.0} us) across {switches} \
         switches, at most {per_hop_us} us per traversal; standing queues of the path \
         {queues_us} us; calibrated flowlet gap {} us",
        c.rtt_us, c.gap_us
    );
    let text = c.text() + &format!("path_switches {switches}\nper_hop_us {per_hop_us}\n");
    std::fs::write(&stored, text).with_context(|| format!("writing {}", stored.display()))?;
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
    fn the_standing_queues_are_k_frames_at_each_port_of_the_path() {
        use topo::{LinkProps, leaf_spine};
        // 4x4 leaf-spine, 4 hosts per leaf at 100 Mb/s, 2:1: uplinks at 50 Mb/s.
        let host = LinkProps {
            rate_bps: 100_000_000,
            delay_us: 0,
            buffer: 256,
        };
        let t = leaf_spine(4, 4, 4, 2.0, host);
        // h1 -> h16: leaf uplink (50 Mb/s, K 4), spine downlink (50 Mb/s, K 4), host port
        // (100 Mb/s, K 6): 968 + 968 + 726 us.
        let k50 = programs::ecmp::dctcp_k(50_000_000);
        let k100 = programs::ecmp::dctcp_k(100_000_000);
        assert_eq!((k50, k100), (4, 6));
        let want =
            2 * (4 * 1514 * 8 * 1_000_000 / 50_000_000) + 6 * 1514 * 8 * 1_000_000 / 100_000_000;
        assert_eq!(standing_queues_us(&t, 0, 15), (want, 3));
        assert_eq!(want, 2662);
        // Two hosts of one leaf: the host port only.
        assert_eq!(standing_queues_us(&t, 0, 1), (726, 1));
    }

    #[test]
    fn the_gap_is_40_70_of_the_rtt_or_the_spread_of_the_replies_plus_the_queues() {
        // Steady replies and no queues: P4TE's rule.
        let c = Calibration::from_times(vec![700.0; 50], 0);
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
        let c = Calibration::from_times(t.clone(), 0);
        assert_eq!(c.rtt_us, 400);
        assert_eq!(c.gap_us, 3000);
        // A loaded path's queues add to the spread.
        assert_eq!(Calibration::from_times(t, 2664).gap_us, 5664);
        assert_eq!(Calibration::parse(&c.text()), Some(c));
        assert_eq!(Calibration::parse("rtt_us 5\n"), None);
    }
}
