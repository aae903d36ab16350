//! Meter tests: hand-computed RFC sequences and a proptest against a reference model.

use super::*;
use Color::{Green as G, Red as R, Yellow as Y};
use proptest::prelude::*;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

fn meter(
    unit: MeterUnit,
    alg: MeterAlgorithm,
    cir: u64,
    cburst: u64,
    pir: u64,
    pburst: u64,
) -> MeterArray {
    let m = MeterArray::new(1, unit, alg);
    m.configure(
        0,
        Some(MeterConfig {
            cir,
            cburst,
            pir,
            pburst,
        }),
    )
    .unwrap();
    m
}

/// Runs `(now_ns, len, pre_colour, expected)` steps on meter 0.
fn run(m: &MeterArray, steps: &[(u64, u32, Option<Color>, Color)]) {
    for (i, &(now, len, pre, want)) in steps.iter().enumerate() {
        assert_eq!(
            m.execute(0, now, len, pre),
            want,
            "step {i}: t={now} len={len} pre={pre:?}"
        );
    }
}

#[test]
fn trtcm_colour_blind_bytes() {
    // CIR 1000 B/s, CBS 1500, PIR 2000 B/s, PBS 3000.
    let m = meter(
        MeterUnit::Bytes,
        MeterAlgorithm::TrTcm,
        1000,
        1500,
        2000,
        3000,
    );
    run(
        &m,
        &[
            (0, 1000, None, G),           // Tc 1500->500, Tp 3000->2000
            (0, 1000, None, Y),           // Tc 500 < 1000; Tp -> 1000
            (0, 1000, None, Y),           // Tp 1000 >= 1000 (not < B); Tp -> 0
            (0, 1, None, R),              // Tp 0 < 1
            (250 * MS, 600, None, R),     // +250 / +500: Tc 750, Tp 500 < 600, unchanged
            (250 * MS, 500, None, G),     // Tc 250, Tp 0
            (250 * MS + 500, 1, None, R), // Tp 0.001 tokens
            // 0.5 ms after 250 ms: Tp exactly 1.0 (fractions carried, no drift), Tc 250.5.
            (250 * MS + MS / 2, 1, None, G),
            (250 * MS + MS / 2, 1, None, R),
            // Long idle: capped at CBS 1500 / PBS 3000.
            (100 * S, 1500, None, G), // Tc 0, Tp 1500
            (100 * S, 1500, None, Y), // Tp 0
            (100 * S, 1, None, R),
            // Time going backwards: no refill, reference time stays at 100 s.
            (50 * S, 1, None, R),
            (100 * S, 1, None, R),
            (100 * S + MS, 1, None, G), // +1 byte C, +2 bytes P
            (100 * S + MS, 1, None, Y), // Tc 0, Tp 1 -> 0
            (100 * S + MS, 1, None, R),
        ],
    );
}

#[test]
fn trtcm_colour_aware_bytes() {
    let m = meter(
        MeterUnit::Bytes,
        MeterAlgorithm::TrTcm,
        1000,
        1500,
        2000,
        3000,
    );
    run(
        &m,
        &[
            (0, 1, Some(R), R),    // pre-red stays red, no tokens taken
            (0, 1000, Some(Y), Y), // Tp 3000 -> 2000, Tc untouched
            (0, 1500, Some(G), G), // Tc 1500 -> 0, Tp -> 500
            (0, 500, Some(G), Y),  // Tc 0 < 500: Tp -> 0
            (0, 1, Some(Y), R),    // Tp 0 < 1
            (0, 1, Some(G), R),
            (S, 1000, Some(Y), Y), // Tp 2000 -> 1000, Tc 1000 untouched
            (S, 1000, Some(G), G), // Tc 1000 -> 0, Tp -> 0
            (S, 1, Some(R), R),
        ],
    );
}

#[test]
fn trtcm_packets_ignore_length() {
    // CIR 1 pkt/s, CBS 2, PIR 2 pkt/s, PBS 3.
    let m = meter(MeterUnit::Packets, MeterAlgorithm::TrTcm, 1, 2, 2, 3);
    run(
        &m,
        &[
            (0, 9000, None, G),
            (0, 9000, None, G),
            (0, 64, None, Y),
            (0, 64, None, R),
            (S / 2, 64, None, Y), // Tp +1, Tc +0.5
            (S, 64, None, G),     // Tc 1, Tp 1
            (S, 64, None, R),
        ],
    );
}

