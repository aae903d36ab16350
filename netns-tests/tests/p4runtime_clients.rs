//! Real P4Runtime clients against `pisa-switch --program basic`: p4runtime-shell, finsy and a PTF
//! suite, each in its own Python venv (scripts/py-clients.sh makes them under
//! `${PISA_VENV_DIR:-/var/cache/pisa-switch/venvs}`). Every test makes a namespace with veth pairs
//! sw_i/p_i (both ends inside it, PTF-style), runs the switch on sw1..sw4 serving gRPC on the
//! namespace's loopback, runs the client script on p1..p4 inside the same namespace, and requires
//! the script to exit 0 and the switch to stop cleanly. Needs root, iproute2, ethtool and the venvs:
//! a missing venv fails the test.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::venv_python;
use pisa_fabric::{Netns, Process, netns_exists, workspace_bin};

/// Switch ports (and veth pairs) per test.
const PORTS: u16 = 4;
const DEVICE_ID: &str = "1";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// A namespace with the switch running in it, and a scratch directory.
/// Fields drop in order: the switch stops before its namespace goes.
struct Rig {
    switch: Process,
    ns: Netns,
    log: PathBuf,
    dir: PathBuf,
    grpc: String,
}

impl Rig {
    fn new(tag: &str, grpc_port: u16, program: &str) -> Rig {
        Rig::with_args(tag, grpc_port, &["--program", program])
    }

    /// A rig whose switch starts with `first` before the usual arguments (a program).
    fn with_args(tag: &str, grpc_port: u16, first: &[&str]) -> Rig {
        let ns = Netns::new(tag).expect("namespace");
        // No IPv6 on the test's interfaces: the kernel's router solicitations and MLD reports
        // would be stray frames for PTF's verify_no_other_packets.
        for knob in ["all", "default"] {
            ns.exec(
                "sh",
                &[
                    "-c",
                    &format!("echo 1 > /proc/sys/net/ipv6/conf/{knob}/disable_ipv6"),
                ],
            )
            .expect("disable IPv6");
        }
        for i in 1..=PORTS {
            let (sw, p) = (format!("sw{i}"), format!("p{i}"));
            ns.exec(
                "ip",
                &["link", "add", &sw, "type", "veth", "peer", "name", &p],
            )
            .expect("veth pair");
            for ifname in [&sw, &p] {
                ns.exec("ip", &["link", "set", ifname, "up"]).unwrap();
                // Partial checksums would leave the veth unfinished (as in switch_basic.rs).
                ns.exec("ethtool", &["-K", ifname, "tx", "off"])
                    .expect("ethtool -K tx off");
            }
        }
        let dir = std::env::temp_dir().join(ns.name());
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("switch.log");
        let grpc = format!("127.0.0.1:{grpc_port}");
        let mut args: Vec<String> = first
            .iter()
            .chain(&["--io", "af-packet"])
            .map(|s| s.to_string())
            .collect();
        for i in 1..=PORTS {
            args.push("-i".into());
            args.push(format!("{i}@sw{i}"));
        }
        args.extend([
            "--device-id".into(),
            DEVICE_ID.into(),
            "--grpc-addr".into(),
            grpc.clone(),
        ]);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut switch = Process::spawn(
            &ns,
            workspace_bin("pisa-switch").to_str().unwrap(),
            &argv,
            &log,
        )
        .expect("start pisa-switch");
        // Wait for the gRPC port to listen inside the namespace.
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let listening = ns
                .exec("ss", &["-Hltn"])
                .map(|o| String::from_utf8_lossy(&o.stdout).contains(&grpc))
                .unwrap_or(false);
            if listening {
                break;
            }
            assert!(
                switch.running(),
                "pisa-switch exited before serving gRPC: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            assert!(
                Instant::now() < deadline,
                "pisa-switch does not listen on {grpc}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Rig {
            switch,
            ns,
            log,
            dir,
            grpc,
        }
    }

    /// A dummy p4_device_config file (a fixed-pipeline switch accepts any bytes).
    fn dummy_bin(&self) -> PathBuf {
        let p = self.dir.join("dummy.bin");
        std::fs::write(&p, b"pisa-switch ignores this\n").unwrap();
        p
    }

    /// Runs `sh -c script` in the namespace (from the scratch directory) for at most `timeout`;
    /// returns whether it exited 0, and its output.
    fn run_client(&self, name: &str, script: &str, timeout: Duration) -> (bool, String) {
        let log = self.dir.join(format!("{name}.log"));
        let cmd = format!(
            "cd '{}' && PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 exec {script}",
            self.dir.display()
        );
        let t0 = Instant::now();
        let mut p = Process::spawn(&self.ns, "sh", &["-c", &cmd], &log).expect("start client");
        let status = p.wait(timeout);
        let out = std::fs::read_to_string(&log).unwrap_or_default();
        let elapsed = t0.elapsed();
        let ok = status.is_some_and(|s| s.success());
        let note = if elapsed >= timeout {
            format!("\n{name}: killed after {timeout:?}")
        } else {
            String::new()
        };
        (ok, format!("{out}{note}"))
    }

