//! Hash functions for the v1model `hash()` extern, action selectors and ECMP.
//!
//! A [`HashFn`] is built once at program load time from an algorithm and a 64-bit seed; the
//! per-packet [`HashFn::hash`] only reads immutable state and never allocates. CRC lookup tables
//! are `static`s computed at compile time by the `crc` crate (slice-by-16, table-driven).
//!
//! Seed semantics, exactly (so a collector can recompute a value):
//! - `Crc16`: CRC-16/ARC (poly 0x8005, refin/refout, xorout 0) with
//!   `init = 0x0000 ^ (seed & 0xFFFF)`; seed 0 is plain CRC-16/ARC (BMv2 `crc16`).
//! - `Crc32`: CRC-32/ISO-HDLC (poly 0x04C11DB7, refin/refout, xorout 0xFFFFFFFF) with
//!   `init = 0xFFFF_FFFF ^ (seed & 0xFFFF_FFFF)`; seed 0 is plain CRC-32 (BMv2 `crc32`).
//!   In both CRCs `init` is in the catalogue (Rocksoft) convention, i.e. what `crc::Algorithm`'s
//!   `init` field means.
//! - `Csum16`: the RFC 1071 internet checksum (ones'-complement of the ones'-complement sum of
//!   big-endian 16-bit words, an odd last byte padded with a zero low byte), with `seed & 0xFFFF`
//!   added to the sum as one extra word; seed 0 is the plain checksum.
//! - `Xor16`: XOR of the big-endian 16-bit words (odd last byte padded as for `Csum16`), XORed
//!   with `seed & 0xFFFF`.
//! - `Identity`: the input bytes read as one big-endian unsigned integer, reduced modulo 2^64
//!   (i.e. the last 8 bytes; shorter inputs are zero-extended on the left, empty input is 0).
//!   This matches P4 truncation of a wide value to 64 bits. The seed is ignored.
//! - `Random`: `rng.next_u64()`, input and seed ignored.

use crc::{CRC_16_ARC, CRC_32_ISO_HDLC, Crc, Table};

use super::Rng;

static CRC16: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_ARC);
static CRC32: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISO_HDLC);

/// A hash algorithm; see the module documentation for the exact definitions and seeding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashAlgorithm {
    /// CRC-16/ARC, 16-bit result.
    Crc16,
    /// CRC-32/ISO-HDLC, 32-bit result.
    Crc32,
    /// The input itself, big-endian, modulo 2^64.
    Identity,
    /// RFC 1071 internet checksum, 16-bit result.
    Csum16,
    /// XOR of 16-bit words, 16-bit result.
    Xor16,
    /// A random value from the caller's [`Rng`], 64-bit result.
    Random,
}

impl HashAlgorithm {
    /// Number of significant bits in this algorithm's result.
    pub fn output_bits(self) -> u8 {
        match self {
            Self::Crc16 | Self::Csum16 | Self::Xor16 => 16,
            Self::Crc32 => 32,
            Self::Identity | Self::Random => 64,
        }
    }
}

/// A seeded hash function, prepared at load time and shared read-only by all workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashFn {
    algorithm: HashAlgorithm,
    seed: u64,
}

