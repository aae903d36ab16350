//! Issue 10, defect 2: a worker that panics must not leave a half-dead switch (its ports silent,
//! the process alive). The switch ends the process instead; this test runs a switch whose program
//! panics on one frame in a child process and checks that the child aborted.

use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::time::Duration;

use dataplane::switch::{PortSpec, Switch, SwitchConfig};
use pipeline::frame::Frame;
use pipeline::metadata::StdMeta;
use pipeline::program::{Ctx, Program};
use pipeline::runtime::{Config, Pipeline};
use pipeline::schema::{Schema, SchemaBuilder};

/// Forwards every frame to port 2, and panics (a bug) on a frame starting with 0xff.
#[derive(Debug)]
struct Buggy {
    schema: Arc<Schema>,
}

impl Program for Buggy {
    fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }
    fn ingress(&self, _cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        assert!(pkt.data().first() != Some(&0xff), "a bug in a program");
        md.egress_spec = Some(2);
    }
    fn egress(&self, _cx: &mut Ctx<'_>, _pkt: &mut Frame<'_>, _md: &mut StdMeta) {}
}

const CHILD: &str = "PISA_WORKER_PANIC_CHILD";

fn child() -> ! {
    let schema = Arc::new(SchemaBuilder::new("buggy", "0").build().unwrap());
    let pipe = Pipeline::new(Arc::new(Buggy { schema }), 1, Config::default());
    let (ports, links) = PortSpec::mem_pairs(1..=2).unwrap();
    let cfg = SwitchConfig {
        workers: 1,
        ..SwitchConfig::default()
    };
    let sw = Switch::start(pipe, ports, cfg).unwrap();
    links[0].send(&[0u8; 64]);
    assert!(links[1].recv(Duration::from_secs(5)).is_some(), "forwards");
    links[0].send(&[0xffu8; 64]);
    // A switch that survived its worker would still be here.
    std::thread::sleep(Duration::from_secs(5));
    drop(sw);
    std::process::exit(0);
}

#[test]
fn a_worker_panic_ends_the_process_instead_of_leaving_a_half_dead_switch() {
    if std::env::var_os(CHILD).is_some() {
        child();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_worker_panic_ends_the_process_instead_of_leaving_a_half_dead_switch",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(6), "SIGABRT expected: {out:?}");
    assert!(
        stderr.contains("pisa-worker-0 panicked: stopping the switch"),
        "{stderr}"
    );
}
