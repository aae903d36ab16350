//! Congestion control as Linux does it, with the window counted in segments (`snd_cwnd`) and
//! grown per ACK by the segments it newly delivered:
//! - **reno**: slow start to `ssthresh`, then one segment per window (`tcp_cong_avoid_ai`);
//!   half the window on a loss or an ECE.
//! - **cubic** (RFC 9438 with Linux's constants and structure): C = 0.4, β = 717/1024, fast
//!   convergence, the Reno-friendly region, a window of at most 20 segments' growth per ACK
//!   before the first loss, and HyStart (the ACK-train and delay detectors, from 16 segments);
//!   reset by a timeout.
//! - **dctcp** (RFC 8257 as Linux's `tcp_dctcp`): α from 1, updated once per window of data
//!   with g = 1/16 from the share of delivered segments whose ACK carried ECE; an ECE cuts the
//!   window to `cwnd × (1 - α/2)`; a loss halves it. Growth is Reno's.
//!
//! What the connection ([`super::conn`]) decides: when a reduction happens (once per window,
//! RFC 3168 §6.1.2 and RFC 6675), and that the window grows only outside a reduction and
//! while the sender is limited by it.

/// Which algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// NewReno's window arithmetic (the loss recovery is SACK's).
    Reno,
    /// CUBIC, Linux's default.
    #[default]
    Cubic,
    /// DCTCP.
    Dctcp,
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Kind, String> {
        match s {
            "reno" => Ok(Kind::Reno),
            "cubic" => Ok(Kind::Cubic),
            "dctcp" => Ok(Kind::Dctcp),
            _ => Err(format!("cc {s}: reno, cubic or dctcp")),
        }
    }
}

/// What an ACK tells the algorithm.
#[derive(Clone, Copy, Debug, Default)]
pub struct Acked {
    /// Now, ns.
    pub now: u64,
    /// Segments this ACK newly delivered (cumulatively or by SACK).
    pub segments: u32,
    /// An RTT sample from it, ns.
    pub rtt: Option<u64>,
    /// It carried ECE.
    pub ece: bool,
    /// The sender's `snd_una` after it.
    pub snd_una: u32,
    /// The sender's `snd_nxt`.
    pub snd_nxt: u32,
    /// HyStart's ACK-train cushion (Linux's `hystart_ack_delay`: the time to send four
    /// 64 KB GSO bursts at the pacing rate, at most 1 ms), ns.
    pub ack_delay_ns: u64,
}

/// CUBIC's C (Linux: `bic_scale` 41 × 10 / 1024), segments per second cubed.
const CUBIC_C: f64 = 410.0 / 1024.0;
/// CUBIC's β × 1024 (Linux's `beta`).
const CUBIC_BETA: u32 = 717;
/// Linux's `beta_scale`: `8 * (1024 + β) / 3 / (1024 - β)` (15), for the Reno-friendly window.
const CUBIC_BETA_SCALE: u32 = 8 * (1024 + CUBIC_BETA) / 3 / (1024 - CUBIC_BETA);
/// CUBIC recomputes its target at most this often while the window stands still (Linux's
/// `HZ / 32` jiffies: 7 at HZ = 250), ns.
const CUBIC_RECOMPUTE_NS: u64 = 28_000_000;
/// CUBIC ignores delay samples this long after a reduction (`cubictcp_acked`: `HZ`), ns.
const CUBIC_DISCARD_NS: u64 = 1_000_000_000;
/// HyStart runs from this window on (Linux's `hystart_low_window`).
const HYSTART_LOW_WINDOW: u32 = 16;
/// ACKs closer than this make a train (Linux's `hystart_ack_delta_us`), ns.
const HYSTART_ACK_DELTA: u64 = 2_000_000;
/// RTT samples per round before the delay detector decides (Linux's `HYSTART_MIN_SAMPLES`).
const HYSTART_MIN_SAMPLES: u32 = 8;
/// DCTCP's g = 1/2^4.
const DCTCP_SHIFT_G: u32 = 4;