impl HashFn {
    /// Prepares `algorithm` with `seed` (see the module documentation for the seed semantics).
    pub fn new(algorithm: HashAlgorithm, seed: u64) -> Self {
        Self { algorithm, seed }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> HashAlgorithm {
        self.algorithm
    }

    /// The seed given at construction.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Hashes `data`; `rng` is only used by [`HashAlgorithm::Random`].
    #[inline]
    pub fn hash(&self, data: &[u8], rng: &mut Rng) -> u64 {
        // Truncating the seed to the algorithm's width is the documented semantics.
        #[allow(
            clippy::cast_possible_truncation,
            reason = "seed truncated to the CRC width by definition"
        )]
        match self.algorithm {
            HashAlgorithm::Crc16 => {
                let mut d = CRC16.digest_with_initial(CRC_16_ARC.init ^ self.seed as u16);
                d.update(data);
                u64::from(d.finalize())
            }
            HashAlgorithm::Crc32 => {
                let mut d = CRC32.digest_with_initial(CRC_32_ISO_HDLC.init ^ self.seed as u32);
                d.update(data);
                u64::from(d.finalize())
            }
            HashAlgorithm::Identity => identity(data),
            HashAlgorithm::Csum16 => u64::from(csum16(data, self.seed & 0xFFFF)),
            HashAlgorithm::Xor16 => u64::from(xor16(data) ^ (self.seed & 0xFFFF) as u16),
            HashAlgorithm::Random => rng.next_u64(),
        }
    }

    /// v1model `hash(out, algo, base, data, max)`: `base + hash(data) % max`, wrapping at 2^64.
    /// `max == 0` means no modulo (`base + hash(data)`).
    #[inline]
    pub fn hash_range(&self, data: &[u8], rng: &mut Rng, base: u64, max: u64) -> u64 {
        hash_range(self.hash(data, rng), base, max)
    }
}

/// Maps a hash value `h` into `base..base + max` as v1model does: `base + h % max` (wrapping);
/// `max == 0` means no modulo (`base + h`).
#[inline]
pub fn hash_range(h: u64, base: u64, max: u64) -> u64 {
    if max == 0 {
        base.wrapping_add(h)
    } else {
        base.wrapping_add(h % max)
    }
}

/// The input as a big-endian integer modulo 2^64.
fn identity(data: &[u8]) -> u64 {
    let tail = &data[data.len().saturating_sub(8)..];
    tail.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// Iterates the big-endian 16-bit words of `data`, zero-padding an odd last byte.
fn words(data: &[u8]) -> impl Iterator<Item = u16> + '_ {
    data.chunks(2).map(|c| match *c {
        [hi, lo] => u16::from_be_bytes([hi, lo]),
        [hi] => u16::from_be_bytes([hi, 0]),
        _ => 0,
    })
}

/// RFC 1071 checksum of `data` with `extra` (< 2^16) added to the sum.
fn csum16(data: &[u8], extra: u64) -> u16 {
    // A u64 accumulator cannot overflow for any slice that fits in memory on 64-bit targets
    // (2^47 words of at most 2^16 each), so folding once at the end is enough.
    let mut sum = words(data).fold(extra, |acc, w| acc + u64::from(w));
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    #[allow(clippy::cast_possible_truncation, reason = "sum folded below 2^16")]
    let folded = sum as u16;
    !folded
}

