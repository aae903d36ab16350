//! A k=4 fat-tree in namespaces: 20 `pisa-switch` processes (AF_XDP, one worker each), 16 hosts,
//! programmed over P4Runtime from the management namespace. All host pairs reach each other over
//! IPv4 and IPv6, iperf3 gets through between pods, the idle fabric stays under 5% of a core in
//! total, and teardown leaves no namespace and no process. Needs root, iproute2, iputils-ping,
//! iperf3, ethtool, and the workspace binaries (pisa-switch, pisa-fabric).

use std::time::{Duration, Instant};

use pisa_fabric::fabric::{Fabric, Options, teardown};
use pisa_fabric::run;
use topo::{GenProps, LinkProps, fat_tree};

mod common;

#[test]
fn fat_tree_k4_reaches_all_pairs_carries_tcp_idles_and_tears_down() {
    let link = LinkProps {
        rate_bps: 1_000_000_000,
        delay_us: 0,
        buffer: 256,
    };
    let t = fat_tree(
        4,
        GenProps {
            host: link,
            fabric: link,
        },
    );
    let opts = Options::for_test('t');
    let name = opts.name.clone();
    let started = Instant::now();
    let mut f = Fabric::up(&t, &opts, |m| {
        eprintln!("[{:5.1} s] {m}", started.elapsed().as_secs_f64())
    })
    .expect("bring-up");
    eprint!("{}", f.program().expect("programming over P4Runtime"));

    for v6 in [false, true] {
        let (ok, total, failed) = f.all_pairs(v6);
        eprintln!("{}: {ok}/{total} pairs", if v6 { "IPv6" } else { "IPv4" });
        assert_eq!(total, 16 * 15);
        assert!(failed.is_empty(), "unreachable: {failed:?}");
    }

    // TCP between pods: h1 (pod 1) to h16 (pod 4), through edge, aggregation, core, aggregation,
    // edge.
    let (src, dst) = (&t.hosts[0], &t.hosts[15]);
    let out = common::iperf3(&f, &opts.dir, src, dst, &["-t", "3", "-f", "m"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let mbps: f64 = text
        .lines()
        .filter(|l| l.contains("receiver"))
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.iter()
                .position(|x| *x == "Mbits/sec")
                .and_then(|i| w.get(i - 1)?.parse().ok())
        })
        .expect("an iperf3 receiver line");
    eprintln!("iperf3 h1 -> h16: {mbps} Mb/s");
    assert!(mbps > 20.0, "{text}");

    // Idle: the 20 switches together, over 10 s, after the traffic has drained.
    std::thread::sleep(Duration::from_secs(2));
    let cpu = |f: &Fabric| -> Duration { f.switch_processes().map(|(_, p)| p.cpu_time()).sum() };
    let (c0, t0) = (cpu(&f), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let (c1, t1) = (cpu(&f), Instant::now());
    let share = (c1 - c0).as_secs_f64() / (t1 - t0).as_secs_f64();
    eprintln!(
        "idle fabric: {:.2}% of a core for 20 switches ({:.3}% each)",
        share * 100.0,
        share * 5.0
    );
    assert!(
        share <= 0.05,
        "the idle fabric used {:.1}% of a core",
        share * 100.0
    );
    assert!(f.switches_running(), "a switch died");

    // Teardown: every switch stops cleanly on SIGTERM; nothing is left.
    let clean = f.stop_switches();
    assert_eq!(clean, 20, "switches that exited cleanly");
    drop(f);
    assert_eq!(teardown(&name), 0, "namespaces left behind");
    let list = run("ip", &["netns", "list"]).unwrap();
    assert!(!String::from_utf8_lossy(&list.stdout).contains(&format!("pf{name}-")));
}
