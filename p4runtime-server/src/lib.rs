//! The P4Runtime side of pisa-switch: the service (tonic/prost), a client library and the
//! `pisa-switch` binary. So far it holds the P4Runtime bytestring rules that the service and the
//! client share.
#![forbid(unsafe_code)]

pub mod bytestring;
pub mod p4info;
pub mod proto;
