//! The Internet checksum (RFC 1071), pseudo-header sums and incremental update (RFC 1624).
//!
//! A "sum" here is the folded 16-bit one's-complement sum of big-endian words (odd trailing
//! byte padded with zero); a "checksum" is its complement as stored in headers.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::IpProtocol;

/// Adds `data` as big-endian 32-bit words into a wide accumulator (no folding).
///
/// Summing 32-bit words is equivalent to summing 16-bit words modulo 0xffff, since
/// 2^16 ≡ 1 (mod 0xffff); the u64 accumulator cannot overflow for any slice that fits in memory
/// of fewer than 2^32 words.
#[inline]
fn accumulate(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        acc += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    match *chunks.remainder() {
        [a] => acc += u64::from(a) << 8,
        [a, b] => acc += u64::from(u16::from_be_bytes([a, b])),
        [a, b, c] => acc += u64::from(u16::from_be_bytes([a, b])) + (u64::from(c) << 8),
        _ => {}
    }
    acc
}

/// Folds a wide accumulator to 16 bits with end-around carry.
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    let mut a = (acc & 0xffff) + (acc >> 16);
    a = (a & 0xffff) + (a >> 16);
    a = (a & 0xffff) + (a >> 16);
    a as u16
}

/// The folded one's-complement sum of `data` (not complemented).
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    fold(accumulate(0, data))
}

/// One's-complement addition of already folded sums.
#[inline]
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// The Internet checksum of `data`, i.e. `!sum(data)`.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !sum(data)
}

/// The folded sum of the IPv4 pseudo header (RFC 793/768).
#[inline]
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: IpProtocol, len: u32) -> u16 {
    let acc =
        u64::from(src.to_bits()) + u64::from(dst.to_bits()) + u64::from(proto.0) + u64::from(len);
    fold(acc)
}

/// The folded sum of the IPv6 pseudo header (RFC 8200 §8.1).
#[inline]
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, proto: IpProtocol, len: u32) -> u16 {
    let s = src.to_bits();
    let d = dst.to_bits();
    let words = [
        s >> 64,
        s & u128::from(u64::MAX),
        d >> 64,
        d & u128::from(u64::MAX),
    ];
    let mut acc = u64::from(proto.0) + u64::from(len);
    for w in words {
        // Each 64-bit half is split into two 32-bit words so the accumulator cannot overflow.
        acc += (w >> 32) as u64 + (w & 0xffff_ffff) as u64;
    }
    fold(acc)
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for std::net::Ipv4Addr {}
    impl Sealed for std::net::Ipv6Addr {}
}

/// An address type usable in a transport pseudo header: [`Ipv4Addr`] or [`Ipv6Addr`].
pub trait PseudoHeaderAddr: Copy + sealed::Sealed {
    /// True for IPv4 (where a UDP checksum of zero means "none").
    const IS_V4: bool;
    /// The folded pseudo-header sum for a transport segment of `len` bytes.
    fn pseudo_sum(src: Self, dst: Self, proto: IpProtocol, len: u32) -> u16;
}

impl PseudoHeaderAddr for Ipv4Addr {
    const IS_V4: bool = true;
    #[inline]
    fn pseudo_sum(src: Self, dst: Self, proto: IpProtocol, len: u32) -> u16 {
        pseudo_header_v4(src, dst, proto, len)
    }
}

impl PseudoHeaderAddr for Ipv6Addr {
    const IS_V4: bool = false;
    #[inline]
    fn pseudo_sum(src: Self, dst: Self, proto: IpProtocol, len: u32) -> u16 {
        pseudo_header_v6(src, dst, proto, len)
    }
}

/// The folded sum of pseudo header plus `data` (the whole transport segment).
#[inline]
pub(crate) fn transport_sum<A: PseudoHeaderAddr>(
    src: A,
    dst: A,
    proto: IpProtocol,
    data: &[u8],
) -> u16 {
    let ph = A::pseudo_sum(src, dst, proto, data.len() as u32);
    fold(accumulate(u64::from(ph), data))
}

/// RFC 1624 eqn. 3 incremental update of checksum `csum` when a 16-bit word changes from `old`
/// to `new`: `HC' = ~(~HC + ~m + m')`. Handles the 0x0000/0xffff corner case correctly.
#[inline]
pub fn update16(csum: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!csum) + u64::from(!old) + u64::from(new))
}

/// Incremental update for a 32-bit field (e.g. an IPv4 address) at an even offset.
#[inline]
pub fn update32(csum: u16, old: u32, new: u32) -> u16 {
    let acc = u64::from(!csum)
        + u64::from(!(old >> 16) as u16)
        + u64::from(!(old as u16))
        + u64::from(new >> 16)
        + u64::from(new as u16);
    !fold(acc)
}

