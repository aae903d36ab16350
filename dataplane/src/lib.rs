//! The data plane of pisa-switch: the only crate that talks to the kernel, and the only one with
//! `unsafe` code (each block carries a `// SAFETY:` comment naming its invariant).
//!
//! - [`pool`]: the packet buffers, owned through unique tokens.
//! - [`io`]: ports (AF_PACKET sockets and in-memory links; AF_XDP is next).
//! - [`switch`]: worker threads running the packet path of [`pipeline::driver`] on real ports,
//!   the CPU port, capture, trace.
//! - [`admin`]: the text commands for entries and run-time settings.
//! - [`agent`]: the thread that runs a program's switch-local agent.
//! - [`sockopt`]: the TCP socket options and `TCP_INFO` of the host traffic tool.

pub mod admin;
pub mod agent;
pub mod io;
pub mod pcap;
pub mod pktgen;
pub mod pool;
pub mod signals;
pub mod sockopt;
pub mod switch;

/// The traffic manager lives in the sans-IO core, on the one packet path.
pub use pipeline::tm;
