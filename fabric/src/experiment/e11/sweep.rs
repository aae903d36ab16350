//! `pisa-fabric e11` on the sweep driver ([`crate::sweep`]): every (load, scheme) of E11 on a
//! fresh fabric. Each point leaves `report.json` and `row.json`; the table is `OUT/e11-netns.md`,
//! a section per load.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use ::sim::workload::Cdf;

use super::{Row, Scheme, Setup};
use crate::sweep::{Ctx, Experiment, command_line, read_json, write_file};

/// What `pisa-fabric e11` asks for.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Everything but the load (its `load` is ignored).
    pub setup: Setup,
    /// Offered loads.
    pub loads: Vec<f64>,
    /// Schemes.
    pub schemes: Vec<Scheme>,
    /// Repetitions of every point; repetition r runs with the setup's seed + r - 1.
    pub reps: u32,
    /// Output directory.
    pub out: PathBuf,
}

/// One point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Offered load.
    pub load: f64,
    /// Scheme.
    pub scheme: Scheme,
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
        if s.loads.is_empty() || s.loads.iter().any(|l| !(*l > 0.0 && *l <= 1.0)) {
            bail!("--loads: fractions in (0, 1]");
        }
        if s.schemes.is_empty() {
            bail!("--schemes: at least one");
        }
        if s.reps == 0 {
            bail!("--reps: at least one");
        }
        if s.setup.oversubscription.is_nan() || s.setup.oversubscription < 1.0 {
            bail!("--oversubscription: at least 1");
        }
        Ok(Sweep { s })
    }

    fn setup_at(&self, load: f64) -> Setup {
        Setup {
            load,
            ..self.s.setup.clone()
        }
    }

    fn setup_of(&self, p: &Point) -> Setup {
        let mut s = self.setup_at(p.load);
        s.seed = s.seed.wrapping_add(u64::from(p.rep) - 1);
        s
    }

    /// The table's file.
    pub fn table_path(&self) -> PathBuf {
        self.s.out.join("e11-netns.md")
    }
}

impl Experiment for Sweep {
    type Point = Point;

