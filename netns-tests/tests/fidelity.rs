//! The fidelity monitors can fail (issue 30): the same CI-sized `pisa-fabric experiment` point
//! (a 2x2 leaf-spine with 20 Mb/s host links, `ecmp`, Hadoop flows for 2 s) comes out `ok` on its
//! own and `degraded`,
//! with its reasons, when a CPU hog (one spinning thread per CPU, started and stopped here) runs
//! beside it. Needs root, iproute2 and the workspace binaries (pisa-switch, pisa-fabric,
//! pisa-traffic).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pisa_fabric::{run, workspace_bin};

mod common;
use common::{Cleanup, col, csv, small_experiment};

/// Runs the point into its own directory; its summary row's fidelity cells by column name. At
/// 20 Mb/s a quiet 2-core machine keeps every link's p99 lateness at 0.07-0.27 of a full frame's
/// time (0.30-0.81 at 100 Mb/s, too close to the threshold of 1 for a test that must not flip).
fn point(tag: &str) -> Vec<(String, String)> {
    let name = format!("f{tag}{}", std::process::id() % 10_000);
    let _cleanup = Cleanup(name.clone());
    let out = std::env::temp_dir().join(format!("pisa-fidelity-test-{name}"));
    let _ = std::fs::remove_dir_all(&out);
    let bin = workspace_bin("pisa-fabric");
    let args = small_experiment("20M", "ecmp", &out, &name, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(bin.to_str().unwrap(), &args).expect("pisa-fabric experiment");
    eprint!("{}", String::from_utf8_lossy(&o.stderr));
    let (h, rows) = csv(&out.join("summary.csv"));
    assert_eq!(rows.len(), 1);
    let cells = [
        "fidelity",
        "cpu_busy",
        "runq_mean",
        "host_drops",
        "switch_input_drops",
        "link_late_p99_frames",
        "link_late_port",
        "start_lag_p99_us",
        "short_avg_fct_us",
    ]
    .iter()
    .map(|c| (c.to_string(), rows[0][col(&h, c)].clone()))
    .collect();
    let _ = std::fs::remove_dir_all(&out);
    cells
}

fn get<'a>(cells: &'a [(String, String)], k: &str) -> &'a str {
    &cells.iter().find(|(c, _)| c == k).unwrap().1
}

#[test]
fn a_point_is_ok_alone_and_degraded_beside_a_cpu_hog() {
    // Alone, up to three times: CI's machine is shared, and another tenant's burst during the
    // quiet run is exactly what the monitors must report. A monitor that never says `ok` still
    // fails here.
    let mut quiet = point("q");
    for attempt in 2..=3 {
        if get(&quiet, "fidelity") == "ok" {
            break;
        }
        eprintln!("quiet run degraded ({quiet:?}); attempt {attempt} of 3");
        quiet = point("q");
    }
    eprintln!("quiet: {quiet:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let cpus = std::thread::available_parallelism().map_or(2, usize::from);
    let hogs: Vec<_> = (0..cpus)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    let busy = point("h");
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
    eprintln!("with a hog: {busy:?}");

    assert_eq!(get(&quiet, "fidelity"), "ok", "{quiet:?}");
    let v = get(&busy, "fidelity");
    assert!(v.starts_with("degraded: "), "{busy:?}");
    // The machine was measured saturated, and the reasons say so.
    let b: f64 = get(&busy, "cpu_busy").parse().unwrap();
    let q: f64 = get(&quiet, "cpu_busy").parse().unwrap();
    assert!(b > q && b > 0.95, "busy {b} quiet {q}");
    assert!(v.contains("busy"), "{v}");
    // And the links' own monitor saw the CPU wait: later departures than alone.
    let late = |c: &[(String, String)]| get(c, "link_late_p99_frames").parse::<f64>().unwrap();
    assert!(late(&busy) > late(&quiet), "{busy:?} against {quiet:?}");
    // The switches' own monitors answered in both runs.
    for c in [&quiet, &busy] {
        get(c, "switch_input_drops").parse::<u64>().unwrap();
        get(c, "link_late_p99_frames").parse::<f64>().unwrap();
    }
}
