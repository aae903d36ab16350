//! Data-center flow-size workloads: the published CDFs (web search, data mining, Facebook Hadoop;
//! the files in `pipeline/sim/workloads/`), sampled as every cited generator samples them, by
//! piecewise-linear interpolation between points; and the Poisson arrival rate that offers a given
//! load.
//!
//! The mean of a CDF is the piecewise-linear model's (trapezoid rule), as HPCC's `getAvg` and
//! TrafficGenerator's `avg_cdf` compute it: web search 1,711,250 B, data mining 12,658,199 B,
//! Hadoop 120,421 B (docs/workloads.md, with the tables' sources).

use pipeline::externs::Rng;

/// A flow-size CDF: points (size in bytes, cumulative probability), both non-decreasing, from
/// probability 0 to 1.
#[derive(Clone, Debug, PartialEq)]
pub struct Cdf {
    name: String,
    points: Vec<(f64, f64)>,
}

/// The workloads this build ships, by name.
pub const NAMES: &[&str] = &["websearch", "datamining", "hadoop"];

impl Cdf {
    /// A shipped workload: `websearch`, `datamining` or `hadoop`; or `fixed:SIZE` (every flow
    /// SIZE bytes, e.g. `fixed:8Mi`: long flows for spraying and throughput experiments).
    pub fn named(name: &str) -> Result<Cdf, String> {
        if let Some(size) = name.strip_prefix("fixed:") {
            let b =
                crate::traffic::parse_size(size).map_err(|e| format!("workload {name}: {e}"))?;
            return Ok(Cdf {
                name: name.to_string(),
                points: vec![(b as f64, 0.0), (b as f64, 1.0)],
            });
        }
        let text = match name {
            "websearch" => include_str!("../workloads/websearch.txt"),
            "datamining" => include_str!("../workloads/datamining.txt"),
            "hadoop" => include_str!("../workloads/hadoop.txt"),
            _ => {
                return Err(format!(
                    "no workload {name} (have: {}, fixed:SIZE)",
                    NAMES.join(", ")
                ));
            }
        };
        Cdf::parse(name, text)
    }

