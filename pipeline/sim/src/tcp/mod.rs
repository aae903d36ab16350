//! TCP hosts for `pisa-sim` (issue 31): a sans-IO model of a Linux TCP endpoint, close enough
//! that a switch mechanism sees the packets a Linux host would send.
//!
//! One module per concern: sequence arithmetic ([`seq`]), the segment ([`segment`]), the RTO
//! estimator ([`rtt`]), congestion control ([`cc`]: reno, cubic, dctcp), the sender's
//! scoreboard ([`scoreboard`]), the receiver ([`recv`]: reassembly, SACK, delayed ACKs, the ECN
//! echo) and the connection that ties them ([`conn`]).
//!
//! **Modelled** (with Linux's defaults): the three-way handshake with MSS, window scaling,
//! SACK-permitted and timestamps (TSval in milliseconds, PAWS on receive); FIN; an initial
//! window of 10 segments; slow start and congestion avoidance counted in segments; CUBIC with
//! HyStart; DCTCP's α and cut; ECN (RFC 3168) for reno and cubic; SACK loss recovery with
//! RACK's time-based loss detection (RFC 8985, `tcp_recovery` 1: a reordering window of none
//! until reordering is seen, then a quarter of the minimum RTT, and its timer), or with Linux's
//! threshold alone (3 SACKed segments above a hole, `Config::rack` off), the threshold raised
//! by observed reordering up to 300, and Proportional Rate Reduction; the RTO with a 200 ms floor and back-off; a tail-loss
//! probe; delayed ACKs (16 quick ACKs, then every second full segment, a 40 ms timer, at once
//! on reordering); the receiver's window and Linux's rule for taking a window update from an
//! ACK; no Nagle (the experiment's sockets set `TCP_NODELAY`).
//!
//! D-SACKs undo the reductions they show spurious and widen RACK's window (`conn/undo.rs`).
//!
//! **Not modelled**, each a known difference from Linux: undo after a timeout (F-RTO) or of a
//! partial recovery,
//! receive-buffer autotuning (the window is the whole buffer from the start), the adaptive
//! delayed-ACK timeout (fixed at its 40 ms minimum), restart after idle and application-limited
//! window validation, Linux's RTT variance estimator (`mdev_max`; plain RFC 6298 here), CUBIC's
//! time in jiffies, pacing at the kernel's own rate (a flow's `rate=` cap is modelled, in
//! `fabric/tcp.rs`), TSO/GSO (every segment is one MSS or less), a FIN riding on the last
//! data segment, NewReno's partial ACKs without SACK (SACK is always offered), re-entering
//! quick-ACK mode when Not-ECT follows ECT, and the zero-window probe's one-byte segments (a
//! window that holds data back with nothing in flight sends the next segment when the RTO
//! fires). docs/sim.md, "TCP hosts", lists what is modelled in prose.

pub mod cc;
pub mod conn;
pub mod recv;
pub mod rtt;
pub mod scoreboard;
pub mod segment;
pub mod seq;
pub mod wire;

pub use cc::Kind;
pub use conn::{Config, Conn, State, Stats};
pub use segment::Segment;

#[cfg(test)]
mod tests;