    fn title(&self) -> String {
        "e11".into()
    }
    fn out(&self) -> &Path {
        &self.s.out
    }
    fn points(&self) -> Vec<Point> {
        let mut v = Vec::new();
        for &load in &self.s.loads {
            // Repetitions inside the load, schemes innermost: a sweep stopped early still has
            // every scheme of the reps it finished, paired by seed.
            for rep in 1..=self.s.reps {
                for &scheme in &self.s.schemes {
                    v.push(Point { load, scheme, rep });
                }
            }
        }
        v
    }
    fn dir_name(&self, p: &Point) -> String {
        let name = format!(
            "load{:.0}-{}",
            p.load * 100.0,
            p.scheme.name.replace([' ', '=', '/'], "")
        );
        // The first repetition keeps the name it had before there were repetitions.
        match p.rep {
            1 => name,
            r => format!("{name}-rep{r}"),
        }
    }
    fn label(&self, p: &Point) -> String {
        format!("{} at load {} rep {}", p.scheme.name, p.load, p.rep)
    }
    fn record(&self) -> String {
        let s = &self.s.setup;
        format!(
            "experiment=e11\nhosts_per_leaf={}\nhost_bps={}\nrtt_us={}\nscale={}\nseconds={}\n\
             drain={}\nseed={}\nbuffer={}\npfc_xoff={}\nip_len={}\n",
            s.hosts_per_leaf,
            s.host_bps,
            s.rtt_us,
            s.scale,
            s.seconds,
            s.drain,
            s.seed,
            s.buffer,
            s.pfc_xoff,
            s.ip_len
        ) + &if s.oversubscription == 1.0 {
            // Only when given, so that earlier runs' directories still resume.
            String::new()
        } else {
            format!("oversubscription={}\n", s.oversubscription)
        }
    }
    fn measure(&self, p: &Point, dir: &Path, ctx: &Ctx) -> Result<String> {
        let s = self.setup_of(p);
        let (row, report) =
            super::netns(&s, &p.scheme, &ctx.options(&dir.join("run")), dir, |m| {
                eprintln!("    {m}")
            })?;
        for (name, text) in [
            ("report.json", serde_json::to_string_pretty(&report)?),
            ("row.json", serde_json::to_string(&row)?),
        ] {
            let path = dir.join(name);
            write_file(&path, text)?;
        }
        let (re, sent) = row.retransmissions;
        Ok(format!(
            "{} incomplete, {re} of {sent} datagrams retransmitted, {} PFC pauses",
            row.incomplete, row.pauses
        ))
    }
    fn tables(&self, done: &[(&Point, PathBuf)]) -> Result<()> {
        let s = &self.s.setup;
        let seeds = if self.s.reps > 1 {
            format!(
                "seeds {} to {}; cells: the median over them [95% bootstrap interval of the \
                 median], the heading's flow count the first seed's",
                s.seed,
                s.seed + u64::from(self.s.reps) - 1
            )
        } else {
            format!("seed {}", s.seed)
        };
        let over = if s.oversubscription == 1.0 {
            String::new()
        } else {
            format!(" (uplinks {}:1 oversubscribed)", s.oversubscription)
        };
        let mut md = format!(
            "`{}`\n\n2 leaves, 2 spines, {} hosts per leaf at {} Mb/s{over}, T = {} us, web search x {}, \
             {} s of arrivals + {} s, buffers {} packets, PFC at {}, {seeds}.\n",
            command_line(),
            s.hosts_per_leaf,
            s.host_bps as f64 / 1e6,
            s.rtt_us,
            s.scale,
            s.seconds,
            s.drain,
            s.buffer,
            s.pfc_xoff,
        );
        for &load in &self.s.loads {
            let rows: Vec<(u32, Row)> = done
                .iter()
                .filter(|(p, _)| p.load == load)
                .map(|(p, d)| Ok((p.rep, read_json(&d.join("row.json"))?)))
                .collect::<Result<_>>()?;
            if rows.is_empty() {
                continue;
            }
            let at = self.setup_at(load);
            let t = super::topology(&at, &self.s.schemes[0]);
            let n = super::flows(&at, &t).map_err(anyhow::Error::msg)?.len();
            let _ = write!(
                md,
                "\n### websearch x {}, load {:.0}%: {n} flows in {} s\n\n",
                s.scale,
                load * 100.0,
                s.seconds
            );
            let edges = super::decile_edges(&Cdf::named("websearch").map_err(anyhow::Error::msg)?);
            let (table, deciles) = if self.s.reps > 1 {
                (
                    table_over_reps(&rows, true),
                    deciles_over_reps(&rows, &edges),
                )
            } else {
                let one: Vec<Row> = rows.into_iter().map(|(_, r)| r).collect();
                (super::table(&one), super::deciles_table(&one, &edges))
            };
            md += &table;
            md += "\nThe p95 slowdown per decile of web search's flow sizes (PINT's Fig. 7):\n\n";
            md += &deciles;
        }
        let path = self.table_path();
        write_file(&path, md)
    }
}

/// E11 in `pisa-sim` on the sweep driver ([`super::sim`]): every (workload, load, scheme),
/// deterministic. Each point leaves `report.json` and `row.json`; the table is
/// `OUT/e11-sim.md`, and `json` (if given) the file `scripts/analysis pint-plot e11` reads.
#[derive(Clone, Debug)]
pub struct SimSweep {
    /// Workloads.
    pub workloads: Vec<String>,
    /// Offered loads.
    pub loads: Vec<f64>,
    /// Schemes of [`super::sim::SIM_SCHEMES`].
    pub schemes: Vec<Scheme>,
    /// The arrival window, ms.
    pub window_ms: f64,
    /// The aggregation-core links' rate, bits/s (None: the fabric's 4 Gb/s).
    pub core_bps: Option<u64>,
    /// Seed (of the first repetition; repetition r uses seed + r - 1).
    pub seed: u64,
    /// Repetitions of every point, each with its own seed.
    pub reps: u32,
    /// Output directory.
    pub out: PathBuf,
    /// Where the plot JSON goes, if anywhere (the first repetition's rows).
    pub json: Option<PathBuf>,
}

