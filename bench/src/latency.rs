//! The latency harness of `pisa-latency` (issue 17): round-trip times through one switch and
//! through a 3-hop leaf-spine path, at idle gaps and under background load, side by side with
//! a direct veth pair and with Linux routers in the switch's place.
//!
//! One switch, in namespace `x`:
//!
//! ```text
//!   h1 (pings) --[1] x [2]-- h2 (answers in its kernel)
//!   g1 (pisa-gen) --[3] x [4]-- g2 (native XDP drop, counted)
//!   d1 -- d2 (direct veth, the baseline)
//! ```
//!
//! `x` is either a `pisa-switch` (program `basic`, one worker, routing the four /24s) or a Linux
//! router (addresses on its four ports, `ip_forward`, static neighbours): the same namespaces,
//! veths and addresses for both. Probes are `ping` (ICMP echo, answered in h2's kernel, so no
//! process wakes on the far side; ping stamps the reply with the kernel's receive time), so
//! the RTT is the forwarder's two traversals plus what the direct pair pays too.

use std::path::PathBuf;
use std::time::Duration;

use pisa_fabric::experiment::ping_times_us;
use pisa_fabric::{Netns, Process, veth};

use crate::harness::{ROUTER, attach_drop_sink, bin, xdp_drops};

/// One switch's namespaces and interfaces.
#[derive(Debug)]
pub struct OneSwitch {
    /// The pinging host.
    pub h1: Netns,
    /// The forwarder's namespace.
    pub x: Netns,
    /// The pinged host.
    pub h2: Netns,
    /// The background generator's host.
    pub g1: Netns,
    /// The background sink's host.
    pub g2: Netns,
    /// The direct pair.
    pub d1: Netns,
    /// The direct pair's far end.
    pub d2: Netns,
    /// The forwarder's ports, 1 to 4.
    pub ports: [String; 4],
    /// h1's interface.
    pub h1_if: String,
    /// g1's and g2's interfaces.
    gen_if: String,
    sink_if: String,
    /// Logs and objects.
    pub dir: PathBuf,
}

/// The hosts' MACs, by port (h1, h2, g1, g2).
const HOST_MAC: [&str; 4] = [
    "02:00:00:00:01:01",
    "02:00:00:00:02:01",
    "02:00:00:00:03:01",
    "02:00:00:00:04:01",
];

impl OneSwitch {
    /// Builds the namespaces, veths, addresses and the sink's XDP program.
    pub fn new() -> OneSwitch {
        let ns = |t: &str| Netns::new(t).expect("netns");
        let (h1, x, h2, g1, g2, d1, d2) = (
            ns("lh1"),
            ns("lx"),
            ns("lh2"),
            ns("lg1"),
            ns("lg2"),
            ns("ld1"),
            ns("ld2"),
        );
        let mut ports: [String; 4] = Default::default();
        let mut host_if: [String; 4] = Default::default();
        for (i, h) in [&h1, &h2, &g1, &g2].into_iter().enumerate() {
            let (a, p) = veth(h, &x).expect("veth");
            let n = i + 1;
            let ip = |args: &[&str]| h.exec("ip", args).expect("ip");
            ip(&["link", "set", &a, "address", HOST_MAC[i]]);
            ip(&["addr", "add", &format!("10.0.{n}.1/24"), "dev", &a]);
            ip(&[
                "route",
                "add",
                "10.0.0.0/16",
                "via",
                &format!("10.0.{n}.254"),
            ]);
            ip(&[
                "neigh",
                "add",
                &format!("10.0.{n}.254"),
                "lladdr",
                ROUTER,
                "dev",
                &a,
            ]);
            x.exec("ip", &["link", "set", &p, "address", ROUTER])
                .expect("ip");
            ports[i] = p;
            host_if[i] = a;
        }
        let (a, b) = veth(&d1, &d2).expect("veth");
        d1.exec("ip", &["addr", "add", "192.0.2.1/24", "dev", &a])
            .expect("ip");
        d2.exec("ip", &["addr", "add", "192.0.2.2/24", "dev", &b])
            .expect("ip");
        let dir = std::env::temp_dir().join(x.name());
        std::fs::create_dir_all(&dir).expect("dir");
        let [h1_if, _, gen_if, sink_if] = host_if;
        attach_drop_sink(&g2, &sink_if, &dir);
        OneSwitch {
            h1,
            x,
            h2,
            g1,
            g2,
            d1,
            d2,
            ports,
            h1_if,
            gen_if,
            sink_if,
            dir,
        }
    }

    /// Makes `x` a Linux router (`on`) or takes its addresses away (a switch's ports carry none).
    pub fn kernel_router(&self, on: bool) {
        let x = |args: &[&str]| {
            let _ = self.x.exec(args[0], &args[1..]);
        };
        x(&[
            "sysctl",
            "-qw",
            &format!("net.ipv4.ip_forward={}", u8::from(on)),
        ]);
        for (i, p) in self.ports.iter().enumerate() {
            let n = i + 1;
            if on {
                x(&["ip", "addr", "add", &format!("10.0.{n}.254/24"), "dev", p]);
                x(&[
                    "ip",
                    "neigh",
                    "replace",
                    &format!("10.0.{n}.1"),
                    "lladdr",
                    HOST_MAC[i],
                    "dev",
                    p,
                ]);
            } else {
                x(&["ip", "addr", "flush", "dev", p]);
            }
        }
    }

