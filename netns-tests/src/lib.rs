//! Helpers for tests in network namespaces: namespaces and veth pairs that remove themselves.
//!
//! Every name is unique per process and call (`pst<pid>x<n>...`), so concurrent test runs do not
//! collide, and every object is deleted when its guard drops, also when a test panics. Traffic only
//! flows between the namespaces a test made. Needs root and iproute2.
#![forbid(unsafe_code)]

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// A command that failed.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// It could not start.
    #[error("{cmd}: {source}")]
    Spawn {
        /// The command line.
        cmd: String,
        /// Why.
        source: std::io::Error,
    },
    /// It exited non-zero.
    #[error("{cmd}: exit {code:?}: {stderr}")]
    Failed {
        /// The command line.
        cmd: String,
        /// Exit code.
        code: Option<i32>,
        /// What it printed on stderr.
        stderr: String,
    },
}

/// Runs `prog args` and returns its output, or an error naming the command.
pub fn run(prog: &str, args: &[&str]) -> Result<Output, NetError> {
    let cmd = format!("{prog} {}", args.join(" "));
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|source| NetError::Spawn {
            cmd: cmd.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(NetError::Failed {
            cmd,
            code: out.status.code(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(out)
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A short name unique to this process and call, usable for namespaces and (<= 15 bytes)
/// interfaces.
pub fn unique_name(tag: &str) -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id() % 100_000;
    format!("pst{pid}x{n}{}", &tag[..tag.len().min(2)])
}

/// A network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a namespace with a unique name and brings its loopback up.
    pub fn new(tag: &str) -> Result<Self, NetError> {
        let ns = Netns {
            name: unique_name(tag),
        };
        run("ip", &["netns", "add", &ns.name])?;
        ns.exec("ip", &["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs a command inside the namespace.
    pub fn exec(&self, prog: &str, args: &[&str]) -> Result<Output, NetError> {
        let mut full = vec!["netns", "exec", &self.name, prog];
        full.extend_from_slice(args);
        run("ip", &full)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace also deletes the veth ends inside it.
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// Connects `a` and `b` with a veth pair named `a_if` / `b_if` inside them, both up; returns the
/// two interface names.
pub fn veth(a: &Netns, b: &Netns) -> Result<(String, String), NetError> {
    let (x, y) = (unique_name("va"), unique_name("vb"));
    run(
        "ip",
        &[
            "link",
            "add",
            &x,
            "netns",
            a.name(),
            "type",
            "veth",
            "peer",
            "name",
            &y,
            "netns",
            b.name(),
        ],
    )?;
    a.exec("ip", &["link", "set", &x, "up"])?;
    b.exec("ip", &["link", "set", &y, "up"])?;
    Ok((x, y))
}

/// Whether a namespace named `name` exists.
pub fn netns_exists(name: &str) -> bool {
    run("ip", &["netns", "list"])
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .any(|w| w == name)
        })
        .unwrap_or(false)
}
