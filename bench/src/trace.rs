//! Where a probe's time goes through one switch: `pisa-latency --trace` records kernel
//! tracepoints (`perf record -a`) while h1 pings h2 through the switch, and splits each probe's
//! path into the segments below from the timestamps of those events.
//!
//! | segment | from | to |
//! |---|---|---|
//! | sender | ping's `sendto` | the switch's port 1 receives the frame (`netif_receive_skb`) |
//! | XDP to wake-up | port 1 receives | the worker is woken (`sched_wakeup`) |
//! | wake-up to on-CPU | woken | switched in (`sched_switch`) |
//! | back to user | switched in | `ppoll` returns |
//! | userspace, echo | `ppoll` returns (or the frame arrived, for a polling worker) | the worker's first `sendto` |
//! | tx, far end, reply | that `sendto` | it returns (copy-mode transmit, h2's kernel answers, the reply reaches port 2's socket) |
//! | userspace, reply | | the worker's next `sendto` |
//! | tx to h1 | | h1's interface receives the reply |
//!
//! A wake-up whose target CPU was idle (a `cpu_idle` entry without exit) woke a halted vCPU.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The tracepoints recorded.
pub const EVENTS: &str = "sched:sched_switch,sched:sched_wakeup,net:netif_receive_skb,\
                          syscalls:sys_enter_ppoll,syscalls:sys_exit_ppoll,\
                          syscalls:sys_enter_sendto,syscalls:sys_exit_sendto,power:cpu_idle";

/// The segments' names, in path order.
pub const SEGMENTS: [&str; 8] = [
    "sender (ping's sendto to the switch's port)",
    "XDP to wake-up",
    "wake-up to on-CPU",
    "back to user (ppoll returns)",
    "userspace, echo request",
    "tx, far end, reply back",
    "userspace, reply",
    "tx to h1",
];

/// One probe's segments (ns; `None` where the worker did not sleep) and whether its wake-up
/// found the target CPU idle.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    /// Per segment, ns.
    pub seg: [Option<u64>; 8],
    /// The wake-up's target CPU was idle.
    pub halted: Option<bool>,
}

/// One line of `perf script -F comm,tid,cpu,time,event,trace`.
#[derive(Debug, PartialEq)]
struct Line<'a> {
    comm: &'a str,
    cpu: usize,
    t_ns: u64,
    event: &'a str,
    trace: &'a str,
}

fn parse(line: &str) -> Option<Line<'_>> {
    let open = line.find(" [")?;
    let close = open + line[open..].find("] ")?;
    let comm = line[..open].trim().rsplit_once(' ')?.0.trim();
    let cpu = line[open + 2..close].parse().ok()?;
    let rest = &line[close + 2..];
    let (time, rest) = rest.split_once(": ")?;
    let (event, trace) = rest.trim().split_once(": ").unwrap_or((rest.trim(), ""));
    let (s, frac) = time.trim().split_once('.')?;
    let frac = format!("{frac:0<9}");
    let t_ns = s.parse::<u64>().ok()? * 1_000_000_000 + frac[..9].parse::<u64>().ok()?;
    Some(Line {
        comm,
        cpu,
        t_ns,
        event: event.trim_end_matches(':'),
        trace,
    })
}

fn field<'a>(trace: &'a str, key: &str) -> Option<&'a str> {
    trace
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// Splits the probes in `perf script` output; `port1` is the switch's port toward h1, `h1_if`
/// h1's own interface.
pub fn probes(script: &str, port1: &str, h1_if: &str) -> Vec<Probe> {
    // Timestamps t0..t8 of the probe in progress.
    let mut t: [Option<u64>; 9] = [None; 9];
    let mut halted = None;
    let mut idle: BTreeMap<usize, bool> = BTreeMap::new();
    let mut out = Vec::new();
    let worker = |c: &str| c.starts_with("pisa-worker");
    for l in script.lines().filter_map(parse) {
        match l.event {
            "power:cpu_idle" => {
                idle.insert(l.cpu, field(l.trace, "state") != Some("4294967295"));
            }
            "syscalls:sys_enter_sendto" if l.comm == "ping" => {
                t = [None; 9];
                t[0] = Some(l.t_ns);
                halted = None;
            }
            "net:netif_receive_skb"
                if t[0].is_some() && t[1].is_none() && field(l.trace, "dev") == Some(port1) =>
            {
                t[1] = Some(l.t_ns);
            }
            "sched:sched_wakeup"
                if t[1].is_some()
                    && t[2].is_none()
                    && t[5].is_none()
                    && field(l.trace, "comm").is_some_and(worker) =>
            {
                t[2] = Some(l.t_ns);
                let cpu = field(l.trace, "target_cpu").and_then(|c| c.parse().ok());
                halted = cpu.map(|c| idle.get(&c).copied().unwrap_or(false));
            }
            "sched:sched_switch"
                if t[2].is_some()
                    && t[3].is_none()
                    && field(l.trace, "next_comm").is_some_and(worker) =>
            {
                t[3] = Some(l.t_ns);
            }
            "syscalls:sys_exit_ppoll" if worker(l.comm) && t[3].is_some() && t[4].is_none() => {
                t[4] = Some(l.t_ns);
            }
            "syscalls:sys_enter_sendto" if worker(l.comm) && t[1].is_some() => {
                if t[5].is_none() && (t[2].is_none() || t[4].is_some()) {
                    t[5] = Some(l.t_ns);
                } else if t[6].is_some() && t[7].is_none() {
                    t[7] = Some(l.t_ns);
                }
            }
            "syscalls:sys_exit_sendto" if worker(l.comm) && t[5].is_some() && t[6].is_none() => {
                t[6] = Some(l.t_ns);
            }
            "net:netif_receive_skb"
                if t[7].is_some() && t[8].is_none() && field(l.trace, "dev") == Some(h1_if) =>
            {
                t[8] = Some(l.t_ns);
                let d = |a: usize, b: usize| Some(t[b]?.saturating_sub(t[a]?));
                // A polling worker has no wake-up: userspace starts at the frame's arrival.
                let start = if t[2].is_some() { 4 } else { 1 };
                out.push(Probe {
                    seg: [
                        d(0, 1),
                        d(1, 2),
                        d(2, 3),
                        d(3, 4),
                        d(start, 5),
                        d(5, 6),
                        d(6, 7),
                        d(7, 8),
                    ],
                    halted,
                });
                t = [None; 9];
            }
            _ => {}
        }
    }
    out
}

