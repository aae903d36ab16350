//! The data plane of pisa-switch: the only crate that talks to the kernel, and the only one with
//! `unsafe` code (each block carries a `// SAFETY:` comment naming its invariant).
//!
//! - [`pool`]: the packet buffers, owned through unique tokens.
//! - [`io`]: ports (AF_PACKET sockets and in-memory links; AF_XDP is next).
//! - [`tm`]: the traffic manager (queues, shaping, shared buffer, PFC).
//! - [`switch`]: worker threads, the packet path, the CPU and recirculation ports, capture, trace.
//! - [`admin`]: the text commands for entries and run-time settings.

pub mod admin;
pub mod ecn;
pub mod io;
pub mod pcap;
pub mod pktgen;
pub mod pool;
pub mod signals;
pub mod switch;
pub mod tm;
