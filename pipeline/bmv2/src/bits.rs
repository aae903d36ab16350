//! Bit strings: BMv2's hex strings, and fields read from and written to byte buffers at any bit
//! offset, most significant bit first (network order).

/// The value of a BMv2 hex string (`0x..`, optionally negative, any number of leading zeros).
pub(crate) fn hexstr(s: &str) -> Result<i128, String> {
    let (neg, t) = match s.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, s),
    };
    // p4c writes `0x...`; some BMv2 JSON has the bare digits.
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let digits = digits.trim_start_matches('0');
    if digits.len() > 32 {
        return Err(format!("hex string {s:?} is wider than 128 bits"));
    }
    let v = if digits.is_empty() {
        0
    } else {
        u128::from_str_radix(digits, 16).map_err(|e| format!("hex string {s:?}: {e}"))?
    };
    // A 128-bit value keeps its bits (two's complement) rather than failing.
    let v = v as i128;
    Ok(if neg { v.wrapping_neg() } else { v })
}

/// The mask of the low `width` bits.
#[inline]
pub(crate) fn mask(width: u32) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// `width` (1..=128) bits of `buf` starting at bit `off`, as an unsigned integer. The caller has
/// checked that the bits are inside `buf`.
#[inline]
pub(crate) fn read(buf: &[u8], off: usize, width: u32) -> u128 {
    if off.is_multiple_of(8) && width.is_multiple_of(8) {
        // Whole bytes (most header fields): no shifting within bytes.
        let start = off / 8;
        return buf[start..start + width as usize / 8]
            .iter()
            .fold(0u128, |v, &b| (v << 8) | u128::from(b));
    }
    let mut v: u128 = 0;
    let mut remaining = width;
    let mut pos = off;
    while remaining > 0 {
        let bit = (pos % 8) as u32;
        let room = 8 - bit;
        let n = room.min(remaining);
        let chunk = (buf[pos / 8] >> (room - n)) & ((1u16 << n) - 1) as u8;
        v = (v << n) | u128::from(chunk);
        remaining -= n;
        pos += n as usize;
    }
    v
}

/// Writes the low `width` (1..=128) bits of `v` into `buf` at bit `off`, leaving the other bits.
#[inline]
pub(crate) fn write(buf: &mut [u8], off: usize, width: u32, v: u128) {
    let v = v & mask(width);
    if off.is_multiple_of(8) && width.is_multiple_of(8) {
        let start = off / 8;
        let n = width as usize / 8;
        for (k, b) in buf[start..start + n].iter_mut().enumerate() {
            *b = (v >> (8 * (n - 1 - k))) as u8;
        }
        return;
    }
    let mut remaining = width;
    let mut pos = off;
    while remaining > 0 {
        let byte = pos / 8;
        let bit = (pos % 8) as u32;
        let room = 8 - bit;
        let n = room.min(remaining);
        // The next n bits of v, from its top.
        let chunk = ((v >> (remaining - n)) & mask(n)) as u8;
        let shift = room - n;
        let m = ((1u16 << n) - 1) as u8;
        buf[byte] = (buf[byte] & !(m << shift)) | (chunk << shift);
        remaining -= n;
        pos += n as usize;
    }
}

/// Appends bits to a byte string, most significant first (the input of a calculation: fields
/// packed without padding, the whole padded to a byte at the end as BMv2 does).
#[derive(Debug, Default)]
pub(crate) struct BitWriter {
    pub bytes: Vec<u8>,
    bits: usize,
}

impl BitWriter {
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.bits = 0;
    }

    pub(crate) fn push(&mut self, width: u32, v: u128) {
        let need = (self.bits + width as usize).div_ceil(8);
        self.bytes.resize(need, 0);
        write(&mut self.bytes, self.bits, width, v);
        self.bits += width as usize;
    }

    pub(crate) fn push_bytes(&mut self, b: &[u8]) {
        if self.bits.is_multiple_of(8) {
            self.bytes.truncate(self.bits / 8);
            self.bytes.extend_from_slice(b);
            self.bits += b.len() * 8;
        } else {
            for &x in b {
                self.push(8, u128::from(x));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_strings() {
        assert_eq!(hexstr("0x0800"), Ok(0x800));
        assert_eq!(hexstr("-0x1"), Ok(-1));
        assert_eq!(hexstr("0x000000000000000000000000000000000001"), Ok(1));
        assert_eq!(hexstr("12"), Ok(0x12));
        assert!(hexstr("0xzz").is_err());
        assert!(hexstr("0x1ffffffffffffffffffffffffffffffff").is_err());
    }

    #[test]
    fn bits_round_trip_at_every_offset_and_width() {
        let mut x = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128;
        for off in 0..20 {
            for width in [1, 3, 7, 8, 9, 12, 16, 31, 48, 64, 100, 127, 128] {
                let mut buf = [0xa5u8; 40];
                let before = buf;
                x = x.rotate_left(7) ^ 0x9e37;
                write(&mut buf, off, width, x);
                assert_eq!(
                    read(&buf, off, width),
                    x & mask(width),
                    "off {off} w {width}"
                );
                // Bits outside the field are untouched.
                for bit in (0..off).chain(off + width as usize..320) {
                    assert_eq!(read(&buf, bit, 1), read(&before, bit, 1), "bit {bit}");
                }
            }
        }
    }

    #[test]
    fn writer_packs_without_padding() {
        let mut w = BitWriter::default();
        w.push(12, 0xaba);
        w.push(4, 0x3);
        w.push(3, 0b101);
        assert_eq!(w.bytes, [0xab, 0xa3, 0b1010_0000]);
    }
}
