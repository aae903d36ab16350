//! P4QCN's arithmetic (Geng, Yan and Zhang, 2019; docs/p4qcn.md, whose "Open questions" lists the
//! A-QCN ids cited here): the congestion point's feedback probability (Eq. 1) and the reaction
//! point, the rate limiter a sending host runs (§3.1.2, Eqs. 2-4).
//!
//! Both are sans-IO: the `p4qcn` program calls [`feedback_probability`] on each packet, and the
//! same [`Rp`] paces `pisa-sim`'s `cc=qcn-rp` flows and `pisa-host rp-send`.

/// The feedback probability of Eq. 1 for a queue of `q` packets, in 1/65536 units (65536 = always).
///
/// P is 0 at or below `q_min`, rises linearly with α = 1/(`q_max` − `q_min`) between them, and is
/// 1 at or above `q_max` (A-QCN-2: the paper leaves α and the boundaries open; this choice makes
/// P continuous). With `q_min` = `q_max`, as in the paper's experiments, the CP is a threshold:
/// P = 1 when `q` > `q_min` (A-QCN-3).
pub fn feedback_probability(q: u32, q_min: u32, q_max: u32) -> u32 {
    if q <= q_min {
        0
    } else if q >= q_max {
        1 << 16
    } else {
        let span = u64::from(q_max - q_min);
        u32::try_from((u64::from(q - q_min) << 16) / span).unwrap_or(1 << 16)
    }
}

/// The reaction point's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RpConfig {
    /// The rate the application asks for, and the highest rate the RP returns to, bits/s.
    pub max_rate_bps: u64,
    /// The lowest rate a cut reaches, bits/s (so the byte counter keeps running).
    pub min_rate_bps: u64,
    /// R_AI: the target's step per active-increase cycle, bits/s.
    pub r_ai_bps: u64,
    /// Bytes sent per cycle (the byte counter's limit).
    pub byte_counter: u64,
    /// Fast-recovery cycles before active increase (N = 5).
    pub fast_recovery_cycles: u32,
    /// β: a cut multiplies the rate by (1 − β/2); β = 1 halves it.
    pub beta: f64,
}

/// The paper's link rate, to which its R_AI = 5 Mb/s belongs.
pub const PAPER_LINK_BPS: u64 = 7_000_000;
/// The paper's R_AI.
pub const PAPER_R_AI_BPS: u64 = 5_000_000;
/// QCN's byte counter (150 KB), which belongs to 10 Gb/s links.
pub const QCN_BYTE_COUNTER: u64 = 150_000;
/// The link rate QCN's byte counter belongs to.
pub const QCN_LINK_BPS: u64 = 10_000_000_000;

impl RpConfig {
    /// The paper's parameters for a host on a `link_bps` link sending at `rate_bps`: N = 5,
    /// β = 1, R_AI = 5 Mb/s × link/7 Mb/s, and QCN's 150 KB byte counter × link/10 Gb/s (at least
    /// one byte: a cycle per packet). The floor is 1/1000 of the link (QCN's 10 Mb/s at 10 Gb/s).
    pub fn scaled(link_bps: u64, rate_bps: u64) -> RpConfig {
        let scale = |v: u64, base: u64| {
            u64::try_from(u128::from(v) * u128::from(link_bps) / u128::from(base)).unwrap_or(v)
        };
        RpConfig {
            max_rate_bps: rate_bps.max(1),
            min_rate_bps: (link_bps / 1000).clamp(1, rate_bps.max(1)),
            r_ai_bps: scale(PAPER_R_AI_BPS, PAPER_LINK_BPS).max(1),
            byte_counter: scale(QCN_BYTE_COUNTER, QCN_LINK_BPS).max(1),
            fast_recovery_cycles: 5,
            beta: 1.0,
        }
    }
}

/// Where the reaction point is (Fig. 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpState {
    /// A feedback packet has just cut the rate; no cycle has completed since.
    RateReduction,
    /// Rc moves halfway back to Rt each cycle, `fast_recovery_cycles` times.
    FastRecovery,
    /// Rt grows by R_AI each cycle and Rc moves halfway to it (also the state before any
    /// feedback, with Rc = Rt = the maximum).
    ActiveIncrease,
}

