//! HPCC's window controller (Li et al., SIGCOMM 2019, Algorithm 1), sans-IO: the sender of PINT's
//! congestion-control use case (PINT §4.5, §6.1; docs/pint.md, "HPCC").
//!
//! The sender keeps a reference window W_c, updated once per RTT (when an ACK acknowledges data
//! sent after the last update), and computes its window W on every ACK from the normalised
//! utilisation U of the path's bottleneck:
//!
//! ```text
//! if U ≥ η or incStage ≥ maxStage:  W = W_c / (U/η) + W_AI   (and, once per RTT, incStage = 0)
//! else:                             W = W_c + W_AI           (and, once per RTT, incStage += 1)
//! once per RTT: W_c = W
//! ```
//!
//! U comes from one of two kinds of feedback ([`Feedback`]):
//! - **INT**: the per-hop records (switch id, timestamp, transmitted bytes, queue length, link
//!   rate) the receiver echoes. As HPCC's `MeasureInflight`: per link, against the previous ACK's
//!   records, u_i = min(qlen, qlen')/(B·T) + txRate/B; the sender's U is an EWMA over the largest
//!   u_i with weight τ/T, τ that link's time between the two records, capped at T.
//! - **PINT**: the bottleneck's U itself, decoded from the 8-bit digest
//!   ([`crate::pint::HpccUtil`]): the switches already keep the EWMA per port (PINT's Example
//!   #3), so the sender uses it as it is.
//!
//! The window is kept within [W_min, W_init], W_init the sender's line rate × T (HPCC starts at
//! line rate and never exceeds it). The pacing rate is W/T.

/// The controller's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HpccConfig {
    /// W_AI, bytes.
    pub w_ai: f64,
    /// maxStage: ACK rounds of pure additive increase before a multiplicative step.
    pub max_stage: u32,
    /// η, the target utilisation.
    pub eta: f64,
    /// T, the base RTT, ns.
    pub base_rtt_ns: u64,
    /// The sender's line rate, bits/s: W_init = line rate × T.
    pub line_bps: u64,
    /// The smallest window, bytes.
    pub w_min: f64,
}

impl HpccConfig {
    /// The PINT paper's W_AI (§6.1), for its 100 Gb/s NICs.
    pub const PAPER_W_AI: f64 = 80.0;
    /// The PINT paper's maxStage.
    pub const PAPER_MAX_STAGE: u32 = 0;
    /// The PINT paper's η.
    pub const PAPER_ETA: f64 = 0.95;
    /// The PINT paper's T, ns.
    pub const PAPER_T_NS: u64 = 13_000;
    /// The PINT paper's NIC rate, bits/s.
    pub const PAPER_LINE_BPS: u64 = 100_000_000_000;

    /// The paper's settings scaled to a fabric of `line_bps` NICs and base RTT `base_rtt_ns` [X]:
    /// η and maxStage as they are, T = the fabric's base RTT, and W_AI scaled with the
    /// bandwidth-delay product (80 B of the paper's 100 Gb/s × 13 µs = 162.5 KB), so that W_AI
    /// is the same fraction of a line-rate window. W_min is one W_AI (at least 64 bytes).
    pub fn scaled(line_bps: u64, base_rtt_ns: u64) -> HpccConfig {
        let bdp = |bps: u64, t: u64| bps as f64 / 8.0 * t as f64 / 1e9;
        let ours = bdp(line_bps, base_rtt_ns);
        let paper = bdp(Self::PAPER_LINE_BPS, Self::PAPER_T_NS);
        let w_ai = Self::PAPER_W_AI * ours / paper;
        HpccConfig {
            w_ai,
            max_stage: Self::PAPER_MAX_STAGE,
            eta: Self::PAPER_ETA,
            base_rtt_ns: base_rtt_ns.max(1),
            line_bps: line_bps.max(1),
            w_min: w_ai.max(64.0),
        }
    }

    /// W_init: the line rate × T, bytes.
    pub fn w_init(&self) -> f64 {
        self.line_bps as f64 / 8.0 * self.base_rtt_ns as f64 / 1e9
    }
}

/// One hop's INT record, as a switch wrote it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntHop {
    /// The switch.
    pub switch_id: u32,
    /// Its egress timestamp, ns (wrapping at 2^32).
    pub ts_ns: u32,
    /// Bytes the egress port has sent (wrapping at 2^32).
    pub tx_bytes: u32,
    /// The port's queue at dequeue, bytes.
    pub qlen_bytes: u32,
    /// The port's rate, Mb/s.
    pub rate_mbps: u32,
}

