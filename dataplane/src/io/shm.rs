//! Shared-memory links: a point-to-point link between two switch processes on one machine, as a
//! pair of single-producer single-consumer rings in a file both map (`/dev/shm`), in the manner of
//! memif. A frame crosses with one copy into the ring and one out of it, in userspace: no skb, no
//! softirq, and no system call while both ends are busy.
//!
//! Why: on veth every hop of an AF_XDP copy-mode fabric costs the sender a `sendto()` that builds
//! an skb, copies the frame, and runs the receiver's generic XDP (another copy into its UMEM) and
//! its wake-up inline (docs/performance.md, "Where the CPU goes in the pisa-switch fabric"). Links
//! between two `pisa-switch` processes need none of that.
//!
//! **Layout** (one file per link, [`FILE_LEN`] bytes): a 4 KiB header page (magic, version, slot
//! count and size; then per ring the producer index, the consumer index and the consumer's
//! "sleeping" flag, each on its own cache line), then ring 0 (side A transmits, side B receives)
//! and ring 1 (the other way), each [`SLOTS`] slots of [`SLOT_SIZE`] bytes: a `u32` length and the
//! frame. Indices run freely and wrap; a slot is `index % SLOTS`.
//!
//! **Ordering**: the producer writes a slot, then publishes its index with release; the consumer
//! reads the index with acquire, copies the frames out, then releases the slots with a release
//! store of its own index.
//!
//! **Wake-ups** (need-wakeup, as AF_XDP's): a consumer about to sleep sets its ring's flag, fences,
//! and looks at the ring once more ([`ShmPort::arm`]). A producer, after publishing, fences and, if
//! the flag is set and it is the one to clear it, writes a byte to the consumer's doorbell: a FIFO
//! next to the file (`FILE.a` for side A, `FILE.b` for side B) that the consumer polls with its
//! other ports. So a busy consumer costs its producer nothing but a load.
//!
//! **Trust**: the peer is another process. Nothing it writes can make this side read or write
//! outside the mapping: slot indices are taken modulo [`SLOTS`], lengths are checked against the
//! slot, and a producer index more than [`SLOTS`] ahead is counted and skipped.
//!
//! **Creation**: both sides open the file with `O_CREAT` under an exclusive `flock`; the first
//! sizes it and writes the header, magic last. A file of another size or magic is refused.

use std::collections::VecDeque;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use super::{CopyIn, Frame, copy_in};
use crate::pool::{LocalCache, Pool};

/// Slots per ring (a power of two).
pub const SLOTS: u32 = 1024;
/// Bytes per slot: a `u32` length, 4 bytes of padding, the frame.
pub const SLOT_SIZE: usize = 2048;
/// Largest frame a slot carries.
pub const MAX_FRAME: usize = SLOT_SIZE - 8;
const HEADER: usize = 4096;
const RING_BYTES: usize = SLOTS as usize * SLOT_SIZE;
/// Size of a link file.
pub const FILE_LEN: usize = HEADER + 2 * RING_BYTES;
const MAGIC: u64 = u64::from_le_bytes(*b"PISASHM1");
const VERSION: u32 = 1;
// Header fields (offsets in bytes).
const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 8;
const OFF_SLOTS: usize = 12;
const OFF_SLOT_SIZE: usize = 16;
/// Ring r's control block: producer, consumer and sleeping flag, a cache line each.
const fn ctrl(ring: usize) -> usize {
    256 + ring * 256
}
const PROD: usize = 0;
const CONS: usize = 64;
const SLEEPING: usize = 128;

/// Which end of the link this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Transmits on ring 0, receives on ring 1; its doorbell is `FILE.a`.
    A,
    /// Transmits on ring 1, receives on ring 0; its doorbell is `FILE.b`.
    B,
}

impl Side {
    fn tx_ring(self) -> usize {
        match self {
            Side::A => 0,
            Side::B => 1,
        }
    }
    fn rx_ring(self) -> usize {
        1 - self.tx_ring()
    }
    fn suffix(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }
    fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Parses a port spec `shm:PATH:a` or `shm:PATH:b`; `None` if `s` does not start with `shm:`.
pub fn parse_spec(s: &str) -> Option<Result<(PathBuf, Side), String>> {
    let rest = s.strip_prefix("shm:")?;
    Some(match rest.rsplit_once(':') {
        Some((path, "a")) if !path.is_empty() => Ok((PathBuf::from(path), Side::A)),
        Some((path, "b")) if !path.is_empty() => Ok((PathBuf::from(path), Side::B)),
        _ => Err(format!("{s}: expected shm:PATH:a or shm:PATH:b")),
    })
}

/// The doorbell FIFO of `side` of the link in `path`.
fn doorbell_path(path: &Path, side: Side) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".");
    p.push(side.suffix());
    PathBuf::from(p)
}

/// A mapping of a whole link file.
#[derive(Debug)]
struct Mapping {
    base: NonNull<u8>,
}

// SAFETY: the mapping is plain shared memory; every access that another thread or process may
// race with goes through atomics (indices, flags) or touches slots that the ring protocol gives to
// one side at a time.
unsafe impl Send for Mapping {}

