//! The packet generator's settings, as Tofino has them: up to [`APPS`] applications, each a frame
//! template sent into ingress on the generator port every period, in batches of packets, marked
//! [`crate::metadata::InstanceType::Generated`]. Probe-based programs (HULA's probes) use it.
//! The switch (`dataplane::pktgen`) and `pisa-sim` run these settings; both take them as the
//! commands [`parse`] reads, so one fabric plan drives both.
//!
//! With `header`, each frame starts with Tofino's 6-byte timer header: `pad:3 pipe_id:2 app_id:3`,
//! a pad byte, `batch_id:16`, `packet_id:16`, then the template. Without it the template is the
//! whole frame (a probe that needs no generator metadata).
//!
//! ```text
//! pktgen_set <app> <period_us> <batches> <packets> header|raw <template hex>
//! pktgen_enable <app>    pktgen_disable <app>
//! ```

/// Applications.
pub const APPS: usize = 8;
/// Length of the timer header.
pub const HEADER_LEN: usize = 6;
/// The most frames per second one application may generate.
pub const MAX_RATE_PPS: u64 = 1_000_000;
/// The shortest period.
pub const MIN_PERIOD_NS: u64 = 1_000;
/// The longest period (one minute): longer ones are refused, so that deadline arithmetic stays far
/// from overflow and a typo (`1e30`) is an error, not a silent saturation.
pub const MAX_PERIOD_NS: u64 = 60_000_000_000;

/// A period given in microseconds (as typed on the admin socket) in nanoseconds, if it is a
/// finite number in [`MIN_PERIOD_NS`]..=[`MAX_PERIOD_NS`]: NaN, infinities, zero, negative and
/// absurd values are refused before any conversion can saturate.
pub fn period_ns_from_us(us: f64) -> Result<u64, String> {
    let ns = us * 1000.0;
    if !ns.is_finite() || ns < MIN_PERIOD_NS as f64 || ns > MAX_PERIOD_NS as f64 {
        return Err(format!(
            "period {us} us: must be a number from {} to {} us",
            MIN_PERIOD_NS / 1000,
            MAX_PERIOD_NS / 1000
        ));
    }
    // In range, so the conversion neither saturates nor wraps.
    Ok(ns.round() as u64)
}

/// One application's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppConfig {
    /// Time between two ticks.
    pub period_ns: u64,
    /// Batches per tick.
    pub batches: u16,
    /// Packets per batch.
    pub packets: u16,
    /// Prepend the timer header.
    pub header: bool,
    /// The frame (after the header, if any).
    pub template: Vec<u8>,
}

impl AppConfig {
    /// Frames per tick.
    pub fn frames_per_tick(&self) -> u64 {
        u64::from(self.batches) * u64::from(self.packets)
    }

    /// Checks the period, the rate bound and the frame length against `max_frame`.
    pub fn check(&self, max_frame: usize) -> Result<(), String> {
        if !(MIN_PERIOD_NS..=MAX_PERIOD_NS).contains(&self.period_ns) {
            return Err(format!(
                "period of {} ns (must be {MIN_PERIOD_NS}..={MAX_PERIOD_NS})",
                self.period_ns
            ));
        }
        if self.batches == 0 || self.packets == 0 {
            return Err("batches and packets must be at least 1".into());
        }
        // u128: frames per tick (< 2^32) x 1e9 cannot overflow, and any rounding is upwards, so
        // no setting slips under the bound.
        let rate = (u128::from(self.frames_per_tick()) * 1_000_000_000)
            .div_ceil(u128::from(self.period_ns));
        if rate > u128::from(MAX_RATE_PPS) {
            return Err(format!(
                "{rate} frames/s is above the generator's bound of {MAX_RATE_PPS} per application"
            ));
        }
        let len = self.template.len() + if self.header { HEADER_LEN } else { 0 };
        if self.template.is_empty() || len > max_frame {
            return Err(format!("frame of {len} bytes (1..={max_frame})"));
        }
        Ok(())
    }
}

