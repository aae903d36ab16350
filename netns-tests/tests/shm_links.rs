//! A fabric whose switch-to-switch links are shared-memory rings (`--links shm`,
//! `dataplane::io::shm`): every host pair reaches each other over IPv4 and IPv6 across the
//! spines, TCP gets through, the links are files in /dev/shm and not veths, and teardown removes
//! them. Needs root, iproute2, iputils-ping, iperf3 and the workspace binaries.

use pisa_fabric::fabric::{Fabric, Links, Options, shm_link_path, teardown};

mod common;
use common::{Cleanup, two_by_two};

#[test]
fn a_fabric_with_shared_memory_links_routes_carries_tcp_and_leaves_nothing() {
    let t = two_by_two("ecmp");
    let opts = Options {
        links: Links::Shm,
        ..Options::for_test('m')
    };
    let name = opts.name.clone();
    let _cleanup = Cleanup(name.clone());
    let f = Fabric::up(&t, &opts, |m| eprintln!("{m}")).expect("bring-up");
    eprint!("{}", f.program().expect("programming over P4Runtime"));

    // The 4 uplinks are link files with a doorbell per side; the host links are veths.
    let uplinks: Vec<usize> = t
        .links
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            t.host_attachment(l.a.node()).is_none() && t.host_attachment(l.b.node()).is_none()
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(uplinks.len(), 4);
    for &i in &uplinks {
        let p = shm_link_path(&name, i);
        assert!(p.exists(), "{}", p.display());
        for side in ["a", "b"] {
            let bell = format!("{}.{side}", p.display());
            assert!(std::path::Path::new(&bell).exists(), "{bell}");
        }
    }
    // leaf1 (switch 3 in topology order) has its host ports as veths and no uplink veths.
    let links = f
        .ns(&t.switches[2].name)
        .exec("ip", &["-o", "link", "show"])
        .expect("ip link");
    let links = String::from_utf8_lossy(&links.stdout);
    assert!(links.contains(": p1@"), "{links}");
    assert!(
        !links.contains(": p3@") && !links.contains(": p4@"),
        "{links}"
    );

    for v6 in [false, true] {
        let (ok, total, failed) = f.all_pairs(v6);
        assert_eq!((ok, total), (12, 12), "v6={v6} unreachable: {failed:?}");
    }

    // 20 MB of TCP from h1 (leaf1) to h3 (leaf2), across a spine.
    let (src, dst) = (&t.hosts[0], &t.hosts[2]);
    let out = common::iperf3(&f, &opts.dir, src, dst, &["-n", "20M", "-f", "m"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.lines()
            .any(|l| l.contains("sender") && l.contains("20.0 MBytes")),
        "{text}"
    );

    drop(f);
    assert_eq!(teardown(&name), 0, "namespaces left behind");
    for &i in &uplinks {
        let p = shm_link_path(&name, i);
        assert!(!p.exists(), "{} left behind", p.display());
    }
}
