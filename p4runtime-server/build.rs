//! Generates the P4Runtime types and the tonic service from the protos that
//! `scripts/fetch-protos.sh` puts in `proto/` (taken from a published package; none is kept in the
//! tree). protoc comes from the `protoc-bin-vendored` crate.

use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "p4/v1/p4runtime.proto",
    "p4/v1/p4data.proto",
    "p4/config/v1/p4info.proto",
    "p4/config/v1/p4types.proto",
    "google/rpc/status.proto",
    "google/rpc/code.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("proto");
    println!("cargo:rerun-if-changed={}", dir.display());
    for p in PROTOS {
        if !dir.join(p).exists() {
            return Err(format!(
                "{} is missing: run `bash scripts/fetch-protos.sh` (scripts/setup.sh does) to get \
                 the P4Runtime protos from their published package",
                dir.join(p).display()
            )
            .into());
        }
    }
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    let includes = [dir.clone(), protoc_bin_vendored::include_path()?];
    let protos: Vec<PathBuf> = PROTOS.iter().map(|p| dir.join(p)).collect();
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_with_config(config, &protos, &includes)?;
    Ok(())
}
