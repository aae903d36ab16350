//! The BMv2-style command language (`pipeline::commands::parse_line`) and the admin commands
//! (`dataplane::admin::run`) on a running switch with in-memory ports: arbitrary text, one line
//! at a time. Nothing may panic (the switch's workers included: a worker panic aborts the
//! process), and the control plane's two copies of the state must stay identical.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use dataplane::switch::{PortSpec, Switch, SwitchConfig};
use libfuzzer_sys::fuzz_target;
use pipeline::runtime::{Config, Pipeline};

fn switch() -> &'static Switch {
    static S: OnceLock<Switch> = OnceLock::new();
    S.get_or_init(|| {
        let program = programs::by_name("basic").expect("basic");
        let pipe = Pipeline::new(program, 1, Config::default());
        let (ports, links) = PortSpec::mem_pairs(1..=4).expect("in-memory ports");
        // Whatever the commands make the switch send (the packet generator) is taken off the
        // links, so that it does not pile up in memory.
        for l in links {
            std::thread::spawn(move || {
                loop {
                    let _ = l.recv(Duration::from_millis(100));
                }
            });
        }
        let config = SwitchConfig {
            workers: 1,
            buffers: 1024,
            ..SwitchConfig::default()
        };
        Switch::start(pipe, ports, config).expect("switch")
    })
}

fuzz_target!(|data: &[u8]| {
    let sw = switch();
    let schema = sw.pipeline().control.schema().clone();
    let text = String::from_utf8_lossy(data);
    for line in text.lines().take(64) {
        let _ = pipeline::commands::parse_line(&schema, line);
        let _ = dataplane::admin::run(sw, line);
    }
    // The packet generator stays off between inputs (it is worker 0's; a rate the fuzzer set
    // would otherwise run on through every later input).
    for app in 0..8 {
        let _ = sw.pktgen().enable(app, false);
    }
    if let Err(e) = sw.pipeline().control.check_copies() {
        panic!("{e}");
    }
});