fn xor16(data: &[u8]) -> u16 {
    words(data).fold(0, |acc, w| acc ^ w)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECK: &[u8] = b"123456789";

    fn h(alg: HashAlgorithm, seed: u64, data: &[u8]) -> u64 {
        HashFn::new(alg, seed).hash(data, &mut Rng::new(0))
    }

    #[test]
    fn crc_check_values() {
        assert_eq!(h(HashAlgorithm::Crc16, 0, CHECK), 0xBB3D);
        assert_eq!(h(HashAlgorithm::Crc32, 0, CHECK), 0xCBF4_3926);
        assert_eq!(h(HashAlgorithm::Crc32, 0, b""), 0);
    }

    #[test]
    fn seed_is_xored_into_init() {
        for alg in [HashAlgorithm::Crc16, HashAlgorithm::Crc32] {
            assert_ne!(h(alg, 1, CHECK), h(alg, 0, CHECK));
            assert_ne!(h(alg, 0xdead_beef, CHECK), h(alg, 0, CHECK));
        }
        // Recompute independently with a crc::Algorithm whose init is the documented value.
        static SEEDED32: crc::Algorithm<u32> = crc::Algorithm {
            init: 0xFFFF_FFFF ^ 0x1234_5678,
            ..CRC_32_ISO_HDLC
        };
        static SEEDED16: crc::Algorithm<u16> = crc::Algorithm {
            init: 0xABCD,
            ..CRC_16_ARC
        };
        assert_eq!(
            h(HashAlgorithm::Crc32, 0x1234_5678, CHECK),
            u64::from(Crc::<u32>::new(&SEEDED32).checksum(CHECK))
        );
        assert_eq!(
            h(HashAlgorithm::Crc16, 0xABCD, CHECK),
            u64::from(Crc::<u16>::new(&SEEDED16).checksum(CHECK))
        );
        // Only the low `width` bits of the seed matter.
        assert_eq!(
            h(HashAlgorithm::Crc16, 0x1_0000_ABCD, CHECK),
            h(HashAlgorithm::Crc16, 0xABCD, CHECK)
        );
    }

    #[test]
    fn long_input_matches_bytewise_table() {
        // Exercise the 16-byte lanes against the single-table implementation.
        let data: Vec<u8> = (0u8..=200).collect();
        assert_eq!(
            h(HashAlgorithm::Crc32, 0, &data),
            u64::from(Crc::<u32>::new(&CRC_32_ISO_HDLC).checksum(&data))
        );
        assert_eq!(
            h(HashAlgorithm::Crc16, 0, &data),
            u64::from(Crc::<u16>::new(&CRC_16_ARC).checksum(&data))
        );
    }

    #[test]
    fn csum16_rfc1071_example() {
        // RFC 1071 section 3: words 0001 f203 f4f5 f6f7 sum to 0xddf2, checksum 0x220d.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(h(HashAlgorithm::Csum16, 0, &data), 0x220d);
        // An odd trailing byte is padded with zero.
        assert_eq!(h(HashAlgorithm::Csum16, 0, &[0x12]), u64::from(!0x1200u16));
        assert_eq!(h(HashAlgorithm::Csum16, 0, &[]), 0xFFFF);
        // The seed is one extra word in the sum.
        assert_eq!(h(HashAlgorithm::Csum16, 0x0001, &data), 0x220c);
        // A classic IPv4 header (checksum field zeroed) gives its known checksum 0xb861.
        let ip = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(h(HashAlgorithm::Csum16, 0, &ip), 0xb861);
    }

    #[test]
    fn xor16_values() {
        assert_eq!(
            h(HashAlgorithm::Xor16, 0, &[0x12, 0x34, 0x56, 0x78]),
            0x444c
        );
        assert_eq!(h(HashAlgorithm::Xor16, 0, &[0x12, 0x34, 0x56]), 0x4434);
        assert_eq!(h(HashAlgorithm::Xor16, 0xFF, &[0x12, 0x34]), 0x12cb);
    }

    #[test]
    fn identity_behaviour() {
        assert_eq!(h(HashAlgorithm::Identity, 0, &[]), 0);
        assert_eq!(
            h(HashAlgorithm::Identity, 0, &[0x0a, 0x00, 0x00, 0x01]),
            0x0a00_0001
        );
        // Seed is ignored.
        assert_eq!(h(HashAlgorithm::Identity, 99, &[0x01, 0x02]), 0x0102);
        // Longer than 8 bytes: the low-order (last) 8 bytes survive.
        let wide = [0xff, 0xee, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(h(HashAlgorithm::Identity, 0, &wide), 0x0102_0304_0506_0708);
    }

    #[test]
    fn random_uses_rng() {
        let f = HashFn::new(HashAlgorithm::Random, 0);
        let mut a = Rng::new(5);
        let mut b = Rng::new(5);
        assert_eq!(f.hash(b"x", &mut a), b.next_u64());
        assert_eq!(f.algorithm(), HashAlgorithm::Random);
        assert_eq!(f.seed(), 0);
        assert_eq!(HashAlgorithm::Crc32.output_bits(), 32);
    }

    #[test]
    fn range_mapping() {
        assert_eq!(hash_range(17, 100, 10), 107);
        assert_eq!(hash_range(17, 100, 0), 117);
        assert_eq!(hash_range(5, u64::MAX, 0), 4);
        let f = HashFn::new(HashAlgorithm::Crc16, 0);
        assert_eq!(f.hash_range(CHECK, &mut Rng::new(0), 1, 0x10), 1 + 0xD);
    }
}