/// What an ACK brought back.
#[derive(Clone, Copy, Debug)]
pub enum Feedback<'a> {
    /// The INT stack, hop by hop.
    Int(&'a [IntHop]),
    /// PINT: the bottleneck's utilisation, decoded from the digest.
    Util(f64),
    /// No telemetry on this ACK (an unsampled packet): the window is not recomputed.
    None,
}

/// The window controller of one flow.
#[derive(Clone, Debug)]
pub struct Hpcc {
    cfg: HpccConfig,
    w: f64,
    wc: f64,
    inc_stage: u32,
    u: f64,
    last_update_seq: u64,
    prev: Vec<IntHop>,
    /// Reference-window updates so far.
    pub updates: u64,
}

impl Hpcc {
    /// A flow starting at line rate (W = W_c = W_init).
    pub fn new(cfg: HpccConfig) -> Hpcc {
        let w = cfg.w_init();
        Hpcc {
            cfg,
            w,
            wc: w,
            inc_stage: 0,
            // As HPCC's reference sender starts it (its queue pair's `u = 1`): a new flow
            // assumes a fully used path until the EWMA has seen a full base RTT of samples.
            u: 1.0,
            last_update_seq: 0,
            prev: Vec::new(),
            updates: 0,
        }
    }

    /// The parameters.
    pub fn config(&self) -> &HpccConfig {
        &self.cfg
    }

    /// The window, bytes.
    pub fn window(&self) -> f64 {
        self.w
    }

    /// The reference window W_c, bytes.
    pub fn reference_window(&self) -> f64 {
        self.wc
    }

    /// The last utilisation estimate U.
    pub fn util(&self) -> f64 {
        self.u
    }

    /// The pacing rate W/T, bits/s.
    pub fn rate_bps(&self) -> f64 {
        self.w * 8.0 * 1e9 / self.cfg.base_rtt_ns as f64
    }

    /// The gap to leave after sending `bytes` at the pacing rate, ns.
    pub fn gap_ns(&self, bytes: u64) -> u64 {
        (bytes as f64 * 8.0 * 1e9 / self.rate_bps()).ceil() as u64
    }

    /// HPCC's `MeasureInflight` on an INT stack: the updated U, or `None` when there is no
    /// previous stack of the same path to compare with (first ACK, or a path change: the stack
    /// is kept for the next ACK).
    fn measure_inflight(&mut self, hops: &[IntHop]) -> Option<f64> {
        let same_path = self.prev.len() == hops.len()
            && self
                .prev
                .iter()
                .zip(hops)
                .all(|(a, b)| a.switch_id == b.switch_id);
        if !same_path || hops.is_empty() {
            self.prev.clear();
            self.prev.extend_from_slice(hops);
            return None;
        }
        let t = self.cfg.base_rtt_ns as f64;
        let mut best: Option<(f64, f64)> = None;
        for (old, new) in self.prev.iter().zip(hops) {
            let dt = new.ts_ns.wrapping_sub(old.ts_ns);
            if dt == 0 || dt >= 1 << 31 {
                continue;
            }
            let b = f64::from(new.rate_mbps.max(1)) * 1e6 / 8.0 / 1e9; // bytes/ns
            let tx_rate = f64::from(new.tx_bytes.wrapping_sub(old.tx_bytes)) / f64::from(dt);
            let q = f64::from(new.qlen_bytes.min(old.qlen_bytes));
            let u = q / (b * t) + tx_rate / b;
            if best.is_none_or(|(bu, _)| u > bu) {
                best = Some((u, f64::from(dt)));
            }
        }
        self.prev.clear();
        self.prev.extend_from_slice(hops);
        let (u, tau) = best?;
        let tau = tau.min(t);
        self.u = (1.0 - tau / t) * self.u + tau / t * u;
        Some(self.u)
    }

    /// HPCC's `ComputeWind`.
    fn compute_window(&mut self, u: f64, update_wc: bool) {
        let c = self.cfg;
        let w = if u >= c.eta || self.inc_stage >= c.max_stage {
            if update_wc {
                self.inc_stage = 0;
            }
            self.wc / (u.max(1e-9) / c.eta) + c.w_ai
        } else {
            if update_wc {
                self.inc_stage += 1;
            }
            self.wc + c.w_ai
        };
        self.w = w.clamp(c.w_min, c.w_init());
        if update_wc {
            self.wc = self.w;
            self.updates += 1;
        }
    }

