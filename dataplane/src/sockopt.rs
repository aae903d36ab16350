//! Socket options of the host traffic tool (`pisa-traffic`) that neither std nor socket2 offers
//! without extra features: the congestion control, the MSS, the pacing cap, and `TCP_INFO`. Two
//! `unsafe` calls (setsockopt and getsockopt on byte buffers); everything typed is safe code on top.

use std::io;
use std::os::fd::AsRawFd;

/// setsockopt(fd, level, name, value).
pub fn set_bytes(fd: &impl AsRawFd, level: i32, name: i32, value: &[u8]) -> io::Result<()> {
    let len = libc::socklen_t::try_from(value.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "option too long"))?;
    // SAFETY: `value` is a live buffer of `len` bytes that the kernel only reads; the descriptor
    // is borrowed from a live owner for the call.
    let r = unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, value.as_ptr().cast(), len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// getsockopt(fd, level, name) into `buf`; returns how many bytes the kernel wrote.
pub fn get_bytes(fd: &impl AsRawFd, level: i32, name: i32, buf: &mut [u8]) -> io::Result<usize> {
    let mut len = libc::socklen_t::try_from(buf.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "buffer too long"))?;
    // SAFETY: `buf` is a live, writable buffer of `len` bytes and `len` a live socklen_t; the
    // kernel writes at most `len` bytes and stores the written length back in `len`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((len as usize).min(buf.len()))
}

/// Sets the TCP congestion control (`TCP_CONGESTION`), e.g. `cubic`, `reno`, `bbr`.
pub fn set_congestion(fd: &impl AsRawFd, name: &str) -> io::Result<()> {
    set_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes())
}

/// The socket's TCP congestion control.
pub fn congestion(fd: &impl AsRawFd) -> io::Result<String> {
    let mut b = [0u8; 16];
    let n = get_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, &mut b)?;
    let s = &b[..n];
    let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
    Ok(String::from_utf8_lossy(&s[..end]).into_owned())
}

/// Caps the segments the socket sends (`TCP_MAXSEG`); set it before connecting.
pub fn set_mss(fd: &impl AsRawFd, mss: u32) -> io::Result<()> {
    set_bytes(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_MAXSEG,
        &(mss as libc::c_int).to_ne_bytes(),
    )
}

/// Caps the socket's pacing rate (`SO_MAX_PACING_RATE`), bytes per second. TCP paces by itself
/// when the qdisc is not fq.
pub fn set_max_pacing_rate(fd: &impl AsRawFd, bytes_per_sec: u64) -> io::Result<()> {
    set_bytes(
        fd,
        libc::SOL_SOCKET,
        libc::SO_MAX_PACING_RATE,
        &bytes_per_sec.to_ne_bytes(),
    )
}

/// The fields of the kernel's `struct tcp_info` (uapi `linux/tcp.h`) the toolkit reports. Fields
/// past what the kernel returned (an older kernel) read 0; `len` says how much it returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Bytes of `struct tcp_info` the kernel returned.
    pub len: usize,
    /// Options negotiated (`tcpi_options`: `TCPI_OPT_ECN` 8 when ECN was agreed on,
    /// `TCPI_OPT_ECN_SEEN` 16 when an ECT segment arrived).
    pub options: u8,
    /// Sender MSS (`tcpi_snd_mss`).
    pub snd_mss: u32,
    /// Smoothed RTT, µs (`tcpi_rtt`).
    pub rtt_us: u32,
    /// Slow-start threshold, segments (`tcpi_snd_ssthresh`).
    pub snd_ssthresh: u32,
    /// Congestion window, segments (`tcpi_snd_cwnd`).
    pub snd_cwnd: u32,
    /// The reordering degree TCP assumes now (`tcpi_reordering`, 3 unless reordering was seen).
    pub reordering: u32,
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub total_retrans: u32,
    /// Bytes the peer acknowledged (`tcpi_bytes_acked`; the SYN counts as one).
    pub bytes_acked: u64,
    /// Bytes received (`tcpi_bytes_received`).
    pub bytes_received: u64,
    /// Data segments received (`tcpi_data_segs_in`).
    pub data_segs_in: u32,
    /// Data segments sent (`tcpi_data_segs_out`).
    pub data_segs_out: u32,
    /// Packets delivered with CE marks (`tcpi_delivered_ce`: ECE-echoed, when ECN is on).
    pub delivered_ce: u32,
    /// Duplicate segments the peer reported by DSACK (`tcpi_dsack_dups`).
    pub dsack_dups: u32,
    /// Reordering events the sender detected (`tcpi_reord_seen`).
    pub reord_seen: u32,
    /// Out-of-order packets received (`tcpi_rcv_ooopack`); each makes the receiver send an
    /// immediate duplicate ACK.
    pub rcv_ooopack: u32,
}

