//! A switch that stops answering is named, within the deadline, instead of hanging the tooling
//! (issue 16): a small leaf-spine in namespaces, one switch frozen with SIGSTOP, then
//! `pisa-fabric counters`, `pisa-fabric health` and `pisa-ctl` against it from the management
//! namespace. Each must fail within its deadline, naming that switch. After SIGCONT the switch
//! answers again, and teardown leaves nothing. Needs root and the workspace binaries
//! (pisa-switch, pisa-ctl, pisa-fabric).

use std::time::Instant;

use pisa_fabric::fabric::{Fabric, GRPC_PORT, Options, mgmt_addrs, teardown};
use pisa_fabric::{NetError, run, workspace_bin};
use topo::{LinkProps, leaf_spine};

/// SIGSTOPs a process, and SIGCONTs it on drop, so that teardown can stop it also when the
/// test fails.
struct Frozen(u32);

impl Frozen {
    fn new(pid: u32) -> Frozen {
        run("kill", &["-STOP", &pid.to_string()]).expect("SIGSTOP");
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = run("kill", &["-CONT", &self.0.to_string()]);
    }
}

/// Runs `prog args` in the management namespace; returns (success, stdout + stderr, seconds).
fn in_mgmt(f: &Fabric, prog: &str, args: &[&str]) -> (bool, String, f64) {
    let bin = workspace_bin(prog);
    let t = Instant::now();
    let r = f.mgmt().exec(bin.to_str().unwrap(), args);
    let took = t.elapsed().as_secs_f64();
    match r {
        Ok(o) => (
            true,
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
            took,
        ),
        Err(NetError::Failed { stderr, .. }) => (false, stderr, took),
        Err(e) => panic!("{prog}: {e}"),
    }
}

#[test]
fn a_frozen_switch_is_named_within_the_deadline() {
    let t = leaf_spine(2, 1, 1, 1.0, LinkProps::default());
    let opts = Options::for_test('z');
    let name = opts.name.clone();
    let mut f = Fabric::up(&t, &opts, |m| eprintln!("{m}")).expect("bring-up");
    eprint!("{}", f.program().expect("programming over P4Runtime"));
    let topo = opts.dir.join("topology.txt");
    let topo = topo.to_str().unwrap();

    // All answer: counters work and take well under the deadline.
    let (ok, out, took) = in_mgmt(&f, "pisa-fabric", &["counters", "--timeout", "3", topo]);
    assert!(ok, "counters with every switch up: {out}");
    eprintln!("counters, all switches up: {took:.2} s");

    // Freeze leaf2: its kernel still accepts TCP connections, the process answers nothing.
    let victim = "leaf2";
    let i = t.switches.iter().position(|s| s.name == victim).unwrap();
    let pid = f
        .switch_processes()
        .find(|(n, _)| n.as_str() == victim)
        .map(|(_, p)| p.pid())
        .unwrap();
    let frozen = Frozen::new(pid);

    let (ok, err, took) = in_mgmt(&f, "pisa-fabric", &["counters", "--timeout", "3", topo]);
    eprintln!(
        "counters, {victim} frozen: failed={} in {took:.2} s: {err}",
        !ok
    );
    assert!(!ok, "counters succeeded with {victim} frozen");
    assert!(
        err.contains(&format!("switch {victim} did not answer")),
        "{err}"
    );
    assert!(err.contains("within 3.0 s"), "{err}");
    // leaf1 answers at once, leaf2 costs its 3 s deadline and stops the command.
    assert!((2.9..6.0).contains(&took), "counters took {took:.2} s");

    let (ok, err, took) = in_mgmt(&f, "pisa-fabric", &["health", "--timeout", "1", topo]);
    eprintln!(
        "health, {victim} frozen: failed={} in {took:.2} s: {err}",
        !ok
    );
    assert!(
        !ok && err.contains(&format!("switch {victim} did not answer")),
        "{err}"
    );
    assert!(
        !err.contains("switch leaf1") && !err.contains("switch spine1"),
        "{err}"
    );
    assert!(took < 4.0, "health took {took:.2} s");

    let addr = format!("{}:{GRPC_PORT}", mgmt_addrs(i).1);
    let (ok, err, took) = in_mgmt(
        &f,
        "pisa-ctl",
        &["--addr", &addr, "--timeout", "2", "counters", "port_tx"],
    );
    eprintln!(
        "pisa-ctl, {victim} frozen: failed={} in {took:.2} s: {err}",
        !ok
    );
    assert!(
        !ok && err.contains(&addr) && err.contains("within 2.0 s"),
        "{err}"
    );
    assert!(took < 5.0, "pisa-ctl took {took:.2} s");

    // Thawed, it answers again.
    drop(frozen);
    let (ok, out, _) = in_mgmt(&f, "pisa-fabric", &["counters", "--timeout", "3", topo]);
    assert!(ok, "counters after SIGCONT: {out}");
    assert!(f.dead_switches().is_empty(), "a switch died");

    let clean = f.stop_switches();
    assert_eq!(clean, 3, "switches that exited cleanly");
    drop(f);
    assert_eq!(teardown(&name), 0, "namespaces left behind");
}
