//! The retransmission timer's estimate (RFC 6298) with Linux's floor: the variance term is at
//! least the minimum RTO, so `RTO = SRTT + max(4 * RTTVAR, rto_min)`, from 1 s before the first
//! sample, doubled per back-off, at most 120 s (Linux's `TCP_RTO_MAX`).
//!
//! Samples come from segments sent once (Karn's rule), timed in nanoseconds as Linux times them
//! in microseconds from its send stamps, not from the millisecond timestamp option.

/// Linux's `TCP_RTO_MAX`, ns.
pub const RTO_MAX_NS: u64 = 120_000_000_000;
/// RFC 6298's initial RTO (Linux's `TCP_TIMEOUT_INIT`), ns.
pub const RTO_INITIAL_NS: u64 = 1_000_000_000;

/// Smoothed RTT and variance.
#[derive(Clone, Debug)]
pub struct Rtt {
    srtt: Option<u64>,
    rttvar: u64,
    min: u64,
    rto_min: u64,
    backoff: u32,
}

impl Rtt {
    /// An estimator with RTO floor `rto_min_ns`.
    pub fn new(rto_min_ns: u64) -> Rtt {
        Rtt {
            srtt: None,
            rttvar: 0,
            min: u64::MAX,
            rto_min: rto_min_ns,
            backoff: 0,
        }
    }

    /// Takes a sample, ns (RFC 6298 §2.2-2.3: α = 1/8, β = 1/4); clears the back-off.
    pub fn sample(&mut self, r: u64) {
        let r = r.max(1);
        self.min = self.min.min(r);
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                self.rttvar = (3 * self.rttvar + s.abs_diff(r)) / 4;
                self.srtt = Some((7 * s + r) / 8);
            }
        }
        self.backoff = 0;
    }

    /// The smoothed RTT, ns, if sampled.
    pub fn srtt(&self) -> Option<u64> {
        self.srtt
    }

    /// The smallest sample, ns, if any.
    pub fn min_rtt(&self) -> Option<u64> {
        (self.min != u64::MAX).then_some(self.min)
    }

    /// The current RTO with its back-off, ns.
    pub fn rto(&self) -> u64 {
        let base = match self.srtt {
            None => RTO_INITIAL_NS,
            Some(s) => s + (4 * self.rttvar).max(self.rto_min),
        };
        base.min(RTO_MAX_NS)
            .saturating_mul(1 << self.backoff.min(16))
            .min(RTO_MAX_NS)
    }

    /// Doubles the RTO (a timeout, RFC 6298 §5.5).
    pub fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rto_follows_rfc6298_with_linuxs_floor_and_backs_off() {
        let mut r = Rtt::new(200_000_000);
        assert_eq!(r.rto(), 1_000_000_000, "1 s before any sample");
        r.sample(100_000);
        assert_eq!((r.srtt(), r.rttvar), (Some(100_000), 50_000));
        // 4 x 50 µs is under the 200 ms floor.
        assert_eq!(r.rto(), 200_100_000);
        r.sample(200_000);
        assert_eq!(r.srtt(), Some(112_500));
        assert_eq!(r.rttvar, (3 * 50_000 + 100_000) / 4);
        assert_eq!(r.min_rtt(), Some(100_000));
        r.back_off();
        r.back_off();
        assert_eq!(r.rto(), 4 * 200_112_500);
        for _ in 0..20 {
            r.back_off();
        }
        assert_eq!(r.rto(), RTO_MAX_NS);
        r.sample(100_000);
        assert!(r.rto() < 300_000_000, "a sample clears the back-off");
        // A small floor: the variance rules.
        let mut r = Rtt::new(1_000_000);
        r.sample(10_000_000);
        assert_eq!(r.rto(), 10_000_000 + 4 * 5_000_000);
    }
}