/// Incremental update for a span of bytes starting at an even offset, replaced by `new` of the
/// same length. Lengths should be even; an odd trailing byte is treated as zero-padded, which
/// is exact when the span ends the checksummed data.
#[inline]
pub fn update_bytes(csum: u16, old: &[u8], new: &[u8]) -> u16 {
    debug_assert_eq!(old.len(), new.len());
    let acc = u64::from(!csum) + u64::from(!sum(old)) + u64::from(sum(new));
    !fold(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Straightforward RFC 1071 reference: 16-bit words, u32 accumulator, fold at the end.
    fn reference_sum(data: &[u8]) -> u16 {
        let mut acc: u64 = 0;
        for c in data.chunks(2) {
            let w = if c.len() == 2 {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                u16::from(c[0]) << 8
            };
            acc += u64::from(w);
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 example: sum of 0001 f203 f4f5 f6f7 = ddf2.
        assert_eq!(
            sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0x220d
        );
    }

    #[test]
    fn rfc1624_corner_case() {
        // RFC 1624 §4: HC = 0xdd2f, m = 0x5555 -> m' = 0x3285 yields HC' = 0x0000 (not 0xffff).
        assert_eq!(update16(0xdd2f, 0x5555, 0x3285), 0x0000);
        // Data whose sum is 0xffff after the update has checksum 0x0000, as a full recompute.
        let before = [0x55u8, 0x55, 0xcd, 0x7a];
        let after = [0x32u8, 0x85, 0xcd, 0x7a];
        assert_eq!(checksum(&before), 0xdd2f);
        assert_eq!(checksum(&after), 0x0000);
        assert_eq!(update_bytes(0xdd2f, &before[..2], &after[..2]), 0x0000);
    }

    #[test]
    fn pseudo_headers_match_byte_layout() {
        let s4 = Ipv4Addr::new(192, 168, 0, 1);
        let d4 = Ipv4Addr::new(10, 1, 2, 3);
        let mut b = Vec::new();
        b.extend_from_slice(&s4.octets());
        b.extend_from_slice(&d4.octets());
        b.extend_from_slice(&[0, 6, 0x12, 0x34]);
        assert_eq!(
            pseudo_header_v4(s4, d4, IpProtocol::TCP, 0x1234),
            reference_sum(&b)
        );

        let s6: Ipv6Addr = "fe80::1:ffff:2:abcd".parse().unwrap();
        let d6: Ipv6Addr = "2001:db8::ffff:ffff".parse().unwrap();
        let mut b = Vec::new();
        b.extend_from_slice(&s6.octets());
        b.extend_from_slice(&d6.octets());
        b.extend_from_slice(&0x0001_2345u32.to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, 58]);
        assert_eq!(
            pseudo_header_v6(s6, d6, IpProtocol::ICMPV6, 0x1_2345),
            reference_sum(&b)
        );
    }

    proptest! {
        #[test]
        fn sum_matches_reference(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            prop_assert_eq!(sum(&data), reference_sum(&data));
        }

        #[test]
        fn combine_of_halves(data in proptest::collection::vec(any::<u8>(), 0..100), split in 0usize..50) {
            let split = (split * 2).min(data.len() & !1);
            prop_assert_eq!(combine(&[sum(&data[..split]), sum(&data[split..])]), reference_sum(&data));
        }

        /// The first word is fixed non-zero (as in every real header), so the sum is never the
        /// all-zero "+0" and the incremental result must equal a full recomputation exactly.
        #[test]
        fn update16_equals_recompute(mut words in proptest::collection::vec(any::<u16>(), 1..30),
                                     idx in any::<prop::sample::Index>(), new in any::<u16>()) {
            words[0] |= 0x4500;
            let i = 1 + idx.index(words.len());
            words.push(0);
            let bytes = |w: &[u16]| w.iter().flat_map(|x| x.to_be_bytes()).collect::<Vec<u8>>();
            let before = checksum(&bytes(&words));
            let old = words[i];
            words[i] = new;
            prop_assert_eq!(update16(before, old, new), checksum(&bytes(&words)));
        }

        #[test]
        fn update32_and_bytes_equal_recompute(mut data in proptest::collection::vec(any::<u8>(), 8..64),
                                              idx in any::<prop::sample::Index>(), new in any::<u32>(),
                                              span in proptest::collection::vec(any::<u8>(), 0..6)) {
            data[0] = 0x45;
            let len = data.len() & !1;
            data.truncate(len);
            let at = 2 + (idx.index(len - 5) & !1);
            let before = checksum(&data);
            let old = u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
            let mut d2 = data.clone();
            d2[at..at + 4].copy_from_slice(&new.to_be_bytes());
            prop_assert_eq!(update32(before, old, new), checksum(&d2));

            let n = (span.len() & !1).min(len - at);
            let mut d3 = data.clone();
            d3[at..at + n].copy_from_slice(&span[..n]);
            prop_assert_eq!(update_bytes(before, &data[at..at + n], &span[..n]), checksum(&d3));
        }
    }
}
