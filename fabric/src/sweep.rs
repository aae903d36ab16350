//! The sweep driver every experiment runs on: an [`Experiment`] says what its points are, how
//! one point is measured and what tables its finished points make; [`run`] owns the rest.
//!
//! - **Output layout**: `OUT/setup` (the setup record), `OUT/points/<point>/` (each point's
//!   files and, once it finished, a `done` marker), and the experiment's tables in `OUT/`,
//!   rebuilt from the finished points after every point.
//! - **Resume**: a point with a `done` marker is not run again, so a sweep stopped by Ctrl-C,
//!   a failure or a reboot goes on at the first unfinished point when the same command runs
//!   again. Points may be added to a finished sweep (more schemes, loads or reps): only the new
//!   ones run. A point that was running when the sweep stopped starts over in an empty
//!   directory.
//! - **The setup record**: what every point of `OUT` must share (the experiment's
//!   [`Experiment::record`]: topology, rates, durations, transport, seed, ...). A run whose record
//!   differs from the one in `OUT` is refused, so that no table mixes points measured under two
//!   setups.
//! - **Bring-up and teardown**: a point brings its fabric up through [`Ctx::up`], serialised
//!   with the teardown a signal starts ([`with_cleanup`]); the driver tears the fabric down after
//!   every point, whether it succeeded or not.
//! - **Ctrl-C**: SIGINT or SIGTERM tears the fabric down and exits with 130; the finished points
//!   stay.
//! - **Progress**: before the sweep, how many points there are, done and to run; after each
//!   point, its one-line result, its time, the time elapsed and an ETA.
//! - **Retries**: an experiment may ask for a finished point to be measured again
//!   ([`Experiment::redo`]; the FCT sweep does for a point whose fidelity was degraded, with
//!   `--retry-degraded N`). The finished attempt moves to `OUT/points/<point>.attempt<K>/`
//!   (kept, out of the tables) and the point runs again, at once or when the sweep resumes.
//! - **Parallel points**: an experiment whose points touch no fabric may measure several at
//!   once ([`Experiment::parallel`], `--jobs` for simulated sweeps), each on its own thread; the
//!   tables are rebuilt after each point as before, one point at a time, and a failure stops
//!   the others from starting new points.
//! - **Seeding** is the experiment's: every experiment derives a point's seed from the point's
//!   value (scheme, load, rep), never its position in the sweep.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context as _, Result, anyhow, bail};
use topo::Topology;

use crate::fabric::{self, Fabric, Links, Options};

/// An experiment: its points, how a point is measured, and its tables.
pub trait Experiment {
    /// A point of the sweep.
    type Point;

    /// The experiment's name in messages (`experiment`, `dbb e9`, `e10 sim`).
    fn title(&self) -> String;
    /// The output directory.
    fn out(&self) -> &Path;
    /// Every point, in the order they run and appear in tables.
    fn points(&self) -> Vec<Self::Point>;
    /// A point's directory under `OUT/points/`: unique among the points, stable across runs.
    fn dir_name(&self, p: &Self::Point) -> String;
    /// A point in progress lines (`ecmp load 0.2 rep 1`).
    fn label(&self, p: &Self::Point) -> String;
    /// The setup record: what every point in `OUT` shares (text, compared byte for byte).
    fn record(&self) -> String;
    /// A line said once before the points run (rates, transport, ...), if any.
    fn describe(&self) -> Option<String> {
        None
    }
    /// Runs once before the first point when any point is to run (e.g. the fabric's
    /// calibration); not when every point is done.
    fn prepare(&mut self, _ctx: &Ctx) -> Result<()> {
        Ok(())
    }
    /// Whether the finished point in `dir` is to be measured again, its files moved aside
    /// (`attempts` earlier attempts of it are kept beside it already).
    fn redo(&self, _dir: &Path, _attempts: usize) -> bool {
        false
    }
    /// How many points may be measured at once, each on its own thread: 1 (the default) for
    /// points that bring up a fabric (there is one fabric name, and the machine is what they
    /// measure); more only for points that touch no fabric, such as simulated ones.
    fn parallel(&self) -> usize {
        1
    }
    /// Measures `p`, writing its files into `dir` (empty); returns its result in one line.
    fn measure(&self, p: &Self::Point, dir: &Path, ctx: &Ctx) -> Result<String>;
    /// Rebuilds the experiment's tables in `OUT` from the finished points, in sweep order, with
    /// their directories.
    fn tables(&self, done: &[(&Self::Point, PathBuf)]) -> Result<()>;
}