/// A point of [`SimSweep`].
#[derive(Clone, Debug, PartialEq)]
pub struct SimPoint {
    /// Workload.
    pub workload: String,
    /// Offered load.
    pub load: f64,
    /// Scheme.
    pub scheme: Scheme,
    /// Repetition, from 1.
    pub rep: u32,
}

impl SimSweep {
    fn setup(&self, p: &SimPoint) -> super::sim::SimSetup {
        let mut s = self.setup_of(&p.workload, p.load);
        s.seed = s.seed.wrapping_add(u64::from(p.rep) - 1);
        s
    }

    fn setup_of(&self, workload: &str, load: f64) -> super::sim::SimSetup {
        let mut s = super::sim::SimSetup::scaled(workload, load, self.window_ms, self.seed);
        s.core = self.core_bps.map(|rate_bps| topo::LinkProps {
            rate_bps,
            ..s.fabric
        });
        s
    }

    /// The table's file.
    pub fn table_path(&self) -> PathBuf {
        self.out.join("e11-sim.md")
    }
}

impl Experiment for SimSweep {
    type Point = SimPoint;

    fn title(&self) -> String {
        "e11 sim".into()
    }
    fn out(&self) -> &Path {
        &self.out
    }
    fn points(&self) -> Vec<SimPoint> {
        let mut v = Vec::new();
        for w in &self.workloads {
            for &load in &self.loads {
                for &scheme in &self.schemes {
                    for rep in 1..=self.reps {
                        v.push(SimPoint {
                            workload: w.clone(),
                            load,
                            scheme,
                            rep,
                        });
                    }
                }
            }
        }
        v
    }
    fn dir_name(&self, p: &SimPoint) -> String {
        let name = format!(
            "{}-load{:.0}-{}",
            p.workload,
            p.load * 100.0,
            p.scheme.name.replace([' ', '=', '/', ','], "")
        );
        // The first repetition keeps the name it had before there were repetitions.
        match p.rep {
            1 => name,
            r => format!("{name}-rep{r}"),
        }
    }
    fn label(&self, p: &SimPoint) -> String {
        format!(
            "{} at {} load {} rep {}",
            p.scheme.name, p.workload, p.load, p.rep
        )
    }
    fn record(&self) -> String {
        let s = self.setup_of("-", 0.0);
        let mut r = format!(
            "experiment=e11-sim\nwindow_ns={}\nseed={}\nk={}\nhost={:?}\nfabric={:?}\npfc_xoff={}\n\
             ip_len={}\n",
            s.window_ns, s.seed, s.k, s.host, s.fabric, s.pfc_xoff, s.ip_len
        );
        // Only when given, so that earlier runs' directories still resume.
        if let Some(core) = s.core {
            let _ = writeln!(r, "core={core:?}");
        }
        r
    }
    fn measure(&self, p: &SimPoint, dir: &Path, _ctx: &Ctx) -> Result<String> {
        let (row, report) =
            super::sim::sim_point(&self.setup(p), &p.scheme).map_err(anyhow::Error::msg)?;
        for (name, text) in [
            ("report.json", serde_json::to_string_pretty(&report)?),
            ("row.json", serde_json::to_string(&row)?),
        ] {
            let path = dir.join(name);
            write_file(&path, text)?;
        }
        Ok(format!(
            "{} incomplete, {} PFC pauses, {} drops",
            row.incomplete, row.pauses, row.drops
        ))
    }
    fn tables(&self, done: &[(&SimPoint, PathBuf)]) -> Result<()> {
        let rows: Vec<(&SimPoint, Row)> = done
            .iter()
            .map(|(p, d)| {
                let row: Row = read_json(&d.join("row.json"))?;
                Ok((*p, row))
            })
            .collect::<Result<_>>()?;
        let core = self.core_bps.map_or(String::new(), |b| {
            format!(" (aggregation-core links at {} Mb/s)", b / 1_000_000)
        });
        let seeds = if self.reps > 1 {
            format!(
                "seeds {} to {}; cells: the median over them [95% bootstrap interval of the \
                 median], the heading's flow count the first seed's",
                self.seed,
                self.seed + u64::from(self.reps) - 1
            )
        } else {
            format!("seed {}", self.seed)
        };
        let mut md = format!(
            "`{}`\n\nE11 in pisa-sim: k = 4 fat-tree, 1 and 4 Gb/s links of 50 us{core}, {seeds}.\n",
            command_line(),
        );
        for w in &self.workloads {
            for &load in &self.loads {
                let here: Vec<(u32, Row)> = rows
                    .iter()
                    .filter(|(p, _)| &p.workload == w && p.load == load)
                    .map(|(p, r)| (p.rep, r.clone()))
                    .collect();
                if here.is_empty() {
                    continue;
                }
                let s = self.setup_of(w, load);
                let n = super::sim::sim_flows(&s).map_err(anyhow::Error::msg)?.len();
                let edges = super::decile_edges(&Cdf::named(w).map_err(anyhow::Error::msg)?);
                let (mut table, deciles) = if self.reps > 1 {
                    (
                        table_over_reps(&here, false),
                        deciles_over_reps(&here, &edges),
                    )
                } else {
                    let one: Vec<Row> = here.into_iter().map(|(_, r)| r).collect();
                    (super::table(&one), super::deciles_table(&one, &edges))
                };
                let _ = write!(
                    table,
                    "\nThe p95 slowdown per decile of {w}'s flow sizes (PINT's Fig. 7):\n\n{deciles}"
                );
                let _ = write!(md, "\n{}\n\n{table}", super::sim::sim_heading(&s, n));
            }
        }
        let path = self.table_path();
        write_file(&path, md)?;
        if let Some(json) = &self.json {
            let runs: Vec<(&str, f64, &Row)> = rows
                .iter()
                .filter(|(p, _)| p.rep == 1)
                .map(|(p, r)| (p.workload.as_str(), p.load, r))
                .collect();
            write_file(json, super::sim::plot_json(&runs))?;
        }
        Ok(())
    }
}

