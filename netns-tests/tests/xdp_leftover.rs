//! AF_XDP after `kill -9`: the switch's XDP programs stay on its interfaces, and the next start
//! must remove those (and only those) and come up; another tool's XDP program on an interface is
//! left alone. Needs root, iproute2 and clang (to build the foreign program), and the workspace
//! binaries (pisa-switch, pisa-cli).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pisa_fabric::{Netns, Process, run, veth, workspace_bin};

/// The XDP program names and ids on `ifname` in `ns` (from `ip -d link show`).
fn programs(ns: &Netns, ifname: &str) -> Vec<(String, String)> {
    let out = ns
        .exec("ip", &["-d", "link", "show", "dev", ifname])
        .expect("ip link show");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut progs = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if w.starts_with("prog/xdp")
            && words.get(i + 1) == Some(&"id")
            && words.get(i + 3) == Some(&"name")
        {
            progs.push((words[i + 4].to_string(), words[i + 2].to_string()));
        }
    }
    progs
}

fn names(ns: &Netns, ifname: &str) -> Vec<String> {
    programs(ns, ifname).into_iter().map(|p| p.0).collect()
}

/// A directory of this test's own, removed at the end even if the test fails.
struct TmpDir(PathBuf);

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts pisa-switch on `ifs` in `ns`; returns it once its admin socket answers, or its log if
/// it exits (or does not answer) within 10 s.
fn start(ns: &Netns, ifs: &[&str], dir: &Path, run_no: u32) -> Result<(Process, PathBuf), String> {
    let sock = dir.join(format!("admin{run_no}.sock"));
    let log = dir.join(format!("switch{run_no}.log"));
    let mut args = vec![
        "--program".to_string(),
        "basic".into(),
        "--io".into(),
        "af-xdp".into(),
        "--workers".into(),
        "1".into(),
        "--admin-socket".into(),
        sock.display().to_string(),
    ];
    for (i, name) in ifs.iter().enumerate() {
        args.push("-i".into());
        args.push(format!("{}@{name}", i + 1));
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let bin = workspace_bin("pisa-switch");
    let mut proc = Process::spawn(ns, bin.to_str().unwrap(), &argv, &log).expect("spawn");
    let cli = workspace_bin("pisa-cli");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if sock.exists()
            && run(
                cli.to_str().unwrap(),
                &[sock.to_str().unwrap(), "show_ports"],
            )
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).starts_with("port "))
        {
            return Ok((proc, sock));
        }
        if !proc.running() || Instant::now() >= deadline {
            drop(proc);
            return Err(std::fs::read_to_string(&log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_switch_restarts_and_leaves_foreign_xdp_programs_alone() {
    let dir = TmpDir(std::env::temp_dir().join(pisa_fabric::unique_name("xl")));
    std::fs::create_dir_all(&dir.0).unwrap();
    let sw = Netns::new("xs").expect("namespace");
    let peer = Netns::new("xp").expect("namespace");
    let (a1, _) = veth(&sw, &peer).expect("veth");
    let (a2, _) = veth(&sw, &peer).expect("veth");

    // 1. Up, then SIGKILL: its programs stay behind (the case the restart must handle).
    let (proc, _) = start(&sw, &[&a1, &a2], &dir.0, 1).expect("first start");
    assert_eq!(names(&sw, &a1), ["xsk_def_prog"]);
    run("kill", &["-KILL", &proc.pid().to_string()]).expect("kill -9");
    let mut proc = proc;
    assert!(proc.wait(Duration::from_secs(5)).is_some());
    assert_eq!(names(&sw, &a1), ["xsk_def_prog"], "left by the killed run");

    // 2. The next start on the same interfaces removes its leftovers and comes up.
    let (mut proc, _) = start(&sw, &[&a1, &a2], &dir.0, 2)
        .unwrap_or_else(|log| panic!("restart after kill -9 failed: {log}"));
    assert_eq!(names(&sw, &a1), ["xsk_def_prog"]);
    proc.terminate(Duration::from_secs(5));
    assert!(names(&sw, &a1).is_empty(), "a clean stop detaches");

    // 3. Another tool's program: the switch does not remove it (it cannot bind there, and says
    //    why), and ports without one are unaffected.
    let src = dir.0.join("foreign.c");
    let obj = dir.0.join("foreign.o");
    std::fs::write(
        &src,
        "struct xdp_md;\n\
         __attribute__((section(\"xdp\"), used)) int foreign_pass(struct xdp_md *c) { return 2; }\n\
         char _license[] __attribute__((section(\"license\"), used)) = \"GPL\";\n",
    )
    .unwrap();
    run(
        "clang",
        &[
            "-O2",
            "-target",
            "bpf",
            "-c",
            src.to_str().unwrap(),
            "-o",
            obj.to_str().unwrap(),
        ],
    )
    .expect("clang -target bpf (needed to build the foreign program)");
    sw.exec(
        "ip",
        &[
            "link",
            "set",
            "dev",
            &a2,
            "xdpgeneric",
            "obj",
            obj.to_str().unwrap(),
            "sec",
            "xdp",
        ],
    )
    .expect("attach the foreign program");
    let before = programs(&sw, &a2);
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].0, "foreign_pass");
    match start(&sw, &[&a1, &a2], &dir.0, 3) {
        Ok((mut p, _)) => {
            eprintln!("the switch came up beside the foreign program");
            p.terminate(Duration::from_secs(5));
            assert_eq!(
                programs(&sw, &a2),
                before,
                "the foreign program was replaced"
            );
        }
        Err(log) => {
            eprintln!(
                "the switch refused the interface: {}",
                log.lines().last().unwrap_or("")
            );
            assert_eq!(
                programs(&sw, &a2),
                before,
                "the foreign program was removed"
            );
            assert!(
                log.contains("another XDP program, foreign_pass"),
                "the switch did not say why it could not start: {log}"
            );
        }
    }
    // Its own leftover elsewhere is still cleaned: kill -9 on a1 alone, then restart there.
    let (p, _) = start(&sw, &[&a1], &dir.0, 4).expect("a1 alone");
    run("kill", &["-KILL", &p.pid().to_string()]).expect("kill -9");
    let mut p = p;
    p.wait(Duration::from_secs(5));
    let (mut p, _) =
        start(&sw, &[&a1], &dir.0, 5).unwrap_or_else(|log| panic!("restart on a1 failed: {log}"));
    p.terminate(Duration::from_secs(5));
    assert_eq!(programs(&sw, &a2), before, "still there at the end");
}
