//! The fabric's measured base RTT, which the plans' RTT-derived defaults use (`rtt_us`: P4TE's
//! flowlet gap and rate-control bytes, `ecmp`'s and `hula`'s flowlet gap).
//!
//! Once per output directory, before the first point: the topology is brought up with `basic`
//! (routing only: the base RTT does not depend on the scheme), the first host pings the first
//! host of the farthest other switch 50 times, and the median is stored in `DIR/rtt_us` so that a
//! resumed experiment uses the same value. `--set rtt_us=N` skips all of it.

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

/// The RTT for `e`: `--set rtt_us`, else `DIR/rtt_us`, else measured (and stored).
pub(super) fn rtt_us(
    e: &Experiment,
    cancel: &Arc<AtomicBool>,
    up: &dyn Fn(&Topology, &Options) -> Result<Fabric, String>,
) -> Result<u64, String> {
    if let Some((_, v)) = e.sets.iter().find(|(k, _)| k == "rtt_us") {
        return v
            .parse()
            .map_err(|_| format!("--set rtt_us={v}: not a number"));
    }
    let stored = e.out.join("rtt_us");
    if let Some(v) = std::fs::read_to_string(&stored)
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        return Ok(v);
    }
    let mut topo = e.base.clone();
    for s in &mut topo.switches {
        s.program = "basic".into();
    }
    // The first host, and the first host attached to another switch (the farthest in a
    // leaf-spine or fat-tree is as far as any other leaf's).
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
        dir: e.out.join("calibration"),
        cancel: cancel.clone(),
        capture: false,
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
    let mut times = ping_times_us(&String::from_utf8_lossy(&out.stdout));
    if times.len() < PINGS / 2 {
        return Err(format!(
            "RTT calibration: {} of {PINGS} pings answered",
            times.len()
        ));
    }
    times.sort_by(f64::total_cmp);
    let rtt = times[times.len() / 2].round().max(1.0) as u64;
    eprintln!(
        "experiment: base RTT {rtt} us (median; min {:.0} us, max {:.0} us); plans derive their \
         RTT-based defaults from it",
        times[0],
        times[times.len() - 1]
    );
    std::fs::write(&stored, format!("{rtt}\n")).map_err(|err| err.to_string())?;
    Ok(rtt)
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
}