    /// Stops the switch; panics unless it exits cleanly.
    fn stop(mut self) -> String {
        let name = self.ns.name().to_string();
        let status = self.switch.terminate(Duration::from_secs(10));
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(
            status.is_some_and(|s| s.success()),
            "pisa-switch did not exit cleanly ({status:?}): {log}"
        );
        let _ = std::fs::remove_dir_all(&self.dir);
        drop(self);
        assert!(!netns_exists(&name), "namespace {name} left behind");
        log
    }
}

fn ports_arg() -> String {
    (1..=PORTS)
        .map(|i| format!("{i}=p{i}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn python_dir() -> PathBuf {
    repo_root().join("netns-tests/python")
}

fn p4info(program: &str) -> PathBuf {
    repo_root().join(format!("pipeline/programs/p4info/{program}.txt"))
}

/// Runs a client script of netns-tests/python with `venv`'s python and the usual arguments.
fn script_client(
    tag: &str,
    venv: &str,
    script: &str,
    program: &str,
    grpc_port: u16,
    timeout: Duration,
) {
    let py = venv_python(venv);
    let rig = Rig::new(tag, grpc_port, program);
    let cmd = format!(
        "'{}' '{}' --grpc-addr {} --device-id {DEVICE_ID} --p4info '{}' --bin '{}' --ports {}",
        py.display(),
        python_dir().join(script).display(),
        rig.grpc,
        p4info(program).display(),
        rig.dummy_bin().display(),
        ports_arg()
    );
    let (ok, out) = rig.run_client(venv, &cmd, timeout);
    eprintln!("----- {script} -----\n{out}");
    let switch_log = rig.stop();
    assert!(
        ok,
        "{script} failed (output above)\n----- switch log -----\n{switch_log}"
    );
}

#[test]
fn p4runtime_shell_client() {
    script_client(
        "sh",
        "shell",
        "shell_test.py",
        "basic",
        9559,
        Duration::from_secs(110),
    );
}

#[test]
fn finsy_client() {
    script_client(
        "fy",
        "finsy",
        "finsy_test.py",
        "basic",
        9560,
        Duration::from_secs(100),
    );
}

/// P4TE (issue 12): p4runtime-shell writes every table of `p4te` and reads every table,
/// register, counter and meter back.
#[test]
fn p4runtime_shell_reads_every_p4te_table_and_register() {
    script_client(
        "s4",
        "shell",
        "shell_p4te.py",
        "p4te",
        9562,
        Duration::from_secs(110),
    );
}

#[test]
fn ptf_suite() {
    let py = venv_python("ptf");
    let ptf = py.with_file_name("ptf");
    let rig = Rig::new("pt", 9561, "basic");
    let ifaces: String = (1..=PORTS).map(|i| format!(" -i {i}@p{i}")).collect();
    let params = format!(
        "grpcaddr='{}';device_id={DEVICE_ID};p4info='{}';bin='{}'",
        rig.grpc,
        p4info("basic").display(),
        rig.dummy_bin().display()
    );
    let cmd = format!(
        "'{}' '{}' --test-dir '{}'{ifaces} --log-file '{}' --test-case-timeout 30 --test-params \"{params}\"",
        py.display(),
        ptf.display(),
        python_dir().join("ptf").display(),
        rig.dir.join("ptf-debug.log").display()
    );
    let (ok, out) = rig.run_client("ptf", &cmd, Duration::from_secs(100));
    eprintln!("----- ptf basic_test -----\n{out}");
    let switch_log = rig.stop();
    assert!(
        ok,
        "the PTF suite failed (output above)\n----- switch log -----\n{switch_log}"
    );
}

/// p4runtime-shell loads a P4 program into `pisa-switch --no-p4`: SetForwardingPipelineConfig
/// with p4c-style inputs (the BMv2 JSON of the loader's test router, and a P4Info whose ids are
/// not the switch's own and which leaves out the hidden tables), then routes written through
/// the shell carry a UDP frame across the switch.
#[test]
fn p4runtime_shell_loads_a_bmv2_json_program() {
    let rig = Rig::with_args("bj", 9562, &["--no-p4"]);
    let json = repo_root().join("pipeline/bmv2/tests/programs/router.json");
    let p4info = rig.dir.join("router.p4info.txt");
    let out = pisa_fabric::run(
        workspace_bin("pisa-bmv2").to_str().unwrap(),
        &["p4info", json.to_str().unwrap()],
    )
    .expect("pisa-bmv2 p4info");
    std::fs::write(&p4info, &out.stdout).unwrap();
    let cmd = format!(
        "'{}' '{}' --grpc-addr {} --device-id {DEVICE_ID} --p4info '{}' --json '{}' --ports 1=p1,2=p2",
        venv_python("shell").display(),
        python_dir().join("bmv2_json_shell.py").display(),
        rig.grpc,
        p4info.display(),
        json.display(),
    );
    let (ok, out) = rig.run_client("shell", &cmd, Duration::from_secs(60));
    eprintln!("----- bmv2_json_shell.py -----\n{out}");
    let switch_log = rig.stop();
    assert!(
        ok,
        "bmv2_json_shell.py failed (output above)\n----- switch log -----\n{switch_log}"
    );
}