/// Runs `perf record -a` on [`EVENTS`] for as long as `argv` runs, into `data`; returns
/// `perf script`'s output.
pub fn record(data: &Path, argv: &[&str]) -> Result<String, String> {
    let data_s = data.to_str().ok_or("path")?;
    let st = Command::new("perf")
        .args(["record", "-q", "-a", "-o", data_s, "-e", EVENTS, "--"])
        .args(argv)
        .output()
        .map_err(|e| format!("perf: {e} (install linux-perf)"))?;
    if !st.status.success() {
        return Err(format!(
            "perf record: {}",
            String::from_utf8_lossy(&st.stderr)
        ));
    }
    let out = Command::new("perf")
        .args([
            "script",
            "-i",
            data_s,
            "-F",
            "comm,tid,cpu,time,event,trace",
        ])
        .output()
        .map_err(|e| format!("perf script: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Taken from a recording on this machine (a sleeping worker, ping every 10 ms).
    const SCRIPT: &str = "\
            ping 23517 [000] 11178.187590:  syscalls:sys_enter_sendto: fd: 0x00000003, len: 0x00000040
            ping 23517 [000] 11178.187634:      net:netif_receive_skb: dev=p1 skbaddr=0xffff888109154000 len=84
            ping 23517 [000] 11178.187661:         sched:sched_wakeup: comm=pisa-worker-0 pid=23512 prio=120 target_cpu=001
         swapper     0 [001] 11178.187662:             power:cpu_idle: state=4294967295 cpu_id=1
         swapper     0 [001] 11178.187677:         sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=pisa-worker-0 next_pid=23512 next_prio=120
   pisa-worker-0 23512 [001] 11178.187697:    syscalls:sys_exit_ppoll: 0x1
   pisa-worker-0 23512 [001] 11178.187743:  syscalls:sys_enter_sendto: fd: 0x0000000c, len: 0x00000000
   pisa-worker-0 23512 [001] 11178.187764:      net:netif_receive_skb: dev=b0 skbaddr=0xffff88810694df00 len=84
   pisa-worker-0 23512 [001] 11178.187807:   syscalls:sys_exit_sendto: 0x0
   pisa-worker-0 23512 [001] 11178.187812:  syscalls:sys_enter_sendto: fd: 0x00000003, len: 0x00000000
   pisa-worker-0 23512 [001] 11178.187817:      net:netif_receive_skb: dev=a0 skbaddr=0xffff88810694d600 len=84
   pisa-worker-0 23512 [001] 11178.187840:   syscalls:sys_exit_sendto: 0x0
";

    #[test]
    fn a_sleeping_workers_probe_splits_into_its_segments() {
        let idle = "         swapper     0 [001] 11178.180000:             power:cpu_idle: state=1 cpu_id=1\n";
        let p = probes(&format!("{idle}{SCRIPT}"), "p1", "a0");
        assert_eq!(p.len(), 1);
        let us = |n: u64| Some(n * 1000);
        assert_eq!(
            p[0].seg,
            [us(44), us(27), us(16), us(20), us(46), us(64), us(5), us(5)]
        );
        assert_eq!(p[0].halted, Some(true));
    }

    #[test]
    fn a_polling_workers_probe_has_no_wake_up() {
        let script: String = SCRIPT
            .lines()
            .filter(|l| !l.contains("sched_") && !l.contains("ppoll") && !l.contains("cpu_idle"))
            .map(|l| format!("{l}\n"))
            .collect();
        let p = probes(&script, "p1", "a0");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].seg[1..4], [None, None, None]);
        // Userspace counts from the frame's arrival at the port.
        assert_eq!(p[0].seg[4], Some(109_000));
        assert_eq!(p[0].halted, None);
    }
}