/// What a point needs of the driver: cancellation and fabrics.
#[derive(Clone, Debug)]
pub struct Ctx {
    /// Set by a signal: stop between steps.
    pub cancel: Arc<AtomicBool>,
    /// The fabric's name (namespaces `pf<NAME>-<node>`).
    pub name: String,
    /// The switches' port I/O.
    pub io: String,
    /// How switches are linked to each other.
    pub links: Links,
    /// Whether switches capture their ports.
    pub capture: bool,
    /// The switches' workers' SCHED_FIFO priority (0: normal scheduling).
    pub rt_priority: u8,
}

impl Ctx {
    /// A context for fabric `name` with the defaults: AF_XDP, veth links, no capture.
    pub fn new(name: &str, cancel: Arc<AtomicBool>) -> Ctx {
        Ctx {
            cancel,
            name: name.to_string(),
            io: "af-xdp".into(),
            links: Links::Veth,
            capture: false,
            rt_priority: 0,
        }
    }

    /// Whether the sweep was asked to stop.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// Fails if the sweep was asked to stop.
    pub fn check(&self) -> Result<()> {
        if self.cancelled() {
            bail!("cancelled");
        }
        Ok(())
    }

    /// The fabric options of a point whose run files go to `dir`.
    pub fn options(&self, dir: &Path) -> Options {
        Options {
            name: self.name.clone(),
            io: self.io.clone(),
            dir: dir.to_path_buf(),
            cancel: self.cancel.clone(),
            capture: self.capture,
            links: self.links,
            rt_priority: self.rt_priority,
        }
    }

    /// Brings `t` up with `opts`, serialised with a signal's teardown, quietly.
    pub fn up(&self, t: &Topology, opts: &Options) -> Result<Fabric> {
        bring_up(t, opts, |_| {})
    }
}

/// Held while a fabric is being brought up: a teardown waits for the bring-up to stop, so that
/// no switch starts after the teardown has looked for processes.
static BRINGUP: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Brings `t` up, serialised with [`with_cleanup`]'s teardown and cancellable through
/// `opts.cancel`.
pub fn bring_up(t: &Topology, opts: &Options, progress: impl FnMut(&str)) -> Result<Fabric> {
    let _g = BRINGUP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Fabric::up(t, opts, progress)
}

/// Runs `f` with a cancel flag. On SIGINT or SIGTERM meanwhile, sets the flag, tears fabric
/// `name` down and exits with 130; when `f` fails, tears it down too.
pub fn with_cleanup<T>(name: &str, f: impl FnOnce(Arc<AtomicBool>) -> Result<T>) -> Result<T> {
    dataplane::signals::block_termination();
    let n = name.to_string();
    let cancel = Arc::new(AtomicBool::new(false));
    let c = cancel.clone();
    std::thread::spawn(move || {
        let sig = dataplane::signals::wait_for_termination();
        eprintln!("pisa-fabric: signal {sig}: tearing fabric {n} down");
        c.store(true, Ordering::Relaxed);
        let _g = BRINGUP
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        fabric::teardown(&n);
        std::process::exit(130);
    });
    let r = f(cancel.clone());
    if cancel.load(Ordering::Relaxed) {
        // A signal stopped `f`: its thread tears the fabric down and exits with 130; an exit
        // here would race it with another code.
        loop {
            std::thread::park();
        }
    }
    if r.is_err() {
        fabric::teardown(name);
    }
    r
}

/// What a sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Done {
    /// Points of the sweep.
    pub points: usize,
    /// Points that were finished before this run.
    pub already: usize,
    /// Points this run measured.
    pub ran: usize,
}

