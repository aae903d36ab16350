//! Value compression (PINT §4.3) and HPCC's utilisation digest (PINT Example #3; docs/pint.md).
//!
//! - **Multiplicative**: write an exponent a ≈ log_β v and decode β^a. With nearest rounding
//!   and β = (1+ε)² (the paper's form) the decoded value is within a factor 1+ε; with randomised
//!   rounding (floor or ceiling, unbiased in the log domain) and β = 1+ε it is within 1+ε.
//! - **Additive**: write a ≈ v/s and decode s·a. Nearest rounding with s = 2Δ (the paper's
//!   form) errs by at most Δ; randomised rounding with step s = Δ errs by less than Δ.
//!
//! Randomised rounding takes 64 uniform bits (a "coin", e.g. [`crate::pint::Hashes::coin`] of the
//! packet and hop), so switch behaviour stays a function of its inputs.

use super::hash::unit;

/// Code 0 of every compressor decodes to 0 (values ≤ 0 or below the range).
const ZERO: u32 = 0;

fn max_code(bits: u8) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits.max(1)) - 1
    }
}

/// Randomised rounding: ⌊x⌋ or ⌈x⌉, the ceiling with probability x − ⌊x⌋.
fn round_random(x: f64, coin: u64) -> f64 {
    let f = x.floor();
    if unit(coin) < x - f { f + 1.0 } else { f }
}

/// Multiplicative compression to `bits` bits with base β: code c ≥ 1 stands for β^(lo + c − 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Multiplicative {
    ln_base: f64,
    bits: u8,
    lo: i64,
}

impl Multiplicative {
    /// Base `base` (> 1), `bits` bits (1..=32), covering values up to `max_value` (> 0): the
    /// exponents run from ⌈log_β max⌉ − (2^bits − 2) to ⌈log_β max⌉.
    pub fn with_base(base: f64, bits: u8, max_value: f64) -> Multiplicative {
        let ln_base = base.max(1.0 + 1e-12).ln();
        let hi = (max_value.max(f64::MIN_POSITIVE).ln() / ln_base).ceil() as i64;
        Multiplicative {
            ln_base,
            bits: bits.clamp(1, 32),
            lo: hi - i64::from(max_code(bits)) + 1,
        }
    }

    /// The paper's form: β = (1+ε)², nearest rounding ([`Multiplicative::encode_nearest`]) is
    /// within a factor 1+ε.
    pub fn nearest(eps: f64, bits: u8, max_value: f64) -> Multiplicative {
        Multiplicative::with_base((1.0 + eps) * (1.0 + eps), bits, max_value)
    }

    /// β = 1+ε: randomised rounding ([`Multiplicative::encode_randomised`]) is within 1+ε.
    pub fn randomised(eps: f64, bits: u8, max_value: f64) -> Multiplicative {
        Multiplicative::with_base(1.0 + eps, bits, max_value)
    }

    /// The base β.
    pub fn base(&self) -> f64 {
        self.ln_base.exp()
    }

    /// The smallest value of the range with bounded relative error (β^lo).
    pub fn min_value(&self) -> f64 {
        (self.lo as f64 * self.ln_base).exp()
    }

    /// The largest code's value; larger inputs saturate to it.
    pub fn max_value(&self) -> f64 {
        self.decode(max_code(self.bits))
    }

    fn code(&self, exponent: f64) -> u32 {
        let e = exponent as i64;
        if e < self.lo {
            ZERO
        } else {
            (e - self.lo + 1).min(i64::from(max_code(self.bits))) as u32
        }
    }

    /// round(log_β v); values ≤ 0 or below β^(lo − 1/2) encode as 0.
    pub fn encode_nearest(&self, v: f64) -> u32 {
        if v > 0.0 {
            self.code((v.ln() / self.ln_base).round())
        } else {
            ZERO
        }
    }

    /// ⌊log_β v⌉ randomised by `coin` (expected exponent = log_β v); values ≤ 0 or below β^(lo−1)
    /// encode as 0.
    pub fn encode_randomised(&self, v: f64, coin: u64) -> u32 {
        if v > 0.0 {
            self.code(round_random(v.ln() / self.ln_base, coin))
        } else {
            ZERO
        }
    }

    /// β^(lo + code − 1), or 0 for code 0.
    pub fn decode(&self, code: u32) -> f64 {
        if code == ZERO {
            0.0
        } else {
            let e = self.lo + i64::from(code.min(max_code(self.bits))) - 1;
            (e as f64 * self.ln_base).exp()
        }
    }
}

/// Additive compression to `bits` bits with step s: code a stands for s·a.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Additive {
    step: f64,
    bits: u8,
}

impl Additive {
    /// Step `step` (> 0), `bits` bits (1..=32).
    pub fn new(step: f64, bits: u8) -> Additive {
        Additive {
            step: step.max(f64::MIN_POSITIVE),
            bits: bits.clamp(1, 32),
        }
    }

