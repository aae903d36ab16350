//! `pisa-fabric e10` on the sweep driver ([`crate::sweep`]): E10's configurations at each
//! background level, or Fig. 17's thresholds (`thresholds`), in `pisa-sim`, namespaces or both.
//! Each point leaves `report.json`, `row.json` and (pisa-sim, RP senders) the reaction point's
//! `trace.csv`; the tables are `OUT/e10-<where>.md` (or `e10-<where>-sweep.md`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::{CONFIGS, Config, Row, Setup};
use crate::sweep::{Ctx, Experiment, command_line, read_json, write_file};

/// Where a point runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    /// In `pisa-sim`, in virtual time.
    Sim,
    /// In namespaces, with the switch processes.
    Netns,
}

impl Where {
    /// Its name in files and options.
    pub fn name(self) -> &'static str {
        match self {
            Where::Sim => "sim",
            Where::Netns => "netns",
        }
    }

    /// `sim`, `netns` or `both`.
    pub fn parse_list(s: &str) -> Result<Vec<Where>> {
        Ok(match s {
            "sim" => vec![Where::Sim],
            "netns" => vec![Where::Netns],
            "both" => vec![Where::Sim, Where::Netns],
            _ => bail!("--where {s}: sim, netns or both"),
        })
    }
}

/// What `pisa-fabric e10` asks for.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The run's parameters (thresholds, link rate, seconds, seed, ...).
    pub setup: Setup,
    /// Background levels, bits/s at this link rate.
    pub bgs: Vec<u64>,
    /// Configurations.
    pub configs: Vec<Config>,
    /// Where.
    pub wheres: Vec<Where>,
    /// Fig. 17's thresholds instead of the configurations (empty: E10's table).
    pub thresholds: Vec<u32>,
    /// Repetitions of every point; repetition r runs with the setup's seed + r - 1.
    pub reps: u32,
    /// Output directory.
    pub out: PathBuf,
}

/// One point.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Where.
    pub at: Where,
    /// Configuration.
    pub config: Config,
    /// Background level, bits/s.
    pub bg: u64,
    /// Fig. 17: the threshold (Q_P4QCN and Q_PFC alike).
    pub threshold: Option<u32>,
    /// Repetition, from 1.
    pub rep: u32,
}

/// The sweep.
#[derive(Debug)]
pub struct Sweep {
    s: Settings,
}

impl Sweep {
    /// Checks `s`.
    pub fn new(s: Settings) -> Result<Sweep> {
        if s.bgs.is_empty() || s.configs.is_empty() || s.wheres.is_empty() {
            bail!("--bg, --configs and --where name at least one each");
        }
        if s.setup.seconds.is_nan() || s.setup.seconds <= 0.0 || s.setup.link_bps == 0 {
            bail!("--seconds and --link must be positive");
        }
        Ok(Sweep { s })
    }

    fn setup_of(&self, p: &Point) -> Setup {
        let mut s = self.s.setup.clone();
        if let Some(q) = p.threshold {
            s.q_p4qcn = q;
            s.q_pfc = q;
        }
        s.seed = s.seed.wrapping_add(u64::from(p.rep) - 1);
        s
    }

    fn table(&self, at: Where, done: &[(&Point, PathBuf)]) -> Result<Option<String>> {
        let s = &self.s.setup;
        let rows: Vec<(&Point, Row)> = done
            .iter()
            .filter(|(p, _)| p.at == at)
            .map(|(p, d)| {
                let row: Row = read_json(&d.join("row.json"))?;
                Ok((*p, row))
            })
            .collect::<Result<_>>()?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut md = format!(
            "`{}`\n\nLinks {} Mb/s, flow host11 -> host41 at {:.1} Mb/s, {} s per point, \
             Q_P4QCN {} Q_PFC {}, seed {}{}.\n\n",
            command_line(),
            s.link_bps as f64 / 1e6,
            s.scale(super::PAPER_FLOW_BPS) as f64 / 1e6,
            s.seconds,
            s.q_p4qcn,
            s.q_pfc,
            s.seed,
            if self.s.reps > 1 {
                format!(
                    " to {} ({} repetitions; cells: median over them [95% bootstrap interval \
                     of the median])",
                    s.seed + u64::from(self.s.reps) - 1,
                    self.s.reps
                )
            } else {
                String::new()
            }
        );
        if self.s.thresholds.is_empty() && self.s.reps == 1 {
            let rows: Vec<Row> = rows.into_iter().map(|(_, r)| r).collect();
            md += &super::table(&rows);
        } else if self.s.thresholds.is_empty() {
            md += &super::table_over_reps(&rows);
        } else {
            md += "| threshold (packets) | p4qcn: host41 link use | p4qcn loss | pfc: host41 \
                   link use | pfc loss |\n|---:|---:|---:|---:|---:|\n";
            for &q in &self.s.thresholds {
                let cell = |name: &str| {
                    let of: Vec<&Row> = rows
                        .iter()
                        .filter(|(p, _)| p.threshold == Some(q) && p.config.name == name)
                        .map(|(_, r)| r)
                        .collect();
                    if of.is_empty() {
                        return "— | —".to_string();
                    }
                    let util: Vec<f64> = of.iter().map(|r| r.utilisation).collect();
                    let loss: Vec<f64> = of.iter().map(|r| r.loss).collect();
                    format!(
                        "{} | {}",
                        super::median_cell(&util, 3),
                        super::median_cell(&loss, 4)
                    )
                };
                let _ = writeln!(md, "| {q} | {} | {} |", cell("p4qcn"), cell("pfc"));
            }
        }
        Ok(Some(md))
    }

