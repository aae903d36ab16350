//! Short versions of PINT's experiments E13 (path tracing, §4.2) and E12 (latency quantiles,
//! §6.2), the full ones being `pisa-pint e13` and `pisa-pint e12` (docs/pint.md). Sans-IO, on
//! the switches' encoders and the collector's decoder; deterministic for their seeds.

use analysis::pint::eval::{self, E12Row, PathKind};

/// §4.2: "≈ k log log* k packets" decode a k-hop path. With hashed switch IDs a hop needs E[R]
/// constraints (docs/pint.md), so the median over 41 trials is held to 1.5 × k·log₂log*₂k ·
/// E[R]/instances, the margin of docs/pint.md's bound test, for fat-tree paths of 5 hops among
/// 80 switches and chains of 8 to 32; every trial decodes the true path. (At k ≤ 4 the formula
/// is degenerate, 0 to k packets, below the k packets any scheme needs; those are only
/// reported.)
#[test]
fn s4_2_e13_packets_to_decode_track_k_log_log_star_k() {
    let cases = [
        (PathKind::FatTree8, 5),
        (PathKind::Chain, 8),
        (PathKind::Chain, 16),
        (PathKind::Chain, 32),
    ];
    let rows = eval::e13(&cases, 41, 7);
    assert_eq!(rows.len(), 8);
    for r in &rows {
        assert_eq!(r.failures, 0, "{r:?}");
        assert!(r.median <= 1.5 * r.paper_hashed, "{r:?}");
        assert!(
            r.median >= f64::from(r.k) / f64::from(r.budget.instances()),
            "{r:?}"
        );
    }
    // More hops, more packets.
    let chain8: Vec<f64> = rows
        .iter()
        .filter(|r| r.budget.instances() == 1 && r.kind == PathKind::Chain)
        .map(|r| r.median)
        .collect();
    assert!(chain8.windows(2).all(|w| w[0] < w[1]), "{chain8:?}");
}

fn row(rows: &[E12Row], bits: u8, sketch: bool, packets: usize) -> &E12Row {
    rows.iter()
        .find(|r| r.bits == bits && r.sketch == sketch && r.packets == packets)
        .unwrap()
}

/// §6.2: "when getting enough packets, the error … converges to the error arising from
/// compressing the values". On a 5-hop path, 21 trials: the per-hop p50 error falls with the
/// packets received and ends within the codec's bound ε (b = 4: 0.39, b = 8: 0.018) plus the
/// sampling error of ~2,000 samples per hop (held to ε + 0.02); and it is still falling or flat
/// between 5,000 and 10,000 packets, not growing.
#[test]
fn s6_2_e12_error_converges_to_the_compression_error() {
    let rows = eval::e12(5, &[100, 5_000, 10_000], 21, 3);
    for bits in [4u8, 8] {
        let eps = eval::e12_config(bits).codec().error_bound();
        let (a, b, c) = (
            row(&rows, bits, false, 100),
            row(&rows, bits, false, 5_000),
            row(&rows, bits, false, 10_000),
        );
        assert!(c.p50_err < a.p50_err, "b={bits}: {a:?} {c:?}");
        assert!(c.p50_err <= eps + 0.02, "b={bits}: {c:?} ε={eps}");
        assert!(c.p50_err <= b.p50_err * 1.2, "b={bits}: {b:?} {c:?}");
    }
    // More bits, less error once the samples suffice.
    assert!(row(&rows, 8, false, 10_000).p50_err < row(&rows, 4, false, 10_000).p50_err / 3.0);
}

/// §6.2: "a sketch (e.g., that keeps 100 identifiers regardless of the number of samples) …
/// degrades only a little". The KLL sketch holds at most 100 items per hop, and its p50 error is
/// within 0.03 of all samples' at 10,000 packets for both budgets. (Its p99 error is not: see
/// docs/pint.md, E12.)
#[test]
fn s6_2_sketch_of_100_items_degrades_the_median_only_slightly() {
    let rows = eval::e12(5, &[10_000], 21, 4);
    for bits in [4u8, 8] {
        let all = row(&rows, bits, false, 10_000);
        let kll = row(&rows, bits, true, 10_000);
        assert!(kll.sketch_items <= 100, "{kll:?}");
        assert!(kll.sketch_items > 50, "{kll:?}");
        assert!(kll.p50_err <= all.p50_err + 0.03, "{all:?} {kll:?}");
    }
}
