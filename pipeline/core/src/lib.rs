//! The engine of pisa-switch: wire formats, standard metadata, tables, externs, the PRE, the
//! traffic manager, the one packet driver, the control API with snapshot publication, and the
//! [`program::Program`] and [`agent::Agent`] traits that programs implement.
//!
//! Nothing in this crate performs I/O, spawns threads, reads a clock or calls `unsafe` code: time,
//! ports, queue state and randomness arrive as arguments (`scripts/check-engine.sh` checks it in
//! CI). That makes every program testable byte-for-byte without a kernel, and lets `dataplane` own
//! all of the system interaction. It knows no program: those are in the `programs` crate.
#![forbid(unsafe_code)]

pub mod agent;
pub mod commands;
pub mod control;
pub mod digest;
pub mod driver;
pub mod ecn;
pub mod externs;
pub mod frame;
pub mod hist;
pub mod metadata;
pub mod p4info;
pub mod pktgen;
pub mod pre;
pub mod program;
pub mod resources;
pub mod runtime;
pub mod schema;
pub mod state;
pub mod table;
pub mod tm;
pub mod wire;