    /// The paper's form for error target Δ: step 2Δ with nearest rounding, error ≤ Δ.
    pub fn paper(delta: f64, bits: u8) -> Additive {
        Additive::new(2.0 * delta, bits)
    }

    /// The step s.
    pub fn step(&self) -> f64 {
        self.step
    }

    /// The largest value with bounded error; larger inputs saturate.
    pub fn max_value(&self) -> f64 {
        self.step * f64::from(max_code(self.bits))
    }

    fn code(&self, a: f64) -> u32 {
        a.clamp(0.0, f64::from(max_code(self.bits))) as u32
    }

    /// round(v/s): error ≤ s/2 for 0 ≤ v ≤ [`Additive::max_value`].
    pub fn encode_nearest(&self, v: f64) -> u32 {
        self.code((v / self.step).round())
    }

    /// ⌊v/s⌉ randomised by `coin`, unbiased: error < s for 0 ≤ v ≤ [`Additive::max_value`].
    pub fn encode_randomised(&self, v: f64, coin: u64) -> u32 {
        self.code(round_random(v / self.step, coin))
    }

    /// s·code.
    pub fn decode(&self, code: u32) -> f64 {
        self.step * f64::from(code.min(max_code(self.bits)))
    }
}

/// HPCC's utilisation digest (PINT Example #3): every hop writes
/// max(digest, [log_(1+ε)² U]_R), so the packet carries the path's bottleneck utilisation.
///
/// Per hop the code is within one exponent step of log_(1+ε)² U, so the decoded maximum is within
/// a factor (1+ε)² of the true path maximum on every packet. Each hop's code is unbiased in the
/// log domain; the maximum over hops near the same U is biased upward (by up to one step;
/// docs/pint.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HpccUtil {
    codec: Multiplicative,
}

impl HpccUtil {
    /// The paper's setting: 8 bits, ε = 0.025.
    pub const PAPER_EPS: f64 = 0.025;
    /// The largest utilisation the paper setting represents (a fixed offset [X], since log U is
    /// negative for U < 1): 8 bits at ε = 0.025 span β^254 ≈ 2.8·10⁵, so 16 down to ≈ 6·10⁻⁵.
    pub const PAPER_MAX_UTIL: f64 = 16.0;

    /// 8 bits, base (1+`eps`)², utilisations up to `max_util`.
    pub fn new(eps: f64, max_util: f64) -> HpccUtil {
        HpccUtil {
            codec: Multiplicative::nearest(eps, 8, max_util),
        }
    }

    /// The paper's setting ([`HpccUtil::PAPER_EPS`], [`HpccUtil::PAPER_MAX_UTIL`]).
    pub fn paper() -> HpccUtil {
        HpccUtil::new(HpccUtil::PAPER_EPS, HpccUtil::PAPER_MAX_UTIL)
    }

    /// The codec (base (1+ε)²).
    pub fn codec(&self) -> Multiplicative {
        self.codec
    }

    /// A hop's update of the digest with its egress link's utilisation `u`.
    pub fn encode_max(&self, digest: u8, u: f64, coin: u64) -> u8 {
        let code = self.codec.encode_randomised(u, coin).min(255) as u8;
        digest.max(code)
    }

    /// The bottleneck utilisation a digest stands for.
    pub fn decode(&self, digest: u8) -> f64 {
        self.codec.decode(u32::from(digest))
    }
}

/// The per-egress-port EWMA of link utilisation of PINT Example #3:
/// U ← ((T−τ)/T)·U + qlen·τ/(B·T²) + byte/(B·T), with τ the time since the port's last packet,
/// capped at T [I].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UtilEwma {
    u: f64,
    last_ns: Option<u64>,
}

impl UtilEwma {
    /// The current utilisation U.
    pub fn util(&self) -> f64 {
        self.u
    }

    /// A port's state as a switch's registers hold it: U and the time of its last packet.
    pub fn from_parts(u: f64, last_ns: Option<u64>) -> UtilEwma {
        UtilEwma { u, last_ns }
    }

    /// The time of the port's last packet, ns.
    pub fn last_ns(&self) -> Option<u64> {
        self.last_ns
    }

    /// Updates with a packet of `bytes` dequeued at `now_ns` with `qlen_bytes` queued, on a link
    /// of `bytes_per_ns` (B) with base RTT `base_rtt_ns` (T). Returns the new U. The first packet
    /// of a port counts as τ = T.
    pub fn update(
        &mut self,
        now_ns: u64,
        bytes: u64,
        qlen_bytes: u64,
        bytes_per_ns: f64,
        base_rtt_ns: u64,
    ) -> f64 {
        let t = base_rtt_ns.max(1) as f64;
        let tau = self
            .last_ns
            .map_or(t, |last| (now_ns.saturating_sub(last) as f64).min(t));
        self.last_ns = Some(now_ns);
        let b = bytes_per_ns.max(f64::MIN_POSITIVE);
        self.u =
            (t - tau) / t * self.u + qlen_bytes as f64 * tau / (b * t * t) + bytes as f64 / (b * t);
        self.u
    }
}
