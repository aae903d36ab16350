//! Packet capture files that tcpdump and Wireshark open: the classic pcap format with nanosecond
//! timestamps (magic `0xa1b23c4d`) and Ethernet link type.

use std::io::{self, Write};

/// Bytes of a frame kept in a record at most.
pub const SNAPLEN: u32 = 65_535;

/// Writes frames to a pcap stream.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header and returns the writer.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes()); // nanosecond timestamps
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay 0.
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
        out.write_all(&h)?;
        Ok(PcapWriter { out })
    }

    /// Appends one frame seen at `ts_ns` (ns since the Unix epoch, or any origin).
    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> io::Result<()> {
        let orig = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let incl = orig.min(SNAPLEN);
        let mut r = [0u8; 16];
        let secs = u32::try_from(ts_ns / 1_000_000_000).unwrap_or(u32::MAX);
        let nanos = (ts_ns % 1_000_000_000) as u32; // < 1e9 fits
        r[0..4].copy_from_slice(&secs.to_le_bytes());
        r[4..8].copy_from_slice(&nanos.to_le_bytes());
        r[8..12].copy_from_slice(&incl.to_le_bytes());
        r[12..16].copy_from_slice(&orig.to_le_bytes());
        self.out.write_all(&r)?;
        self.out.write_all(&frame[..incl as usize])
    }

    /// Flushes buffered records to the stream.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and returns the underlying stream.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_record_layout() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write(3_000_000_007, &[1, 2, 3]).unwrap();
        let b = w.into_inner().unwrap();
        assert_eq!(b.len(), 24 + 16 + 3);
        assert_eq!(&b[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(b[24..28].try_into().unwrap()), 3);
        assert_eq!(u32::from_le_bytes(b[28..32].try_into().unwrap()), 7);
        assert_eq!(u32::from_le_bytes(b[32..36].try_into().unwrap()), 3);
        assert_eq!(&b[40..], &[1, 2, 3]);
    }
}
