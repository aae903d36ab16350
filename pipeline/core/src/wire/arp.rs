//! ARP (RFC 826). The view handles any hardware/protocol lengths; the `Repr` only Ethernet/IPv4.

use std::net::Ipv4Addr;

use super::{Error, EtherType, MacAddr, Result, get_u16, set_u16};

mod field {
    use crate::wire::Field;
    pub(super) const HTYPE: Field = 0..2;
    pub(super) const PTYPE: Field = 2..4;
    pub(super) const HLEN: usize = 4;
    pub(super) const PLEN: usize = 5;
    pub(super) const OPER: Field = 6..8;
    pub(super) const ADDRS: usize = 8;
}

/// Length of the fixed part of an ARP packet.
pub const FIXED_LEN: usize = field::ADDRS;
/// Length of an Ethernet/IPv4 ARP packet.
pub const ETH_IPV4_LEN: usize = FIXED_LEN + 2 * (6 + 4);
/// Hardware type of Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;

/// An ARP operation code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArpOperation(pub u16);

impl ArpOperation {
    /// Request.
    pub const REQUEST: ArpOperation = ArpOperation(1);
    /// Reply.
    pub const REPLY: ArpOperation = ArpOperation(2);
}

/// A zero-copy view of an ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    super::view_constructors!();

    /// Ensures the buffer holds the fixed part and both address pairs.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        if d.len() < FIXED_LEN || d.len() < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Total length implied by the address lengths: `8 + 2 * (hlen + plen)`.
    #[inline]
    pub fn header_len(&self) -> usize {
        FIXED_LEN + 2 * (usize::from(self.hardware_len()) + usize::from(self.protocol_len()))
    }

    /// Hardware type (1 = Ethernet).
    #[inline]
    pub fn hardware_type(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::HTYPE.start)
    }

    /// Protocol type (an EtherType).
    #[inline]
    pub fn protocol_type(&self) -> EtherType {
        EtherType(get_u16(self.buffer.as_ref(), field::PTYPE.start))
    }

    /// Hardware address length.
    #[inline]
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length.
    #[inline]
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Operation.
    #[inline]
    pub fn operation(&self) -> ArpOperation {
        ArpOperation(get_u16(self.buffer.as_ref(), field::OPER.start))
    }

    #[inline]
    fn offsets(&self) -> [usize; 4] {
        let h = usize::from(self.hardware_len());
        let p = usize::from(self.protocol_len());
        let sha = field::ADDRS;
        [sha, sha + h, sha + h + p, sha + 2 * h + p]
    }

    /// Sender hardware address bytes.
    #[inline]
    pub fn source_hardware_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.buffer.as_ref()[o[0]..o[1]]
    }

    /// Sender protocol address bytes.
    #[inline]
    pub fn source_protocol_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.buffer.as_ref()[o[1]..o[2]]
    }

    /// Target hardware address bytes.
    #[inline]
    pub fn target_hardware_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.buffer.as_ref()[o[2]..o[3]]
    }

    /// Target protocol address bytes.
    #[inline]
    pub fn target_protocol_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.buffer.as_ref()[o[3]..o[3] + usize::from(self.protocol_len())]
    }

    /// Bytes after the address fields (Ethernet padding, usually).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the hardware type.
    #[inline]
    pub fn set_hardware_type(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::HTYPE.start, v);
    }

    /// Sets the protocol type.
    #[inline]
    pub fn set_protocol_type(&mut self, v: EtherType) {
        set_u16(self.buffer.as_mut(), field::PTYPE.start, v.0);
    }

    /// Sets the hardware address length.
    #[inline]
    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v;
    }

    /// Sets the protocol address length.
    #[inline]
    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v;
    }

    /// Sets the operation.
    #[inline]
    pub fn set_operation(&mut self, v: ArpOperation) {
        set_u16(self.buffer.as_mut(), field::OPER.start, v.0);
    }

    /// Sets the sender hardware address (length must equal `hardware_len`).
    #[inline]
    pub fn set_source_hardware_addr(&mut self, a: &[u8]) {
        let o = self.offsets();
        self.buffer.as_mut()[o[0]..o[1]].copy_from_slice(a);
    }

    /// Sets the sender protocol address (length must equal `protocol_len`).
    #[inline]
    pub fn set_source_protocol_addr(&mut self, a: &[u8]) {
        let o = self.offsets();
        self.buffer.as_mut()[o[1]..o[2]].copy_from_slice(a);
    }

    /// Sets the target hardware address (length must equal `hardware_len`).
    #[inline]
    pub fn set_target_hardware_addr(&mut self, a: &[u8]) {
        let o = self.offsets();
        self.buffer.as_mut()[o[2]..o[3]].copy_from_slice(a);
    }

    /// Sets the target protocol address (length must equal `protocol_len`).
    #[inline]
    pub fn set_target_protocol_addr(&mut self, a: &[u8]) {
        let o = self.offsets();
        let end = o[3] + usize::from(self.protocol_len());
        self.buffer.as_mut()[o[3]..end].copy_from_slice(a);
    }

    /// Mutable bytes after the address fields.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// Owned Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Operation.
    pub operation: ArpOperation,
    /// Sender MAC.
    pub source_hardware_addr: MacAddr,
    /// Sender IPv4 address.
    pub source_protocol_addr: Ipv4Addr,
    /// Target MAC.
    pub target_hardware_addr: MacAddr,
    /// Target IPv4 address.
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// Parses an Ethernet/IPv4 ARP packet; other hardware/protocol types are `Unsupported`.
    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> Result<Self> {
        p.check_len()?;
        if p.hardware_type() != HTYPE_ETHERNET
            || p.protocol_type() != EtherType::IPV4
            || p.hardware_len() != 6
            || p.protocol_len() != 4
        {
            return Err(Error::Unsupported);
        }
        let ip = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
        Ok(ArpRepr {
            operation: p.operation(),
            source_hardware_addr: MacAddr::from_bytes(p.source_hardware_addr()),
            source_protocol_addr: ip(p.source_protocol_addr()),
            target_hardware_addr: MacAddr::from_bytes(p.target_hardware_addr()),
            target_protocol_addr: ip(p.target_protocol_addr()),
        })
    }

    /// Packet length (28).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        ETH_IPV4_LEN
    }

    /// Writes the packet.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut ArpPacket<T>) {
        p.set_hardware_type(HTYPE_ETHERNET);
        p.set_protocol_type(EtherType::IPV4);
        p.set_hardware_len(6);
        p.set_protocol_len(4);
        p.set_operation(self.operation);
        p.set_source_hardware_addr(&self.source_hardware_addr.0);
        p.set_source_protocol_addr(&self.source_protocol_addr.octets());
        p.set_target_hardware_addr(&self.target_hardware_addr.0);
        p.set_target_protocol_addr(&self.target_protocol_addr.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Who has 10.0.0.2? Tell 10.0.0.1 (52:54:00:12:34:56).
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, //
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 10, 0, 0, 1, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 10, 0, 0, 2,
    ];

    #[test]
    fn parse_and_emit_fixture() {
        let p = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(p.hardware_type(), 1);
        assert_eq!(p.protocol_type(), EtherType::IPV4);
        assert_eq!((p.hardware_len(), p.protocol_len()), (6, 4));
        assert_eq!(p.operation(), ArpOperation::REQUEST);
        assert_eq!(
            p.source_hardware_addr(),
            &[0x52, 0x54, 0x00, 0x12, 0x34, 0x56]
        );
        assert_eq!(p.source_protocol_addr(), &[10, 0, 0, 1]);
        assert_eq!(p.target_hardware_addr(), &[0; 6]);
        assert_eq!(p.target_protocol_addr(), &[10, 0, 0, 2]);
        assert!(p.payload().is_empty());
        let r = ArpRepr::parse(&p).unwrap();
        assert_eq!(r.target_protocol_addr, Ipv4Addr::new(10, 0, 0, 2));
        let mut buf = [0xaau8; 28];
        r.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf, REQUEST);
    }

    #[test]
    fn malformed() {
        for n in 0..28 {
            assert_eq!(ArpPacket::new_checked(&REQUEST[..n]), Err(Error::Truncated));
        }
        let mut b = REQUEST;
        b[1] = 6; // IEEE 802 hardware type
        assert_eq!(
            ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()),
            Err(Error::Unsupported)
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = ArpPacket::new_checked(&data[..]) {
                let _ = (p.hardware_type(), p.protocol_type(), p.operation(), p.header_len());
                let _ = (p.source_hardware_addr(), p.source_protocol_addr());
                let _ = (p.target_hardware_addr(), p.target_protocol_addr(), p.payload());
                let _ = ArpRepr::parse(&p);
            }
        }

        #[test]
        fn repr_roundtrip(op in any::<u16>(), sha in any::<[u8; 6]>(), spa in any::<u32>(),
                          tha in any::<[u8; 6]>(), tpa in any::<u32>()) {
            let r = ArpRepr {
                operation: ArpOperation(op),
                source_hardware_addr: MacAddr(sha),
                source_protocol_addr: Ipv4Addr::from_bits(spa),
                target_hardware_addr: MacAddr(tha),
                target_protocol_addr: Ipv4Addr::from_bits(tpa),
            };
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()), Ok(r));
        }
    }
}
