//! Link lateness (docs/dataplane.md, "Fidelity monitors"): whether a busy port sends back to back
//! at its configured rate, as a real link does (Mininet-HiFi's invariant, Handigol et al.,
//! CoNEXT 2012).
//!
//! A *departure* is the traffic manager's dequeue of a frame: the moment the shaper lets it go,
//! at the `now_ns` its owner passed to [`super::TrafficManager::dequeue`]. What follows (egress,
//! the propagation delay, the port's TX ring, the kernel) is not in it. A departure is
//! *backlogged* when another frame was waiting in one of the port's queues as the previous one
//! left (a class that a received pause held back does not count, see below); its *ideal* time is
//! the previous departure plus the frame's own serialisation time at the port's rate (frame
//! bytes x 8 / bits/s, as the shaper counts them, or 1 / packets/s), and its *lateness* how much
//! later than that it left (0 if it left earlier, as a burst allows). The frame's own time, not
//! the previous frame's: the shaper lets a frame go once the tokens for it have come in, so a
//! departure is the end of the frame's serialisation, and a full frame after a 66-byte ACK is due
//! a full frame's time after the ACK (measured against the ACK's time, every such frame looked
//! about one full frame late at any rate, on an idle machine). A departure after
//! an idle port is not counted: nothing was waiting, so the link had no reason to be busy.
//! Neither is one after a gap in which only paused classes held frames (received PFC stopped
//! the port, as it would a real one). Unshaped ports have no rate, hence no ideal time: they are
//! not measured.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::hist::{Histogram, Snapshot};

/// Lateness in serialisation times is recorded in units of 1/`SER_SCALE` of one.
pub const SER_SCALE: u64 = 256;

/// The serialisation time, ns, of a frame of `len` bytes at a port's rate: `kind` 1 bits/s, 2
/// packets/s; 0 for an unshaped port. At least 1 ns when shaped.
#[inline]
pub(super) fn ser_ns(kind: u8, rate: u64, len: u32) -> u64 {
    match kind {
        1 if rate > 0 => (u64::from(len).saturating_mul(8_000_000_000) / rate).max(1),
        2 if rate > 0 => (1_000_000_000 / rate).max(1),
        _ => 0,
    }
}

/// A shaped port's lateness counters; its owner records, anyone reads.
#[derive(Debug, Default)]
pub(super) struct LinkMonitor {
    /// Lateness of backlogged departures, ns (its count is the number of those departures).
    ns: Histogram,
    /// The same in 1/[`SER_SCALE`] of the departing frame's serialisation time.
    ser: Histogram,
    /// Backlogged departures more than one serialisation time late.
    late: AtomicU64,
}

impl LinkMonitor {
    /// A backlogged departure `late_ns` after its ideal time, its frame taking `ser_ns`.
    #[inline]
    fn record(&self, late_ns: u64, ser_ns: u64) {
        self.ns.record(late_ns);
        let units = if late_ns == 0 {
            0
        } else {
            late_ns.saturating_mul(SER_SCALE) / ser_ns.max(1)
        };
        self.ser.record(units);
        if late_ns > ser_ns {
            let l = &self.late;
            l.store(l.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }

    pub(super) fn snapshot(&self) -> Lateness {
        let ns = self.ns.snapshot();
        Lateness {
            departures: ns.count,
            late: self.late.load(Ordering::Relaxed),
            ns,
            ser: self.ser.snapshot(),
        }
    }
}

/// The owner's record of its port's last departure.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LastDeparture {
    at: u64,
    /// Its frame's serialisation time at the rate then, ns (0: none to compare the next with).
    ser_ns: u64,
    /// Another frame was waiting when it left.
    backlogged: bool,
    /// Since it left, a dequeue found nothing it could send but frames of paused classes.
    pub(super) pause_gap: bool,
}

impl LastDeparture {
    /// A frame whose serialisation time is `ser_ns` (0: the port is unshaped now) left at `now`,
    /// with another one waiting or not; records the departure's lateness in `m` if it was
    /// backlogged.
    #[inline]
    pub(super) fn depart(&mut self, m: &LinkMonitor, ser_ns: u64, backlogged: bool, now: u64) {
        if self.backlogged && !self.pause_gap && self.ser_ns > 0 && ser_ns > 0 {
            // The shaper releases a frame once the tokens for the frame itself have come in (a
            // departure is the end of its serialisation), so a busy port's frame is due one of
            // its own serialisation times after the previous one left.
            let ideal = self.at.saturating_add(ser_ns);
            m.record(now.saturating_sub(ideal), ser_ns);
        }
        *self = LastDeparture {
            at: now,
            ser_ns,
            backlogged: backlogged && ser_ns > 0,
            pause_gap: false,
        };
    }
}

/// A shaped port's link lateness since the switch started ([`super::TrafficManager::lateness`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lateness {
    /// Backlogged departures (each measured).
    pub departures: u64,
    /// Those more than one serialisation time late.
    pub late: u64,
    /// Their lateness, ns.
    pub ns: Snapshot,
    /// Their lateness in 1/[`SER_SCALE`] of a serialisation time (see [`Lateness::in_ser`]).
    pub ser: Snapshot,
}

impl Lateness {
    /// The share of backlogged departures more than one serialisation time late (0 if none).
    pub fn late_share(&self) -> f64 {
        if self.departures == 0 {
            0.0
        } else {
            self.late as f64 / self.departures as f64
        }
    }

    /// A value of [`Lateness::ser`] in serialisation times.
    pub fn in_ser(v: u64) -> f64 {
        v as f64 / SER_SCALE as f64
    }
}
