//! Compiles the crate's BPF program (`bpf/dctcp.bpf.c`) with clang into `OUT_DIR`, for
//! `include_bytes!`. The libbpf headers (`bpf_helpers.h`, `bpf_tracing.h`, `bpf_core_read.h`)
//! are those of the libbpf that libbpf-sys builds (`DEP_BPF_INCLUDE`), so the program and its
//! loader agree on libbpf's version.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let include = std::env::var("DEP_BPF_INCLUDE").expect("DEP_BPF_INCLUDE from libbpf-sys");
    println!("cargo:rerun-if-env-changed=CLANG");
    compile("dctcp", &include, &out);
}

/// Compiles `bpf/NAME.bpf.c` to `OUT/NAME.bpf.o`.
fn compile(name: &str, include: &str, out: &Path) {
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok("riscv64") => "riscv",
        Ok("s390x") => "s390",
        Ok("powerpc64") => "powerpc",
        Ok(other) => panic!("no BPF target arch for {other}"),
        Err(e) => panic!("CARGO_CFG_TARGET_ARCH: {e}"),
    };
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let src = format!("bpf/{name}.bpf.c");
    println!("cargo:rerun-if-changed={src}");
    let obj = out.join(format!("{name}.bpf.o"));
    let mut cmd = Command::new(&clang);
    cmd.args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"])
        .arg(format!("-D__TARGET_ARCH_{arch}"))
        .arg(format!("-I{include}"));
    // Debian and Ubuntu keep asm/types.h (wanted by linux/types.h) in the multiarch directory,
    // which clang does not search for the bpf target.
    if let Some(dir) = multiarch_include() {
        cmd.arg(format!("-I{}", dir.display()));
    }
    cmd.arg("-c").arg(&src).arg("-o").arg(&obj);
    let status = cmd.status().unwrap_or_else(|e| {
        panic!("running {clang} for {src}: {e} (scripts/setup.sh installs clang)")
    });
    assert!(status.success(), "{clang} failed on {src}: {status}");
}

/// The multiarch header directory of the target (`/usr/include/x86_64-linux-gnu`), if any.
fn multiarch_include() -> Option<PathBuf> {
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").ok()?;
    let dir = PathBuf::from("/usr/include").join(format!("{arch}-linux-gnu"));
    dir.join("asm").is_dir().then_some(dir)
}