impl RpState {
    /// The name traces use.
    pub fn name(self) -> &'static str {
        match self {
            RpState::RateReduction => "reduction",
            RpState::FastRecovery => "fast_recovery",
            RpState::ActiveIncrease => "active_increase",
        }
    }
}

/// The reaction point of one flow.
#[derive(Clone, Debug)]
pub struct Rp {
    cfg: RpConfig,
    rc: f64,
    rt: f64,
    bc: u64,
    cycles: u32,
    state: RpState,
    feedbacks: u64,
}

impl Rp {
    /// An RP sending at its maximum rate.
    pub fn new(cfg: RpConfig) -> Rp {
        let max = cfg.max_rate_bps as f64;
        Rp {
            cfg,
            rc: max,
            rt: max,
            bc: 0,
            cycles: 0,
            state: RpState::ActiveIncrease,
            feedbacks: 0,
        }
    }

    /// The parameters.
    pub fn config(&self) -> &RpConfig {
        &self.cfg
    }

    /// Rc, the current sending rate, bits/s.
    pub fn rate_bps(&self) -> u64 {
        self.rc as u64
    }

    /// Rt, the target rate, bits/s.
    pub fn target_bps(&self) -> u64 {
        self.rt as u64
    }

    /// The state.
    pub fn state(&self) -> RpState {
        self.state
    }

    /// Feedback packets taken so far.
    pub fn feedbacks(&self) -> u64 {
        self.feedbacks
    }

    /// A feedback packet arrived (Eq. 2): Rt = Rc, Rc = Rc·(1 − β/2), the byte counter restarts
    /// and fast recovery begins. In fast recovery or active increase this is a new reduction
    /// (A-QCN-6: Fig. 6, which would say otherwise, is not in the paper).
    pub fn on_feedback(&mut self) {
        self.feedbacks += 1;
        self.rt = self.rc;
        self.rc = (self.rc * (1.0 - self.cfg.beta / 2.0)).max(self.cfg.min_rate_bps as f64);
        self.bc = 0;
        self.cycles = 0;
        self.state = RpState::RateReduction;
    }

    /// `bytes` were sent. Returns whether a cycle ended (the rate may have changed): in fast
    /// recovery Rc = (Rt + Rc)/2 (Eq. 3), and after N cycles active increase, where Rt += R_AI
    /// and Rc = (Rt + Rc)/2 (Eq. 4). Rates never exceed the maximum.
    pub fn on_sent(&mut self, bytes: u64) -> bool {
        self.bc += bytes;
        if self.bc < self.cfg.byte_counter {
            return false;
        }
        self.bc = 0;
        let max = self.cfg.max_rate_bps as f64;
        match self.state {
            RpState::RateReduction | RpState::FastRecovery => {
                self.rc = (self.rt + self.rc) / 2.0;
                self.cycles += 1;
                self.state = if self.cycles >= self.cfg.fast_recovery_cycles {
                    RpState::ActiveIncrease
                } else {
                    RpState::FastRecovery
                };
            }
            RpState::ActiveIncrease => {
                self.rt = (self.rt + self.cfg.r_ai_bps as f64).min(max);
                self.rc = (self.rt + self.rc) / 2.0;
            }
        }
        self.rc = self.rc.min(max);
        true
    }

    /// Its parameters and state as the JSON that `pisa-sim` and `pisa-host` report.
    pub fn report(&self) -> crate::json::Json {
        let c = &self.cfg;
        crate::json::Json::object()
            .with("feedbacks", self.feedbacks)
            .with("rate_bps", self.rate_bps())
            .with("target_bps", self.target_bps())
            .with("state", self.state.name())
            .with("r_ai_bps", c.r_ai_bps)
            .with("byte_counter", c.byte_counter)
            .with("min_rate_bps", c.min_rate_bps)
            .with("max_rate_bps", c.max_rate_bps)
            .with("fast_recovery_cycles", u64::from(c.fast_recovery_cycles))
            .with("beta", c.beta)
    }

