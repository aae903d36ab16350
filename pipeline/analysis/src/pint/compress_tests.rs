//! Value compression: error bounds for all inputs (proptest), unbiased randomised rounding, the
//! HPCC path maximum and its EWMA.

use super::compress::{Additive, HpccUtil, Multiplicative, UtilEwma};
use super::hash::{Hashes, mix64};
use proptest::prelude::*;

/// Relative slack for floating-point ln/exp round-off.
const FP: f64 = 1e-9;

/// A value log-uniform in the codec's bounded-error range, from t ∈ [0, 1] (at most e^500 wide, so
/// wide codecs stay clear of subnormal floats).
fn in_range(c: &Multiplicative, t: f64) -> f64 {
    let hi = c.max_value().ln();
    let lo = c.min_value().ln().max(hi - 500.0);
    (lo + t * (hi - lo))
        .exp()
        .clamp(c.min_value(), c.max_value())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The paper's form: round(log_(1+ε)² v), decoded within a factor 1+ε.
    #[test]
    fn multiplicative_nearest_within_1_plus_eps(
        eps in 0.001f64..0.5, bits in 4u8..=16, max_exp in -10i32..40, t in 0.0f64..=1.0,
    ) {
        let c = Multiplicative::nearest(eps, bits, 2f64.powi(max_exp));
        let v = in_range(&c, t);
        let d = c.decode(c.encode_nearest(v));
        prop_assert!(d <= v * (1.0 + eps) * (1.0 + FP), "v {v} d {d}");
        prop_assert!(d * (1.0 + eps) * (1.0 + FP) >= v, "v {v} d {d}");
    }

    /// Randomised rounding of log_(1+ε) v: decoded within a factor 1+ε whatever the coin.
    #[test]
    fn multiplicative_randomised_within_1_plus_eps(
        eps in 0.001f64..0.5, bits in 4u8..=16, max_exp in -10i32..40, t in 0.0f64..=1.0,
        coin in any::<u64>(),
    ) {
        let c = Multiplicative::randomised(eps, bits, 2f64.powi(max_exp));
        let v = in_range(&c, t);
        let d = c.decode(c.encode_randomised(v, coin));
        prop_assert!(d <= v * (1.0 + eps) * (1.0 + FP), "v {v} d {d}");
        prop_assert!(d * (1.0 + eps) * (1.0 + FP) >= v, "v {v} d {d}");
    }

    /// Codes fit the budget for every input, including out-of-range ones.
    #[test]
    fn codes_fit_bits(bits in 1u8..=16, v in any::<f64>(), coin in any::<u64>()) {
        let m = Multiplicative::randomised(0.01, bits, 1e6);
        let a = Additive::new(3.0, bits);
        let max = (1u32 << bits) - 1;
        prop_assert!(m.encode_nearest(v) <= max && m.encode_randomised(v, coin) <= max);
        prop_assert!(a.encode_nearest(v) <= max && a.encode_randomised(v, coin) <= max);
    }

    /// Additive with step s: nearest errs by ≤ s/2 (the paper's 2Δ step: ≤ Δ), randomised by < s.
    #[test]
    fn additive_within_delta(
        delta in 0.001f64..1e6, bits in 1u8..=16, t in 0.0f64..=1.0, coin in any::<u64>(),
    ) {
        let paper = Additive::paper(delta, bits);
        let v = t * paper.max_value();
        let err = (paper.decode(paper.encode_nearest(v)) - v).abs();
        prop_assert!(err <= delta * (1.0 + FP), "v {v} err {err}");

        let step = Additive::new(delta, bits);
        let v = t * step.max_value();
        let err = (step.decode(step.encode_randomised(v, coin)) - v).abs();
        prop_assert!(err < delta * (1.0 + FP), "v {v} err {err}");
        let err = (step.decode(step.encode_nearest(v)) - v).abs();
        prop_assert!(err <= delta / 2.0 * (1.0 + FP), "v {v} err {err}");
    }

    /// HPCC: after every hop wrote max(digest, [log_(1+ε)² U_i]_R) the digest never decreased,
    /// and decodes within (1+ε)² of the path's largest utilisation.
    #[test]
    fn hpcc_keeps_path_max(
        utils in prop::collection::vec(1e-4f64..16.0, 1..32), packet in any::<u64>(), seed in any::<u64>(),
    ) {
        let hpcc = HpccUtil::paper();
        let hashes = Hashes::new(seed);
        let mut digest = 0u8;
        for (i, &u) in utils.iter().enumerate() {
            let next = hpcc.encode_max(digest, u, hashes.coin(packet, i as u32 + 1));
            prop_assert!(next >= digest);
            digest = next;
        }
        let max = utils.iter().copied().fold(0.0, f64::max);
        let beta = (1.0 + HpccUtil::PAPER_EPS).powi(2);
        let d = hpcc.decode(digest);
        prop_assert!(d <= max * beta * (1.0 + FP) && d * beta * (1.0 + FP) >= max, "max {max} d {d}");
    }
}

