//! The switch side of the fidelity monitors (docs/dataplane.md, "Fidelity monitors"): the
//! kernel's drop counters of each port's socket, and how long the workers' loops take. The
//! traffic manager measures the third, link lateness, itself ([`pipeline::tm::fidelity`]).
//!
//! The counters are read on demand (the admin socket's `show_fidelity`, the stats `pisa-switch`
//! prints when it stops), from another thread than the port's worker, through a duplicate of the
//! socket's descriptor: the worker is never asked for anything, and the socket cannot be closed
//! (nor its number reused) under a reader, because the duplicate is closed only under the same
//! lock the readers take.

use std::io;
use std::os::fd::OwnedFd;

use pipeline::metadata::PortId;

use super::PortIo;
use crate::io::packet::PacketStats;
use crate::io::xdp::XdpStats;

/// A port's kernel counters, as its socket kind has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputCounters {
    /// An AF_XDP socket's (cumulative in the kernel).
    Xdp(XdpStats),
    /// An AF_PACKET socket's, summed over every read since the switch started (the kernel
    /// resets them on each read).
    Packet(PacketStats),
    /// A shared-memory or in-memory link: no kernel socket, no counters.
    None,
}

/// The input counters of one port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputStats {
    /// The port.
    pub port: PortId,
    /// Its kind of I/O: `af_xdp`, `af_packet`, `shm` or `mem`.
    pub socket: &'static str,
    /// Its counters, or why they could not be read.
    pub counters: Result<InputCounters, String>,
}

/// What the switch keeps to read one port's counters.
#[derive(Debug)]
pub(super) struct Input {
    port: PortId,
    socket: &'static str,
    source: Source,
}

/// Where a port's counters come from.
#[derive(Debug)]
enum Source {
    /// A duplicate of an AF_XDP socket.
    Xdp(OwnedFd),
    /// A duplicate of an AF_PACKET socket, and the counters read from it so far.
    Packet(OwnedFd, PacketStats),
    /// No socket.
    None,
}

impl Input {
    /// The counters of port `port` moving frames through `io` (opened already).
    pub(super) fn new(port: PortId, io: &PortIo) -> io::Result<Input> {
        let (socket, source) = match io {
            PortIo::Xdp(x) => ("af_xdp", Source::Xdp(x.stats_fd()?)),
            PortIo::Packet(p) => (
                "af_packet",
                Source::Packet(p.stats_fd()?, PacketStats::default()),
            ),
            PortIo::Shm(_) => ("shm", Source::None),
            PortIo::Mem(_) => ("mem", Source::None),
            PortIo::XdpSpec(_) => ("af_xdp", Source::None),
        };
        Ok(Input {
            port,
            socket,
            source,
        })
    }

    /// The port.
    pub(super) fn port(&self) -> PortId {
        self.port
    }

    /// Reads the counters now (the caller holds the lock around every `Input`).
    pub(super) fn read(&mut self) -> InputStats {
        let counters = match &mut self.source {
            Source::Xdp(fd) => XdpStats::read(fd)
                .map(InputCounters::Xdp)
                .map_err(|e| e.to_string()),
            Source::Packet(fd, sum) => PacketStats::read(fd)
                .map(|d| {
                    sum.packets += d.packets;
                    sum.drops += d.drops;
                    InputCounters::Packet(*sum)
                })
                .map_err(|e| e.to_string()),
            Source::None => Ok(InputCounters::None),
        };
        InputStats {
            port: self.port,
            socket: self.socket,
            counters,
        }
    }
}
