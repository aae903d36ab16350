//! The namespace helpers themselves: hosts reach each other over a veth pair, and nothing is left
//! behind afterwards.

use pisa_fabric::{Netns, netns_exists, veth};

#[test]
fn veth_pair_pings_and_cleans_up() {
    let (a_name, b_name);
    {
        let a = Netns::new("h1").expect("namespace a");
        let b = Netns::new("h2").expect("namespace b");
        a_name = a.name().to_string();
        b_name = b.name().to_string();
        let (x, y) = veth(&a, &b).expect("veth");
        a.exec("ip", &["addr", "add", "192.0.2.1/24", "dev", &x])
            .expect("addr a");
        b.exec("ip", &["addr", "add", "192.0.2.2/24", "dev", &y])
            .expect("addr b");
        let out = a
            .exec("ping", &["-c", "3", "-i", "0.2", "-W", "2", "192.0.2.2"])
            .expect("ping");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("3 received"), "{text}");
        assert!(netns_exists(&a_name) && netns_exists(&b_name));
    }
    assert!(!netns_exists(&a_name), "namespace {a_name} left behind");
    assert!(!netns_exists(&b_name), "namespace {b_name} left behind");
}

#[test]
fn namespace_removed_after_panic() {
    let name = std::panic::catch_unwind(|| {
        let ns = Netns::new("px").expect("namespace");
        let name = ns.name().to_string();
        assert!(netns_exists(&name));
        std::panic::panic_any(name);
    })
    .expect_err("the closure panics");
    let name = name.downcast::<String>().expect("name");
    assert!(
        !netns_exists(&name),
        "namespace {name} left behind after a panic"
    );
}
