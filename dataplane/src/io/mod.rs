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

use crate::pool::Buf;

/// A frame in a pool buffer: `bytes[start..start + len]`.
pub type Frame = pipeline::driver::Pkt<Buf>;

/// Largest batch a port moves per call.
pub const BATCH: usize = 32;
