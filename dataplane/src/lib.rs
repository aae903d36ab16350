//! The data plane of pisa-switch: the only crate that talks to the kernel.
//!
//! It owns ports (AF_XDP, AF_PACKET, in-memory), worker threads, the traffic manager, and packet
//! capture. So far it has the capture writer; the I/O and threads arrive with the data-plane work.

pub mod admin;
pub mod ecn;
pub mod io;
pub mod pcap;
pub mod pool;
pub mod signals;
pub mod switch;
pub mod tm;
