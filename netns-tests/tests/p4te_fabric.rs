//! A fabric of `p4te` switches in namespaces (issue 12): `pisa-fabric` programs each switch by
//! the P4TE plan over P4Runtime, every host pair reaches every other over IPv4 and IPv6 (untagged
//! traffic takes ECMP), and a large-class TCP flow through a leaf's uplink raises monitoring
//! feedback that the leaf's agent (its own thread in pisa-switch) turns into routing-group
//! writes, counted by `show_agent`. Needs root, iproute2, iputils-ping, iperf3 and the workspace binaries.

use pisa_fabric::fabric::{Fabric, Options};

mod common;
use common::two_by_two;

#[test]
fn a_p4te_fabric_is_programmed_by_its_plan_routes_and_reports_load() {
    let t = two_by_two("p4te");
    let opts = Options::for_test('p');
    let f = Fabric::up(&t, &opts, |m| eprintln!("{m}")).expect("bring-up");
    eprint!("{}", f.program().expect("programming over P4Runtime"));
    for v6 in [false, true] {
        let (ok, total, failed) = f.all_pairs(v6);
        assert_eq!((ok, total), (12, 12), "v6={v6}: unreachable: {failed:?}");
    }
    // leaf1 is the third switch.
    let ctl = |args: &[&str]| common::ctl(&f, 2, args);
    // The plan's Δ for 100 Mb/s ports: round(K / 3) with K = 6.
    assert_eq!(
        ctl(&["registers", "qdepth_delta", "0"]).trim(),
        "qdepth_delta[0] = 2"
    );
    // A large-class flow from h1 to h3 at the uplinks' full rate for 3 s.
    let server = f.ns("h3");
    let _ = server.exec("sh", &["-c", "iperf3 -s -1 -D"]);
    server
        .wait_listening(5201, std::time::Duration::from_secs(30))
        .expect("iperf3 server listening");
    let out = f
        .ns("h1")
        .exec(
            "iperf3",
            &["-c", "10.0.2.1", "-t", "3", "-S", "16", "-C", "cubic"],
        )
        .expect("iperf3");
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("{report}");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let feedback = ctl(&["counters", "feedback"]);
    let facks = ctl(&["counters", "facks"]);
    let groups = ctl(&["read", "link_util_up"]);
    eprintln!("leaf1 feedback reports:\n{feedback}\nFACKs:\n{facks}\nlink_util_up now:\n{groups}");
    // Monitoring reports left leaf1's uplinks (ports 3, 4) toward its agent.
    assert!(
        feedback
            .lines()
            .any(|l| l.contains("[3]") || l.contains("[4]")),
        "{feedback}"
    );
    // The agent thread's statistics on the admin socket (what an experiment records per point):
    // it took the reports, read each as feedback, and none was refused.
    let shown = pisa_fabric::experiment::admin(&f.opts.dir.join("leaf1.sock"), "show_agent")
        .expect("show_agent");
    eprintln!("leaf1 show_agent:\n{}", shown.join("\n"));
    let value = |k: &str| -> u64 {
        shown
            .iter()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {k} in {shown:?}"))
    };
    assert!(value("packet_ins") > 0);
    assert!(value("agent.feedback") > 0 && value("agent.feedback") <= value("packet_ins"));
    assert_eq!(value("dropped"), 0);
}
