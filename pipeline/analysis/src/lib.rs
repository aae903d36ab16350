//! The analysis tools of pisa-switch, offline and sans-IO: the DBB compiler ([`dbb`]), which turns
//! a fabric's links into DBB's packet dispatching cycles, and PINT ([`pint`]): the per-hop
//! encoders the `pint` program runs, and the collector that decodes what the sinks export. The
//! binaries `pisa-dbb` and `pisa-pint` run them from the command line.
#![forbid(unsafe_code)]

pub mod dbb;
pub mod pint;
