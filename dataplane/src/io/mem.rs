//! In-memory ports: a switch port whose other end is a [`MemLink`] held by a test (or a
//! generator). Frames cross as owned byte vectors through channels; an eventfd wakes a sleeping
//! worker when a frame arrives, so workers poll in-memory ports like sockets.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crossbeam::channel::{Receiver, Sender, unbounded};

use super::{CopyIn, Frame, copy_in};
use crate::pool::{LocalCache, Pool};

/// The switch's side of an in-memory port.
#[derive(Debug)]
pub struct MemPort {
    rx: Receiver<Vec<u8>>,
    tx: Sender<Vec<u8>>,
    event: std::sync::Arc<OwnedFd>,
}

/// The test's side: send frames into the switch port, receive what it transmits.
#[derive(Debug, Clone)]
pub struct MemLink {
    tx: Sender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
    event: std::sync::Arc<OwnedFd>,
}

/// A connected port and link.
pub fn pair() -> io::Result<(MemPort, MemLink)> {
    // SAFETY: plain syscall; the result is checked before use.
    let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else.
    let event = std::sync::Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
    let (to_switch, from_link) = unbounded();
    let (to_link, from_switch) = unbounded();
    Ok((
        MemPort {
            rx: from_link,
            tx: to_link,
            event: event.clone(),
        },
        MemLink {
            tx: to_switch,
            rx: from_switch,
            event,
        },
    ))
}

fn signal(fd: &OwnedFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live array to an eventfd; a failure (counter overflow) only
    // means the worker is already due to wake.
    let _ = unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
}

fn drain(fd: &OwnedFd) {
    let mut b = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a live array; EAGAIN when nothing is pending is fine.
    let _ = unsafe { libc::read(fd.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
}

impl MemLink {
    /// Sends a frame into the switch port.
    pub fn send(&self, frame: &[u8]) {
        if self.tx.send(frame.to_vec()).is_ok() {
            signal(&self.event);
        }
    }

    /// The next frame the switch sent on this port, waiting up to `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Vec<u8>> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// Every frame sent so far, without waiting.
    pub fn drain(&self) -> Vec<Vec<u8>> {
        self.rx.try_iter().collect()
    }
}

impl MemPort {
    /// The descriptor that becomes readable when frames wait.
    pub fn fd(&self) -> RawFd {
        self.event.as_raw_fd()
    }

    /// Moves up to `max` waiting frames into pool buffers; frames larger than a buffer are
    /// dropped and counted in the second number.
    pub fn recv(
        &mut self,
        pool: &Pool,
        cache: &mut LocalCache,
        out: &mut Vec<Frame>,
        max: usize,
    ) -> (usize, usize) {
        drain(&self.event);
        let (mut got, mut oversize) = (0, 0);
        while got < max {
            let Ok(bytes) = self.rx.try_recv() else { break };
            match copy_in(pool, cache, &bytes) {
                Ok(f) => {
                    out.push(f);
                    got += 1;
                }
                Err(CopyIn::TooLong) => oversize += 1,
                Err(CopyIn::NoBuffer) => break,
            }
        }
        if !self.rx.is_empty() {
            signal(&self.event);
        }
        (got, oversize)
    }

    /// Transmits a frame to the link; its buffer goes back to `cache`.
    pub fn send(&mut self, pool: &Pool, cache: &mut LocalCache, f: Frame) {
        let bytes = pool.bytes(&f.buf)[f.start..f.start + f.len].to_vec();
        cache.free(pool, f.buf);
        let _ = self.tx.send(bytes);
    }
}
