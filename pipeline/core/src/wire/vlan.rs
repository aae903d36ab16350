//! IEEE 802.1Q / 802.1ad VLAN tags: the 4 bytes following a 0x8100 / 0x88a8 EtherType.

use super::{Error, EtherType, Result, get_u16, set_u16};

mod field {
    use crate::wire::{Field, Rest};
    pub(super) const TCI: Field = 0..2;
    pub(super) const ETHERTYPE: Field = 2..4;
    pub(super) const PAYLOAD: Rest = 4..;
}

/// Length of a VLAN tag (TCI + inner EtherType).
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A zero-copy view of a VLAN tag and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    super::view_constructors!();

    /// Ensures the buffer holds a full tag.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Tag length (4).
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The raw tag control information.
    #[inline]
    pub fn tci(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::TCI.start)
    }

    /// Priority code point (0..=7).
    #[inline]
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    #[inline]
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (0..=4095).
    #[inline]
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// EtherType of the encapsulated payload.
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(get_u16(self.buffer.as_ref(), field::ETHERTYPE.start))
    }

    /// Everything after the tag.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    /// Sets the raw TCI.
    #[inline]
    pub fn set_tci(&mut self, tci: u16) {
        set_u16(self.buffer.as_mut(), field::TCI.start, tci);
    }

    /// Sets the priority code point (only the low 3 bits are used).
    #[inline]
    pub fn set_pcp(&mut self, pcp: u8) {
        self.set_tci((self.tci() & 0x1fff) | (u16::from(pcp & 7) << 13));
    }

    /// Sets the drop eligible indicator.
    #[inline]
    pub fn set_dei(&mut self, dei: bool) {
        self.set_tci((self.tci() & !0x1000) | if dei { 0x1000 } else { 0 });
    }

    /// Sets the VLAN id (only the low 12 bits are used).
    #[inline]
    pub fn set_vid(&mut self, vid: u16) {
        self.set_tci((self.tci() & 0xf000) | (vid & 0x0fff));
    }

    /// Sets the inner EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, t: EtherType) {
        set_u16(self.buffer.as_mut(), field::ETHERTYPE.start, t.0);
    }

    /// Mutable payload.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// Owned VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanRepr {
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id (0..=4095).
    pub vid: u16,
    /// Inner EtherType.
    pub ethertype: EtherType,
}

impl VlanRepr {
    /// Reads a tag.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(tag: &VlanTag<T>) -> Result<Self> {
        tag.check_len()?;
        Ok(VlanRepr {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vid: tag.vid(),
            ethertype: tag.ethertype(),
        })
    }

    /// Tag length (4).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the tag. Out-of-range `pcp`/`vid` bits are masked off.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut VlanTag<T>) {
        let tci = (u16::from(self.pcp & 7) << 13)
            | if self.dei { 0x1000 } else { 0 }
            | (self.vid & 0x0fff);
        tag.set_tci(tci);
        tag.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// PCP 5, DEI 1, VID 100, inner IPv4.
    const TAG: [u8; 6] = [0xb0, 0x64, 0x08, 0x00, 0x45, 0x00];

    #[test]
    fn parse_and_emit_fixture() {
        let t = VlanTag::new_checked(&TAG[..]).unwrap();
        assert_eq!((t.pcp(), t.dei(), t.vid()), (5, true, 100));
        assert_eq!(t.ethertype(), EtherType::IPV4);
        assert_eq!(t.payload(), &[0x45, 0x00]);
        let r = VlanRepr::parse(&t).unwrap();
        let mut buf = [0u8; 6];
        buf[4..].copy_from_slice(&TAG[4..]);
        r.emit(&mut VlanTag::new_unchecked(&mut buf[..]));
        assert_eq!(buf, TAG);
    }

    #[test]
    fn setters() {
        let mut buf = TAG;
        let mut t = VlanTag::new_unchecked(&mut buf[..]);
        t.set_vid(4095);
        t.set_pcp(1);
        t.set_dei(false);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (1, false, 4095));
        assert_eq!(VlanTag::new_checked(&TAG[..3]), Err(Error::Truncated));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..16)) {
            if let Ok(t) = VlanTag::new_checked(&data[..]) {
                let _ = (t.pcp(), t.dei(), t.vid(), t.ethertype(), t.payload(), VlanRepr::parse(&t));
            }
        }

        #[test]
        fn repr_roundtrip(pcp in 0u8..8, dei in any::<bool>(), vid in 0u16..4096, et in any::<u16>()) {
            let r = VlanRepr { pcp, dei, vid, ethertype: EtherType(et) };
            let mut buf = [0u8; 4];
            r.emit(&mut VlanTag::new_unchecked(&mut buf[..]));
            prop_assert_eq!(VlanRepr::parse(&VlanTag::new_checked(&buf[..]).unwrap()), Ok(r));
        }
    }
}