impl Mapping {
    fn new(file: &File) -> io::Result<Mapping> {
        // SAFETY: maps FILE_LEN bytes of a file the caller has sized to FILE_LEN; the result is
        // checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                FILE_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        Ok(Mapping { base })
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off.is_multiple_of(4) && off + 4 <= HEADER);
        // SAFETY: `off` is a constant offset inside the header page (checked above in debug
        // builds; every caller passes one of this module's constants), 4-aligned because the
        // mapping is page-aligned; the mapping lives as long as `self`.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU32>() }
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off.is_multiple_of(8) && off + 8 <= HEADER);
        // SAFETY: as in `u32_at`, 8-aligned.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU64>() }
    }

    /// Slot `index` of ring `ring` (the index is reduced modulo [`SLOTS`]).
    fn slot(&self, ring: usize, index: u32) -> *mut u8 {
        let off = HEADER + ring * RING_BYTES + (index % SLOTS) as usize * SLOT_SIZE;
        // SAFETY: `ring` is 0 or 1 and the slot number below SLOTS, so the slot lies inside the
        // FILE_LEN bytes mapped.
        unsafe { self.base.as_ptr().add(off) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region `new` mapped; no reference into it outlives `self`.
        unsafe { libc::munmap(self.base.as_ptr().cast(), FILE_LEN) };
    }
}

fn mkfifo(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::AlreadyExists {
            return Err(e);
        }
    }
    Ok(())
}

/// Opens a FIFO without blocking for the other end and without EOF when it goes away.
fn open_fifo(path: &Path) -> io::Result<File> {
    mkfifo(path)?;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !f.metadata()?.file_type().is_fifo() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a FIFO", path.display()),
        ));
    }
    Ok(f)
}

/// Holds an exclusive `flock` on a file until dropped.
struct Flock<'a>(&'a File);

