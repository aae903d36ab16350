//! AF_PACKET ports: a raw socket bound to one interface, moved in batches with recvmmsg/sendmmsg
//! straight into and out of pool buffers (the kernel's copy is the only one).
//!
//! The socket ignores its own outgoing frames (PACKET_IGNORE_OUTGOING) and puts the interface in
//! promiscuous mode, as a switch port must. 802.1Q tags, which the kernel moves out of a frame
//! before packet sockets see it, are put back from PACKET_AUXDATA.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::{BATCH, Frame};
use crate::pool::{HEADROOM, LocalCache, Pool};

/// u64 words of control-message space per received frame (room for one tpacket_auxdata).
const CONTROL_WORDS: usize = 8;

/// The 802.1Q tag the kernel took out of a received frame (it moves tags to metadata before
/// packet sockets see the frame), from the frame's PACKET_AUXDATA: (TPID, TCI).
fn vlan_of(hdr: &libc::msghdr) -> Option<(u16, u16)> {
    // SAFETY: `hdr` is a msghdr filled by recvmmsg whose control buffer (msg_control,
    // msg_controllen) is alive; the CMSG macros stay inside it.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(hdr) };
    while !cmsg.is_null() {
        // SAFETY: `cmsg` is a non-null header inside the control buffer (see above).
        let c = unsafe { &*cmsg };
        if c.cmsg_level == libc::SOL_PACKET && c.cmsg_type == PACKET_AUXDATA {
            // SAFETY: a PACKET_AUXDATA message carries a tpacket_auxdata; read it unaligned.
            let aux: libc::tpacket_auxdata =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            if aux.tp_status & TP_STATUS_VLAN_VALID == 0 {
                return None;
            }
            let tpid = if aux.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 {
                aux.tp_vlan_tpid
            } else {
                0x8100
            };
            return Some((tpid, aux.tp_vlan_tci));
        }
        // SAFETY: as above; returns null after the last header.
        cmsg = unsafe { libc::CMSG_NXTHDR(hdr, cmsg) };
    }
    None
}

/// Puts a tag back after the MAC addresses, using 4 bytes of headroom.
fn restore_vlan(pool: &Pool, f: &mut Frame, tpid: u16, tci: u16) {
    if f.start < 4 || f.len < 12 {
        return;
    }
    let bytes = pool.bytes_mut(&mut f.buf);
    bytes.copy_within(f.start..f.start + 12, f.start - 4);
    f.start -= 4;
    f.len += 4;
    bytes[f.start + 12..f.start + 14].copy_from_slice(&tpid.to_be_bytes());
    bytes[f.start + 14..f.start + 16].copy_from_slice(&tci.to_be_bytes());
}

const PACKET_AUXDATA: libc::c_int = 8;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// An AF_PACKET socket's counters since they were last read (`getsockopt(SOL_PACKET,
/// PACKET_STATISTICS)`, `struct tpacket_stats`): the kernel resets them on each read, so whoever
/// reads them accumulates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketStats {
    /// Frames that reached the socket, those it dropped included (the kernel adds them).
    pub packets: u64,
    /// Frames dropped because the socket's receive buffer was full.
    pub drops: u64,
}

impl PacketStats {
    /// Reads (and so resets) the counters of the AF_PACKET socket `fd`.
    pub fn read(fd: &impl AsRawFd) -> io::Result<PacketStats> {
        let mut b = [0u8; 8];
        let n = crate::sockopt::get_bytes(fd, libc::SOL_PACKET, PACKET_STATISTICS, &mut b)?;
        if n < 8 {
            return Err(io::Error::other("short PACKET_STATISTICS answer"));
        }
        let u32_at = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Ok(PacketStats {
            packets: u64::from(u32_at(0)),
            drops: u64::from(u32_at(4)),
        })
    }
}

const PACKET_STATISTICS: libc::c_int = 6;