/// Byte offsets in `struct tcp_info` (x86-64 and every Linux ABI: naturally aligned fields).
mod off {
    pub(super) const OPTIONS: usize = 5;
    pub(super) const SND_SSTHRESH: usize = 76;
    pub(super) const SND_CWND: usize = 80;
    pub(super) const SND_MSS: usize = 16;
    pub(super) const REORDERING: usize = 88;
    pub(super) const RTT: usize = 68;
    pub(super) const TOTAL_RETRANS: usize = 100;
    pub(super) const BYTES_ACKED: usize = 120;
    pub(super) const BYTES_RECEIVED: usize = 128;
    pub(super) const DATA_SEGS_IN: usize = 152;
    pub(super) const DATA_SEGS_OUT: usize = 156;
    pub(super) const DELIVERED_CE: usize = 196;
    pub(super) const DSACK_DUPS: usize = 216;
    pub(super) const REORD_SEEN: usize = 220;
    pub(super) const RCV_OOOPACK: usize = 224;
}

impl TcpInfo {
    /// Decodes the first `len` bytes of a `struct tcp_info`.
    pub fn parse(b: &[u8]) -> TcpInfo {
        let u32_at = |o: usize| {
            b.get(o..o + 4)
                .map_or(0, |s| u32::from_ne_bytes(s.try_into().unwrap_or_default()))
        };
        let u64_at = |o: usize| {
            b.get(o..o + 8)
                .map_or(0, |s| u64::from_ne_bytes(s.try_into().unwrap_or_default()))
        };
        TcpInfo {
            len: b.len(),
            options: b.get(off::OPTIONS).copied().unwrap_or(0),
            snd_ssthresh: u32_at(off::SND_SSTHRESH),
            snd_cwnd: u32_at(off::SND_CWND),
            snd_mss: u32_at(off::SND_MSS),
            rtt_us: u32_at(off::RTT),
            reordering: u32_at(off::REORDERING),
            total_retrans: u32_at(off::TOTAL_RETRANS),
            bytes_acked: u64_at(off::BYTES_ACKED),
            bytes_received: u64_at(off::BYTES_RECEIVED),
            data_segs_in: u32_at(off::DATA_SEGS_IN),
            data_segs_out: u32_at(off::DATA_SEGS_OUT),
            delivered_ce: u32_at(off::DELIVERED_CE),
            dsack_dups: u32_at(off::DSACK_DUPS),
            reord_seen: u32_at(off::REORD_SEEN),
            rcv_ooopack: u32_at(off::RCV_OOOPACK),
        }
    }
}

/// `tcpi_options`: ECN was negotiated.
pub const TCPI_OPT_ECN: u8 = 8;
/// `tcpi_options`: an ECT segment arrived.
pub const TCPI_OPT_ECN_SEEN: u8 = 16;

/// The socket's `TCP_INFO`.
pub fn tcp_info(fd: &impl AsRawFd) -> io::Result<TcpInfo> {
    let mut b = [0u8; 512];
    let n = get_bytes(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut b)?;
    Ok(TcpInfo::parse(&b[..n]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn tcp_info_and_options_on_a_loopback_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        set_congestion(&c, "reno").unwrap();
        assert_eq!(congestion(&c).unwrap(), "reno");
        assert!(set_congestion(&c, "no-such-cc").is_err());
        set_max_pacing_rate(&c, 10_000_000).unwrap();
        c.write_all(&[7u8; 100_000]).unwrap();
        let mut buf = vec![0u8; 100_000];
        s.read_exact(&mut buf).unwrap();
        let rx = tcp_info(&s).unwrap();
        assert_eq!(rx.bytes_received, 100_000);
        assert!(
            rx.len >= off::RCV_OOOPACK + 4,
            "kernel gave {} bytes",
            rx.len
        );
        assert_eq!(rx.rcv_ooopack, 0);
        // The sender's count of acknowledged bytes reaches what was sent.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let tx = loop {
            let tx = tcp_info(&c).unwrap();
            if tx.bytes_acked > 100_000 || std::time::Instant::now() > deadline {
                break tx;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        // The kernel counts the SYN's sequence number as one acknowledged byte.
        assert_eq!(tx.bytes_acked, 100_001);
        assert!(tx.data_segs_out >= 2 && tx.snd_mss > 0);
        assert_eq!(tx.reordering, 3, "no reordering on loopback");
        // Reno starts at 10 segments (RFC 6928) and only grows on a loss-free loopback.
        assert!(tx.snd_cwnd >= 10, "{tx:?}");
        assert!(tx.snd_ssthresh >= tx.snd_cwnd, "{tx:?}");
        // A short buffer decodes the fields it holds and zeroes the rest.
        let short = TcpInfo::parse(&[1u8; 104]);
        assert_eq!(short.total_retrans, 0x0101_0101);
        assert_eq!((short.options, short.snd_cwnd), (1, 0x0101_0101));
        assert_eq!(short.rcv_ooopack, 0);
    }
}
