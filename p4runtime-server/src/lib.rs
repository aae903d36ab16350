//! The P4Runtime side of pisa-switch: the service (tonic/prost), a client library, the
//! `pisa-switch` binary and the `pisa-ctl` controller command.
#![forbid(unsafe_code)]

pub mod arbitration;
pub mod bytestring;
pub mod client;
pub mod convert;
pub mod p4info;
pub mod proto;
pub mod server;
pub mod thrift;
