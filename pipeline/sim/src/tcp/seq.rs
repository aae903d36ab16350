//! Sequence-number arithmetic modulo 2^32 (RFC 9293 §3.4): `a` is before `b` when the signed
//! distance from `b` to `a` is negative.

/// `a` before `b`.
pub fn lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// `a` before or at `b`.
pub fn le(a: u32, b: u32) -> bool {
    !lt(b, a)
}

/// `a` after `b`.
pub fn gt(a: u32, b: u32) -> bool {
    lt(b, a)
}

/// `a` after or at `b`.
pub fn ge(a: u32, b: u32) -> bool {
    !lt(a, b)
}

/// The later of `a` and `b`.
pub fn max(a: u32, b: u32) -> u32 {
    if lt(a, b) { b } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_wrap_around_zero() {
        assert!(lt(1, 2) && le(2, 2) && gt(3, 2) && ge(2, 2));
        assert!(
            lt(u32::MAX - 5, 10),
            "10 comes after a sequence number about to wrap"
        );
        assert!(gt(10, u32::MAX - 5));
        assert_eq!(max(u32::MAX, 3), 3);
        assert_eq!(max(7, 3), 7);
    }
}
