//! Switch stalls: the software switch's process waiting for a CPU, as it does in namespaces.
//!
//! In namespaces a pisa-switch process is now and then off its CPU: for that time it neither
//! takes frames in nor sends any, and what arrives waits. Two paths through different switches
//! then differ in delay for a moment, which reorders what is sprayed across them (measured:
//! docs/results/2026-11-27-emulator-path-jitter.md). [`Stalls`] lets the simulator do the same,
//! so that a result can be checked for whether it survives that jitter: each switch runs for an
//! exponentially distributed time of mean 1 / `per_second`, then stalls for an exponentially
//! distributed time of mean `mean_ns`, and so on, independently of the other switches and of
//! the traffic (`per_second` stalls a second of running time: 1 / (1 / `per_second` +
//! `mean_ns`) a second of all time). Arrivals
//! during a stall are held until it ends, in their order, and the switch's turns wait too.

use std::fmt;
use std::str::FromStr;

use pipeline::externs::Rng;

/// How often switches stall and for how long, on average.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stalls {
    /// Stalls per second of each switch's running time (the running times between stalls are
    /// exponential).
    pub per_second: f64,
    /// Mean length of a stall, ns (exponential).
    pub mean_ns: u64,
}

impl FromStr for Stalls {
    type Err = String;

    /// `RATE:MEAN_US`: stalls per second of each switch, and their mean length in µs
    /// (`5:1000`: five stalls a second of 1 ms on average).
    fn from_str(s: &str) -> Result<Self, String> {
        let (rate, mean) = s
            .split_once(':')
            .ok_or_else(|| format!("{s}: expected RATE:MEAN_US (stalls per second, mean µs)"))?;
        let per_second: f64 = rate
            .parse()
            .ok()
            .filter(|r: &f64| r.is_finite() && *r > 0.0)
            .ok_or_else(|| format!("{rate}: a rate of stalls per second above 0"))?;
        let mean_us: f64 = mean
            .parse()
            .ok()
            .filter(|m: &f64| m.is_finite() && *m > 0.0)
            .ok_or_else(|| format!("{mean}: a mean stall length in µs above 0"))?;
        Ok(Stalls {
            per_second,
            mean_ns: ((mean_us * 1000.0) as u64).max(1),
        })
    }
}

impl fmt::Display for Stalls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.per_second, self.mean_ns as f64 / 1000.0)
    }
}

/// One switch's stalls, drawn as time goes on.
#[derive(Debug)]
pub(super) struct StallClock {
    rng: Rng,
    gap_mean_ns: f64,
    mean_ns: f64,
    /// The current or next stall, `[start, end)`.
    start: u64,
    end: u64,
    /// Whether the current stall has been counted.
    counted: bool,
    /// Stalls that held something so far and their total length, ns (the last one whole).
    pub(super) count: u64,
    pub(super) total_ns: u64,
}

impl StallClock {
    pub(super) fn new(s: Stalls, seed: u64) -> StallClock {
        let mut c = StallClock {
            rng: Rng::new(seed),
            gap_mean_ns: 1e9 / s.per_second,
            mean_ns: s.mean_ns as f64,
            start: 0,
            end: 0,
            counted: false,
            count: 0,
            total_ns: 0,
        };
        c.draw_after(0);
        c
    }

    fn exp(&mut self, mean: f64) -> u64 {
        // A uniform in [0, 1) from the top 53 bits.
        let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (-(1.0 - u).ln() * mean) as u64
    }

    fn draw_after(&mut self, t: u64) {
        self.start = t.saturating_add(self.exp(self.gap_mean_ns));
        self.end = self.start.saturating_add(self.exp(self.mean_ns).max(1));
        self.counted = false;
    }

    /// When the stall `now` falls in ends, if it falls in one. `now` must not go back between
    /// calls (the simulator's clock does not).
    pub(super) fn until(&mut self, now: u64) -> Option<u64> {
        while now >= self.end {
            self.draw_after(self.end);
        }
        if now < self.start {
            return None;
        }
        if !self.counted {
            self.counted = true;
            self.count += 1;
            self.total_ns += self.end - self.start;
        }
        Some(self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_holds_until_its_end_and_the_rate_and_length_are_as_asked() {
        let s: Stalls = "50:2000".parse().unwrap();
        assert_eq!(s.mean_ns, 2_000_000);
        let mut c = StallClock::new(s, 7);
        // Walk 100 s of virtual time in 10 µs steps; count the time found stalled.
        let (mut stalled, mut starts, mut t) = (0u64, 0u64, 0u64);
        let mut was = false;
        while t < 100_000_000_000 {
            match c.until(t) {
                Some(end) => {
                    assert!(end > t);
                    stalled += 10_000;
                    starts += u64::from(!was);
                    was = true;
                }
                None => was = false,
            }
            t += 10_000;
        }
        // 50 stalls a second of running time, of 2 ms: one every 22 ms on average, so 4,545
        // stalls and 2/22 = 9.1% of the time (within sampling error; stalls shorter than a
        // step may be missed).
        assert!((4_300..4_800).contains(&starts), "{starts} stalls");
        let share = stalled as f64 / 1e11;
        assert!((0.078..0.104).contains(&share), "stalled {share}");
        assert!((4_300..4_800).contains(&c.count), "{} counted", c.count);
    }

    #[test]
    fn the_same_seed_gives_the_same_stalls_and_bad_settings_are_refused() {
        let s = Stalls {
            per_second: 100.0,
            mean_ns: 500_000,
        };
        let ends = |seed| {
            let mut c = StallClock::new(s, seed);
            (0..20_000u64)
                .filter_map(|i| c.until(i * 50_000))
                .collect::<Vec<_>>()
        };
        assert_eq!(ends(1), ends(1));
        assert_ne!(ends(1), ends(2));
        for bad in ["5", "0:100", "5:0", "x:1", "5:-1", "inf:1"] {
            assert!(bad.parse::<Stalls>().is_err(), "{bad}");
        }
        assert_eq!("5:1000".parse::<Stalls>().unwrap().to_string(), "5:1000");
    }
}
