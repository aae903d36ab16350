//! MAC control frames (EtherType 0x8808): 802.3x PAUSE (opcode 0x0001) and 802.1Qbb priority
//! flow control (opcode 0x0101). The view covers the Ethernet payload.
//!
//! Layout: opcode (2) | PAUSE: pause time (2) / PFC: class-enable vector (2), 8 × pause time
//! (2 each). Times are in quanta of 512 bit times. MAC control frames are always padded to the
//! 46-byte minimum Ethernet payload, so `check_len` requires the 20 bytes of the PFC layout
//! whatever the opcode.

use super::{Error, Result, get_u16, set_u16};

mod field {
    use crate::wire::Field;
    pub(super) const OPCODE: Field = 0..2;
    pub(super) const PAUSE_TIME: Field = 2..4;
    pub(super) const CLASS_ENABLE: Field = 2..4;
    pub(super) const CLASS_TIMES: usize = 4;
    pub(super) const END: usize = 20;
}

/// Bytes the view needs (opcode + vector + 8 times).
pub const MIN_LEN: usize = field::END;
/// The minimum Ethernet payload that MAC control frames are padded to.
pub const PADDED_LEN: usize = 46;
/// 802.3x PAUSE opcode.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// 802.1Qbb PFC opcode.
pub const OPCODE_PFC: u16 = 0x0101;
/// Bit times per pause quantum.
pub const BITS_PER_QUANTUM: u64 = 512;

/// Pause duration in bit times for `quanta`.
#[inline]
pub const fn quanta_to_bit_times(quanta: u16) -> u64 {
    quanta as u64 * BITS_PER_QUANTUM
}

/// A zero-copy view of a MAC control frame payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PfcFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PfcFrame<T> {
    super::view_constructors!();

    /// Ensures at least [`MIN_LEN`] bytes (`Truncated`).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < MIN_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Bytes of meaningful content: 4 for PAUSE, 20 otherwise.
    #[inline]
    pub fn header_len(&self) -> usize {
        if self.opcode() == OPCODE_PAUSE {
            4
        } else {
            MIN_LEN
        }
    }

    /// MAC control opcode.
    #[inline]
    pub fn opcode(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::OPCODE.start)
    }

    /// PAUSE time in quanta (meaningful for opcode 0x0001).
    #[inline]
    pub fn pause_time(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PAUSE_TIME.start)
    }

    /// PFC class-enable vector; bit `i` enables `class_pause_time(i)` (opcode 0x0101).
    #[inline]
    pub fn class_enable_vector(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CLASS_ENABLE.start)
    }

    /// True if priority `class` (0..=7) is enabled in the vector.
    #[inline]
    pub fn class_enabled(&self, class: usize) -> bool {
        class < 8 && self.class_enable_vector() & (1 << class) != 0
    }

    /// Pause time of priority `class` in quanta. Panics if `class >= 8`.
    #[inline]
    pub fn class_pause_time(&self, class: usize) -> u16 {
        assert!(class < 8, "PFC class out of range");
        get_u16(self.buffer.as_ref(), field::CLASS_TIMES + 2 * class)
    }

    /// All eight pause times.
    #[inline]
    pub fn class_pause_times(&self) -> [u16; 8] {
        core::array::from_fn(|i| self.class_pause_time(i))
    }

    /// Bytes after the content (padding).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> PfcFrame<T> {
    /// Sets the opcode.
    #[inline]
    pub fn set_opcode(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::OPCODE.start, v);
    }

    /// Sets the PAUSE time.
    #[inline]
    pub fn set_pause_time(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PAUSE_TIME.start, v);
    }

    /// Sets the class-enable vector.
    #[inline]
    pub fn set_class_enable_vector(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CLASS_ENABLE.start, v);
    }

    /// Sets the pause time of `class` (0..=7; panics otherwise).
    #[inline]
    pub fn set_class_pause_time(&mut self, class: usize, v: u16) {
        assert!(class < 8, "PFC class out of range");
        set_u16(self.buffer.as_mut(), field::CLASS_TIMES + 2 * class, v);
    }

    /// Mutable padding.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// Owned MAC control frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PfcRepr {
    /// 802.3x PAUSE for all traffic.
    Pause {
        /// Pause time in quanta.
        quanta: u16,
    },
    /// 802.1Qbb per-priority pause.
    Pfc {
        /// Class-enable vector (bits 0..=7).
        class_enable_vector: u16,
        /// Pause time per priority in quanta.
        quanta: [u16; 8],
    },
}

