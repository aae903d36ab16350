//! The sans-IO core of pisa-switch.
//!
//! Nothing in this crate performs I/O, spawns threads, reads a clock or calls `unsafe` code: time,
//! ports, queue state and randomness arrive as arguments. That makes every program testable
//! byte-for-byte without a kernel, and lets `dataplane` own all of the system interaction.
#![forbid(unsafe_code)]

pub mod externs;
pub mod table;
pub mod wire;
