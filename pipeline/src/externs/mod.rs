//! Stateful externs: registers, counters, meters, hashes and random numbers.

mod counter;
mod hash;
mod meter;
mod random;
mod register;

pub use counter::{Counter, CounterData, CounterKind};
pub use hash::{HashAlgorithm, HashFn, hash_range};
pub use meter::{Color, MeterAlgorithm, MeterArray, MeterConfig, MeterError, MeterUnit};
pub use random::Rng;
pub use register::Register;