#[derive(Clone, Debug, Default)]
struct Cubic {
    last_max: u32,
    epoch_start: Option<u64>,
    origin: u32,
    k: f64,
    ack_cnt: u32,
    tcp_cwnd: u32,
    cnt: u32,
    last_cwnd: u32,
    last_time: u64,
    delay_min: Option<u64>,
    // HyStart.
    found: bool,
    round_start: u64,
    last_ack: u64,
    /// The round ends when `snd_una` passes it (`None`: start a round at the next ACK).
    end_seq: Option<u32>,
    curr_rtt: u64,
    sample_cnt: u32,
}

#[derive(Clone, Debug)]
struct Dctcp {
    /// α × 1024.
    alpha: u32,
    next_seq: u32,
    delivered: u32,
    delivered_ce: u32,
}

/// A connection's congestion window and its algorithm's state.
#[derive(Clone, Debug)]
pub struct Cc {
    kind: Kind,
    /// The window, segments.
    pub cwnd: u32,
    /// The slow-start threshold, segments.
    pub ssthresh: u32,
    cwnd_cnt: u32,
    cubic: Cubic,
    dctcp: Dctcp,
}

impl Cc {
    /// `kind` with an initial window of `init_cwnd` segments and no threshold yet.
    pub fn new(kind: Kind, init_cwnd: u32) -> Cc {
        Cc {
            kind,
            cwnd: init_cwnd.max(1),
            ssthresh: u32::MAX,
            cwnd_cnt: 0,
            cubic: Cubic::default(),
            dctcp: Dctcp {
                alpha: 1024,
                next_seq: 0,
                delivered: 0,
                delivered_ce: 0,
            },
        }
    }

    /// The connection is established with `snd_nxt`: DCTCP's first window and HyStart's first
    /// round end there.
    pub fn start(&mut self, snd_nxt: u32) {
        self.dctcp.next_seq = snd_nxt;
        self.cubic.end_seq = None;
    }

    /// The algorithm.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Whether the window is below the threshold.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// DCTCP's α (0-1), for reports; 0 for the others.
    pub fn alpha(&self) -> f64 {
        match self.kind {
            Kind::Dctcp => f64::from(self.dctcp.alpha) / 1024.0,
            _ => 0.0,
        }
    }

    /// Every ACK, in any state: the algorithms' measurements (DCTCP's α, CUBIC's minimum delay
    /// and HyStart).
    pub fn on_ack(&mut self, a: &Acked) {
        match self.kind {
            Kind::Dctcp => {
                // Linux's dctcp_update_alpha runs (in_ack_event) before the ACK's cumulative
                // delivery is counted: the window that closes here is the one before it.
                let d = &mut self.dctcp;
                if !super::seq::lt(a.snd_una, d.next_seq) {
                    // min_not_zero(α, α >> g): all of a small α.
                    d.alpha -= match d.alpha >> DCTCP_SHIFT_G {
                        0 => d.alpha,
                        x => x,
                    };
                    if d.delivered_ce > 0 {
                        let f = (d.delivered_ce << (10 - DCTCP_SHIFT_G)) / d.delivered.max(1);
                        d.alpha = (d.alpha + f).min(1024);
                    }
                    d.next_seq = a.snd_nxt;
                    d.delivered = 0;
                    d.delivered_ce = 0;
                }
                d.delivered += a.segments;
                if a.ece {
                    d.delivered_ce += a.segments;
                }
            }
            Kind::Cubic => {
                let Some(r) = a.rtt.filter(|_| a.segments > 0) else {
                    return;
                };
                let c = &mut self.cubic;
                if c.epoch_start
                    .is_some_and(|e| a.now.saturating_sub(e) < CUBIC_DISCARD_NS)
                {
                    return;
                }
                c.delay_min = Some(c.delay_min.map_or(r, |m| m.min(r)));
                if !c.found && self.cwnd < self.ssthresh && self.cwnd >= HYSTART_LOW_WINDOW {
                    self.hystart(a, r);
                }
            }
            Kind::Reno => {}
        }
    }

