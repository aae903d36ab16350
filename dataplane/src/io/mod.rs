//! Port I/O: AF_XDP and AF_PACKET sockets, shared-memory links between switch processes, and
//! in-memory ports for tests.
//!
//! Every backend moves frames between the kernel (or a test) and [`crate::pool::Pool`] buffers in
//! batches: receive fills buffers the worker owns, transmit takes them. A frame is a buffer plus
//! the start and length of the frame inside it.

pub mod mem;
pub mod packet;
pub mod shm;
pub mod xdp;

use crate::pool::{Buf, HEADROOM, LocalCache, Pool};

/// A frame in a pool buffer: `bytes[start..start + len]`.
pub type Frame = pipeline::driver::Pkt<Buf>;

/// Largest batch a port moves per call.
pub const BATCH: usize = 32;

/// Why [`copy_in`] made no frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CopyIn {
    /// Longer than a buffer carries after its headroom.
    TooLong,
    /// The pool has no free buffer.
    NoBuffer,
}

/// Copies `bytes` into a fresh pool buffer after its headroom: how a frame that is not already
/// in the pool (an in-memory or shared-memory link, a packet-out) enters it.
pub(crate) fn copy_in(pool: &Pool, cache: &mut LocalCache, bytes: &[u8]) -> Result<Frame, CopyIn> {
    let len = bytes.len();
    if len > pool.buf_size() - HEADROOM {
        return Err(CopyIn::TooLong);
    }
    let mut b = cache.alloc(pool).ok_or(CopyIn::NoBuffer)?;
    pool.bytes_mut(&mut b)[HEADROOM..HEADROOM + len].copy_from_slice(bytes);
    Ok(Frame {
        buf: b,
        start: HEADROOM,
        len,
    })
}
