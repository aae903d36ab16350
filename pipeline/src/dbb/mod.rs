//! DBB compiler: deterministic bandwidth-based packet-level traffic splitting (seed 001, issue 13).
//!
//! Every step of the compiler (max-flow, link ratios, SIR) must be exact, so it works on
//! [`Ratio`]s parsed from the decimal text of the bandwidths, never on floating point.

pub mod ratio;

pub use ratio::{ParseRatioError, Ratio};