/// The timer header of frame `packet` of batch `batch` of application `app` (pipe 0).
pub fn header(app: u8, batch: u16, packet: u16) -> [u8; HEADER_LEN] {
    let [b0, b1] = batch.to_be_bytes();
    let [p0, p1] = packet.to_be_bytes();
    [app & 0x7, 0, b0, b1, p0, p1]
}

/// A generator command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `pktgen_set`: configure an application (disabled until enabled).
    Set(u8, AppConfig),
    /// `pktgen_enable` (true) or `pktgen_disable` (false).
    Enable(u8, bool),
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> Result<T, String> {
    let s = args.get(i).ok_or_else(|| format!("missing {what}"))?;
    s.parse().map_err(|_| format!("bad {what}: {s}"))
}

/// Reads a generator command: `None` if `verb` is not one, else the command or why it is wrong.
/// The application number is checked against [`APPS`]; the rest of the settings by
/// [`AppConfig::check`] where they are applied (it needs the buffer size).
pub fn parse(verb: &str, args: &[String]) -> Option<Result<Command, String>> {
    let app = || -> Result<u8, String> {
        let app: u8 = arg(args, 0, "application")?;
        if usize::from(app) >= APPS {
            return Err(format!("application {app}: there are {APPS} (0..{APPS})"));
        }
        Ok(app)
    };
    Some(match verb {
        "pktgen_set" => (|| {
            let app = app()?;
            let period_ns = period_ns_from_us(arg(args, 1, "period (us)")?)?;
            let header = match args.get(4).map(String::as_str) {
                Some("header") => true,
                Some("raw") => false,
                _ => return Err("expected header or raw".into()),
            };
            let hex = args.get(5).ok_or("missing template")?;
            if hex.len() % 2 != 0 {
                return Err("the template must be an even number of hex digits".into());
            }
            let template = (0..hex.len())
                .step_by(2)
                .map(|i| {
                    hex.get(i..i + 2)
                        .and_then(|d| u8::from_str_radix(d, 16).ok())
                })
                .collect::<Option<Vec<u8>>>()
                .ok_or("the template must be hex digits")?;
            let config = AppConfig {
                period_ns,
                batches: arg(args, 2, "batches")?,
                packets: arg(args, 3, "packets")?,
                header,
                template,
            };
            Ok(Command::Set(app, config))
        })(),
        "pktgen_enable" | "pktgen_disable" => {
            app().map(|a| Command::Enable(a, verb == "pktgen_enable"))
        }
        _ => return None,
    })
}

/// `bytes` as the hex digits `pktgen_set` reads.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> (String, Vec<String>) {
        let mut w = s.split_whitespace().map(str::to_string);
        (w.next().unwrap(), w.collect())
    }

    fn parsed(s: &str) -> Option<Result<Command, String>> {
        let (v, a) = words(s);
        parse(&v, &a)
    }

    #[test]
    fn commands_read_back_what_hex_writes() {
        let t = vec![0xff, 0x00, 0x88, 0xb5];
        let line = format!("pktgen_set 3 250 1 2 raw {}", hex(&t));
        let Some(Ok(Command::Set(3, c))) = parsed(&line) else {
            panic!("{line}")
        };
        assert_eq!(
            (c.period_ns, c.batches, c.packets, c.header),
            (250_000, 1, 2, false)
        );
        assert_eq!(c.template, t);
        assert_eq!(
            parsed("pktgen_enable 3"),
            Some(Ok(Command::Enable(3, true)))
        );
        assert_eq!(
            parsed("pktgen_disable 0"),
            Some(Ok(Command::Enable(0, false)))
        );
        assert_eq!(parsed("set_port_rate 1000"), None);
    }

    #[test]
    fn bad_commands_say_why() {
        for bad in [
            "pktgen_set 8 100 1 1 raw 00",
            "pktgen_set 0 100 1 1 raw 0",
            "pktgen_set 0 100 1 1 raw zz",
            "pktgen_set 0 100 1 1 both 00",
            "pktgen_set 0 0 1 1 raw 00",
            "pktgen_set 0 100 1 1 raw",
            "pktgen_enable 9",
            "pktgen_enable",
        ] {
            assert!(matches!(parsed(bad), Some(Err(_))), "{bad} accepted");
        }
    }
}
