//! A fabric of `ecmp` switches in namespaces: `pisa-fabric` programs each switch by the `ecmp`
//! plan over P4Runtime (routes, the flowlet gap and per-port ECN thresholds as register writes),
//! every host pair reaches each other, and the registers read back over P4Runtime. Needs root,
//! iproute2, iputils-ping and the workspace binaries (pisa-switch, pisa-ctl).

use pisa_fabric::fabric::{Fabric, Options};

mod common;
use common::two_by_two;

#[test]
fn an_ecmp_fabric_is_programmed_by_its_plan_and_routes() {
    let t = two_by_two("ecmp");
    let opts = Options::for_test('e');
    let f = Fabric::up(&t, &opts, |m| eprintln!("{m}")).expect("bring-up");
    eprint!("{}", f.program().expect("programming over P4Runtime"));
    let (ok, total, failed) = f.all_pairs(false);
    assert_eq!((ok, total), (12, 12), "unreachable: {failed:?}");
    // leaf1 is the third switch.
    let read = |register: &str, index: &str| common::ctl(&f, 2, &["registers", register, index]);
    // K for a 100 Mb/s port by the DCTCP rule is 6 packets; the gap is 500 us.
    // (pisa-ctl prints values of 1024 and more in hex.)
    assert_eq!(read("ecn_threshold", "1").trim(), "ecn_threshold[1] = 6");
    assert_eq!(
        read("flowlet_gap_ns", "0").trim(),
        format!("flowlet_gap_ns[0] = {:#x}", 500_000)
    );
}