    fn hystart(&mut self, a: &Acked, rtt: u64) {
        let c = &mut self.cubic;
        if c.end_seq.is_none_or(|e| super::seq::gt(a.snd_una, e)) {
            c.round_start = a.now;
            c.last_ack = a.now;
            c.end_seq = Some(a.snd_nxt);
            c.curr_rtt = u64::MAX;
            c.sample_cnt = 0;
        }
        let delay_min = c.delay_min.unwrap_or(rtt);
        // The ACK train: dense ACKs for longer than half the minimum RTT and the cushion
        // (halved because Linux's sockets without fq are not paced).
        if a.now.saturating_sub(c.last_ack) <= HYSTART_ACK_DELTA {
            c.last_ack = a.now;
            if a.now.saturating_sub(c.round_start) > (delay_min + a.ack_delay_ns) / 2 {
                c.found = true;
            }
        }
        // The delay: the round's least RTT (after 8 samples) grew past the minimum by an
        // eighth, clamped to 4-16 ms.
        c.curr_rtt = c.curr_rtt.min(rtt);
        if c.sample_cnt < HYSTART_MIN_SAMPLES {
            c.sample_cnt += 1;
        } else if c.curr_rtt > delay_min + (delay_min / 8).clamp(4_000_000, 16_000_000) {
            c.found = true;
        }
        if c.found {
            self.ssthresh = self.cwnd;
        }
    }

    /// Grows the window for an ACK (outside a reduction, while the window limits the sender).
    pub fn grow(&mut self, a: &Acked) {
        let mut acked = a.segments;
        if acked == 0 {
            return;
        }
        if self.in_slow_start() {
            let to = self.cwnd.saturating_add(acked).min(self.ssthresh);
            acked -= to - self.cwnd;
            self.cwnd = to;
            if acked == 0 {
                return;
            }
        }
        let w = match self.kind {
            Kind::Reno | Kind::Dctcp => self.cwnd,
            Kind::Cubic => self.cubic_update(a.now, acked),
        };
        self.avoid(w, acked);
    }

    /// Linux's `tcp_cong_avoid_ai`: one segment per `w` segments acknowledged.
    fn avoid(&mut self, w: u32, acked: u32) {
        let w = w.max(1);
        if self.cwnd_cnt >= w {
            self.cwnd_cnt = 0;
            self.cwnd += 1;
        }
        self.cwnd_cnt += acked;
        if self.cwnd_cnt >= w {
            let d = self.cwnd_cnt / w;
            self.cwnd_cnt -= d * w;
            self.cwnd += d;
        }
    }

    /// CUBIC's segments per added segment (`bictcp_update`).
    fn cubic_update(&mut self, now: u64, acked: u32) -> u32 {
        let cwnd = self.cwnd;
        let c = &mut self.cubic;
        c.ack_cnt += acked;
        if c.last_cwnd == cwnd && now.saturating_sub(c.last_time) <= CUBIC_RECOMPUTE_NS {
            return c.cnt.max(2);
        }
        c.last_cwnd = cwnd;
        c.last_time = now;
        let start = match c.epoch_start {
            Some(s) => s,
            None => {
                c.epoch_start = Some(now);
                c.ack_cnt = acked;
                c.tcp_cwnd = cwnd;
                if c.last_max <= cwnd {
                    c.k = 0.0;
                    c.origin = cwnd;
                } else {
                    c.k = (f64::from(c.last_max - cwnd) / CUBIC_C).cbrt();
                    c.origin = c.last_max;
                }
                now
            }
        };
        let t = (now - start + c.delay_min.unwrap_or(0)) as f64 / 1e9;
        // Linux's target is a whole number of segments.
        let target = (f64::from(c.origin) + CUBIC_C * (t - c.k).powi(3)).floor();
        let target = if target <= 0.0 { 0 } else { target as u32 };
        c.cnt = if target > cwnd {
            cwnd / (target - cwnd)
        } else {
            100 * cwnd
        };
        if c.last_max == 0 && c.cnt > 20 {
            c.cnt = 20;
        }
        // The Reno-friendly window.
        let delta = (cwnd * CUBIC_BETA_SCALE) >> 3;
        if delta > 0 {
            while c.ack_cnt > delta {
                c.ack_cnt -= delta;
                c.tcp_cwnd += 1;
            }
        }
        if c.tcp_cwnd > cwnd {
            let max_cnt = cwnd / (c.tcp_cwnd - cwnd);
            c.cnt = c.cnt.min(max_cnt);
        }
        c.cnt = c.cnt.max(2);
        c.cnt
    }

