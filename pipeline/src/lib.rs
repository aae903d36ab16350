//! The sans-IO core of pisa-switch.
//!
//! Nothing in this crate performs I/O, spawns threads, reads a clock or calls `unsafe` code: time,
//! ports, queue state and randomness arrive as arguments. That makes every program testable
//! byte-for-byte without a kernel, and lets `dataplane` own all of the system interaction.
#![forbid(unsafe_code)]

pub mod agent;
pub mod commands;
pub mod control;
pub mod dbb;
pub mod digest;
pub mod driver;
pub mod ecn;
pub mod externs;
pub mod fabric;
pub mod frame;
pub mod hpcc;
pub mod metadata;
pub mod p4info;
pub mod pint;
pub mod pktgen;
pub mod pre;
pub mod program;
pub mod qcn;
pub mod resources;
pub mod runtime;
pub mod schema;
pub mod sim;
pub mod state;
pub mod table;
pub mod tm;
pub mod traffic;
pub mod wire;
pub mod workload;