impl<'a> Flock<'a> {
    fn new(f: &'a File) -> io::Result<Flock<'a>> {
        // SAFETY: plain system call on a descriptor `f` keeps open.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Flock(f))
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `new`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// One end of a shared-memory link.
#[derive(Debug)]
pub struct ShmPort {
    map: Mapping,
    side: Side,
    /// This side's doorbell (read when woken; polled).
    bell: File,
    /// The peer's doorbell (written to wake it).
    peer_bell: File,
}

impl ShmPort {
    /// Opens (creating it if need be) side `side` of the link in file `path`.
    pub fn open(path: &Path, side: Side) -> io::Result<ShmPort> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)?;
        let map = {
            let _lock = Flock::new(&file)?;
            let len = file.metadata()?.len();
            let fresh = len == 0;
            if fresh {
                file.set_len(FILE_LEN as u64)?;
            } else if len != FILE_LEN as u64 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: {len} bytes, not a pisa-switch link file ({FILE_LEN})",
                        path.display()
                    ),
                ));
            }
            let map = Mapping::new(&file)?;
            if fresh {
                map.u32_at(OFF_VERSION).store(VERSION, Ordering::Relaxed);
                map.u32_at(OFF_SLOTS).store(SLOTS, Ordering::Relaxed);
                map.u32_at(OFF_SLOT_SIZE)
                    .store(SLOT_SIZE as u32, Ordering::Relaxed);
                map.u64_at(OFF_MAGIC).store(MAGIC, Ordering::Release);
            } else if map.u64_at(OFF_MAGIC).load(Ordering::Acquire) != MAGIC
                || map.u32_at(OFF_VERSION).load(Ordering::Relaxed) != VERSION
                || map.u32_at(OFF_SLOTS).load(Ordering::Relaxed) != SLOTS
                || map.u32_at(OFF_SLOT_SIZE).load(Ordering::Relaxed) != SLOT_SIZE as u32
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: not a pisa-switch link file of this version",
                        path.display()
                    ),
                ));
            }
            map
        };
        Ok(ShmPort {
            bell: open_fifo(&doorbell_path(path, side))?,
            peer_bell: open_fifo(&doorbell_path(path, side.peer()))?,
            map,
            side,
        })
    }

    /// The descriptor that becomes readable when the peer rings this side's doorbell.
    pub fn fd(&self) -> RawFd {
        self.bell.as_raw_fd()
    }

    /// Frames waiting to be received.
    pub fn pending(&self) -> u32 {
        let c = ctrl(self.side.rx_ring());
        let prod = self.map.u32_at(c + PROD).load(Ordering::Acquire);
        let cons = self.map.u32_at(c + CONS).load(Ordering::Relaxed);
        prod.wrapping_sub(cons).min(SLOTS)
    }

    /// Moves up to `max` waiting frames into pool buffers. Returns (received, dropped: longer
    /// than a slot or a buffer can carry, or skipped because the peer published a producer index
    /// more than a ring ahead).
    pub fn recv(
        &mut self,
        pool: &Pool,
        cache: &mut LocalCache,
        out: &mut Vec<Frame>,
        max: usize,
    ) -> (usize, usize) {
        let ring = self.side.rx_ring();
        let c = ctrl(ring);
        let prod = self.map.u32_at(c + PROD).load(Ordering::Acquire);
        let mut cons = self.map.u32_at(c + CONS).load(Ordering::Relaxed);
        let mut avail = prod.wrapping_sub(cons);
        if avail > SLOTS {
            // Not something a correct peer publishes: skip to its index rather than read slots
            // it may be writing.
            self.map.u32_at(c + CONS).store(prod, Ordering::Release);
            return (0, avail as usize);
        }
        let (mut got, mut bad) = (0, 0);
        while avail > 0 && got < max {
            let slot = self.map.slot(ring, cons);
            let mut len_bytes = [0u8; 4];
            // SAFETY: the slot is below the producer index just acquired and above our consumer
            // index, so the peer finished writing it and will not touch it until we release it;
            // 4 bytes from its start lie inside the slot.
            unsafe { std::ptr::copy_nonoverlapping(slot, len_bytes.as_mut_ptr(), 4) };
            let len = u32::from_ne_bytes(len_bytes) as usize;
            if len > MAX_FRAME {
                bad += 1;
            } else {
                // SAFETY: as above; `len <= MAX_FRAME`, so `slot + 8 .. slot + 8 + len` lies
                // inside the slot, which nothing writes while this borrow lives.
                let frame = unsafe { std::slice::from_raw_parts(slot.add(8), len) };
                match copy_in(pool, cache, frame) {
                    Ok(f) => {
                        out.push(f);
                        got += 1;
                    }
                    Err(CopyIn::TooLong) => bad += 1,
                    Err(CopyIn::NoBuffer) => break, // leave the rest in the ring
                }
            }
            cons = cons.wrapping_add(1);
            avail -= 1;
        }
        self.map.u32_at(c + CONS).store(cons, Ordering::Release);
        (got, bad)
    }

    /// Sends frames from the front of `frames`, as many as the ring has room for; their buffers
    /// go back to `cache`. Returns (sent, dropped because longer than a slot carries). Wakes the
    /// peer if it sleeps.
    pub fn send(
        &mut self,
        pool: &Pool,
        cache: &mut LocalCache,
        frames: &mut VecDeque<Frame>,
    ) -> (usize, usize) {
        let ring = self.side.tx_ring();
        let c = ctrl(ring);
        let cons = self.map.u32_at(c + CONS).load(Ordering::Acquire);
        let mut prod = self.map.u32_at(c + PROD).load(Ordering::Relaxed);
        // A peer's consumer index ahead of ours, or more than a ring behind, leaves no room.
        let used = prod.wrapping_sub(cons);
        let free = SLOTS.saturating_sub(used) as usize;
        let (mut sent, mut bad) = (0, 0);
        for f in frames.drain(..frames.len().min(free)) {
            if f.len > MAX_FRAME {
                bad += 1;
            } else {
                let slot = self.map.slot(ring, prod);
                let src = &pool.bytes(&f.buf)[f.start..f.start + f.len];
                let len = (f.len as u32).to_ne_bytes();
                // SAFETY: the slot is at or above the peer's consumer index and below it plus
                // SLOTS (room checked above), so the peer does not read it until we publish it;
                // the length and `f.len <= MAX_FRAME` bytes fit inside the slot.
                unsafe {
                    std::ptr::copy_nonoverlapping(len.as_ptr(), slot, 4);
                    std::ptr::copy_nonoverlapping(src.as_ptr(), slot.add(8), f.len);
                }
                prod = prod.wrapping_add(1);
                sent += 1;
            }
            cache.free(pool, f.buf);
        }
        if sent > 0 {
            self.map.u32_at(c + PROD).store(prod, Ordering::Release);
            // Pairs with the fence in the peer's `arm`: either it sees our frames, or we see
            // its flag.
            fence(Ordering::SeqCst);
            let sleeping = self.map.u32_at(c + SLEEPING);
            if sleeping.load(Ordering::Relaxed) != 0 && sleeping.swap(0, Ordering::AcqRel) != 0 {
                // A full FIFO (EAGAIN) already holds a wake-up.
                let _ = (&self.peer_bell).write(&[1]);
            }
        }
        (sent, bad)
    }

    /// Before sleeping: asks the peer to ring the doorbell when it sends. Returns false (and
    /// withdraws the request) if frames are already waiting: then do not sleep.
    pub fn arm(&self) -> bool {
        let c = ctrl(self.side.rx_ring());
        self.map.u32_at(c + SLEEPING).store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if self.pending() > 0 {
            self.map.u32_at(c + SLEEPING).store(0, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// After sleeping: withdraws the request and, if it `rang` (the doorbell polled readable),
    /// empties the doorbell.
    pub fn disarm(&mut self, rang: bool) {
        let c = ctrl(self.side.rx_ring());
        self.map.u32_at(c + SLEEPING).store(0, Ordering::Relaxed);
        if rang {
            let mut buf = [0u8; 64];
            while matches!((&self.bell).read(&mut buf), Ok(n) if n > 0) {}
        }
    }
}

#[cfg(test)]
#[path = "shm_tests.rs"]
mod tests;