/// Randomised rounding is unbiased in the log domain: the mean exponent equals log_β v.
#[test]
fn randomised_rounding_is_unbiased() {
    let c = Multiplicative::randomised(0.1, 8, 1e6);
    let ln_b = c.base().ln();
    for v in [1.0, 3.7, 123.4, 9999.0] {
        let n = 100_000u64;
        let sum: f64 = (0..n)
            .map(|i| {
                let d = c.decode(c.encode_randomised(v, mix64(i)));
                d.ln() / ln_b
            })
            .sum();
        let mean = sum / n as f64;
        // The coin is a Bernoulli per sample: σ of the mean ≤ 0.5/√n ≈ 0.0016.
        assert!((mean - v.ln() / ln_b).abs() < 0.01, "v {v} mean {mean}");
    }
    let a = Additive::new(10.0, 8);
    let n = 100_000u64;
    let mean = (0..n)
        .map(|i| a.decode(a.encode_randomised(33.0, mix64(i))))
        .sum::<f64>()
        / n as f64;
    assert!((mean - 33.0).abs() < 0.1, "{mean}");
}

/// The path maximum of independent randomised roundings is biased upward when several hops
/// are near the maximum (issue 33): each hop is unbiased, but the maximum of k codes rounds up
/// with probability 1 − (1 − f)^k, where f is the fractional part of log_β U. With every hop at
/// one U midway between codes (f = 1/2) the mean exponent is 1/4 of a step high for 2 hops and
/// 15/32 for 5; the decoded value stays within the (1+ε)² bound.
#[test]
fn the_path_maximum_is_biased_upward_when_hops_tie() {
    let h = HpccUtil::paper();
    let c = h.codec();
    let ln_b = c.base().ln();
    // A utilisation whose exponent is an integer plus one half.
    let e = (0.8f64.ln() / ln_b).floor() + 0.5;
    let u = (e * ln_b).exp();
    for (hops, want) in [(1, 0.0), (2, 0.25), (5, 15.0 / 32.0)] {
        let n = 100_000u64;
        let sum: f64 = (0..n)
            .map(|i| {
                let digest = (0..hops).fold(0u8, |d, k| h.encode_max(d, u, mix64(i * 8 + k)));
                h.decode(digest).ln() / ln_b
            })
            .sum();
        let bias = sum / n as f64 - e;
        assert!(
            (bias - want).abs() < 0.01,
            "{hops} hops: bias {bias} steps, want {want}"
        );
        // In the value: β^bias, e.g. +2.3% for 5 hops at ε = 0.025.
        eprintln!(
            "{hops} hops at one U: {bias:.3} steps high, x{:.4}",
            (bias * ln_b).exp()
        );
    }
}

#[test]
fn out_of_range_values() {
    let c = Multiplicative::nearest(0.025, 8, 16.0);
    assert_eq!(c.encode_nearest(0.0), 0);
    assert_eq!(c.encode_nearest(-5.0), 0);
    assert_eq!(c.decode(0), 0.0);
    assert_eq!(c.encode_nearest(1e9), 255);
    assert!(c.max_value() >= 16.0 && c.max_value() < 16.0 * c.base());
    // The paper's claim: 8 bits support ε = 0.025 (≈ 2.8·10⁵ dynamic range).
    assert!(c.max_value() / c.min_value() > 2.5e5);
    let a = Additive::new(2.0, 4);
    assert_eq!(a.encode_nearest(-1.0), 0);
    assert_eq!(a.encode_nearest(1e9), 15);
}

/// A link kept exactly busy with an empty queue converges to U = 1; a standing queue of one BDP
/// adds 1 more (HPCC's U counts the queue: qlen/(B·T)).
#[test]
fn ewma_converges_to_link_utilisation() {
    let bytes_per_ns = 12.5; // 100 Gb/s
    let t_ns = 13_000; // the paper's T = 13 µs
    let size = 1000u64;
    let gap = (size as f64 / bytes_per_ns) as u64; // 80 ns: line rate
    for (qlen, want) in [(0u64, 1.0f64), ((bytes_per_ns * t_ns as f64) as u64, 2.0)] {
        let mut ewma = UtilEwma::default();
        let mut now = 0;
        for _ in 0..20_000 {
            now += gap;
            ewma.update(now, size, qlen, bytes_per_ns, t_ns);
        }
        assert!(
            (ewma.util() - want).abs() < 0.01,
            "qlen {qlen}: {}",
            ewma.util()
        );
    }
    // Half the line rate halves U.
    let mut ewma = UtilEwma::default();
    let mut now = 0;
    for _ in 0..20_000 {
        now += 2 * gap;
        ewma.update(now, size, 0, bytes_per_ns, t_ns);
    }
    assert!((ewma.util() - 0.5).abs() < 0.01, "{}", ewma.util());
}