/// Checks `OUT/setup` against `record`, writing it if there is none.
fn check_record(out: &Path, record: &str) -> Result<()> {
    let path = out.join("setup");
    match std::fs::read_to_string(&path) {
        Ok(old) if old != record => Err(anyhow!(
            "{}: the points there were measured under another setup; use another --out, or the \
             same settings.\n  there: {}\n  now:   {}",
            path.display(),
            old.trim().replace('\n', "; "),
            record.trim().replace('\n', "; ")
        )),
        Ok(_) => Ok(()),
        Err(_) => {
            // Points without a record were measured under an unknown setup.
            let measured = std::fs::read_dir(out.join("points"))
                .map(|d| d.flatten().any(|p| p.path().join("done").exists()))
                .unwrap_or(false);
            if measured {
                bail!(
                    "{}: finished points but no record of their setup ({}); use another --out",
                    out.display(),
                    path.display()
                );
            }
            std::fs::write(&path, record).with_context(|| format!("writing {}", path.display()))
        }
    }
}

/// `s` seconds as `1h02m`, `3m04s` or `5s`.
pub fn fmt_duration(s: f64) -> String {
    let s = s.max(0.0) as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Runs every unfinished point of `e`, then rebuilds its tables (see the module documentation).
pub fn run<E>(e: &mut E, ctx: &Ctx) -> Result<Done>
where
    E: Experiment + Sync,
    E::Point: Sync,
{
    let out = e.out().to_path_buf();
    let points_dir = out.join("points");
    std::fs::create_dir_all(&points_dir)
        .with_context(|| format!("creating {}", points_dir.display()))?;
    check_record(&out, &e.record())?;
    let all = e.points();
    let dirs: Vec<PathBuf> = all.iter().map(|p| points_dir.join(e.dir_name(p))).collect();
    for (i, d) in dirs.iter().enumerate() {
        if dirs[..i].contains(d) {
            bail!("two points share the directory {}", d.display());
        }
    }
    let todo: Vec<usize> = (0..all.len())
        .filter(|&i| {
            !dirs[i].join("done").exists() || e.redo(&dirs[i], attempts_of(&dirs[i]).len())
        })
        .collect();
    let title = e.title();
    eprintln!(
        "{title}: {} points, {} done already, {} to run; results in {}",
        all.len(),
        all.len() - todo.len(),
        todo.len(),
        out.display()
    );
    if let Some(d) = e.describe() {
        eprintln!("{title}: {d}");
    }
    if !todo.is_empty() {
        e.prepare(ctx)?;
    }
    let finished = |dirs: &[PathBuf]| -> Vec<(usize, PathBuf)> {
        dirs.iter()
            .enumerate()
            .filter(|(_, d)| d.join("done").exists())
            .map(|(i, d)| (i, d.clone()))
            .collect()
    };
    let started = Instant::now();
    let e: &E = e;
    let n = todo.len();
    // Tables, markers and progress lines, one point at a time; the count of finished points.
    let tables = std::sync::Mutex::new(0usize);
    // Measures todo[k] (again, while the experiment asks).
    let one = |k: usize| -> Result<()> {
        let i = todo[k];
        let (p, dir) = (&all[i], &dirs[i]);
        let label = e.label(p);
        loop {
            ctx.check()?;
            let kept = attempts_of(dir).len();
            if dir.join("done").exists() {
                let to = attempt_dir(dir, kept + 1);
                std::fs::rename(dir, &to)
                    .with_context(|| format!("moving {} to {}", dir.display(), to.display()))?;
                eprintln!(
                    "[{}/{n}] {label}: measuring again (attempt {} kept in {})",
                    k + 1,
                    kept + 1,
                    to.display()
                );
            } else {
                eprintln!("[{}/{n}] {label}: starting", k + 1);
            }
            let _ = std::fs::remove_dir_all(dir);
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let t0 = Instant::now();
            let r = e.measure(p, dir, ctx);
            // Whatever the point did, no fabric outlives it (parallel points bring none up).
            if e.parallel() <= 1 {
                fabric::teardown(&ctx.name);
            }
            let line = r.with_context(|| format!("{title}: {label} ({})", dir.display()))?;
            let mut count = tables
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let marker = dir.join("done");
            std::fs::write(&marker, "").with_context(|| format!("writing {}", marker.display()))?;
            let done = finished(&dirs);
            let done: Vec<(&E::Point, PathBuf)> =
                done.into_iter().map(|(i, d)| (&all[i], d)).collect();
            e.tables(&done)?;
            *count += 1;
            let per = started.elapsed().as_secs_f64() / *count as f64;
            eprintln!(
                "[{}/{n}] {label}: {line}; {} this point, {} elapsed, ETA {}",
                k + 1,
                fmt_duration(t0.elapsed().as_secs_f64()),
                fmt_duration(started.elapsed().as_secs_f64()),
                // Re-measured points count as measurements, so there may be more than n.
                fmt_duration(per * n.saturating_sub(*count) as f64)
            );
            drop(count);
            if !e.redo(dir, attempts_of(dir).len()) {
                return Ok(());
            }
        }
    };
    let jobs = e.parallel().clamp(1, n.max(1));
    if jobs == 1 {
        for k in 0..n {
            one(k)?;
        }
    } else {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let errors: Vec<anyhow::Error> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..jobs)
                .map(|_| {
                    s.spawn(|| -> Result<()> {
                        while !failed.load(Ordering::Relaxed) {
                            let k = next.fetch_add(1, Ordering::Relaxed);
                            if k >= n {
                                break;
                            }
                            if let Err(err) = one(k) {
                                failed.store(true, Ordering::Relaxed);
                                return Err(err);
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            workers
                .into_iter()
                .filter_map(|w| match w.join() {
                    Ok(r) => r.err(),
                    Err(panic) => std::panic::resume_unwind(panic),
                })
                .collect()
        });
        if let Some(err) = errors.into_iter().next() {
            return Err(err);
        }
    }
    if todo.is_empty() {
        let done = finished(&dirs);
        let done: Vec<(&E::Point, PathBuf)> = done.into_iter().map(|(i, d)| (&all[i], d)).collect();
        e.tables(&done)?;
    }
    Ok(Done {
        points: all.len(),
        already: all.len() - todo.len(),
        ran: todo.len(),
    })
}

/// `dir`'s kept attempt `k` (from 1): `<dir>.attempt<k>` beside it.
pub fn attempt_dir(dir: &Path, k: usize) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".attempt{k}"));
    dir.with_file_name(name)
}

/// The kept attempts of the point in `dir`, in order (attempt 1, 2, ... while they exist).
pub fn attempts_of(dir: &Path) -> Vec<PathBuf> {
    (1..)
        .map(|k| attempt_dir(dir, k))
        .take_while(|d| d.exists())
        .collect()
}

/// Reads and parses a point's JSON file (`row.json`, `report.json`), naming it on failure.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Writes a point's or a table's file, naming it on failure.
pub fn write_file(path: &Path, text: impl AsRef<[u8]>) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The command line this process was started with, for the tables' headers.
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sweep of numbers: a point writes its square; the table lists the finished ones.
    struct Squares {
        out: PathBuf,
        n: u32,
        setting: u32,
        measured: std::sync::Mutex<Vec<u32>>,
        /// Cancels the sweep after this many points have been measured.
        stop_after: Option<(usize, Arc<AtomicBool>)>,
        prepared: u32,
        /// Odd points are measured again while they have fewer kept attempts than this.
        retries: usize,
        /// Points measured at once.
        jobs: usize,
        /// The threads that measured points.
        threads: std::sync::Mutex<std::collections::BTreeSet<String>>,
    }

    impl Experiment for Squares {
        type Point = u32;
        fn title(&self) -> String {
            "squares".into()
        }
        fn out(&self) -> &Path {
            &self.out
        }
        fn points(&self) -> Vec<u32> {
            (1..=self.n).collect()
        }
        fn dir_name(&self, p: &u32) -> String {
            format!("p{p}")
        }
        fn label(&self, p: &u32) -> String {
            format!("point {p}")
        }
        fn record(&self) -> String {
            format!("setting={}\n", self.setting)
        }
        fn prepare(&mut self, _ctx: &Ctx) -> Result<()> {
            self.prepared += 1;
            Ok(())
        }
        fn redo(&self, dir: &Path, attempts: usize) -> bool {
            let p: u32 = std::fs::read_to_string(dir.join("value"))
                .unwrap()
                .parse()
                .unwrap();
            p % 2 == 1 && attempts < self.retries
        }
        fn parallel(&self) -> usize {
            self.jobs
        }
        fn measure(&self, p: &u32, dir: &Path, _ctx: &Ctx) -> Result<String> {
            assert_eq!(std::fs::read_dir(dir)?.count(), 0, "a point starts empty");
            self.threads
                .lock()
                .unwrap()
                .insert(format!("{:?}", std::thread::current().id()));
            if self.jobs > 1 {
                // Long enough that every worker takes points.
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            std::fs::write(dir.join("value"), (p * p).to_string())?;
            self.measured.lock().unwrap().push(*p);
            if let Some((k, c)) = &self.stop_after
                && self.measured.lock().unwrap().len() == *k
            {
                c.store(true, Ordering::Relaxed);
            }
            if *p == 99 {
                bail!("point 99 fails");
            }
            Ok(format!("{}", p * p))
        }
        fn tables(&self, done: &[(&u32, PathBuf)]) -> Result<()> {
            let mut t = String::new();
            for (p, d) in done {
                t += &format!("{p} {}\n", std::fs::read_to_string(d.join("value"))?);
            }
            std::fs::write(self.out.join("table"), t)?;
            Ok(())
        }
    }

    fn squares(out: &Path, n: u32) -> Squares {
        Squares {
            out: out.to_path_buf(),
            n,
            setting: 1,
            measured: std::sync::Mutex::new(vec![]),
            stop_after: None,
            prepared: 0,
            retries: 0,
            jobs: 1,
            threads: Default::default(),
        }
    }

    fn ctx() -> Ctx {
        // An empty name: the driver's teardown touches no namespace.
        Ctx::new("", Arc::new(AtomicBool::new(false)))
    }

    #[test]
    fn a_cancelled_sweep_resumes_at_the_next_point_and_runs_no_point_twice() {
        let out = std::env::temp_dir().join(format!("pisa-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let c = ctx();
        let mut e = squares(&out, 5);
        e.stop_after = Some((2, c.cancel.clone()));
        let err = run(&mut e, &c).unwrap_err();
        assert_eq!(err.to_string(), "cancelled");
        assert_eq!(*e.measured.lock().unwrap(), [1, 2]);
        assert_eq!(
            std::fs::read_to_string(out.join("table")).unwrap(),
            "1 1\n2 4\n"
        );
        // A point that was running when the sweep stopped (no marker) starts over, empty.
        std::fs::create_dir_all(out.join("points/p3")).unwrap();
        std::fs::write(out.join("points/p3/value"), "partial").unwrap();

        let mut e = squares(&out, 5);
        let d = run(&mut e, &ctx()).unwrap();
        assert_eq!(
            d,
            Done {
                points: 5,
                already: 2,
                ran: 3
            }
        );
        assert_eq!(*e.measured.lock().unwrap(), [3, 4, 5]);
        assert_eq!(e.prepared, 1);
        assert_eq!(
            std::fs::read_to_string(out.join("table")).unwrap(),
            "1 1\n2 4\n3 9\n4 16\n5 25\n"
        );
        // Nothing left: no point runs, nothing is prepared, the table is rebuilt.
        std::fs::remove_file(out.join("table")).unwrap();
        let mut e = squares(&out, 5);
        assert_eq!(run(&mut e, &ctx()).unwrap().ran, 0);
        assert_eq!(e.prepared, 0);
        assert!(out.join("table").exists());
        // More points: only the new one runs.
        let mut e = squares(&out, 6);
        assert_eq!(run(&mut e, &ctx()).unwrap().ran, 1);
        assert_eq!(*e.measured.lock().unwrap(), [6]);
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn a_sweep_resumes_only_under_its_own_setup_and_a_failing_point_stays_unfinished() {
        let out = std::env::temp_dir().join(format!("pisa-sweep-rec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let mut e = squares(&out, 2);
        run(&mut e, &ctx()).unwrap();
        let mut other = squares(&out, 3);
        other.setting = 2;
        let err = run(&mut other, &ctx()).unwrap_err().to_string();
        assert!(
            err.contains("setting=1") && err.contains("setting=2"),
            "{err}"
        );
        assert!(other.measured.lock().unwrap().is_empty());
        // Finished points without a record are of an unknown setup.
        std::fs::remove_file(out.join("setup")).unwrap();
        let err = run(&mut squares(&out, 2), &ctx()).unwrap_err().to_string();
        assert!(err.contains("no record"), "{err}");
        std::fs::remove_dir_all(&out).unwrap();

        // A failing point names itself and leaves no marker.
        let mut e = squares(&out, 99);
        let err = format!("{:#}", run(&mut e, &ctx()).unwrap_err());
        assert!(err.contains("point 99") && err.contains("fails"), "{err}");
        assert!(!out.join("points/p99/done").exists());
        assert!(out.join("points/p98/done").exists());
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn a_point_measured_again_keeps_its_earlier_attempts_beside_it() {
        let out = std::env::temp_dir().join(format!("pisa-sweep-redo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let mut e = squares(&out, 3);
        e.retries = 2;
        assert_eq!(run(&mut e, &ctx()).unwrap().ran, 3);
        // At once, twice each: the odd points (whose squares are odd).
        assert_eq!(*e.measured.lock().unwrap(), [1, 1, 1, 2, 3, 3, 3]);
        let p1 = out.join("points/p1");
        assert_eq!(
            attempts_of(&p1),
            [
                out.join("points/p1.attempt1"),
                out.join("points/p1.attempt2")
            ]
        );
        assert!(attempts_of(&out.join("points/p2")).is_empty());
        assert!(out.join("points/p1.attempt2/done").exists());
        // Only the points themselves make the table.
        assert_eq!(
            std::fs::read_to_string(out.join("table")).unwrap(),
            "1 1\n2 4\n3 9\n"
        );
        // Resumed with one more retry allowed: each odd point once more, nothing else.
        let mut e = squares(&out, 3);
        e.retries = 3;
        let d = run(&mut e, &ctx()).unwrap();
        assert_eq!((d.already, d.ran), (1, 2));
        assert_eq!(*e.measured.lock().unwrap(), [1, 3]);
        assert_eq!(attempts_of(&out.join("points/p3")).len(), 3);
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn parallel_points_each_run_once_and_make_the_same_table() {
        let out = std::env::temp_dir().join(format!("pisa-sweep-par-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let mut e = squares(&out, 20);
        e.jobs = 3;
        assert_eq!(run(&mut e, &ctx()).unwrap().ran, 20);
        let mut m = e.measured.lock().unwrap().clone();
        m.sort_unstable();
        assert_eq!(m, (1..=20).collect::<Vec<_>>());
        assert_eq!(
            e.threads.lock().unwrap().len(),
            3,
            "every worker measured points"
        );
        let table: String = (1..=20).map(|p| format!("{p} {}\n", p * p)).collect();
        assert_eq!(std::fs::read_to_string(out.join("table")).unwrap(), table);
        // Resumed: nothing runs again.
        let mut e = squares(&out, 20);
        e.jobs = 3;
        assert_eq!(run(&mut e, &ctx()).unwrap().ran, 0);
        // A failing point stops the sweep with its error, and leaves no marker.
        let mut e = squares(&out, 99);
        e.jobs = 2;
        let err = format!("{:#}", run(&mut e, &ctx()).unwrap_err());
        assert!(err.contains("point 99") && err.contains("fails"), "{err}");
        assert!(!out.join("points/p99/done").exists());
        std::fs::remove_dir_all(&out).unwrap();
    }
}