/// An AF_PACKET socket on one interface.
#[derive(Debug)]
pub struct PacketPort {
    fd: OwnedFd,
    ifindex: i32,
    name: String,
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    let len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` points to a live `T` of `len` bytes for the duration of the call.
    check(unsafe { libc::setsockopt(fd, level, name, (value as *const T).cast(), len) })?;
    Ok(())
}

/// The interface index of `name`.
pub fn ifindex(name: &str) -> io::Result<i32> {
    let c =
        std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(io::Error::last_os_error());
    }
    i32::try_from(idx).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
}

impl PacketPort {
    /// Opens a non-blocking raw socket on interface `name`.
    pub fn open(name: &str) -> io::Result<Self> {
        let ifindex = ifindex(name)?;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain syscall with constant arguments; the result is checked.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::c_int::from(proto),
            )
        })?;
        // SAFETY: `raw` is a freshly created descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: all-zero is a valid `sockaddr_ll`; the fields that matter are set below.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = ifindex;
        let len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `addr` is a valid `sockaddr_ll` of `len` bytes.
        check(unsafe { libc::bind(fd.as_raw_fd(), (&raw const addr).cast(), len) })?;
        setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            23, /* PACKET_IGNORE_OUTGOING */
            &1i32,
        )?;
        // VLAN tags: the kernel strips them before packet sockets see a frame; auxdata carries
        // them so `recv` can put them back.
        setsockopt(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_AUXDATA, &1i32)?;
        // SAFETY: all-zero is a valid `packet_mreq`.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            &mreq,
        )?;
        setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &(4i32 << 20),
        )?;
        setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            &(4i32 << 20),
        )?;
        Ok(PacketPort {
            fd,
            ifindex,
            name: name.to_string(),
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface index.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// The descriptor to poll for readability.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A second descriptor of this socket, for reading its counters from another thread
    /// ([`PacketStats::read`]) while the worker owns the port.
    pub fn stats_fd(&self) -> io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// Receives up to [`BATCH`] frames into `out`; returns how many arrived and how many were
    /// too large for a buffer (dropped).
    pub fn recv(
        &mut self,
        pool: &Pool,
        cache: &mut LocalCache,
        out: &mut Vec<Frame>,
    ) -> io::Result<(usize, usize)> {
        let mut held: [Option<crate::pool::Buf>; BATCH] = std::array::from_fn(|_| None);
        // SAFETY: all-zero is a valid iovec / mmsghdr (null pointers, zero lengths).
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        // Control-message space for each frame's PACKET_AUXDATA (u64s for cmsg alignment).
        let mut control = [[0u64; CONTROL_WORDS]; BATCH];
        let room = pool.buf_size() - HEADROOM;
        let mut n = 0;
        while n < BATCH {
            let Some(mut b) = cache.alloc(pool) else {
                break;
            };
            let bytes = pool.bytes_mut(&mut b);
            iov[n].iov_base = bytes[HEADROOM..].as_mut_ptr().cast();
            iov[n].iov_len = room;
            msgs[n].msg_hdr.msg_iov = &raw mut iov[n];
            msgs[n].msg_hdr.msg_iovlen = 1;
            msgs[n].msg_hdr.msg_control = control[n].as_mut_ptr().cast();
            msgs[n].msg_hdr.msg_controllen = std::mem::size_of_val(&control[n]);
            held[n] = Some(b);
            n += 1;
        }
        if n == 0 {
            return Ok((0, 0));
        }
        // SAFETY: `msgs[..n]` point at `iov[..n]`, which point at `room` writable bytes of
        // buffers this function owns (`held`) and keeps alive across the call.
        let got = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let got = if got < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock && e.kind() != io::ErrorKind::Interrupted {
                held.iter_mut()
                    .flat_map(Option::take)
                    .for_each(|b| cache.free(pool, b));
                return Err(e);
            }
            0
        } else {
            got as usize
        };
        let mut oversize = 0;
        for (i, slot) in held.iter_mut().enumerate().take(n) {
            let Some(b) = slot.take() else { continue };
            let len = msgs[i].msg_len as usize;
            if i >= got {
                cache.free(pool, b);
            } else if msgs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || len > room {
                oversize += 1;
                cache.free(pool, b);
            } else {
                let mut f = Frame {
                    buf: b,
                    start: HEADROOM,
                    len,
                };
                if let Some((tpid, tci)) = vlan_of(&msgs[i].msg_hdr) {
                    restore_vlan(pool, &mut f, tpid, tci);
                }
                out.push(f);
            }
        }
        Ok((got - oversize, oversize))
    }

    /// Sends frames from the front of `frames`; returns how many the kernel took (the rest stay,
    /// for a later try). Sent buffers go back to `cache`.
    pub fn send(
        &mut self,
        pool: &Pool,
        cache: &mut LocalCache,
        frames: &mut std::collections::VecDeque<Frame>,
    ) -> io::Result<usize> {
        let n = frames.len().min(BATCH);
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: all-zero is a valid iovec / mmsghdr.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (i, f) in frames.iter().take(n).enumerate() {
            let bytes = pool.bytes(&f.buf);
            let end = (f.start + f.len).min(bytes.len());
            let data = &bytes[f.start.min(end)..end];
            iov[i].iov_base = data.as_ptr().cast_mut().cast();
            iov[i].iov_len = data.len();
            msgs[i].msg_hdr.msg_iov = &raw mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `msgs[..n]` point at `iov[..n]`, which point into buffers owned by `frames`,
        // alive and unmodified across the call (the kernel only reads them).
        let sent = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        let sent = if sent < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            // Drop the frame that failed (e.g. too large for the MTU) so the queue moves on.
            if let Some(f) = frames.pop_front() {
                cache.free(pool, f.buf);
            }
            return Err(e);
        } else {
            sent as usize
        };
        for f in frames.drain(..sent) {
            cache.free(pool, f.buf);
        }
        Ok(sent)
    }
}