impl PfcRepr {
    /// Parses PAUSE or PFC; other opcodes are `Unsupported`.
    pub fn parse<T: AsRef<[u8]>>(p: &PfcFrame<T>) -> Result<Self> {
        p.check_len()?;
        match p.opcode() {
            OPCODE_PAUSE => Ok(PfcRepr::Pause {
                quanta: p.pause_time(),
            }),
            OPCODE_PFC => Ok(PfcRepr::Pfc {
                class_enable_vector: p.class_enable_vector(),
                quanta: p.class_pause_times(),
            }),
            _ => Err(Error::Unsupported),
        }
    }

    /// Always [`PADDED_LEN`] (46): the frame is emitted with its zero padding.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        PADDED_LEN
    }

    /// Writes the frame and zeroes the rest of the buffer (padding).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut PfcFrame<T>) {
        p.buffer.as_mut().fill(0);
        match *self {
            PfcRepr::Pause { quanta } => {
                p.set_opcode(OPCODE_PAUSE);
                p.set_pause_time(quanta);
            }
            PfcRepr::Pfc {
                class_enable_vector,
                quanta,
            } => {
                p.set_opcode(OPCODE_PFC);
                p.set_class_enable_vector(class_enable_vector);
                for (i, q) in quanta.into_iter().enumerate() {
                    p.set_class_pause_time(i, q);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{EtherType, EthernetFrame, EthernetRepr, MacAddr};
    use proptest::prelude::*;

    /// PFC pausing priorities 3 (0xffff quanta) and 4 (0x0100 quanta), padded to 46 bytes.
    const PFC: [u8; 46] = {
        let mut b = [0u8; 46];
        b[0] = 0x01;
        b[1] = 0x01;
        b[3] = 0x18;
        b[10] = 0xff;
        b[11] = 0xff;
        b[12] = 0x01;
        b
    };

    #[test]
    fn parse_and_emit_fixture() {
        let p = PfcFrame::new_checked(&PFC[..]).unwrap();
        assert_eq!((p.opcode(), p.class_enable_vector()), (OPCODE_PFC, 0x0018));
        assert!(p.class_enabled(3) && p.class_enabled(4) && !p.class_enabled(0));
        assert!(!p.class_enabled(9));
        assert_eq!(p.class_pause_times(), [0, 0, 0, 0xffff, 0x0100, 0, 0, 0]);
        assert_eq!(quanta_to_bit_times(p.class_pause_time(4)), 256 * 512);
        assert_eq!(p.payload().len(), 26);
        let r = PfcRepr::parse(&p).unwrap();
        let mut buf = [0xffu8; 46];
        r.emit(&mut PfcFrame::new_unchecked(&mut buf[..]));
        assert_eq!(buf, PFC);
    }

    #[test]
    fn pause_in_ethernet_frame() {
        let mut frame = [0u8; 60];
        EthernetRepr {
            src_addr: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_addr: MacAddr::MAC_CONTROL,
            ethertype: EtherType::MAC_CONTROL,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut frame[..]));
        let r = PfcRepr::Pause { quanta: 0xffff };
        r.emit(&mut PfcFrame::new_unchecked(&mut frame[14..]));
        assert_eq!(&frame[14..18], &[0x00, 0x01, 0xff, 0xff]);
        let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::MAC_CONTROL);
        let p = PfcFrame::new_checked(eth.payload()).unwrap();
        assert_eq!((p.header_len(), p.pause_time()), (4, 0xffff));
        assert_eq!(PfcRepr::parse(&p), Ok(r));
        let mut other = frame;
        other[15] = 0x02;
        assert_eq!(
            PfcRepr::parse(&PfcFrame::new_unchecked(&other[14..])),
            Err(Error::Unsupported)
        );
        for n in 0..MIN_LEN {
            assert_eq!(PfcFrame::new_checked(&PFC[..n]), Err(Error::Truncated));
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..48)) {
            if let Ok(p) = PfcFrame::new_checked(&data[..]) {
                let _ = (p.opcode(), p.pause_time(), p.class_enable_vector(), p.class_pause_times());
                let _ = (p.payload(), p.class_enabled(7), PfcRepr::parse(&p));
            }
        }

        #[test]
        fn repr_roundtrip(pause in any::<bool>(), v in 0u16..256, q in any::<[u16; 8]>()) {
            let r = if pause { PfcRepr::Pause { quanta: q[0] } }
                    else { PfcRepr::Pfc { class_enable_vector: v, quanta: q } };
            let mut buf = vec![0xaau8; r.buffer_len()];
            r.emit(&mut PfcFrame::new_unchecked(&mut buf[..]));
            prop_assert_eq!(PfcRepr::parse(&PfcFrame::new_checked(&buf[..]).unwrap()), Ok(r));
        }
    }
}
