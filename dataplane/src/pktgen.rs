//! The packet generator (docs/dataplane.md) at run time: the settings of
//! [`pipeline::pktgen`], shared by the control side and worker 0, which injects each application's
//! frames into ingress on the generator port every period.
//!
//! Generated traffic is bounded ([`MAX_RATE_PPS`] per application; a tick the worker could not
//! serve in time is skipped, not made up) and counted per application.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

pub use pipeline::pktgen::{
    APPS, AppConfig, HEADER_LEN, MAX_PERIOD_NS, MAX_RATE_PPS, MIN_PERIOD_NS, header,
    period_ns_from_us,
};

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

/// One enabled application in worker 0's schedule.
#[derive(Debug)]
struct Running {
    app: u8,
    config: AppConfig,
    /// When the next tick is due.
    next: u64,
    /// Frames of the current tick already emitted (0: no tick in progress).
    done: u64,
}

/// Worker 0's view: the enabled applications and when each ticks next.
#[derive(Debug, Default)]
pub(crate) struct Schedule {
    version: Option<u64>,
    apps: Vec<Running>,
}

impl Schedule {
    /// Calls `emit(app, config, batch, packet)` for frames due at `now`, at most `budget` of them
    /// in all (a tick bigger than that is finished by the next calls, so one call never does
    /// unbounded work); returns the next deadline, if any application runs (`now` while a tick
    /// is unfinished).
    pub(crate) fn run(
        &mut self,
        pg: &Pktgen,
        now: u64,
        budget: u64,
        mut emit: impl FnMut(u8, &AppConfig, u16, u16),
    ) -> Option<u64> {
        let v = pg.version.load(Ordering::Acquire);
        if self.version != Some(v) {
            let slots = pg.slots.lock();
            let old = std::mem::take(&mut self.apps);
            self.apps = slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.enabled)
                .filter_map(|(i, s)| {
                    let app = i as u8; // i < APPS = 8
                    let config = s.config.clone()?;
                    // An unchanged application keeps its place; a changed one starts afresh.
                    let (next, done) = old
                        .iter()
                        .find(|o| o.app == app && o.config == config)
                        .map_or((now, 0), |o| (o.next, o.done));
                    Some(Running {
                        app,
                        config,
                        next,
                        done,
                    })
                })
                .collect();
            self.version = Some(v);
        }
        let mut left = budget;
        for r in &mut self.apps {
            if r.done == 0 && now < r.next {
                continue;
            }
            let total = r.config.frames_per_tick();
            let packets = u64::from(r.config.packets.max(1));
            let end = total.min(r.done.saturating_add(left));
            for i in r.done..end {
                // i < batches x packets, so both fit in u16.
                emit(r.app, &r.config, (i / packets) as u16, (i % packets) as u16);
            }
            left -= end - r.done;
            r.done = end;
            if r.done < total {
                continue; // the budget ran out: the rest of this tick comes next call
            }
            r.done = 0;
            let period = r.config.period_ns.max(1);
            r.next = r.next.saturating_add(period);
            if r.next <= now {
                // Late by more than a period: skip what was missed rather than burst.
                let missed = (now - r.next) / period + 1;
                pg.stats[usize::from(r.app)]
                    .skipped_ticks
                    .fetch_add(missed, Ordering::Relaxed);
                r.next = r.next.saturating_add(missed.saturating_mul(period));
            }
        }
        self.apps
            .iter()
            .map(|r| if r.done > 0 { now } else { r.next })
            .min()
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
        assert_eq!(
            s.run(&pg, 0, u64::MAX, |a, _, b, p| frames.push((a, b, p))),
            None
        );
        pg.enable(2, true).unwrap();
        let next = s.run(&pg, 10, u64::MAX, |a, _, b, p| frames.push((a, b, p)));
        assert_eq!(frames.len(), 6);
        assert_eq!(frames[5], (2, 1, 2));
        assert_eq!(next, Some(1_000_010));
        frames.clear();
        s.run(&pg, 500_000, u64::MAX, |a, _, b, p| frames.push((a, b, p)));
        assert!(frames.is_empty(), "not due yet");
        // 3.5 periods late: one tick now, the 3 missed ones skipped.
        let next = s.run(&pg, 4_500_010, u64::MAX, |a, _, b, p| {
            frames.push((a, b, p))
        });
        assert_eq!(frames.len(), 6);
        assert_eq!(next, Some(5_000_010));
        assert_eq!(
            pg.stats(2).unwrap().skipped_ticks.load(Ordering::Relaxed),
            3
        );
        pg.enable(2, false).unwrap();
        assert_eq!(
            s.run(&pg, 6_000_000, u64::MAX, |_, _, _, _| panic!("disabled")),
            None
        );
    }

    #[test]
    fn absurd_periods_are_refused() {
        for us in [
            1e30,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            0.0,
            -1.0,
            0.5,
            6.1e7,
        ] {
            assert!(period_ns_from_us(us).is_err(), "{us} us accepted");
        }
        assert_eq!(period_ns_from_us(1.0), Ok(1_000));
        assert_eq!(period_ns_from_us(60e6), Ok(MAX_PERIOD_NS));
        // A saturated period must not pass the rate check by dividing to zero.
        let pg = Pktgen::new(1500, Box::new(|| {}));
        assert!(pg.configure(0, app(u64::MAX, u16::MAX, u16::MAX)).is_err());
        assert!(pg.configure(0, app(MAX_PERIOD_NS + 1, 1, 1)).is_err());
    }

    #[test]
    fn a_tick_does_bounded_work_and_time_cannot_wrap() {
        // The worst accepted setting: the longest period, as many frames per tick as the rate
        // bound allows (60 s x 1 Mpps = 60 M > 2^16 x 2^10).
        let pg = Pktgen::new(1500, Box::new(|| {}));
        let worst = app(MAX_PERIOD_NS, u16::MAX, 900);
        assert!(pg.configure(0, worst.clone()).is_ok());
        pg.enable(0, true).unwrap();
        let mut s = Schedule::default();
        let mut n = 0u64;
        let next = s.run(&pg, 5, 32, |_, _, _, _| n += 1);
        assert_eq!(n, 32, "one call emits at most its budget");
        assert_eq!(next, Some(5), "the rest of the tick is due at once");
        // The tick resumes where it stopped: frame 32 is batch 0, packet 32.
        let mut first = None;
        s.run(&pg, 6, 1, |_, _, b, p| first = Some((b, p)));
        assert_eq!(first, Some((0, 32)));
        // Finish the tick (the remaining frames, in bounded calls), then the next is a period on.
        let total = worst.frames_per_tick();
        let mut emitted = 33u64;
        let mut calls = 0u64;
        let mut next = None;
        while emitted < total {
            let mut k = 0;
            next = s.run(&pg, 7, 1 << 20, |_, _, _, _| k += 1);
            assert!(k <= 1 << 20);
            emitted += k;
            calls += 1;
        }
        assert_eq!(emitted, total);
        assert!(calls <= total.div_ceil(1 << 20));
        assert_eq!(next, Some(5 + MAX_PERIOD_NS));
        // A clock near the end of time neither wraps the deadline nor loops.
        let mut k = 0u64;
        let next = s.run(&pg, u64::MAX - 1, 64, |_, _, _, _| k += 1);
        assert_eq!(k, 64);
        assert_eq!(next, Some(u64::MAX - 1));
    }
}
