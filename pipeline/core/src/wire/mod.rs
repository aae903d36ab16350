//! Zero-copy wire views and `Repr` types for the headers the programs parse.
//!
//! Every header has two faces, in the style of smoltcp:
//!
//! * a *view* (`EthernetFrame<T>`, `Ipv4Packet<T>`, ...) wrapping any `T: AsRef<[u8]>` with
//!   `#[inline]` getters, and setters when `T: AsMut<[u8]>`. Views never copy or allocate;
//! * a *`Repr`* (`EthernetRepr`, `Ipv4Repr`, ...), a plain owned value with `parse(&view)`,
//!   `emit(&self, &mut view)` and `buffer_len()`.
//!
//! # Panic contract
//!
//! * `new_unchecked` performs no validation; accessors on a too-short buffer may panic.
//! * After `check_len` (or `new_checked`) has returned `Ok`, **no getter panics**, whatever the
//!   bytes are (getters taking an index, like `PfcFrame::class_pause_time(i)`, assert `i < 8`).
//!   Setters of fixed-position fields do not panic either; setters that change a length field
//!   (`set_header_len`, `set_total_len`, ...) may break that guarantee for later calls until
//!   the buffer is revalidated, and `Icmpv6Packet::set_ndp_target_addr` needs 24 bytes.
//! * `Repr::emit` requires a view whose buffer holds at least `buffer_len()` bytes (exactly
//!   `buffer_len()` for the headers, followed by the payload if the header carries a length)
//!   and panics otherwise. `emit` never computes pseudo-header checksums (TCP, UDP, ICMPv6):
//!   write the payload, then call the view's `fill_checksum(src, dst)`. IPv4 and ICMPv4
//!   `emit` fill their own checksums.
//!
//! Errors are a small `Copy` enum, [`Error`], usable directly as a drop reason.

use core::fmt;
use core::ops::{Range, RangeFrom};

/// The constructors every view shares: `new_unchecked`, `new_checked` (which runs the view's
/// own `check_len`) and `into_inner`. Invoked inside each view's `impl<T: AsRef<[u8]>>` block.
macro_rules! view_constructors {
    () => {
        /// Wraps `buffer` without validation.
        #[inline]
        pub const fn new_unchecked(buffer: T) -> Self {
            Self { buffer }
        }

        /// Wraps `buffer` and validates it with [`check_len`](Self::check_len).
        #[inline]
        pub fn new_checked(buffer: T) -> Result<Self> {
            let view = Self::new_unchecked(buffer);
            view.check_len()?;
            Ok(view)
        }

        /// Returns the wrapped buffer.
        #[inline]
        pub fn into_inner(self) -> T {
            self.buffer
        }
    };
}
pub(crate) use view_constructors;

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod pfc;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use checksum::PseudoHeaderAddr;
pub use ethernet::{EthernetFrame, EthernetRepr};
pub use icmpv4::{IcmpPacket, IcmpRepr};
pub use icmpv6::{Icmpv6Packet, Icmpv6Repr, NdpOption, NdpOptionIter};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use pfc::{PfcFrame, PfcRepr};
pub use tcp::{TcpFlags, TcpOption, TcpOptionIter, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{VlanRepr, VlanTag};

/// Why a buffer could not be parsed (or emitted). Cheap to copy; usable as a drop reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field claims).
    #[error("buffer truncated")]
    Truncated,
    /// A length field is inconsistent (e.g. IPv4 total length below the header length, UDP
    /// length below 8).
    #[error("inconsistent length field")]
    BadLength,
    /// The IP version nibble does not match the header type.
    #[error("bad IP version")]
    BadVersion,
    /// IPv4 IHL below 5 or beyond the buffer.
    #[error("bad IPv4 header length (IHL)")]
    BadIhl,
    /// TCP data offset below 5 or beyond the buffer.
    #[error("bad TCP data offset")]
    BadDataOffset,
    /// A checksum does not verify.
    #[error("bad checksum")]
    BadChecksum,
    /// A TCP, IPv4 or NDP option is malformed.
    #[error("malformed option")]
    BadOption,
    /// Well-formed, but a variant this crate does not represent (e.g. non-Ethernet ARP).
    #[error("unsupported header variant")]
    Unsupported,
}

/// Result alias of the wire module.
pub type Result<T> = core::result::Result<T, Error>;

/// A byte range of a fixed-position field.
pub(crate) type Field = Range<usize>;
/// The open-ended range where a header's rest starts.
pub(crate) type Rest = RangeFrom<usize>;

#[inline(always)]
pub(crate) fn get_u16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

#[inline(always)]
pub(crate) fn get_u32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