#[test]
fn srtcm_colour_blind_packets() {
    // CIR 2 pkt/s, CBS 3, EBS 2.
    let m = meter(MeterUnit::Packets, MeterAlgorithm::SrTcm, 2, 3, 0, 2);
    run(
        &m,
        &[
            (0, 1500, None, G),
            (0, 1500, None, G),
            (0, 1500, None, G),
            (0, 1500, None, Y),
            (0, 1500, None, Y),
            (0, 1500, None, R),
            (S / 2, 1, None, G), // 1 token, goes to C
            (S / 2, 1, None, R),
            // 2.5 s = 5 tokens: 3 fill C, the overflow 2 fills E.
            (3 * S, 1, None, G),
            (3 * S, 1, None, G),
            (3 * S, 1, None, G),
            (3 * S, 1, None, Y),
            (3 * S, 1, None, Y),
            (3 * S, 1, None, R),
            // Idle: C capped at CBS, E at EBS.
            (100 * S, 1, None, G),
            (100 * S, 1, None, G),
            (100 * S, 1, None, G),
            (100 * S, 1, None, Y), // Tc 0, Te 1
            // 1.5 s = 3 tokens: exactly refills C, E gets nothing.
            (101 * S + S / 2, 1, None, G),
            (101 * S + S / 2, 1, None, G),
            (101 * S + S / 2, 1, None, G),
            (101 * S + S / 2, 1, None, Y),
            (101 * S + S / 2, 1, None, R),
        ],
    );
}

#[test]
fn srtcm_colour_blind_bytes_fractional_overflow() {
    // CIR 1000 B/s, CBS 100, EBS 50.
    let m = meter(MeterUnit::Bytes, MeterAlgorithm::SrTcm, 1000, 100, 0, 50);
    run(
        &m,
        &[
            (0, 100, None, G), // Tc 0
            (0, 50, None, Y),  // Te 0
            (0, 1, None, R),
            // +100.5 tokens: C to 100, E gets 0.5.
            (100 * MS + MS / 2, 100, None, G),
            (100 * MS + MS / 2, 1, None, R), // Tc 0, Te 0.5
            // +0.5 tokens go to C (not full), so E stays at 0.5.
            (101 * MS, 1, None, R),
            (101 * MS + MS / 2, 1, None, G), // Tc 1.0
            // Time backwards never panics and refills nothing.
            (0, 1, None, R),
        ],
    );
}

#[test]
fn srtcm_colour_aware_packets() {
    // CIR 1 pkt/s, CBS 2, EBS 1.
    let m = meter(MeterUnit::Packets, MeterAlgorithm::SrTcm, 1, 2, 0, 1);
    run(
        &m,
        &[
            (0, 1, Some(R), R),
            (0, 1, Some(Y), Y), // Te 1 -> 0, Tc untouched
            (0, 1, Some(Y), R),
            (0, 1, Some(G), G),
            (0, 1, Some(G), G),
            (0, 1, Some(G), R), // Tc 0, Te 0
            (S, 1, Some(Y), R), // a token in C does not help a yellow packet
            (S, 1, Some(G), G),
            (3 * S, 1, Some(G), G), // Tc 2 (capped), Te 0
            (3 * S, 1, Some(Y), R),
            (4 * S, 1, Some(Y), R), // C not full (1): token goes to C
            (4 * S, 1, Some(G), G),
        ],
    );
}

#[test]
fn srtcm_zero_ebs_is_two_colour() {
    let m = meter(MeterUnit::Packets, MeterAlgorithm::SrTcm, 0, 1, 0, 0);
    run(
        &m,
        &[(0, 1, None, G), (S, 1, None, R), (2 * S, 1, Some(Y), R)],
    );
}

