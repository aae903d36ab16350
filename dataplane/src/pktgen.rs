//! The packet generator (design.md section 4), as Tofino has one: up to [`APPS`] applications,
//! each a frame template sent into ingress on the generator port every period, in batches of
//! packets. Probe-based programs (HULA's probes, P4TE's monitoring) use it; the program tells
//! generated frames by their ingress port ([`pipeline::runtime::Config::pktgen_port`]).
//!
//! With `header`, each frame starts with Tofino's 6-byte timer header: `pad:3 pipe_id:2 app_id:3`,
//! a pad byte, `batch_id:16`, `packet_id:16`, then the template. Without it the template is the
//! whole frame (a probe that needs no generator metadata).
//!
//! Generated traffic is bounded ([`MAX_RATE_PPS`] per application; a tick the worker could not
//! serve in time is skipped, not made up) and counted per application.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Applications.
pub const APPS: usize = 8;
/// Length of the timer header.
pub const HEADER_LEN: usize = 6;
/// The most frames per second one application may generate.
pub const MAX_RATE_PPS: u64 = 1_000_000;
/// The shortest period.
pub const MIN_PERIOD_NS: u64 = 1_000;

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

    fn check(&self, max_frame: usize) -> Result<(), String> {
        if self.period_ns < MIN_PERIOD_NS {
            return Err(format!("period below {MIN_PERIOD_NS} ns"));
        }
        if self.batches == 0 || self.packets == 0 {
            return Err("batches and packets must be at least 1".into());
        }
        let rate = self.frames_per_tick() * 1_000_000_000 / self.period_ns;
        if rate > MAX_RATE_PPS {
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

/// Per-application counters.
#[derive(Debug, Default)]
pub struct AppStats {
    /// Frames injected into ingress.
    pub generated: AtomicU64,
    /// Frames not generated: no buffer free.
    pub dropped: AtomicU64,
    /// Ticks skipped because the worker was late by more than a period.
    pub skipped_ticks: AtomicU64,
}

#[derive(Debug, Default, Clone)]
struct Slot {
    config: Option<AppConfig>,
    enabled: bool,
}

/// Wakes the worker that runs the generator.
type Waker = Box<dyn Fn() + Send + Sync>;

/// The generator's settings and counters, shared by the control side and worker 0.
pub struct Pktgen {
    slots: Mutex<Vec<Slot>>,
    /// Bumped on every change, so the worker rebuilds its schedule.
    version: AtomicU64,
    stats: Vec<AppStats>,
    max_frame: usize,
    /// A sleeping worker must see a change now, not at its next timeout.
    wake: Waker,
}

impl std::fmt::Debug for Pktgen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pktgen")
            .field("slots", &self.slots)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The timer header of frame `packet` of batch `batch` of application `app` (pipe 0).
pub fn header(app: u8, batch: u16, packet: u16) -> [u8; HEADER_LEN] {
    let [b0, b1] = batch.to_be_bytes();
    let [p0, p1] = packet.to_be_bytes();
    [app & 0x7, 0, b0, b1, p0, p1]
}

impl Pktgen {
    /// A generator whose frames may be up to `max_frame` bytes; `wake` wakes the worker that
    /// runs it.
    pub fn new(max_frame: usize, wake: Waker) -> Self {
        Pktgen {
            slots: Mutex::new(vec![Slot::default(); APPS]),
            version: AtomicU64::new(0),
            stats: (0..APPS).map(|_| AppStats::default()).collect(),
            max_frame,
            wake,
        }
    }

    fn slot<T>(
        &self,
        app: u8,
        f: impl FnOnce(&mut Slot) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut slots = self.slots.lock();
        let s = slots
            .get_mut(usize::from(app))
            .ok_or_else(|| format!("application {app}: there are {APPS} (0..{APPS})"))?;
        let r = f(s)?;
        self.version.fetch_add(1, Ordering::Release);
        drop(slots);
        (self.wake)();
        Ok(r)
    }

    /// Sets application `app` (disabled until [`Pktgen::enable`]).
    pub fn configure(&self, app: u8, config: AppConfig) -> Result<(), String> {
        config.check(self.max_frame)?;
        self.slot(app, |s| {
            *s = Slot {
                config: Some(config),
                enabled: false,
            };
            Ok(())
        })
    }

    /// Starts or stops application `app`.
    pub fn enable(&self, app: u8, on: bool) -> Result<(), String> {
        self.slot(app, |s| {
            if on && s.config.is_none() {
                return Err(format!("application {app} is not configured"));
            }
            s.enabled = on;
            Ok(())
        })
    }

    /// The counters of application `app`.
    pub fn stats(&self, app: u8) -> Option<&AppStats> {
        self.stats.get(usize::from(app))
    }

    /// A table of the applications and their counters.
    pub fn show(&self) -> String {
        let slots = self.slots.lock().clone();
        let mut out = String::from(
            "app enabled period_ns batches packets header len generated dropped skipped\n",
        );
        for (i, s) in slots.iter().enumerate() {
            let Some(c) = &s.config else { continue };
            let st = &self.stats[i];
            let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
            out += &format!(
                "{i} {} {} {} {} {} {} {} {} {}\n",
                s.enabled,
                c.period_ns,
                c.batches,
                c.packets,
                c.header,
                c.template.len(),
                l(&st.generated),
                l(&st.dropped),
                l(&st.skipped_ticks)
            );
        }
        out
    }
}

/// Worker 0's view: the enabled applications and when each ticks next.
#[derive(Debug, Default)]
pub(crate) struct Schedule {
    version: Option<u64>,
    apps: Vec<(u8, AppConfig, u64)>,
}

impl Schedule {
    /// Calls `emit(app, config, batch, packet)` for every frame due at `now`; returns the next
    /// deadline, if any application runs.
    pub(crate) fn run(
        &mut self,
        pg: &Pktgen,
        now: u64,
        mut emit: impl FnMut(u8, &AppConfig, u16, u16),
    ) -> Option<u64> {
        let v = pg.version.load(Ordering::Acquire);
        if self.version != Some(v) {
            let slots = pg.slots.lock();
            let old: Vec<(u8, u64)> = self.apps.iter().map(|a| (a.0, a.2)).collect();
            self.apps = slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.enabled)
                .filter_map(|(i, s)| {
                    let app = i as u8; // i < APPS = 8
                    let next = old.iter().find(|o| o.0 == app).map_or(now, |o| o.1);
                    Some((app, s.config.clone()?, next))
                })
                .collect();
            self.version = Some(v);
        }
        for (app, config, next) in &mut self.apps {
            if now < *next {
                continue;
            }
            for batch in 0..config.batches {
                for packet in 0..config.packets {
                    emit(*app, config, batch, packet);
                }
            }
            *next += config.period_ns;
            if *next <= now {
                // Late by more than a period: skip what was missed rather than burst.
                let missed = (now - *next) / config.period_ns + 1;
                pg.stats[usize::from(*app)]
                    .skipped_ticks
                    .fetch_add(missed, Ordering::Relaxed);
                *next += missed * config.period_ns;
            }
        }
        self.apps.iter().map(|a| a.2).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(period_ns: u64, batches: u16, packets: u16) -> AppConfig {
        AppConfig {
            period_ns,
            batches,
            packets,
            header: true,
            template: vec![0xab; 60],
        }
    }

    #[test]
    fn header_layout_is_tofinos() {
        assert_eq!(header(5, 0x0102, 0x0304), [5, 0, 1, 2, 3, 4]);
        assert_eq!(header(9, 0, 0)[0], 1, "app id is 3 bits");
    }

    #[test]
    fn rate_and_size_are_bounded() {
        let pg = Pktgen::new(1500, Box::new(|| {}));
        assert!(pg.configure(0, app(1_000, 1, 1)).is_ok());
        assert!(pg.configure(0, app(1_000, 2, 1)).is_err(), "2 Mpps");
        assert!(pg.configure(0, app(500, 1, 1)).is_err(), "period");
        assert!(pg.configure(0, app(1_000_000, 0, 1)).is_err());
        let mut big = app(1_000_000, 1, 1);
        big.template = vec![0; 1495];
        assert!(pg.configure(0, big).is_err(), "1495 + 6 > 1500");
        assert!(pg.configure(8, app(1_000_000, 1, 1)).is_err());
        assert!(pg.enable(3, true).is_err(), "unconfigured");
    }

    #[test]
    fn ticks_emit_batches_and_skip_when_late() {
        let pg = Pktgen::new(1500, Box::new(|| {}));
        pg.configure(2, app(1_000_000, 2, 3)).unwrap();
        let mut s = Schedule::default();
        let mut frames = Vec::new();
        assert_eq!(s.run(&pg, 0, |a, _, b, p| frames.push((a, b, p))), None);
        pg.enable(2, true).unwrap();
        let next = s.run(&pg, 10, |a, _, b, p| frames.push((a, b, p)));
        assert_eq!(frames.len(), 6);
        assert_eq!(frames[5], (2, 1, 2));
        assert_eq!(next, Some(1_000_010));
        frames.clear();
        s.run(&pg, 500_000, |a, _, b, p| frames.push((a, b, p)));
        assert!(frames.is_empty(), "not due yet");
        // 3.5 periods late: one tick now, the 3 missed ones skipped.
        let next = s.run(&pg, 4_500_010, |a, _, b, p| frames.push((a, b, p)));
        assert_eq!(frames.len(), 6);
        assert_eq!(next, Some(5_000_010));
        assert_eq!(
            pg.stats(2).unwrap().skipped_ticks.load(Ordering::Relaxed),
            3
        );
        pg.enable(2, false).unwrap();
        assert_eq!(s.run(&pg, 6_000_000, |_, _, _, _| panic!("disabled")), None);
    }
}