#[inline(always)]
pub(crate) fn set_u16(d: &mut [u8], at: usize, v: u16) {
    d[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn set_u32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// A 48-bit IEEE 802 MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// 00:00:00:00:00:00.
    pub const ZERO: MacAddr = MacAddr([0; 6]);
    /// 01:80:c2:00:00:01, the destination of 802.3x PAUSE and 802.1Qbb PFC frames.
    pub const MAC_CONTROL: MacAddr = MacAddr([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);

    /// Builds an address from a 6-byte slice. Panics if `b.len() != 6`.
    #[inline]
    pub fn from_bytes(b: &[u8]) -> MacAddr {
        let mut a = [0; 6];
        a.copy_from_slice(b);
        MacAddr(a)
    }

    /// The six octets.
    #[inline]
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// True for ff:ff:ff:ff:ff:ff.
    #[inline]
    pub const fn is_broadcast(&self) -> bool {
        matches!(self.0, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
    }

    /// True when the group bit (LSB of the first octet) is set; includes broadcast.
    #[inline]
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// True when the group bit is clear.
    #[inline]
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// True when the locally-administered bit is set.
    #[inline]
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MacAddr({self})")
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(b: [u8; 6]) -> Self {
        MacAddr(b)
    }
}

/// An EtherType (or 802.3 length) value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP.
    pub const ARP: EtherType = EtherType(0x0806);
    /// 802.1Q VLAN tag.
    pub const VLAN: EtherType = EtherType(0x8100);
    /// 802.1ad service tag (QinQ).
    pub const QINQ: EtherType = EtherType(0x88a8);
    /// IPv6.
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// MAC control (802.3x PAUSE, 802.1Qbb PFC).
    pub const MAC_CONTROL: EtherType = EtherType(0x8808);

    /// True for the tag protocol identifiers 0x8100 and 0x88a8.
    #[inline]
    pub const fn is_vlan(self) -> bool {
        self.0 == Self::VLAN.0 || self.0 == Self::QINQ.0
    }
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        EtherType(v)
    }
}

impl From<EtherType> for u16 {
    fn from(v: EtherType) -> Self {
        v.0
    }
}

/// An IP protocol / IPv6 next-header number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// ICMP for IPv4.
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// TCP.
    pub const TCP: IpProtocol = IpProtocol(6);
    /// UDP.
    pub const UDP: IpProtocol = IpProtocol(17);
    /// ICMP for IPv6.
    pub const ICMPV6: IpProtocol = IpProtocol(58);
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        IpProtocol(v)
    }
}

impl From<IpProtocol> for u8 {
    fn from(v: IpProtocol) -> Self {
        v.0
    }
}

/// Up to 40 option bytes (IPv4 or TCP), stored inline so `Repr`s stay `Copy` and allocation-free.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptionBytes {
    len: u8,
    bytes: [u8; 40],
}

impl OptionBytes {
    /// Maximum option length of IPv4 and TCP headers.
    pub const MAX_LEN: usize = 40;

    /// No options.
    pub const EMPTY: OptionBytes = OptionBytes {
        len: 0,
        bytes: [0; 40],
    };

    /// Copies `b`, which must be at most 40 bytes and a multiple of 4 (pad with NOP/EOL).
    pub fn new(b: &[u8]) -> Result<OptionBytes> {
        if b.len() > Self::MAX_LEN || !b.len().is_multiple_of(4) {
            return Err(Error::BadLength);
        }
        let mut o = Self::EMPTY;
        o.bytes[..b.len()].copy_from_slice(b);
        o.len = b.len() as u8;
        Ok(o)
    }

    /// The option bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Number of option bytes.
    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// True when there are no options.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for OptionBytes {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl fmt::Debug for OptionBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OptionBytes")
            .field(&self.as_slice())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_display_and_kinds() {
        let m = MacAddr([0x02, 0x00, 0x5e, 0x10, 0xab, 0xcd]);
        assert_eq!(m.to_string(), "02:00:5e:10:ab:cd");
        assert!(m.is_unicast() && m.is_local() && !m.is_broadcast());
        assert!(MacAddr::BROADCAST.is_broadcast() && MacAddr::BROADCAST.is_multicast());
        assert!(MacAddr::MAC_CONTROL.is_multicast());
        assert_eq!(format!("{:?}", MacAddr::ZERO), "MacAddr(00:00:00:00:00:00)");
    }

    #[test]
    fn option_bytes() {
        assert_eq!(OptionBytes::new(&[1, 1, 1]), Err(Error::BadLength));
        assert_eq!(OptionBytes::new(&[0; 44]), Err(Error::BadLength));
        let o = OptionBytes::new(&[1, 1, 1, 0]).unwrap();
        assert_eq!(o.as_slice(), &[1, 1, 1, 0]);
        assert!(OptionBytes::default().is_empty());
    }

    /// Ethernet -> IPv4 -> TCP as the pipeline parser chains the views.
    fn parse_eth_ipv4_tcp(frame: &[u8]) -> Result<(u16, u16)> {
        let eth = EthernetFrame::new_checked(frame)?;
        if eth.ethertype() != EtherType::IPV4 {
            return Err(Error::Unsupported);
        }
        let ip = Ipv4Packet::new_checked(eth.payload())?;
        if ip.protocol() != IpProtocol::TCP {
            return Err(Error::Unsupported);
        }
        let tcp = TcpPacket::new_checked(ip.payload())?;
        Ok((tcp.src_port(), tcp.dst_port()))
    }

    fn etherparse_frame(payload_len: usize) -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(1000, 2000, 1, 1024)
            .options(&[etherparse::TcpOptionElement::MaximumSegmentSize(1460)])
            .unwrap();
        let payload = vec![7u8; payload_len];
        let mut out = Vec::with_capacity(b.size(payload_len));
        b.write(&mut out, &payload).unwrap();
        out
    }

    #[test]
    fn truncated_frame_at_every_offset_is_an_error() {
        let frame = etherparse_frame(0);
        assert_eq!(parse_eth_ipv4_tcp(&frame), Ok((1000, 2000)));
        for n in 0..frame.len() {
            assert!(parse_eth_ipv4_tcp(&frame[..n]).is_err(), "cut at {n}");
        }
    }

    proptest::proptest! {
        #[test]
        fn truncated_frame_with_payload_is_an_error(plen in 1usize..64, cut in proptest::prelude::any::<proptest::sample::Index>()) {
            let frame = etherparse_frame(plen);
            proptest::prop_assert!(parse_eth_ipv4_tcp(&frame).is_ok());
            proptest::prop_assert!(parse_eth_ipv4_tcp(&frame[..cut.index(frame.len())]).is_err());
        }
    }

    #[test]
    fn error_is_displayable() {
        assert_eq!(Error::BadIhl.to_string(), "bad IPv4 header length (IHL)");
    }
}