/// E11's table over repetitions: per scheme (in the order the points ran), each bucket's p95
/// slowdown, the large flows' goodput and the incomplete flows as the median over the
/// repetitions [95% bootstrap interval of the median], then the reps and (`fidelity`, runs in
/// namespaces) how many of them kept fidelity.
fn table_over_reps(rows: &[(u32, Row)], fidelity: bool) -> String {
    use crate::experiment::e10::median_cell;
    let mut md = String::from("| scheme |");
    for (_, _, name) in super::BUCKETS {
        let _ = write!(md, " {name} |");
    }
    md += " goodput >=10 MB (Mb/s) | incomplete | reps |";
    if fidelity {
        md += " fidelity ok |";
    }
    md += "\n|---|";
    md += &"---|".repeat(super::BUCKETS.len() + 3 + usize::from(fidelity));
    md.push('\n');
    for (scheme, of) in by_scheme(rows) {
        let _ = write!(md, "| {scheme} |");
        for b in 0..super::BUCKETS.len() {
            let v: Vec<f64> = of.iter().filter_map(|r| r.p95.get(b)?.0).collect();
            let _ = write!(md, " {} |", median_cell(&v, 2));
        }
        let goodput: Vec<f64> = of
            .iter()
            .filter_map(|r| r.goodput_large.0)
            .map(|g| g / 1e6)
            .collect();
        let incomplete: Vec<f64> = of.iter().map(|r| r.incomplete as f64).collect();
        let _ = write!(
            md,
            " {} | {} | {} |",
            median_cell(&goodput, 1),
            median_cell(&incomplete, 0),
            of.len()
        );
        if fidelity {
            let ok = of.iter().filter(|r| r.fidelity == "ok").count();
            let _ = write!(md, " {ok}/{} |", of.len());
        }
        md.push('\n');
    }
    md
}

/// The rows of each scheme, schemes in the order they first appear.
fn by_scheme(rows: &[(u32, Row)]) -> Vec<(&str, Vec<&Row>)> {
    let mut out: Vec<(&str, Vec<&Row>)> = Vec::new();
    for (_, r) in rows {
        match out.iter_mut().find(|(s, _)| *s == r.scheme) {
            Some((_, of)) => of.push(r),
            None => out.push((&r.scheme, vec![r])),
        }
    }
    out
}