    /// The gap after a frame of `bits` at the current rate, ns.
    pub fn gap_ns(&self, bits: u64) -> u64 {
        ((bits as f64) * 1e9 / self.rc.max(1.0)).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq1_is_continuous_and_a_threshold_when_the_bounds_meet() {
        assert_eq!(feedback_probability(0, 5, 15), 0);
        assert_eq!(feedback_probability(5, 5, 15), 0);
        assert_eq!(feedback_probability(10, 5, 15), 1 << 15);
        assert_eq!(feedback_probability(15, 5, 15), 1 << 16);
        assert_eq!(feedback_probability(99, 5, 15), 1 << 16);
        // The paper's Q_min = Q_max = 11.
        assert_eq!(feedback_probability(11, 11, 11), 0);
        assert_eq!(feedback_probability(12, 11, 11), 1 << 16);
        // Nonsense bounds never panic.
        assert_eq!(feedback_probability(7, 11, 3), 0);
        assert_eq!(feedback_probability(12, 11, 3), 1 << 16);
    }

    fn cfg() -> RpConfig {
        RpConfig {
            max_rate_bps: 4_000_000,
            min_rate_bps: 7_000,
            r_ai_bps: 500_000,
            byte_counter: 1000,
            fast_recovery_cycles: 5,
            beta: 1.0,
        }
    }

    #[test]
    fn a_feedback_halves_then_five_cycles_recover_then_active_increase() {
        let mut rp = Rp::new(cfg());
        assert_eq!(rp.rate_bps(), 4_000_000);
        rp.on_feedback();
        assert_eq!((rp.rate_bps(), rp.target_bps()), (2_000_000, 4_000_000));
        assert_eq!(rp.state(), RpState::RateReduction);
        assert!(!rp.on_sent(999));
        assert!(rp.on_sent(1));
        assert_eq!(rp.rate_bps(), 3_000_000);
        assert_eq!(rp.state(), RpState::FastRecovery);
        for _ in 0..4 {
            rp.on_sent(1000);
        }
        // 4M − 2M/2^5.
        assert_eq!(rp.rate_bps(), 3_937_500);
        assert_eq!(rp.state(), RpState::ActiveIncrease);
        // Active increase: Rt is capped at the maximum, Rc closes in on it.
        rp.on_sent(1000);
        assert_eq!(rp.target_bps(), 4_000_000);
        assert_eq!(rp.rate_bps(), 3_968_750);
    }

    #[test]
    fn active_increase_raises_the_target_by_r_ai() {
        let mut rp = Rp::new(cfg());
        rp.on_feedback();
        rp.on_feedback();
        // Rt = 2M, Rc = 1M.
        assert_eq!((rp.rate_bps(), rp.target_bps()), (1_000_000, 2_000_000));
        for _ in 0..5 {
            rp.on_sent(1000);
        }
        assert_eq!(rp.state(), RpState::ActiveIncrease);
        let rc = rp.rate_bps();
        rp.on_sent(1000);
        assert_eq!(rp.target_bps(), 2_500_000);
        assert_eq!(rp.rate_bps(), (2_500_000 + rc) / 2);
    }

    #[test]
    fn cuts_stop_at_the_floor_and_gaps_follow_the_rate() {
        let mut rp = Rp::new(cfg());
        for _ in 0..100 {
            rp.on_feedback();
        }
        assert_eq!(rp.rate_bps(), 7_000);
        assert_eq!(rp.feedbacks(), 100);
        let rp = Rp::new(cfg());
        // 8000 bits at 4 Mb/s.
        assert_eq!(rp.gap_ns(8000), 2_000_000);
    }

    #[test]
    fn scaled_parameters_follow_the_link() {
        let c = RpConfig::scaled(7_000_000, 4_000_000);
        assert_eq!(c.r_ai_bps, 5_000_000);
        assert_eq!(c.byte_counter, 105);
        assert_eq!(c.min_rate_bps, 7_000);
        let c = RpConfig::scaled(700_000_000, 400_000_000);
        assert_eq!(c.r_ai_bps, 500_000_000);
        assert_eq!(c.byte_counter, 10_500);
        assert_eq!(c.fast_recovery_cycles, 5);
    }
}
