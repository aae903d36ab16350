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

/// Writes the low `width` (1..=128) bits of `v` into `buf` at bit `off`, leaving the other bits
/// (the reference the streaming [`Packer`] is tested against).
#[cfg(test)]
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

/// Calls `f` with the low `n` (1..=16) bytes of `v` in network order: a fixed-size array for
/// the sizes most fields have, so that the copy `f` makes is a few moves rather than a call.
#[inline(always)]
fn with_be_bytes(v: u128, n: usize, f: impl FnOnce(&[u8])) {
    match n {
        1 => f(&[v as u8]),
        2 => f(&(v as u16).to_be_bytes()),
        4 => f(&(v as u32).to_be_bytes()),
        6 => f(&(v as u64).to_be_bytes()[2..]),
        8 => f(&(v as u64).to_be_bytes()),
        _ => f(&v.to_be_bytes()[16 - n..]),
    }
}

/// Bits on their way out a byte at a time, most significant first: fewer than 8 wait between
/// calls, in the low `n` bits of a word.
#[derive(Debug, Default)]
struct Bits {
    acc: u64,
    n: u32,
}

impl Bits {
    /// Feeds the low `width` bits of `v`; every byte they complete goes to `out`.
    #[inline]
    fn put(&mut self, width: u32, v: u128, mut out: impl FnMut(u8)) {
        let mut w = width;
        while w > 0 {
            // At most 56 bits at a time, so that the word never overflows (n < 8 here); one
            // step for most fields.
            let k = w.min(56);
            let chunk = ((v >> (w - k)) as u64) & ((1u64 << k) - 1);
            self.acc = (self.acc << k) | chunk;
            self.n += k;
            w -= k;
            while self.n >= 8 {
                self.n -= 8;
                out((self.acc >> self.n) as u8);
            }
            self.acc &= (1u64 << self.n) - 1;
        }
    }

    /// The bits still waiting, at the top of a byte, and how many there are.
    fn rest(&self) -> (u8, u32) {
        if self.n == 0 {
            (0, 0)
        } else {
            ((self.acc << (8 - self.n)) as u8, self.n)
        }
    }
}

/// Appends bits to a byte string, most significant first (the input of a calculation: fields
/// packed without padding, the whole padded to a byte at the end as BMv2 does);
/// [`BitWriter::finish`] pads and writes the last byte.
#[derive(Debug, Default)]
pub(crate) struct BitWriter {
    /// The bytes so far (all of them after [`BitWriter::finish`]).
    pub bytes: Vec<u8>,
    bits: Bits,
}

impl BitWriter {
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.bits = Bits::default();
    }

    #[inline]
    pub(crate) fn push(&mut self, width: u32, v: u128) {
        let bytes = &mut self.bytes;
        if self.bits.n == 0 && width.is_multiple_of(8) {
            // On a byte and whole bytes (most fields): no shifting.
            return with_be_bytes(v, width as usize / 8, |b| bytes.extend_from_slice(b));
        }
        self.bits.put(width, v, |b| bytes.push(b));
    }

    pub(crate) fn push_bytes(&mut self, b: &[u8]) {
        if self.bits.n == 0 {
            self.bytes.extend_from_slice(b);
        } else {
            for &x in b {
                self.push(8, u128::from(x));
            }
        }
    }

    /// Writes the bits still pending as a last byte, padded with zeros.
    pub(crate) fn finish(&mut self) {
        let (last, n) = self.bits.rest();
        if n > 0 {
            self.bytes.push(last);
        }
        self.bits = Bits::default();
    }
}

/// Writes fields one after another into a byte slice from its first bit, most significant
/// first, a byte at a time (a header's fields are contiguous): the deparser's writer.
pub(crate) struct Packer<'a> {
    out: &'a mut [u8],
    pos: usize,
    bits: Bits,
}

impl<'a> Packer<'a> {
    pub(crate) fn new(out: &'a mut [u8]) -> Self {
        Packer {
            out,
            pos: 0,
            bits: Bits::default(),
        }
    }

    /// Appends the low `width` bits of `v`. The caller has checked that they fit the slice.
    #[inline]
    pub(crate) fn put(&mut self, width: u32, v: u128) {
        let (out, pos) = (&mut *self.out, &mut self.pos);
        if self.bits.n == 0 && width.is_multiple_of(8) {
            // On a byte and whole bytes (most fields): no shifting.
            return with_be_bytes(v, width as usize / 8, |b| {
                out[*pos..*pos + b.len()].copy_from_slice(b);
                *pos += b.len();
            });
        }
        self.bits.put(width, v, |b| {
            out[*pos] = b;
            *pos += 1;
        });
    }

