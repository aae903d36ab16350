//! PINT's global hash functions, computed identically by every switch and by the collector.
//!
//! The PINT paper (Ben Basat et al., SIGCOMM 2020, §4) assumes two families of global hashes
//! that all encoders and the Inference Module share:
//!
//! - **g(packet ID, hop)** → [0, 1): does hop `i` act on this packet? ([`Hashes::g`]; the fast
//!   decoder's k-bit vectors are further outputs of the same family, [`Hashes::g_word`]);
//! - **h(value, packet ID)** → q bits: the hashed switch ID a hop writes or XORs
//!   ([`Hashes::value`]).
//!
//! We add a third, **h(packet ID)**, which picks the packet's layer ([`Hashes::layer`]), and a
//! coin for randomised rounding ([`Hashes::coin`]). Each is one splitmix64-style chain over its
//! inputs, separated by a domain constant, so the functions are independent of one another for a
//! given seed and all change together when the seed does. Every function also takes the
//! *instance* (which of the independent repetitions of a split budget, e.g. the two 4-bit halves
//! of an 8-bit budget) so that instances use independent hashes.

/// 2^64 / φ, the splitmix64 increment.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// Domain constants: one per function, so equal inputs to different functions hash apart.
const DOMAIN_LAYER: u64 = 0x4c41_5945_5200_0001;
const DOMAIN_HOP: u64 = 0x484f_5000_0000_0002;
const DOMAIN_XOR: u64 = 0x584f_5200_0000_0003;
const DOMAIN_VALUE: u64 = 0x5641_4c55_4500_0004;
const DOMAIN_COIN: u64 = 0x434f_494e_0000_0005;

/// The splitmix64 finaliser: a bijective 64-bit mixer with full avalanche.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One step of the hash chain: fold `x` into `state`.
fn absorb(state: u64, x: u64) -> u64 {
    mix64((state ^ x).wrapping_add(GOLDEN))
}

/// Maps 64 hash bits to [0, 1) using the top 53 (exactly representable in an `f64`).
pub fn unit(bits: u64) -> f64 {
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    (bits >> 11) as f64 * SCALE
}

/// `true` with probability `num / den` for uniform `bits`: `unit(bits) < num/den`, decided in
/// exact integer arithmetic on the same 53 bits [`unit`] uses.
pub fn below(bits: u64, num: u64, den: u64) -> bool {
    u128::from(bits >> 11) * u128::from(den) < u128::from(num) << 53
}

/// The seeded global hash functions. Switches and the collector must hold the same seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hashes {
    seed: u64,
}

impl Hashes {
    /// The hash functions for `seed`.
    pub const fn new(seed: u64) -> Hashes {
        Hashes { seed }
    }

    /// The seed these functions were built from.
    pub const fn seed(self) -> u64 {
        self.seed
    }

    /// The start of a chain for `domain` and `instance`.
    fn start(self, domain: u64, instance: u8) -> u64 {
        absorb(
            absorb(mix64(self.seed ^ GOLDEN), domain),
            u64::from(instance),
        )
    }

    /// h(packet ID): 64 uniform bits that choose the packet's layer (Baseline or one of the XOR
    /// layers) for one instance.
    pub fn layer(self, packet_id: u64, instance: u8) -> u64 {
        absorb(self.start(DOMAIN_LAYER, instance), packet_id)
    }

    /// The 64 raw bits behind g(packet ID, hop).
    pub fn g_bits(self, packet_id: u64, hop: u32, instance: u8) -> u64 {
        absorb(
            absorb(self.start(DOMAIN_HOP, instance), packet_id),
            u64::from(hop),
        )
    }

    /// g(packet ID, hop) ∈ [0, 1): the Baseline layer's hop `i` overwrites the digest iff
    /// g < 1/i (reservoir sampling, see [`crate::pint::path`]).
    pub fn g(self, packet_id: u64, hop: u32, instance: u8) -> f64 {
        unit(self.g_bits(packet_id, hop, instance))
    }

    /// The fast variant of g for an XOR layer: word `word` (hops 64·word+1 ..= 64·word+64) of the
    /// `round`-th pseudo-random k-bit vector of `packet_id` in XOR layer `layer`. Each bit is a
    /// fair coin; the AND of m rounds sets each bit with probability 2^-m.
    pub fn g_word(self, packet_id: u64, instance: u8, layer: u8, round: u8, word: u8) -> u64 {
        let tag = u64::from(layer) << 16 | u64::from(round) << 8 | u64::from(word);
        absorb(absorb(self.start(DOMAIN_XOR, instance), packet_id), tag)
    }

    /// h(value, packet ID) truncated to `bits` bits (1..=32): what hop `i` writes or XORs for
    /// its switch ID M_i.
    pub fn value(self, value: u32, packet_id: u64, instance: u8, bits: u8) -> u32 {
        let full = absorb(
            absorb(self.start(DOMAIN_VALUE, instance), packet_id),
            u64::from(value),
        );
        let mask = if bits >= 32 {
            u32::MAX
        } else {
            (1u32 << bits) - 1
        };
        // The top bits: the best-mixed ones of the finaliser.
        (full >> 32) as u32 & mask
    }

    /// 64 uniform bits for randomised rounding of a value written by `hop` on `packet_id`.
    pub fn coin(self, packet_id: u64, hop: u32) -> u64 {
        absorb(
            absorb(self.start(DOMAIN_COIN, 0), packet_id),
            u64::from(hop),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_seeded() {
        let a = Hashes::new(1);
        let b = Hashes::new(1);
        let c = Hashes::new(2);
        assert_eq!(a.g_bits(7, 3, 0), b.g_bits(7, 3, 0));
        assert_ne!(a.g_bits(7, 3, 0), c.g_bits(7, 3, 0));
        assert_ne!(a.g_bits(7, 3, 0), a.g_bits(7, 3, 1));
        assert_ne!(a.g_bits(7, 3, 0), a.g_bits(7, 4, 0));
        assert_ne!(a.layer(7, 0), a.g_bits(7, 0, 0));
        assert!(a.value(99, 7, 0, 8) < 256);
        assert!(a.value(99, 7, 0, 4) < 16);
        assert_eq!(a.value(99, 7, 0, 4), a.value(99, 7, 0, 8) & 15);
    }

    #[test]
    fn g_is_uniform_enough() {
        let h = Hashes::new(42);
        let n = 100_000u32;
        let mut buckets = [0u32; 10];
        for p in 0..u64::from(n) {
            let g = h.g(p, 5, 0);
            assert!((0.0..1.0).contains(&g));
            buckets[(g * 10.0) as usize] += 1;
        }
        for b in buckets {
            // 10 000 expected; 5 standard deviations is ±475.
            assert!(b.abs_diff(n / 10) < 500, "{buckets:?}");
        }
    }

    #[test]
    fn below_agrees_with_unit() {
        let h = Hashes::new(3);
        for p in 0..10_000u64 {
            let bits = h.g_bits(p, 1, 0);
            for den in [1u64, 2, 3, 7, 16] {
                assert_eq!(below(bits, 1, den), unit(bits) < 1.0 / den as f64);
            }
        }
    }
}