#[test]
fn unconfigured_out_of_range_and_validation() {
    let m = MeterArray::new(2, MeterUnit::Bytes, MeterAlgorithm::TrTcm);
    assert_eq!(
        (m.size(), m.unit(), m.algorithm()),
        (2, MeterUnit::Bytes, MeterAlgorithm::TrTcm)
    );
    assert_eq!(m.execute(0, 0, 1500, None), G);
    assert_eq!(m.execute(0, 0, 1500, Some(R)), G);
    assert_eq!(m.execute(5, 0, 1500, None), G);
    let ok = MeterConfig {
        cir: 10,
        cburst: 10,
        pir: 20,
        pburst: 20,
    };
    assert_eq!(
        m.configure(2, Some(ok)),
        Err(MeterError::OutOfRange { index: 2, size: 2 })
    );
    assert_eq!(
        m.reset(2),
        Err(MeterError::OutOfRange { index: 2, size: 2 })
    );
    for bad in [
        MeterConfig { pir: 5, ..ok },
        MeterConfig { cburst: 0, ..ok },
        MeterConfig { pburst: 0, ..ok },
    ] {
        assert!(matches!(
            m.configure(0, Some(bad)),
            Err(MeterError::InvalidConfig(_))
        ));
        assert_eq!(m.config(0), None);
    }
    m.configure(1, Some(ok)).unwrap();
    assert_eq!(m.config(1), Some(ok));
    assert_eq!(m.config(7), None);
    assert_eq!(m.execute(1, 0, 20, None), Y);
    assert_eq!(m.execute(1, 0, 1, None), R);
    m.reset(1).unwrap();
    assert_eq!(m.execute(1, 0, 10, None), G);
    m.reset_all();
    assert_eq!(m.execute(1, 0, 10, None), G);
    m.configure(1, None).unwrap();
    assert_eq!(m.config(1), None);
    assert_eq!(m.execute(1, 0, 1_000_000, None), G);

    // srTCM ignores PIR and accepts EBS 0.
    let s = MeterArray::new(1, MeterUnit::Packets, MeterAlgorithm::SrTcm);
    s.configure(
        0,
        Some(MeterConfig {
            cir: 5,
            cburst: 1,
            pir: 0,
            pburst: 0,
        }),
    )
    .unwrap();
    assert!(
        s.configure(
            0,
            Some(MeterConfig {
                cir: 5,
                cburst: 0,
                pir: 0,
                pburst: 9
            })
        )
        .is_err()
    );
    assert_eq!(Color::from_value(1), Some(Y));
    assert_eq!(Color::from_value(3), None);
    assert_eq!(R as u8, 2);
}

#[test]
fn extreme_values_do_not_overflow() {
    let m = meter(
        MeterUnit::Bytes,
        MeterAlgorithm::TrTcm,
        u64::MAX,
        u64::MAX,
        u64::MAX,
        u64::MAX,
    );
    assert_eq!(m.execute(0, 0, u32::MAX, None), G);
    assert_eq!(m.execute(0, u64::MAX, u32::MAX, None), G);
    let s = meter(
        MeterUnit::Bytes,
        MeterAlgorithm::SrTcm,
        u64::MAX,
        1,
        0,
        u64::MAX,
    );
    assert_eq!(s.execute(0, 0, 1, None), G);
    assert_eq!(s.execute(0, u64::MAX, 2, None), Y);
}