    /// The table files, one per place.
    pub fn table_path(&self, at: Where) -> PathBuf {
        let sweep = if self.s.thresholds.is_empty() {
            ""
        } else {
            "-sweep"
        };
        self.s.out.join(format!("e10-{}{sweep}.md", at.name()))
    }
}

impl Experiment for Sweep {
    type Point = Point;

    fn title(&self) -> String {
        "e10".into()
    }
    fn out(&self) -> &Path {
        &self.s.out
    }
    fn points(&self) -> Vec<Point> {
        let mut v = Vec::new();
        for &at in &self.s.wheres {
            if self.s.thresholds.is_empty() {
                for &c in &self.s.configs {
                    // pisa-sim has no TCP congestion control.
                    if c.tcp && at == Where::Sim {
                        continue;
                    }
                    for &bg in &self.s.bgs {
                        for rep in 1..=self.s.reps {
                            v.push(Point {
                                at,
                                config: c,
                                bg,
                                threshold: None,
                                rep,
                            });
                        }
                    }
                }
            } else {
                // Fig. 17: the lowest background level ("slight congestion").
                let bg = self.s.bgs.iter().copied().min().unwrap_or(0);
                for &q in &self.s.thresholds {
                    for c in [CONFIGS[2], CONFIGS[4]] {
                        for rep in 1..=self.s.reps {
                            v.push(Point {
                                at,
                                config: c,
                                bg,
                                threshold: Some(q),
                                rep,
                            });
                        }
                    }
                }
            }
        }
        v
    }
    fn dir_name(&self, p: &Point) -> String {
        let s = self.setup_of(p);
        let mut tag = format!(
            "{}-{}-{}-{:.0}M",
            p.config.name,
            p.at.name(),
            s.link_bps / 1_000_000,
            p.bg as f64 / 1e6
        );
        if let Some(q) = p.threshold {
            tag += &format!("-q{q}-{q}");
        }
        // The first repetition keeps the name it had before there were repetitions.
        if p.rep > 1 {
            tag += &format!("-rep{}", p.rep);
        }
        tag
    }
    fn label(&self, p: &Point) -> String {
        self.dir_name(p)
    }
    fn record(&self) -> String {
        let s = &self.s.setup;
        let mut r = format!(
            "experiment=e10\nlink_bps={}\ndelay_us={}\nbuffer={}\nseconds={}\nsize={}\n\
             mean_bytes={}\nseed={}\n",
            s.link_bps, s.delay_us, s.buffer, s.seconds, s.size, s.mean_bytes, s.seed
        );
        // The thresholds of E10's table; Fig. 17's points carry their own.
        if self.s.thresholds.is_empty() {
            let _ = write!(r, "q_p4qcn={}\nq_pfc={}\n", s.q_p4qcn, s.q_pfc);
        }
        r
    }
    fn measure(&self, p: &Point, dir: &Path, ctx: &Ctx) -> Result<String> {
        let s = self.setup_of(p);
        let (row, report) = match p.at {
            Where::Sim => super::sim(&s, &p.config, p.bg).map_err(anyhow::Error::msg)?,
            Where::Netns => super::netns(
                &s,
                &p.config,
                p.bg,
                &ctx.options(&dir.join("run")),
                dir,
                |m| eprintln!("    {m}"),
            )?,
        };
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            write_file(&path, text)
        };
        write("report.json", serde_json::to_string_pretty(&report)?)?;
        write("row.json", serde_json::to_string(&row)?)?;
        let trace = &report["flows"][0]["qcn_rp"]["trace_t_us_rc_rt_state"];
        if let Some(rows) = trace.as_array().filter(|r| !r.is_empty()) {
            // pisa-sim's RP trace: rows [t_us, rc, rt, state].
            let mut csv = String::from("t_us,rc_bps,rt_bps,state\n");
            for r in rows {
                let v: Vec<String> = r
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|x| x.as_str().map_or(x.to_string(), str::to_string))
                    .collect();
                csv += &(v.join(",") + "\n");
            }
            write("trace.csv", csv)?;
        }
        Ok(format!(
            "loss {:.4}, p99 {:?} us, use {:.3}",
            row.loss, row.latency_us.1, row.utilisation
        ))
    }
    fn tables(&self, done: &[(&Point, PathBuf)]) -> Result<()> {
        for &at in &self.s.wheres {
            if let Some(md) = self.table(at, done)? {
                let path = self.table_path(at);
                write_file(&path, md)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_sim_sweep_writes_its_table_and_resumes_without_rerunning_a_point() {
        let out = std::env::temp_dir().join(format!("pisa-e10-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let setup = Setup::paper(7_000_000, 0.5);
        let settings = Settings {
            bgs: vec![setup.scale(2_000_000)],
            configs: vec![CONFIGS[0], CONFIGS[1], CONFIGS[2]],
            wheres: vec![Where::Sim],
            thresholds: vec![],
            reps: 1,
            out: out.clone(),
            setup,
        };
        let ctx = Ctx::new("", Arc::new(AtomicBool::new(false)));
        let mut e = Sweep::new(settings.clone()).unwrap();
        let d = crate::sweep::run(&mut e, &ctx).unwrap();
        // tcp has no sim point.
        assert_eq!((d.points, d.ran), (2, 2));
        let md = std::fs::read_to_string(out.join("e10-sim.md")).unwrap();
        assert!(md.contains("| udp |") && md.contains("| p4qcn |"), "{md}");
        assert!(!md.contains("| tcp |"), "{md}");
        let trace = out.join("points/p4qcn-sim-7-2M/trace.csv");
        assert!(std::fs::read_to_string(trace).unwrap().starts_with("t_us,"));
        // Rerun: nothing runs, the same table comes out.
        std::fs::remove_file(out.join("e10-sim.md")).unwrap();
        let mut e = Sweep::new(settings.clone()).unwrap();
        assert_eq!(crate::sweep::run(&mut e, &ctx).unwrap().ran, 0);
        let again = std::fs::read_to_string(out.join("e10-sim.md")).unwrap();
        assert_eq!(
            again.lines().skip(1).collect::<Vec<_>>(),
            md.lines().skip(1).collect::<Vec<_>>()
        );
        // Another seed is another setup.
        let mut other = settings;
        other.setup.seed = 2;
        let err = crate::sweep::run(&mut Sweep::new(other).unwrap(), &ctx).unwrap_err();
        assert!(err.to_string().contains("seed=1"), "{err}");
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn repetitions_run_with_their_own_seeds_and_the_table_gives_their_median() {
        let out = std::env::temp_dir().join(format!("pisa-e10-reps-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let setup = Setup::paper(7_000_000, 0.5);
        let settings = Settings {
            bgs: vec![setup.scale(2_000_000)],
            configs: vec![CONFIGS[0]],
            wheres: vec![Where::Sim],
            thresholds: vec![],
            reps: 3,
            out: out.clone(),
            setup,
        };
        let ctx = Ctx::new("", Arc::new(AtomicBool::new(false)));
        let mut e = Sweep::new(settings).unwrap();
        let d = crate::sweep::run(&mut e, &ctx).unwrap();
        assert_eq!((d.points, d.ran), (3, 3));
        // The first repetition keeps the name of a run without repetitions.
        for dir in ["udp-sim-7-2M", "udp-sim-7-2M-rep2", "udp-sim-7-2M-rep3"] {
            assert!(
                out.join("points").join(dir).join("row.json").exists(),
                "{dir}"
            );
        }
        // Other seeds, other flows: the repetitions' reports differ.
        let report = |dir: &str| {
            std::fs::read_to_string(out.join("points").join(dir).join("report.json")).unwrap()
        };
        assert_ne!(report("udp-sim-7-2M"), report("udp-sim-7-2M-rep2"));
        let md = std::fs::read_to_string(out.join("e10-sim.md")).unwrap();
        assert!(md.contains("seed 1 to 3 (3 repetitions"), "{md}");
        let row = md.lines().find(|l| l.starts_with("| udp |")).unwrap();
        assert!(row.contains("| 3 |") && row.contains(" ["), "{row}");
        std::fs::remove_dir_all(&out).unwrap();
    }
}