/// The p95 slowdown per decile of flow size ([`super::decile_edges`]), per scheme: the median
/// over the repetitions [95% bootstrap interval].
fn deciles_over_reps(rows: &[(u32, Row)], edges: &[f64]) -> String {
    use crate::experiment::e10::median_cell;
    let mut md = String::from("| scheme |");
    for k in 0..=edges.len() {
        let _ = write!(md, " {} |", super::decile_label(edges, k));
    }
    md += " reps |\n|---|";
    md += &"---|".repeat(edges.len() + 2);
    md.push('\n');
    for (scheme, of) in by_scheme(rows) {
        let _ = write!(md, "| {scheme} |");
        for k in 0..=edges.len() {
            let v: Vec<f64> = of.iter().filter_map(|r| r.p95_deciles.get(k)?.0).collect();
            let _ = write!(md, " {} |", median_cell(&v, 2));
        }
        let _ = writeln!(md, " {} |", of.len());
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn namespace_repetitions_pair_every_scheme_by_seed_and_keep_the_first_reps_name() {
        let sweep = Sweep::new(Settings {
            setup: Setup {
                hosts_per_leaf: 2,
                host_bps: 100_000_000,
                rtt_us: 4000,
                scale: 0.1,
                load: 0.0,
                seconds: 1.0,
                drain: 1.0,
                seed: 7,
                buffer: 200,
                pfc_xoff: 100,
                ip_len: 1000,
                oversubscription: 1.0,
            },
            loads: vec![0.3, 0.5],
            schemes: super::super::SCHEMES[..2].to_vec(),
            reps: 3,
            out: PathBuf::from("unused"),
        })
        .unwrap();
        let points = sweep.points();
        assert_eq!(points.len(), 2 * 3 * 2);
        // Schemes innermost: every rep's schemes run back to back, on one seed.
        let first: Vec<(u32, &str)> = points[..4].iter().map(|p| (p.rep, p.scheme.name)).collect();
        assert_eq!(
            first,
            [(1, "INT"), (1, "PINT p=1"), (2, "INT"), (2, "PINT p=1")]
        );
        let seeds: Vec<u64> = points[..6].iter().map(|p| sweep.setup_of(p).seed).collect();
        assert_eq!(seeds, [7, 7, 8, 8, 9, 9]);
        assert_eq!(sweep.setup_of(&points[6]).load, 0.5);
        let names: Vec<String> = points[..4].iter().map(|p| sweep.dir_name(p)).collect();
        assert_eq!(
            names,
            [
                "load30-INT",
                "load30-PINTp1",
                "load30-INT-rep2",
                "load30-PINTp1-rep2"
            ]
        );
        assert!(
            Sweep::new(Settings {
                reps: 0,
                ..sweep.s.clone()
            })
            .is_err()
        );
    }

    #[test]
    fn sim_repetitions_run_with_their_own_seeds_and_the_table_gives_their_median() {
        let out = std::env::temp_dir().join(format!("pisa-e11-reps-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let mut s = SimSweep {
            workloads: vec!["websearch".into()],
            loads: vec![0.3],
            schemes: vec![super::super::sim::SIM_SCHEMES[1]],
            window_ms: 5.0,
            core_bps: None,
            seed: 1,
            reps: 3,
            out: out.clone(),
            json: None,
        };
        let ctx = Ctx::new("", Arc::new(AtomicBool::new(false)));
        let d = crate::sweep::run(&mut s, &ctx).unwrap();
        assert_eq!((d.points, d.ran), (3, 3));
        let points = out.join("points");
        let report =
            |dir: &str| std::fs::read_to_string(points.join(dir).join("report.json")).unwrap();
        // The first repetition keeps the name of a run without repetitions; other seeds give
        // other flows.
        assert_ne!(
            report("websearch-load30-PINTp1"),
            report("websearch-load30-PINTp1-rep2")
        );
        assert!(points.join("websearch-load30-PINTp1-rep3").exists());
        let md = std::fs::read_to_string(s.table_path()).unwrap();
        assert!(md.contains("seeds 1 to 3"), "{md}");
        let row = md.lines().find(|l| l.starts_with("| PINT p=1 |")).unwrap();
        assert!(row.ends_with("| 3 |"), "{row}");
        std::fs::remove_dir_all(&out).unwrap();
    }
}
