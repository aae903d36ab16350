//! The admin socket as an attack surface: its file mode, who may connect, how long a line may be
//! and how many clients it serves. One test, one process, so the memory figure is this test's.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dataplane::admin::{MAX_CONNECTIONS, MAX_LINE};
use dataplane::io::mem;
use dataplane::switch::{PortIo, PortSpec, Switch, SwitchConfig};
use pipeline::runtime::{Config, Pipeline};

/// A directory of this test's own, removed at the end even if the test fails.
struct TmpDir(PathBuf);

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn connect(path: &Path) -> (UnixStream, BufReader<UnixStream>) {
    let s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let r = BufReader::new(s.try_clone().unwrap());
    (s, r)
}

/// Sends `cmd` and returns the answer up to its `ok` or `error:` line.
fn ask(s: &mut UnixStream, r: &mut BufReader<UnixStream>, cmd: &str) -> String {
    // A refused connection may be closed before the write: its answer is still there to read.
    let _ = s.write_all(format!("{cmd}\n").as_bytes());
    let mut out = String::new();
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap_or(0) == 0 {
            return out;
        }
        out += &l;
        if l == "ok\n" || l.starts_with("error:") {
            return out;
        }
    }
}

/// A connection that is served (`show_ports` answered), retrying for up to 3 s while the server
/// is still releasing the place of a connection that just closed.
fn served_conn(path: &Path) -> (UnixStream, BufReader<UnixStream>) {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (mut s, mut r) = connect(path);
        let a = ask(&mut s, &mut r, "show_ports");
        if a.ends_with("ok\n") {
            return (s, r);
        }
        assert!(Instant::now() < deadline, "not served: {a:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the server says to a fresh connection before closing it, if anything ("" if it serves).
fn greeting(r: &mut BufReader<UnixStream>) -> String {
    r.get_ref()
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut l = String::new();
    let _ = r.read_line(&mut l);
    r.get_ref()
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    l
}

#[test]
fn the_admin_socket_is_private_bounded_and_capped() {
    let dir = TmpDir(std::env::temp_dir().join(format!("pisa-admin-test-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.0.join("admin.sock");
    let (p, _link) = mem::pair().unwrap();
    let ports = vec![PortSpec {
        id: 1,
        io: PortIo::Mem(p),
    }];
    let pipe = Pipeline::new(programs::by_name("basic").unwrap(), 1, Config::default());
    let config = SwitchConfig {
        workers: 1,
        ..SwitchConfig::default()
    };
    let sw = Arc::new(Switch::start(pipe, ports, config).unwrap());

    // 1. Mode 0600 even under umask 000.
    // SAFETY: umask only swaps the process's file-creation mask; restored just below.
    let old = unsafe { libc::umask(0) };
    let served = dataplane::admin::serve(&sw, &path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    served.unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let names: Vec<_> = std::fs::read_dir(&dir.0).unwrap().collect();
    assert_eq!(names.len(), 1, "nothing but the socket is left: {names:?}");

    // 2. A user that is neither root nor ours is refused, even where the mode would let it in.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let script = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.settimeout(5)\n\
                  s.connect(sys.argv[1])\n\
                  try: s.sendall(b'show_ports\\n')\n\
                  except OSError: pass\n\
                  print(s.recv(4096).decode(), end='')\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script, path.to_str().unwrap()])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with("error: permission denied"),
        "nobody was answered {said:?} ({})",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();

    // 3. An over-long line: an error, the connection closed, and no buffering of it.
    let before = rss_kib();
    let (s, mut r) = connect(&path);
    let mut w = s.try_clone().unwrap();
    const FLOOD: usize = 64 << 20;
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'a'; 64 << 10];
        let mut sent = 0;
        while sent < FLOOD && w.write_all(&chunk).is_ok() {
            sent += chunk.len();
        }
        sent
    });
    let mut reply = String::new();
    r.read_line(&mut reply).unwrap();
    assert!(
        reply.starts_with("error:") && reply.contains("longer than"),
        "{reply:?}"
    );
    let mut rest = Vec::new();
    let _ = r.read_to_end(&mut rest);
    assert!(rest.is_empty(), "closed after the error");
    let sent = writer.join().unwrap();
    assert!(sent < FLOOD, "the server kept reading: {sent} bytes");
    assert!(sent >= MAX_LINE);
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 16 << 10, "memory grew by {grown} KiB");
    let _ = s.shutdown(std::net::Shutdown::Both);

    // 4. At most MAX_CONNECTIONS at once; a freed place is served again.
    let mut held: Vec<_> = (0..MAX_CONNECTIONS).map(|_| served_conn(&path)).collect();
    let (_s, mut r) = connect(&path);
    let refused = greeting(&mut r);
    assert!(refused.starts_with("error: too many"), "{refused:?}");
    held.pop();
    drop(served_conn(&path));

    // 5. The switch and the held clients still work.
    let (s, r) = &mut held[0];
    assert!(ask(s, r, "set_queue_depth 100").ends_with("ok\n"));
    assert_eq!(sw.tm().config(1).unwrap().max_packets, 100);
    drop(held);
    drop(sw); // the server holds it weakly: this stops the switch
}
