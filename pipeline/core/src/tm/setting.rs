//! Port settings as the text commands write them (`--entries`, the admin socket, fabric plans,
//! the simulator): one parser for all of them.

use super::{PortConfig, Shaping};
use crate::metadata::PortId;

/// A run-time setting of a port, as the text commands (`--entries`, the admin socket, fabric
/// plans, the simulator) write it:
///
/// ```text
/// set_queue_depth <packets> [<port>]      set_queue_rate <pps> [<port>]
/// set_queue_bytes <bytes> [<port>]
/// set_port_rate <bits/s> [<port>]         set_port_delay <us> [<port>]
/// set_ecn_threshold <packets> [<port>]   set_pfc on|off [<port>]
/// set_pfc_xoff <packets> [<port>]       set_pfc_xon <packets> [<port>]
/// ```
///
/// Without `<port>` a setting applies to every data port. A rate of 0 removes shaping; an ECN
/// threshold of 0 turns marking off, and so does a PFC threshold of 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// Queue depth limit, packets.
    QueueDepth(u32),
    /// Queue depth limit, bytes (a queue holds at most 4 MiB unless raised).
    QueueBytes(u64),
    /// Shaping in packets/s (burst: one packet).
    QueueRate(u64),
    /// Shaping in bits/s (burst: one full-size frame); also the link speed for PFC quanta.
    PortRate(u64),
    /// Propagation delay, ns.
    PortDelay(u64),
    /// ECN marking threshold, packets.
    EcnThreshold(u32),
    /// Honour received PAUSE/PFC frames.
    Pfc(bool),
    /// PFC as an ingress port: pause the upstream at this many queued packets from the port.
    PfcXoff(u32),
    /// PFC as an ingress port: resume once fewer than this many remain (0: the default, 3/4 of
    /// the XOFF threshold; [`PortConfig::pfc_xon`]).
    PfcXon(u32),
}

/// Longest propagation delay a port accepts (10 s), so `now + delay` cannot overflow.
pub const MAX_DELAY_NS: u64 = 10_000_000_000;

impl Setting {
    /// Parses `verb args...`: None if `verb` is not a setting; else the setting and the port
    /// it names, if any.
    pub fn parse(verb: &str, args: &[String]) -> Option<Result<(Setting, Option<PortId>), String>> {
        fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> Result<T, String> {
            let a = args.get(i).ok_or_else(|| format!("missing {what}"))?;
            a.parse().map_err(|_| format!("bad {what}: {a}"))
        }
        let setting = match verb {
            "set_queue_depth" => arg(args, 0, "depth").map(Setting::QueueDepth),
            "set_queue_bytes" => arg(args, 0, "depth (bytes)").map(Setting::QueueBytes),
            "set_queue_rate" => arg(args, 0, "rate").map(Setting::QueueRate),
            "set_port_rate" => arg(args, 0, "rate").map(Setting::PortRate),
            "set_port_delay" => arg::<u64>(args, 0, "delay (us)").and_then(|us| {
                us.checked_mul(1000)
                    .filter(|&ns| ns <= MAX_DELAY_NS)
                    .map(Setting::PortDelay)
                    .ok_or_else(|| format!("delay {us} us: at most {} us", MAX_DELAY_NS / 1000))
            }),
            "set_ecn_threshold" => arg(args, 0, "threshold").map(Setting::EcnThreshold),
            "set_pfc_xoff" => arg(args, 0, "threshold (packets)").map(Setting::PfcXoff),
            "set_pfc_xon" => arg(args, 0, "resume threshold (packets)").map(Setting::PfcXon),
            "set_pfc" => match args.first().map(String::as_str) {
                Some("on") => Ok(Setting::Pfc(true)),
                Some("off") => Ok(Setting::Pfc(false)),
                _ => Err("expected on or off".to_string()),
            },
            _ => return None,
        };
        Some(setting.and_then(|s| {
            let port = match args.get(1) {
                Some(p) => Some(p.parse().map_err(|_| format!("bad port {p}"))?),
                None => None,
            };
            Ok((s, port))
        }))
    }

    /// Applies the setting to a port's configuration.
    pub fn apply(self, c: &mut PortConfig) {
        match self {
            Setting::QueueDepth(n) => c.max_packets = n,
            Setting::QueueBytes(n) => c.max_bytes = n,
            Setting::QueueRate(n) => {
                c.shaping = if n == 0 {
                    Shaping::None
                } else {
                    Shaping::PacketsPerSec(n)
                };
                c.burst = 1;
            }
            Setting::PortRate(n) => {
                c.shaping = if n == 0 {
                    Shaping::None
                } else {
                    Shaping::BitsPerSec(n)
                };
                c.burst = 1514;
                if n != 0 {
                    c.link_bps = n;
                }
            }
            Setting::PortDelay(ns) => c.delay_ns = ns.min(MAX_DELAY_NS),
            Setting::EcnThreshold(n) => c.ecn_threshold = (n != 0).then_some(n),
            Setting::Pfc(on) => c.pfc = on,
            Setting::PfcXoff(n) => c.pfc_xoff = (n != 0).then_some(n),
            Setting::PfcXon(n) => c.pfc_xon = (n != 0).then_some(n),
        }
    }
}
