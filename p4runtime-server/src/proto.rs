//! The P4Runtime types and gRPC service, generated at build time from the published protos.
#![allow(missing_docs, reason = "generated code")]
#![allow(
    missing_debug_implementations,
    unreachable_pub,
    reason = "generated code"
)]
#![allow(clippy::all, clippy::pedantic, reason = "generated code")]
#![allow(
    clippy::allow_attributes_without_reason,
    reason = "the generated code carries its own allows"
)]

/// `p4.v1`: the P4Runtime service and its messages.
pub mod p4 {
    pub mod v1 {
        tonic::include_proto!("p4.v1");
    }
    /// `p4.config.v1`: the P4Info.
    pub mod config {
        pub mod v1 {
            tonic::include_proto!("p4.config.v1");
        }
    }
}

/// `google.rpc`: Status and canonical codes.
pub mod google {
    pub mod rpc {
        tonic::include_proto!("google.rpc");
    }
}
