//! `pisa-ctl` against a real `pisa-switch` in a namespace: BMv2-style lines written over
//! P4Runtime, entries, counters and registers read back, a packet-out seen on the wire.
//! Needs root and iproute2.

use std::time::Duration;

use pisa_fabric::{Netns, Process, run, workspace_bin};

fn ctl(ns: &Netns, args: &[&str]) -> String {
    let bin = workspace_bin("pisa-ctl");
    let mut full = vec![bin.to_str().unwrap()];
    full.extend_from_slice(args);
    let out = ns
        .exec(full[0], &full[1..])
        .unwrap_or_else(|e| panic!("pisa-ctl {args:?}: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A namespace with `ports` veth pairs `swN`/`pN` and `pisa-switch` on the `swN` ends (with
/// `extra` flags), serving P4Runtime; returns them and the scratch directory.
fn switch_in_ns(tag: &str, ports: u16, extra: &[&str]) -> (Netns, Process, std::path::PathBuf) {
    let ns = Netns::new(tag).unwrap();
    let mut args: Vec<String> = ["--program", "basic", "--io", "af-packet"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for n in 1..=ports {
        let (a, b) = (format!("sw{n}"), format!("p{n}"));
        ns.exec(
            "ip",
            &["link", "add", &a, "type", "veth", "peer", "name", &b],
        )
        .unwrap();
        for i in [&a, &b] {
            ns.exec("ip", &["link", "set", i, "up"]).unwrap();
        }
        args.extend(["-i".to_string(), format!("{n}@{a}")]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let dir = std::env::temp_dir().join(ns.name());
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("switch.log");
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let sw = Process::spawn(
        &ns,
        workspace_bin("pisa-switch").to_str().unwrap(),
        &argv,
        &log,
    )
    .unwrap();
    for i in 0..=100 {
        let ss = ns.exec("ss", &["-ltn"]).unwrap();
        if String::from_utf8_lossy(&ss.stdout).contains(":9559") {
            break;
        }
        assert!(
            i < 100,
            "no P4Runtime server: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (ns, sw, dir)
}

#[test]
fn pisa_ctl_writes_reads_and_sends() {
    let (ns, mut sw, _dir) = switch_in_ns("ct", 2, &[]);

    let info = ctl(&ns, &["info"]);
    assert!(
        info.contains("P4Runtime 1.5.0") && info.contains("program basic"),
        "{info}"
    );
    let w = ctl(
        &ns,
        &[
            "cmd",
            "table_add l2_exact l2_forward 02:00:00:00:00:02 => 2",
            "act_prof_create_member ecmp_selector 1 set_nhop 02:00:00:00:00:02 02:00:00:00:00:fe 2",
            "table_indirect_add ipv4_lpm 10.0.2.0/24 => 1",
            "register_write flow_last_seen 7 1234", // printed back as 0x4d2
        ],
    );
    assert!(w.contains("4 updates written"), "{w}");
    let read = ctl(&ns, &["read"]);
    assert!(
        read.contains("l2_exact hdr.ethernet.dst_addr=0x20000000002 => l2_forward(2)"),
        "{read}"
    );
    assert!(
        read.contains("ipv4_lpm hdr.ipv4.dst_addr=0xa000200/24 => member 1"),
        "{read}"
    );
    let regs = ctl(&ns, &["registers", "flow_last_seen", "7"]);
    assert!(regs.contains("flow_last_seen[7] = 0x4d2"), "{regs}");

    // A frame forwarded at L2 from port 1 to port 2 moves the port counters.
    let frame = "020000000002020000000001080045000014000100004000f97c0a0001010a000201";
    let out = ctl(&ns, &["packet-out", "1", frame]);
    assert!(out.contains("sent"));
    // Counted when the worker has sent it (a busy machine may take longer than alone).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut counters = ctl(&ns, &["counters", "port_tx"]);
    while !counters.contains("port_tx[1] 1 packets") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        counters = ctl(&ns, &["counters", "port_tx"]);
    }
    assert!(counters.contains("port_tx[1] 1 packets"), "{counters}");

    // A bad line is refused with the server's reason, and the exit status says so.
    let bin = workspace_bin("pisa-ctl");
    let bad = run(
        "ip",
        &[
            "netns",
            "exec",
            ns.name(),
            bin.to_str().unwrap(),
            "cmd",
            "table_add l2_exact l2_forward 02:00:00:00:00:02 => 2",
        ],
    );
    match bad {
        Err(pisa_fabric::NetError::Failed { stderr, .. }) => {
            assert!(stderr.contains("AlreadyExists"), "{stderr}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    let status = sw
        .terminate(Duration::from_secs(5))
        .expect("the switch exits");
    assert!(status.success());
}

/// Two controllers at once against a real switch (BMv2's live-highest election): the backup's
/// writes are refused while the primary lives, and the backup becomes primary when it leaves.
/// (The spec's rule, where the highest id ever seen stays the bar, is checked by the shell suite
/// and the service tests.)
#[test]
fn backup_takes_over_when_the_primary_leaves() {
    let (ns, mut sw, dir) = switch_in_ns("fo", 1, &["--election-compat", "live-highest"]);
    let bin = workspace_bin("pisa-ctl");
    let bin = bin.to_str().unwrap();
    let (blog, alog) = (dir.join("backup.log"), dir.join("primary.log"));
    let mut backup =
        Process::spawn(&ns, bin, &["--election-id", "5", "watch", "6"], &blog).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut primary =
        Process::spawn(&ns, bin, &["--election-id", "10", "watch", "2"], &alog).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    // A third controller below the primary: its write is refused.
    let line = "table_add l2_exact l2_forward 02:00:00:00:00:02 => 1";
    match run(
        "ip",
        &[
            "netns",
            "exec",
            ns.name(),
            bin,
            "--election-id",
            "4",
            "cmd",
            line,
        ],
    ) {
        Err(pisa_fabric::NetError::Failed { stderr, .. }) => {
            assert!(stderr.contains("only the primary"), "{stderr}");
        }
        other => panic!("a backup's write went through: {other:?}"),
    }
    assert!(
        primary
            .wait(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
    assert!(
        backup
            .wait(Duration::from_secs(15))
            .is_some_and(|s| s.success())
    );
    let b = std::fs::read_to_string(&blog).unwrap();
    let first_backup = b.find("arbitration: backup").expect(&b);
    let then_primary = b.find("arbitration: primary (election id 5)").expect(&b);
    assert!(first_backup < then_primary, "{b}");
    // With everyone gone, a new controller with a low id is primary (live-highest) and writes.
    let out = run(
        "ip",
        &[
            "netns",
            "exec",
            ns.name(),
            bin,
            "--election-id",
            "5",
            "cmd",
            line,
        ],
    )
    .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 updates written"));
    assert!(
        sw.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success())
    );
}
