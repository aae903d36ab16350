//! What the switches' programs, `pisa-sim`'s hosts and the real host tools (`pisa-host`,
//! `pisa-traffic`) share about the hosts: QCN's reaction point ([`qcn`]), HPCC's window controller
//! and INT hop record ([`hpcc`]), the measurement stamp every test packet carries ([`stamp`]), and
//! the report JSON ([`json`]). A format both sides read lives here, below both.
#![forbid(unsafe_code)]

pub mod hpcc;
pub mod json;
pub mod qcn;
pub mod stamp;
