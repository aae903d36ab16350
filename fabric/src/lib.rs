//! The fabric library of pisa-switch: fabrics of switch processes in network namespaces
//! ([`fabric`]: bring-up, programming by each program's fabric plan over P4Runtime, teardown; the
//! `pisa-fabric` tool), the host traffic tool ([`traffic`]: `pisa-traffic serve` and `client`), the experiment runner
//! ([`experiment`]: `pisa-fabric experiment`), and the namespace helpers they stand on (namespaces and veth pairs that
//! remove themselves, processes, workspace binaries). The tests that use it live in
//! `netns-tests/`; the benchmarks in `bench/` use it too.
//!
//! Every name is unique per process and call (`pst<pid>x<n>...`), so concurrent test runs do not
//! collide, and every object is deleted when its guard drops, also when a test panics. Traffic only
//! flows between the namespaces a test made. Needs root and iproute2.
#![forbid(unsafe_code)]

pub mod dctcp;
pub mod experiment;
pub mod fabric;
pub mod host;
pub mod sweep;
pub mod traffic;

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

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
    /// What it waited for did not happen in time.
    #[error("{what}: not within {seconds:.1} s")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long, seconds.
        seconds: f64,
    },
    /// Its log file could not be created.
    #[error("{cmd}: creating its log {}: {source}", path.display())]
    Log {
        /// The command line.
        cmd: String,
        /// The log file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// For callers whose errors are still text: a `NetError`'s text names the command line, and with
/// it the namespace and the files it works on.
impl From<NetError> for String {
    fn from(e: NetError) -> String {
        e.to_string()
    }
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

/// Deletes the namespaces [`unique_name`] gave a process that no longer runs: a test or bench
/// killed outright (SIGKILL, a machine restart) never runs its guards' `Drop`. A name carries its
/// process's pid modulo 100,000, so a namespace is left alone while any live process has that
/// residue. Returns the names deleted.
pub fn remove_stale_namespaces() -> Vec<String> {
    let live = live_pid_residues();
    let mut gone = Vec::new();
    for e in std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
    {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let owner = name
            .strip_prefix("pst")
            .and_then(|r| r.split_once('x'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok());
        if owner.is_some_and(|pid| !live.contains(&pid))
            && run("ip", &["netns", "del", &name]).is_ok()
        {
            gone.push(name);
        }
    }
    gone
}

/// The pids of the running processes, modulo 100,000 (as names carry them).
pub(crate) fn live_pid_residues() -> std::collections::HashSet<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .map(|pid| pid % 100_000)
        .collect()
}

/// A network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a namespace with a unique name and brings its loopback up.
    pub fn new(tag: &str) -> Result<Self, NetError> {
        // Once per process, before its first namespace: what killed processes left behind.
        static SWEEP: std::sync::Once = std::sync::Once::new();
        SWEEP.call_once(|| {
            for name in remove_stale_namespaces() {
                eprintln!("removed namespace {name}: its process no longer runs");
            }
        });
        let ns = Netns {
            name: unique_name(tag),
        };
        run("ip", &["netns", "add", &ns.name])?;
        ns.exec("ip", &["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Creates a namespace named exactly `name` (for things that outlive this process, like a
    /// fabric brought up by one command and torn down by another).
    pub fn named(name: &str) -> Result<Self, NetError> {
        run("ip", &["netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
        };
        ns.exec("ip", &["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Keeps the namespace after this guard is gone; returns its name.
    pub fn keep(self) -> String {
        let name = self.name.clone();
        std::mem::forget(self);
        name
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

    /// Waits until something listens on TCP `port` in the namespace (`ss -ltnH`), polling every
    /// 20 ms for at most `timeout`: a server started beside a busy machine's other work may take
    /// far longer than the few hundred ms it takes alone.
    pub fn wait_listening(&self, port: u16, timeout: Duration) -> Result<(), NetError> {
        let deadline = Instant::now() + timeout;
        let want = format!(":{port} ");
        loop {
            let out = self.exec("ss", &["-ltnH"])?;
            if String::from_utf8_lossy(&out.stdout).contains(&want) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(NetError::Timeout {
                    what: format!("a TCP listener on port {port} in {}", self.name),
                    seconds: timeout.as_secs_f64(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
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

/// A process started inside a namespace, killed (SIGTERM, then SIGKILL) on drop.
#[derive(Debug)]
pub struct Process {
    child: Option<std::process::Child>,
    name: String,
}

impl Process {
    /// Starts `prog args` in `ns`, with stdout and stderr going to `log`.
    pub fn spawn(
        ns: &Netns,
        prog: &str,
        args: &[&str],
        log: &std::path::Path,
    ) -> Result<Self, NetError> {
        let cmd = format!("{prog} {}", args.join(" "));
        let file = std::fs::File::create(log).map_err(|source| NetError::Log {
            cmd: cmd.clone(),
            path: log.to_path_buf(),
            source,
        })?;
        let err = file.try_clone().map_err(|source| NetError::Log {
            cmd: cmd.clone(),
            path: log.to_path_buf(),
            source,
        })?;
        let child = Command::new("ip")
            .args(["netns", "exec", ns.name(), prog])
            .args(args)
            .stdout(file)
            .stderr(err)
            .spawn()
            .map_err(|source| NetError::Spawn {
                cmd: cmd.clone(),
                source,
            })?;
        Ok(Process {
            child: Some(child),
            name: cmd,
        })
    }

    /// Lets the process run on after this guard is gone.
    pub fn detach(mut self) {
        drop(self.child.take());
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, std::process::Child::id)
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Polls for up to `timeout` for the process to have exited; returns its status if it did.
    fn exited_within(&mut self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits up to `timeout` for it to exit (then kills it); returns its exit
    /// status.
    pub fn terminate(&mut self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        let pid = self.child.as_ref()?.id();
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        if let Some(status) = self.exited_within(timeout) {
            return Some(status);
        }
        let mut child = self.child.take()?;
        let _ = child.kill();
        eprintln!("{} did not stop on SIGTERM: killed", self.name);
        child.wait().ok()
    }

    /// Waits up to `timeout` for it to exit by itself (then stops it); returns its exit status.
    pub fn wait(&mut self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        self.exited_within(timeout)
            .or_else(|| self.terminate(std::time::Duration::from_secs(5)))
    }

    /// CPU time (user + system) it has used, from /proc.
    pub fn cpu_time(&self) -> std::time::Duration {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())) else {
            return std::time::Duration::ZERO;
        };
        let rest = stat.rsplit(") ").next().unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = [11, 12]
            .iter()
            .filter_map(|&i| f.get(i)?.parse::<u64>().ok())
            .sum();
        // USER_HZ is 100 on Linux.
        std::time::Duration::from_millis(ticks * 10)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.terminate(std::time::Duration::from_secs(2));
    }
}

/// The path of a binary of this workspace (`pisa-switch`, `pisa-cli`), built next to the test
/// binary (target/<profile>/), or named by the environment variable `PISA_BIN_DIR`.
pub fn workspace_bin(name: &str) -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("PISA_BIN_DIR") {
        return std::path::PathBuf::from(dir).join(name);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/<test> or target/<profile>/<binary> -> target/<profile>/<name>
    let mut dir = exe
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace binaries first (cargo build --bins, same profile)",
        path.display()
    );
    path
}

/// Whether any interface in `ns` still has an XDP program attached.
pub fn xdp_attached(ns: &Netns) -> bool {
    ns.exec("ip", &["-d", "link", "show"])
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.contains(" xdp") || text.contains("xdpgeneric") || text.contains("prog/xdp")
        })
        .unwrap_or(false)
}

/// Waits up to `timeout` for `path` to exist (a process's socket or ready file); whether it does.
pub fn wait_for_path(path: &std::path::Path, timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while !path.exists() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_fabrics_of_dead_processes_are_torn_down_and_live_ones_kept() {
        use crate::fabric::{ns_name, remove_dead_test_fabrics};
        let taken = live_pid_residues();
        let dead = (1..100_000).rev().find(|r| !taken.contains(r)).unwrap();
        let mine = std::process::id() % 100_000;
        // A directory of our own stands for the temporary one, so that no other test's
        // fabric is touched.
        let tmp = std::env::temp_dir().join(unique_name("tf"));
        let (stale, live) = (format!("z{dead}"), format!("z{mine}"));
        for name in [&stale, &live] {
            std::fs::create_dir_all(tmp.join(format!("pisa-fabric-test-{name}"))).unwrap();
            run("ip", &["netns", "add", &ns_name(name, "h1")]).unwrap();
        }
        let gone = remove_dead_test_fabrics(&tmp);
        let listed =
            String::from_utf8_lossy(&run("ip", &["netns", "list"]).unwrap().stdout).into_owned();
        // Delete both ourselves, so the test leaves nothing behind whatever the sweep did.
        for name in [&stale, &live] {
            let _ = run("ip", &["netns", "del", &ns_name(name, "h1")]);
        }
        let stale_dir = tmp.join(format!("pisa-fabric-test-{stale}")).exists();
        let live_dir = tmp.join(format!("pisa-fabric-test-{live}")).exists();
        let _ = std::fs::remove_dir_all(&tmp);
        assert_eq!(gone, std::slice::from_ref(&stale));
        assert!(!listed.contains(&ns_name(&stale, "h1")), "{listed}");
        assert!(listed.contains(&ns_name(&live, "h1")), "{listed}");
        assert!(!stale_dir && live_dir);
    }

    #[test]
    fn namespaces_of_dead_processes_are_removed_and_live_ones_kept() {
        let live = Netns::new("lv").unwrap();
        // A pid residue no running process has.
        let taken: std::collections::HashSet<u32> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .map(|pid| pid % 100_000)
            .collect();
        let dead = (1..100_000).rev().find(|r| !taken.contains(r)).unwrap();
        let stale = format!("pst{dead}x0zz");
        run("ip", &["netns", "add", &stale]).unwrap();
        let gone = remove_stale_namespaces();
        let listed =
            String::from_utf8_lossy(&run("ip", &["netns", "list"]).unwrap().stdout).into_owned();
        // Delete it ourselves if the sweep failed, so the test leaves nothing behind.
        if listed.contains(&stale) {
            let _ = run("ip", &["netns", "del", &stale]);
        }
        assert!(gone.contains(&stale), "{gone:?}");
        assert!(!listed.contains(&stale));
        assert!(listed.contains(live.name()), "{listed}");
    }
}