#[test]
fn concurrent_execute_takes_each_token_once() {
    // No refill: exactly CBS packets are green, EBS yellow, whatever the interleaving.
    let m = meter(MeterUnit::Packets, MeterAlgorithm::SrTcm, 0, 1000, 0, 500);
    let counts: Vec<[u32; 3]> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let m = &m;
                s.spawn(move || {
                    let mut c = [0u32; 3];
                    for i in 0..1000u64 {
                        c[m.execute(0, t * 1000 + i, 64, None) as usize] += 1;
                    }
                    c
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total = counts
        .iter()
        .fold([0; 3], |a, c| [a[0] + c[0], a[1] + c[1], a[2] + c[2]]);
    assert_eq!(total, [1000, 500, 2500]);
}

/// A reference model written from the RFC text, independent of the implementation's
/// nano-token representation: each bucket is a whole token count plus a fraction in
/// 1/10^9 tokens, and refills are carried digit-wise.
#[derive(Debug, Clone, Copy)]
struct RefBucket {
    whole: u128,
    frac: u128,
    cap: u128,
}

impl RefBucket {
    fn full(cap: u64) -> Self {
        Self {
            whole: u128::from(cap),
            frac: 0,
            cap: u128::from(cap),
        }
    }

    /// Adds `rate` tokens per second for `ns` nanoseconds; returns what did not fit as
    /// (whole, frac) since a full bucket discards (trTCM) or passes on (srTCM) the excess.
    fn add(&mut self, rate: u64, ns: u64) -> (u128, u128) {
        let product = u128::from(rate) * u128::from(ns);
        self.add_parts(product / 1_000_000_000, product % 1_000_000_000)
    }

    fn add_parts(&mut self, whole: u128, frac: u128) -> (u128, u128) {
        let mut w = self.whole + whole;
        let mut f = self.frac + frac;
        if f >= 1_000_000_000 {
            f -= 1_000_000_000;
            w += 1;
        }
        if w > self.cap || (w == self.cap && f > 0) {
            let over_total = (w - self.cap) * 1_000_000_000 + f;
            self.whole = self.cap;
            self.frac = 0;
            (over_total / 1_000_000_000, over_total % 1_000_000_000)
        } else {
            self.whole = w;
            self.frac = f;
            (0, 0)
        }
    }

    /// The RFCs' test `T - B >= 0` on the integer-and-fraction count.
    fn has(&self, b: u128) -> bool {
        self.whole >= b
    }

    fn take(&mut self, b: u128) {
        self.whole -= b;
    }
}

#[derive(Debug)]
struct RefMeter {
    alg: MeterAlgorithm,
    unit: MeterUnit,
    cfg: MeterConfig,
    c: RefBucket,
    /// P (trTCM) or E (srTCM).
    x: RefBucket,
    last: Option<u64>,
}

impl RefMeter {
    fn new(alg: MeterAlgorithm, unit: MeterUnit, cfg: MeterConfig) -> Self {
        Self {
            alg,
            unit,
            cfg,
            c: RefBucket::full(cfg.cburst),
            x: RefBucket::full(cfg.pburst),
            last: None,
        }
    }

    fn execute(&mut self, now: u64, len: u32, pre: Option<Color>) -> Color {
        let elapsed = match self.last {
            None => 0,
            Some(l) if now < l => 0,
            Some(l) => now - l,
        };
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        let b = match self.unit {
            MeterUnit::Packets => 1,
            MeterUnit::Bytes => u128::from(len),
        };
        match self.alg {
            MeterAlgorithm::TrTcm => {
                // "Tp is incremented by one PIR times per second up to PBS and Tc is
                // incremented by one CIR times per second up to CBS."
                self.c.add(self.cfg.cir, elapsed);
                self.x.add(self.cfg.pir, elapsed);
                // Colour-blind: "If Tp(t)-B < 0, red; else if Tc(t)-B < 0, yellow and Tp -= B;
                // else green and both decremented." Colour-aware adds the pre-colour checks.
                let pre = pre.unwrap_or(Color::Green);
                if pre == Color::Red || !self.x.has(b) {
                    Color::Red
                } else if pre == Color::Yellow || !self.c.has(b) {
                    self.x.take(b);
                    Color::Yellow
                } else {
                    self.x.take(b);
                    self.c.take(b);
                    Color::Green
                }
            }
            MeterAlgorithm::SrTcm => {
                // "If Tc < CBS, Tc is incremented by one, else if Te < EBS, Te is incremented
                // by one, else neither" -- CIR times per second.
                let (ow, of) = self.c.add(self.cfg.cir, elapsed);
                self.x.add_parts(ow, of);
                match pre {
                    None => {
                        if self.c.has(b) {
                            self.c.take(b);
                            Color::Green
                        } else if self.x.has(b) {
                            self.x.take(b);
                            Color::Yellow
                        } else {
                            Color::Red
                        }
                    }
                    Some(p) => {
                        if p == Color::Green && self.c.has(b) {
                            self.c.take(b);
                            Color::Green
                        } else if (p == Color::Green || p == Color::Yellow) && self.x.has(b) {
                            self.x.take(b);
                            Color::Yellow
                        } else {
                            Color::Red
                        }
                    }
                }
            }
        }
    }
}

fn small_or_any() -> impl Strategy<Value = u64> {
    prop_oneof![8 => 0u64..5_000, 1 => any::<u64>()]
}

fn colour() -> impl Strategy<Value = Option<Color>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some(Color::Green)),
        1 => Just(Some(Color::Yellow)),
        1 => Just(Some(Color::Red)),
    ]
}

proptest! {
    #[test]
    fn execute_matches_rfc_reference(
        tr in any::<bool>(),
        bytes in any::<bool>(),
        cir in small_or_any(),
        extra in small_or_any(),
        cburst in 1u64..5_000,
        pburst in 0u64..5_000,
        steps in prop::collection::vec(
            (prop_oneof![4 => 0i64..2_000_000_000, 1 => 0i64..2_000, 1 => -1_000_000_000i64..0],
             1u32..3_000,
             colour()),
            1..200),
    ) {
        let alg = if tr { MeterAlgorithm::TrTcm } else { MeterAlgorithm::SrTcm };
        let unit = if bytes { MeterUnit::Bytes } else { MeterUnit::Packets };
        let cfg = MeterConfig {
            cir,
            cburst,
            pir: cir.saturating_add(extra),
            pburst: if tr { pburst.max(1) } else { pburst },
        };
        let m = MeterArray::new(1, unit, alg);
        m.configure(0, Some(cfg)).unwrap();
        let mut reference = RefMeter::new(alg, unit, cfg);
        let mut now: u64 = 1_000_000_000_000;
        for (dt, len, pre) in steps {
            now = now.saturating_add_signed(dt);
            prop_assert_eq!(m.execute(0, now, len, pre), reference.execute(now, len, pre));
        }
    }
}