    /// An ACK for data up to sequence `ack_seq` (bytes) arrived, with the sender's next
    /// sequence `snd_nxt` and the telemetry it echoes. Returns whether the window was
    /// recomputed.
    pub fn on_ack(&mut self, ack_seq: u64, snd_nxt: u64, fb: Feedback<'_>) -> bool {
        let u = match fb {
            Feedback::Int(hops) => self.measure_inflight(hops),
            Feedback::Util(u) => {
                self.u = u;
                Some(u)
            }
            Feedback::None => None,
        };
        let Some(u) = u else { return false };
        let update_wc = ack_seq > self.last_update_seq;
        if update_wc {
            self.last_update_seq = snd_nxt;
        }
        self.compute_window(u, update_wc);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> HpccConfig {
        // 1 Gb/s, T = 100 µs: W_init = 12.5 KB.
        HpccConfig::scaled(1_000_000_000, 100_000)
    }

    #[test]
    fn scaling_keeps_the_paper_ratios() {
        let c = HpccConfig::scaled(HpccConfig::PAPER_LINE_BPS, HpccConfig::PAPER_T_NS);
        assert!((c.w_ai - 80.0).abs() < 1e-9);
        assert!((c.w_init() - 162_500.0).abs() < 1e-6);
        let s = cfg();
        assert!((s.w_init() - 12_500.0).abs() < 1e-6);
        assert!((s.w_ai / s.w_init() - 80.0 / 162_500.0).abs() < 1e-12);
        assert_eq!((s.eta, s.max_stage), (0.95, 0));
    }

    #[test]
    fn starts_at_line_rate_and_cuts_in_proportion_to_overload() {
        let mut h = Hpcc::new(cfg());
        assert_eq!(h.window(), 12_500.0);
        assert!((h.rate_bps() - 1e9).abs() < 1.0);
        // U = 2η: the window halves (plus W_AI), once per RTT.
        assert!(h.on_ack(1000, 20_000, Feedback::Util(1.9)));
        let w = 12_500.0 / 2.0 + h.config().w_ai;
        assert!((h.window() - w).abs() < 1e-9);
        assert_eq!(h.reference_window(), h.window());
        // Within the same RTT the reference window holds: W = W_c/(U/η) + W_AI from the same W_c.
        assert!(h.on_ack(5000, 30_000, Feedback::Util(1.9)));
        assert!((h.reference_window() - w).abs() < 1e-9);
        assert!((h.window() - (w / 2.0 + h.config().w_ai)).abs() < 1e-9);
    }

    #[test]
    fn reference_window_changes_once_per_rtt() {
        let mut h = Hpcc::new(cfg());
        h.on_ack(1, 10_000, Feedback::Util(1.9));
        let wc = h.reference_window();
        for seq in [2, 500, 9_999, 10_000] {
            h.on_ack(seq, 20_000, Feedback::Util(3.8));
            assert_eq!(h.reference_window(), wc, "seq {seq}");
            // Every ACK still sets W from W_c and its own U.
            assert!((h.window() - (wc / 4.0 + h.config().w_ai)).abs() < 1e-9);
        }
        assert_eq!(h.updates, 1);
        h.on_ack(10_001, 30_000, Feedback::Util(3.8));
        assert_eq!(h.updates, 2);
        assert!((h.reference_window() - (wc / 4.0 + h.config().w_ai)).abs() < 1e-9);
    }

    #[test]
    fn under_target_grows_multiplicatively_with_max_stage_0_and_additively_otherwise() {
        let mut h = Hpcc::new(cfg());
        h.on_ack(1, 1000, Feedback::Util(3.8));
        let wc = h.reference_window();
        h.on_ack(1001, 2000, Feedback::Util(0.475));
        assert!((h.window() - (wc * 2.0 + h.config().w_ai)).abs() < 1e-9);
        let mut c = cfg();
        c.max_stage = 2;
        let mut h = Hpcc::new(c);
        h.on_ack(1, 1000, Feedback::Util(3.8));
        let wc = h.reference_window();
        h.on_ack(1001, 2000, Feedback::Util(0.475));
        assert!((h.window() - (wc + c.w_ai)).abs() < 1e-9);
        h.on_ack(2001, 3000, Feedback::Util(0.475));
        assert!((h.window() - (wc + 2.0 * c.w_ai)).abs() < 1e-9);
        // incStage reached maxStage: multiplicative.
        h.on_ack(3001, 4000, Feedback::Util(0.475));
        assert!((h.window() - ((wc + 2.0 * c.w_ai) * 2.0 + c.w_ai)).abs() < 1e-9);
    }

    #[test]
    fn window_stays_between_min_and_line_rate_and_unsampled_acks_change_nothing() {
        let mut h = Hpcc::new(cfg());
        h.on_ack(1, 1000, Feedback::Util(0.01));
        assert_eq!(h.window(), h.config().w_init());
        for i in 0..50 {
            h.on_ack(1000 * (i + 2), 1000 * (i + 3), Feedback::Util(15.0));
        }
        assert_eq!(h.window(), h.config().w_min);
        let w = h.window();
        assert!(!h.on_ack(1_000_000, 2_000_000, Feedback::None));
        assert_eq!(h.window(), w);
    }

    fn hop(id: u32, ts: u32, tx: u32, q: u32) -> IntHop {
        IntHop {
            switch_id: id,
            ts_ns: ts,
            tx_bytes: tx,
            qlen_bytes: q,
            rate_mbps: 1000,
        }
    }

    #[test]
    fn int_takes_the_most_utilised_link_as_hpcc_measures_it() {
        let mut h = Hpcc::new(cfg());
        let first = [hop(1, 0, 0, 0), hop(2, 10, 0, 0)];
        // No previous stack: no update.
        assert!(!h.on_ack(1, 1000, Feedback::Int(&first)));
        // T = 100 µs; after 100 µs hop 1 sent 6250 B (0.5 of 125 B/µs·100 µs), hop 2 sent
        // 12_500 B and holds 6250 B both times (u = 1 + 0.5).
        let second = [hop(1, 100_000, 6_250, 0), hop(2, 100_010, 12_500, 6_250)];
        let first = [hop(1, 0, 0, 0), hop(2, 10, 0, 6_250)];
        let mut h2 = Hpcc::new(cfg());
        h2.on_ack(1, 1000, Feedback::Int(&first));
        assert!(h2.on_ack(2, 1000, Feedback::Int(&second)));
        assert!((h2.util() - 1.5).abs() < 1e-9, "{}", h2.util());
        // τ < T weighs the sample by τ/T.
        let third = [hop(1, 150_000, 9_375, 0), hop(2, 150_010, 15_625, 0)];
        h2.on_ack(3, 1000, Feedback::Int(&third));
        // Hop 2: min queue 0, rate 3125 B / 50 µs = 0.5 of B; U = 0.5·1.5 + 0.5·0.5.
        assert!((h2.util() - 1.0).abs() < 1e-9, "{}", h2.util());
        // A path change (other switch ids) restarts the comparison.
        let other = [hop(1, 200_000, 0, 0), hop(3, 200_010, 0, 0)];
        assert!(!h2.on_ack(4, 1000, Feedback::Int(&other)));
    }

    /// U starts at 1, as in HPCC's reference sender: a flow's first INT sample over a short τ
    /// moves it only τ/T of the way, so a new flow on a congested path backs off at once
    /// instead of growing for an RTT from U = 0 (issue 33).
    #[test]
    fn a_new_flow_starts_from_a_fully_used_path() {
        let mut h = Hpcc::new(cfg());
        assert_eq!(h.util(), 1.0);
        // Two stacks 10 µs apart (τ = T/10) of a link at twice its rate (queue of one BDP).
        let bdp = 12_500;
        let first = [hop(1, 0, 0, bdp)];
        let second = [hop(1, 10_000, 1_250, bdp)];
        h.on_ack(1, 1000, Feedback::Int(&first));
        assert!(h.on_ack(2, 1000, Feedback::Int(&second)));
        // Sample u = 1 (queue) + 1 (rate); U = 0.9·1 + 0.1·2 = 1.1 ≥ η: the window shrinks.
        assert!((h.util() - 1.1).abs() < 1e-9, "{}", h.util());
        assert!(h.window() < h.config().w_init(), "{}", h.window());
    }

    /// N flows on one link, fluid model with one RTT of feedback delay: they converge to an
    /// equal share with the link at about η.
    #[test]
    fn flows_on_one_link_converge_to_a_fair_share_at_eta() {
        let c = cfg();
        let bdp = c.w_init();
        let mut flows: Vec<Hpcc> = (0..4).map(|_| Hpcc::new(c)).collect();
        // Unequal starts.
        for (i, f) in flows.iter_mut().enumerate() {
            f.on_ack(1, 1, Feedback::Util(1.0 + i as f64));
        }
        let mut seq = 2u64;
        for _ in 0..3000 {
            let total: f64 = flows.iter().map(Hpcc::window).sum();
            // Utilisation = in-flight over the BDP (queue included when above 1).
            let u = total / bdp;
            for f in &mut flows {
                f.on_ack(seq, seq + 1, Feedback::Util(u));
            }
            seq += 2;
        }
        let total: f64 = flows.iter().map(Hpcc::window).sum();
        let u = total / bdp;
        assert!((u - c.eta).abs() < 0.05, "U = {u}");
        let (lo, hi) = flows
            .iter()
            .map(Hpcc::window)
            .fold((f64::MAX, 0.0f64), |a, w| (a.0.min(w), a.1.max(w)));
        assert!(hi / lo < 1.05, "{lo} .. {hi}");
    }
}
