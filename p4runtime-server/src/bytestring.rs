//! P4Runtime bytestrings (spec section 8.3): big-endian unsigned values of a declared bit width.
//!
//! A server accepts the canonical form (no leading zero bytes, at least one byte) and any
//! zero-padded form up to the width's byte length; it rejects an empty value and any value with a
//! bit set beyond the width (OUT_OF_RANGE), and answers in canonical form.

/// Why a bytestring was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BytestringError {
    /// The value is empty.
    #[error("empty bytestring")]
    Empty,
    /// A bit beyond the declared width is set (P4Runtime OUT_OF_RANGE).
    #[error("value does not fit in {0} bits")]
    TooWide(u32),
}

/// Reads a bytestring of declared `bitwidth` (1..=128) as a number.
pub fn to_u128(bytes: &[u8], bitwidth: u32) -> Result<u128, BytestringError> {
    if bytes.is_empty() {
        return Err(BytestringError::Empty);
    }
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    let significant = &bytes[first..];
    if significant.len() > 16 {
        return Err(BytestringError::TooWide(bitwidth));
    }
    let v = significant
        .iter()
        .fold(0u128, |acc, &b| (acc << 8) | u128::from(b));
    if bitwidth < 128 && v >> bitwidth != 0 {
        return Err(BytestringError::TooWide(bitwidth));
    }
    Ok(v)
}

/// The canonical bytestring of `value`: big-endian, no leading zero bytes, `[0]` for zero.
pub fn canonical(value: u128) -> Vec<u8> {
    let b = value.to_be_bytes();
    let first = b.iter().position(|&x| x != 0).unwrap_or(15);
    b[first..].to_vec()
}

/// The zero-padded bytestring of `value` for a field of `bitwidth` bits.
pub fn padded(value: u128, bitwidth: u32) -> Vec<u8> {
    let n = (bitwidth as usize).div_ceil(8).clamp(1, 16);
    value.to_be_bytes()[16 - n..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_canonical_and_padded() {
        assert_eq!(to_u128(&[1], 9), Ok(1));
        assert_eq!(to_u128(&[0, 1], 9), Ok(1));
        assert_eq!(to_u128(&[0, 0, 0, 0, 0, 1], 48), Ok(1));
        assert_eq!(to_u128(&[0x01, 0xff], 9), Ok(0x1ff));
    }

    #[test]
    fn rejects_empty_and_too_wide() {
        assert_eq!(to_u128(&[], 8), Err(BytestringError::Empty));
        assert_eq!(to_u128(&[0x02, 0x00], 9), Err(BytestringError::TooWide(9)));
        assert_eq!(to_u128(&[1; 17], 128), Err(BytestringError::TooWide(128)));
    }

    #[test]
    fn canonical_forms() {
        assert_eq!(canonical(0), vec![0]);
        assert_eq!(canonical(0x1ff), vec![1, 0xff]);
        assert_eq!(padded(1, 9), vec![0, 1]);
        assert_eq!(padded(0x0a000001, 32), vec![10, 0, 0, 1]);
    }

    proptest! {
        #[test]
        fn roundtrip(v: u128, w in 1u32..=128) {
            let v = if w == 128 { v } else { v & ((1u128 << w) - 1) };
            prop_assert_eq!(to_u128(&canonical(v), w), Ok(v));
            prop_assert_eq!(to_u128(&padded(v, w), w), Ok(v));
        }
    }
}