    /// Appends whole bytes; the fields before them end on a byte (a wide field's rule).
    #[inline]
    pub(crate) fn put_bytes(&mut self, b: &[u8]) {
        debug_assert_eq!(self.bits.n, 0, "bytes put at a bit offset");
        self.out[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }

    /// Writes the bits still pending into the next byte's top, leaving its other bits.
    pub(crate) fn finish(self) {
        let (last, n) = self.bits.rest();
        if n > 0 {
            let b = &mut self.out[self.pos];
            *b = (*b & ((1u8 << (8 - n)) - 1)) | last;
        }
    }
}

/// Reads fields one after another from a byte slice's first bit (the inverse of [`Packer`]).
pub(crate) struct Unpacker<'a> {
    buf: &'a [u8],
    pos: usize,
    acc: u64,
    n: u32,
}

impl<'a> Unpacker<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Unpacker {
            buf,
            pos: 0,
            acc: 0,
            n: 0,
        }
    }

    /// The next `width` bits. The caller has checked that they are inside the slice.
    #[inline]
    pub(crate) fn take(&mut self, width: u32) -> u128 {
        if self.n == 0 && width.is_multiple_of(8) {
            // On a byte and whole bytes (most fields): no shifting.
            let n = width as usize / 8;
            let b = &self.buf[self.pos..self.pos + n];
            self.pos += n;
            return match *b {
                [x] => u128::from(x),
                [x, y] => u128::from(u16::from_be_bytes([x, y])),
                [x, y, z, w] => u128::from(u32::from_be_bytes([x, y, z, w])),
                _ => b.iter().fold(0u128, |v, &x| (v << 8) | u128::from(x)),
            };
        }
        if width <= 56 {
            while self.n < width {
                self.acc = (self.acc << 8) | u64::from(self.buf[self.pos]);
                self.pos += 1;
                self.n += 8;
            }
            self.n -= width;
            let v = (self.acc >> self.n) & ((1u64 << width) - 1);
            self.acc &= (1u64 << self.n) - 1;
            return u128::from(v);
        }
        let mut v = 0u128;
        let mut w = width;
        while w > 0 {
            let k = w.min(56);
            while self.n < k {
                self.acc = (self.acc << 8) | u64::from(self.buf[self.pos]);
                self.pos += 1;
                self.n += 8;
            }
            self.n -= k;
            let chunk = (self.acc >> self.n) & ((1u64 << k) - 1);
            self.acc &= (1u64 << self.n) - 1;
            v = (v << k) | u128::from(chunk);
            w -= k;
        }
        v
    }

    /// The next `out.len()` bytes into `out` (keeping its length); the fields before them end
    /// on a byte (a wide field's rule). The caller has checked that they are inside the slice.
    #[inline]
    pub(crate) fn take_bytes(&mut self, out: &mut [u8]) {
        debug_assert_eq!(self.n, 0, "bytes taken at a bit offset");
        out.copy_from_slice(&self.buf[self.pos..self.pos + out.len()]);
        self.pos += out.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_writers_and_readers_agree_with_bit_writes() {
        let widths = [
            4u32, 4, 8, 16, 16, 3, 13, 8, 8, 16, 32, 32, 48, 64, 24, 40, 1, 7, 128, 9, 64, 57, 2,
        ];
        let vals: Vec<u128> = widths
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835u128.rotate_left(i as u32 * 7) & mask(w)
            })
            .collect();
        let total: u32 = widths.iter().sum();
        let mut expect = vec![0u8; total.div_ceil(8) as usize];
        let mut off = 0;
        for (&w, &v) in widths.iter().zip(&vals) {
            write(&mut expect, off, w, v);
            off += w as usize;
        }
        let mut got = vec![0u8; expect.len()];
        let mut p = Packer::new(&mut got);
        widths.iter().zip(&vals).for_each(|(&w, &v)| p.put(w, v));
        p.finish();
        assert_eq!(got, expect);
        let mut u = Unpacker::new(&expect);
        for (&w, &v) in widths.iter().zip(&vals) {
            assert_eq!(u.take(w), v, "width {w}");
        }
        let mut bw = BitWriter::default();
        widths.iter().zip(&vals).for_each(|(&w, &v)| bw.push(w, v));
        bw.finish();
        assert_eq!(bw.bytes, expect);
    }

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
        w.finish();
        assert_eq!(w.bytes, [0xab, 0xa3, 0b1010_0000]);
    }
}