    /// Starts `pisa-switch` (program `basic`, one worker) in `x` with `flags`.
    pub fn start_switch(&self, flags: &[String]) -> Process {
        let entries = self.dir.join("entries.txt");
        let mut text = String::new();
        for (i, mac) in HOST_MAC.iter().enumerate() {
            let n = i + 1;
            text += &format!(
                "act_prof_create_member ecmp_selector {n} set_nhop {mac} {ROUTER} {n}\n\
                 table_indirect_add ipv4_lpm 10.0.{n}.0/24 => {n}\n"
            );
        }
        std::fs::write(&entries, text).expect("entries");
        let sock = self.dir.join("admin.sock");
        let _ = std::fs::remove_file(&sock);
        let mut args: Vec<String> = [
            "--program",
            "basic",
            "--io",
            "af-xdp",
            "--workers",
            "1",
            "--grpc-addr",
            "none",
            "--entries",
            entries.to_str().expect("utf-8"),
            "--admin-socket",
            sock.to_str().expect("utf-8"),
        ]
        .map(String::from)
        .into();
        for (i, p) in self.ports.iter().enumerate() {
            args.extend(["-i".into(), format!("{}@{p}", i + 1)]);
        }
        args.extend(flags.iter().cloned());
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let log = self.dir.join("switch.log");
        let mut p = Process::spawn(&self.x, &bin("pisa-switch"), &argv, &log).expect("spawn");
        for _ in 0..500 {
            if sock.exists() {
                // The ports' XDP programs and sockets are up once the admin socket is.
                std::thread::sleep(Duration::from_millis(200));
                return p;
            }
            if !p.running() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "pisa-switch did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Frames the background sink has dropped so far.
    pub fn sink_count(&self) -> u64 {
        xdp_drops(&self.g2, &self.sink_if)
    }

    /// Starts the background: 64-byte UDP frames g1 -> g2 at `pps` (0: flat out) for `secs`,
    /// the generator on CPU 0.
    pub fn background(&self, pps: u64, secs: f64) -> Process {
        let (pps, secs) = (pps.to_string(), secs.to_string());
        Process::spawn(
            &self.g1,
            "taskset",
            &[
                "-c",
                "0",
                &bin("pisa-gen"),
                "--iface",
                &self.gen_if,
                "--size",
                "64",
                "--pps",
                &pps,
                "--seconds",
                &secs,
                "--dst-mac",
                ROUTER,
                "--src-ip",
                "10.0.3.1",
                "--dst-ip",
                "10.0.4.1",
            ],
            &self.dir.join("gen.log"),
        )
        .expect("pisa-gen")
    }

    /// The frames/s that reach the sink over `secs` while the background runs.
    pub fn delivered(&self, secs: f64) -> f64 {
        let (c0, t0) = (self.sink_count(), std::time::Instant::now());
        std::thread::sleep(Duration::from_secs_f64(secs));
        let (c1, t1) = (self.sink_count(), std::time::Instant::now());
        c1.saturating_sub(c0) as f64 / (t1 - t0).as_secs_f64()
    }
}

impl Default for OneSwitch {
    fn default() -> Self {
        OneSwitch::new()
    }
}

/// Round-trip times, µs, of `count` pings `gap` apart from `ns` to `dst` (after 3 unmeasured
/// ones, which fill the neighbour and route caches). A lost probe is left out.
pub fn ping(ns: &Netns, dst: &str, gap: Duration, count: usize) -> Vec<f64> {
    warm_up(ns, dst);
    let (gap, count) = (format!("{:.6}", gap.as_secs_f64()), count.to_string());
    let out = ns
        .exec("ping", &["-n", "-W", "1", "-i", &gap, "-c", &count, dst])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    ping_times_us(&out)
}

/// Three unmeasured pings from `ns` to `dst`, 10 ms apart: they fill the neighbour and route
/// caches before a measurement.
pub fn warm_up(ns: &Netns, dst: &str) {
    let _ = ns.exec("ping", &["-q", "-n", "-c", "3", "-i", "0.01", dst]);
}

/// p50, p99 and max of `v` (nearest rank), or zeros when empty.
pub fn summary(v: &[f64]) -> [f64; 3] {
    if v.is_empty() {
        return [0.0; 3];
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((s.len() as f64 * q).ceil() as usize).clamp(1, s.len()) - 1];
    [at(0.5), at(0.99), s[s.len() - 1]]
}

#[cfg(test)]
mod tests {
    use super::summary;

    #[test]
    fn summary_takes_nearest_ranks() {
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(summary(&v), [100.0, 198.0, 200.0]);
        assert_eq!(summary(&[5.0]), [5.0, 5.0, 5.0]);
        assert_eq!(summary(&[]), [0.0; 3]);
    }
}