    /// Parses `size probability` lines (`#` comments; probabilities as fractions, or as
    /// percentages when the last one is 100).
    pub fn parse(name: &str, text: &str) -> Result<Cdf, String> {
        let mut points = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let at = |e: &str| format!("{name}, line {}: {e}", n + 1);
            let mut w = line.split_whitespace();
            let (Some(x), Some(p), None) = (w.next(), w.next(), w.next()) else {
                return Err(at("expected `size probability`"));
            };
            let x: f64 = x.parse().map_err(|_| at("bad size"))?;
            let p: f64 = p.parse().map_err(|_| at("bad probability"))?;
            if !(x.is_finite() && p.is_finite() && x >= 0.0 && p >= 0.0) {
                return Err(at("sizes and probabilities are finite and non-negative"));
            }
            if let Some(&(px, pp)) = points.last()
                && (x < px || p < pp)
            {
                return Err(at("sizes and probabilities must not decrease"));
            }
            points.push((x, p));
        }
        let last = points
            .last()
            .map(|p| p.1)
            .ok_or(format!("{name}: empty CDF"))?;
        let scale = if (last - 100.0).abs() < 1e-9 {
            100.0
        } else if (last - 1.0).abs() < 1e-9 {
            1.0
        } else {
            return Err(format!(
                "{name}: the CDF must end at 1 (or 100%), not {last}"
            ));
        };
        points.iter_mut().for_each(|p| p.1 /= scale);
        if points[0].1 != 0.0 {
            // The curve starts at the first size with probability 0 below it.
            points.insert(0, (points[0].0, 0.0));
        }
        Ok(Cdf {
            name: name.to_string(),
            points,
        })
    }

    /// The workload's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The size at cumulative probability `u` (0..=1), interpolated linearly.
    pub fn quantile(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0);
        let i = self.points.partition_point(|p| p.1 < u).max(1);
        let Some(&(x1, p1)) = self.points.get(i) else {
            return self.points.last().map_or(0.0, |p| p.0);
        };
        let (x0, p0) = self.points[i - 1];
        if p1 <= p0 {
            return x1;
        }
        x0 + (x1 - x0) * (u - p0) / (p1 - p0)
    }

    /// One sampled flow size, bytes (at least 1).
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (self.quantile(u).round() as u64).max(1)
    }

    /// The mean of the piecewise-linear model, bytes.
    pub fn mean(&self) -> f64 {
        self.points
            .windows(2)
            .map(|w| (w[0].0 + w[1].0) / 2.0 * (w[1].1 - w[0].1))
            .sum()
    }

    /// Flows per second that offer `load` (a fraction) of `capacity_bps`: λ = load·C/(8·mean).
    pub fn arrival_rate(&self, load: f64, capacity_bps: f64) -> f64 {
        load * capacity_bps / (8.0 * self.mean())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_workload_gives_every_flow_its_size() {
        let cdf = Cdf::named("fixed:8Mi").unwrap();
        let mut rng = Rng::new(3);
        assert!((0..100).all(|_| cdf.sample(&mut rng) == 8 << 20));
        assert_eq!(cdf.mean(), (8u64 << 20) as f64);
        assert_eq!(cdf.quantile(0.9), (8u64 << 20) as f64);
        assert!(Cdf::named("fixed:0").is_err());
        assert!(Cdf::named("fixed:lots").is_err());
    }

    #[test]
    fn the_shipped_cdfs_have_the_published_means_and_p90s() {
        let cases = [
            ("websearch", 1_711_250.0, 5_000_000.0),
            ("datamining", 12_658_199.0, 400_000.0),
            ("hadoop", 120_421.0, 120_000.0),
        ];
        for (name, mean, p90) in cases {
            let c = Cdf::named(name).unwrap();
            assert!((c.mean() - mean).abs() < 1.0, "{name}: {}", c.mean());
            assert!((c.quantile(0.9) - p90).abs() < 1e-6, "{name}");
        }
        assert!(Cdf::named("nope").is_err());
    }

    #[test]
    fn sampled_means_match_the_model() {
        // 10^6 seeded samples: within 2% for web search and Hadoop, 5% for data mining (whose
        // 2% tail of 100 MB - 1 GB flows dominates the mean).
        for (name, tolerance) in [("websearch", 0.02), ("hadoop", 0.02), ("datamining", 0.05)] {
            let c = Cdf::named(name).unwrap();
            let mut rng = Rng::new(42);
            let n = 1_000_000;
            let sum: f64 = (0..n).map(|_| c.sample(&mut rng) as f64).sum();
            let mean = sum / f64::from(n);
            assert!(
                (mean / c.mean() - 1.0).abs() < tolerance,
                "{name}: sampled {mean:.0}, model {:.0}",
                c.mean()
            );
        }
    }

    #[test]
    fn poisson_arrivals_offer_the_target_load() {
        // HPCC's convention: per host, as a fraction of the host link. Web search at 10 Gb/s and
        // 0.5 load: about 365 flows/s.
        let c = Cdf::named("websearch").unwrap();
        let lambda = c.arrival_rate(0.5, 10e9);
        assert!((lambda - 365.25).abs() < 0.1, "{lambda}");
        // Offered load of a sampled Poisson process over 20,000 flows.
        let mut rng = Rng::new(7);
        let (mut t, mut bytes) = (0.0f64, 0.0f64);
        for _ in 0..20_000 {
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            t += -(1.0 - u).ln() / lambda;
            bytes += c.sample(&mut rng) as f64;
        }
        let load = bytes * 8.0 / t / 10e9;
        assert!((load / 0.5 - 1.0).abs() < 0.05, "offered {load:.3}");
    }

    #[test]
    fn bad_tables_are_refused() {
        for bad in [
            "",
            "10 0.5\n5 1",
            "10 0.5\n20 0.4\n30 1",
            "10 0.5\n20 0.9",
            "x 1",
            "10 -1\n20 1",
            "10 0.5 7",
        ] {
            assert!(Cdf::parse("t", bad).is_err(), "{bad:?}");
        }
        // Percentages, and a first point above 0.
        let c = Cdf::parse("t", "100 50\n200 100").unwrap();
        assert_eq!(c.quantile(0.0), 100.0);
        assert_eq!(c.quantile(0.25), 100.0);
        assert_eq!(c.quantile(0.75), 150.0);
        assert_eq!(c.quantile(1.0), 200.0);
    }
}