    /// The threshold to reduce to on entering loss recovery (`loss`) or on an ECE: the
    /// algorithm's `ssthresh`, with its side effects (CUBIC's epoch and `last_max`).
    pub fn reduce(&mut self, loss: bool) -> u32 {
        let cwnd = self.cwnd;
        self.ssthresh = match self.kind {
            Kind::Reno => (cwnd / 2).max(2),
            Kind::Dctcp if loss => (cwnd / 2).max(2),
            Kind::Dctcp => cwnd.saturating_sub((cwnd * self.dctcp.alpha) >> 11).max(2),
            Kind::Cubic => {
                let c = &mut self.cubic;
                c.epoch_start = None;
                c.last_max = if cwnd < c.last_max {
                    cwnd * (1024 + CUBIC_BETA) / 2048
                } else {
                    cwnd
                };
                (cwnd * CUBIC_BETA / 1024).max(2)
            }
        };
        self.ssthresh
    }

    /// A retransmission timeout: the window to one segment, and CUBIC starts over
    /// (`bictcp_state` on `TCP_CA_Loss`). The threshold is recomputed as for a loss only when
    /// `recompute` (Linux's `tcp_enter_loss`: not on a timeout that follows another in the same
    /// loss episode).
    pub fn on_timeout(&mut self, recompute: bool) {
        if recompute {
            self.reduce(true);
        }
        if self.kind == Kind::Cubic {
            self.cubic = Cubic::default();
        }
        self.cwnd = 1;
        self.cwnd_cnt = 0;
    }

    /// Entering loss recovery from a reduction already under way: DCTCP halves its threshold
    /// anyway (`dctcp_state` on `TCP_CA_Recovery`); the others keep it.
    pub fn enter_recovery_reducing(&mut self) {
        if self.kind == Kind::Dctcp {
            self.ssthresh = (self.cwnd / 2).max(2);
        }
    }

    /// A reduction shown spurious is undone (`tcp_undo_cwnd_reduction` with the algorithms'
    /// `undo_cwnd`: the larger of the window now and before it; the threshold back if it was
    /// higher).
    pub fn undo(&mut self, cwnd: u32, ssthresh: Option<u32>) {
        self.cwnd = self.cwnd.max(cwnd);
        if let Some(s) = ssthresh
            && s > self.ssthresh
        {
            self.ssthresh = s;
        }
    }

