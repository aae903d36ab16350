//! Stateful externs: registers, counters, meters, hashes and random numbers.

mod counter;
mod random;
mod register;

pub use counter::{Counter, CounterData, CounterKind};
pub use random::Rng;
pub use register::Register;