    /// The end of a reduction: the window settles at the threshold (Linux's
    /// `tcp_end_cwnd_reduction`).
    pub fn end_reduction(&mut self) {
        self.cwnd = self.ssthresh.max(1);
        self.cwnd_cnt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(now: u64, segments: u32) -> Acked {
        Acked {
            now,
            segments,
            ..Acked::default()
        }
    }

    #[test]
    fn slow_start_doubles_per_round_and_reno_adds_one_per_window() {
        let mut c = Cc::new(Kind::Reno, 10);
        // A round of 10 ACKs of one segment each: 20.
        for _ in 0..10 {
            c.grow(&ack(0, 1));
        }
        assert_eq!(c.cwnd, 20);
        c.ssthresh = 20;
        // Congestion avoidance: a whole window of ACKs adds one.
        for _ in 0..19 {
            c.grow(&ack(0, 1));
        }
        assert_eq!(c.cwnd, 20);
        c.grow(&ack(0, 1));
        assert_eq!(c.cwnd, 21);
        // Slow start stops at the threshold and the rest of the ACK counts in avoidance.
        let mut c = Cc::new(Kind::Reno, 10);
        c.ssthresh = 12;
        c.grow(&ack(0, 5));
        assert_eq!((c.cwnd, c.cwnd_cnt), (12, 3));
        assert_eq!(c.reduce(true), 6);
        c.end_reduction();
        assert_eq!(c.cwnd, 6);
        c.on_timeout(true);
        assert_eq!((c.cwnd, c.ssthresh), (1, 3));
    }

    #[test]
    fn dctcp_alpha_moves_by_one_sixteenth_per_window_and_cuts_by_half_alpha() {
        let mut c = Cc::new(Kind::Dctcp, 10);
        assert_eq!(c.alpha(), 1.0, "Linux starts α at 1");
        c.start(100);
        let ack = |una: u32, segments: u32, ece: bool| Acked {
            segments,
            ece,
            snd_una: una,
            snd_nxt: una + 100,
            ..Acked::default()
        };
        // The first window (to 100) has no mark: α × 15/16 when an ACK reaches 100. That ACK's
        // own segments count in the next window (Linux updates α before counting them).
        c.on_ack(&ack(50, 5, false));
        assert_eq!(c.dctcp.alpha, 1024);
        c.on_ack(&ack(100, 5, true));
        assert_eq!(c.dctcp.alpha, 1024 - 64);
        // The next window (to 200): 5 of its 10 segments marked: α × 15/16 + 1/2 × 1/16.
        c.on_ack(&ack(150, 5, false));
        assert_eq!(c.dctcp.alpha, 960, "not before the window ends");
        c.on_ack(&ack(200, 0, false));
        assert_eq!(c.dctcp.alpha, 960 - 60 + 32);
        c.cwnd = 100;
        // cwnd × (1 - α/2), α = 932/1024.
        assert_eq!(c.reduce(false), 100 - ((100 * 932) >> 11));
        c.cwnd = 100;
        assert_eq!(c.reduce(true), 50, "a loss halves");
        // α decays to 0 without marks and stays there.
        for k in 0..200u32 {
            c.on_ack(&ack(300 + k * 100, 1, false));
        }
        assert_eq!(c.alpha(), 0.0);
    }

    #[test]
    fn cubic_backs_off_to_beta_and_regrows_to_its_last_maximum_in_k_seconds() {
        let mut c = Cc::new(Kind::Cubic, 10);
        c.cwnd = 100;
        c.ssthresh = 100;
        assert_eq!(c.reduce(true), 70);
        assert_eq!(c.cubic.last_max, 100);
        c.end_reduction();
        // K = cbrt((100 - 70) / 0.4) ≈ 4.22 s: at K the window is back near 100, concave before
        // (above the line from 70 to 100), convex after. A 100 ms RTT keeps the Reno-friendly
        // window (one segment per ~1.9 rounds from 70) below the cubic one.
        let rtt = 100_000_000;
        let mut now = 0;
        let mut at = std::collections::BTreeMap::new();
        while now <= 10_000_000_000 {
            let w = c.cwnd;
            c.grow(&ack(now, w));
            now += rtt;
            at.insert(now, c.cwnd);
        }
        let at_k = at[&4_300_000_000];
        assert!((95..=101).contains(&at_k), "cwnd at K: {at_k}");
        assert!(at[&2_100_000_000] > 85, "concave: {}", at[&2_100_000_000]);
        // 0.4 × (10 - 4.22)^3 ≈ 77 above 100 at 10 s.
        assert!((165..=185).contains(&c.cwnd), "convex after K: {}", c.cwnd);
        // A loss below the last maximum: fast convergence lowers it.
        c.cwnd = 90;
        c.cubic.last_max = 100;
        c.reduce(true);
        assert_eq!(c.cubic.last_max, 90 * (1024 + 717) / 2048);
    }

    #[test]
    fn hystart_leaves_slow_start_on_an_ack_train_of_half_the_min_rtt() {
        let mut c = Cc::new(Kind::Cubic, 16);
        // 100 µs minimum RTT; ACKs 1 µs apart: the round passes 50 µs after 51 ACKs.
        let mut now = 0u64;
        let mut snd_una = 0u32;
        let mut exits = None;
        for i in 0..200 {
            now += 1_000;
            snd_una += 1;
            let a = Acked {
                now,
                segments: 1,
                rtt: Some(100_000),
                snd_una,
                snd_nxt: snd_una + c.cwnd,
                ece: false,
                ack_delay_ns: 0,
            };
            c.on_ack(&a);
            if !c.in_slow_start() {
                exits = Some(i);
                break;
            }
            c.grow(&a);
        }
        // A round ends when snd_una passes the snd_nxt of its start: round 1 starts at ACK 0
        // (snd_una 1, cwnd 16: ends past 17), round 2 at ACK 17 (cwnd 33: ends past 51), round
        // 3 at ACK 51 (1 µs per ACK), which is more than 50 µs old at ACK 102.
        let i = exits.expect("HyStart found the exit");
        assert_eq!(i, 102);
        assert_eq!(c.ssthresh, c.cwnd);
    }
}
