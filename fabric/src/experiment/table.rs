//! The FCT table an experiment prints at its end (and docs/ quote): one row per (scheme, load),
//! the median over its repetitions of each summary column, and each scheme's average FCTs as a
//! ratio to the first scheme's at the same load (the baseline, e.g. `ecmp`).

use std::collections::BTreeMap;

/// The columns the table reads from `summary.csv`, in the order it prints them.
const COLUMNS: [&str; 8] = [
    "short_avg_fct_us",
    "short_p99_fct_us",
    "large_avg_fct_us",
    "large_p99_fct_us",
    "retransmits",
    "tm_drops",
    "uplink_pkts_std_mean",
    "finished",
];

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The table, as Markdown, from the text of a `summary.csv`.
pub fn fct_table(summary: &str) -> Result<String, String> {
    let mut lines = summary.lines();
    let head: Vec<&str> = lines.next().ok_or("empty summary")?.split(',').collect();
    let col = |name: &str| {
        head.iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("summary.csv has no column {name}"))
    };
    let (scheme_c, load_c, flows_c) = (col("scheme")?, col("load")?, col("flows")?);
    let cols: Vec<usize> = COLUMNS.iter().map(|c| col(c)).collect::<Result<_, _>>()?;
    // (scheme, load) in order of first appearance -> per column, the values of each rep.
    let mut order: Vec<(String, String)> = Vec::new();
    let mut values: BTreeMap<(String, String), Vec<Vec<f64>>> = BTreeMap::new();
    let mut flows: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for l in lines.filter(|l| !l.trim().is_empty()) {
        let v: Vec<&str> = l.split(',').collect();
        if v.len() != head.len() {
            return Err(format!(
                "summary row with {} of {} columns",
                v.len(),
                head.len()
            ));
        }
        let key = (v[scheme_c].to_string(), v[load_c].to_string());
        if !values.contains_key(&key) {
            order.push(key.clone());
        }
        let cells = values
            .entry(key.clone())
            .or_insert_with(|| vec![Vec::new(); cols.len()]);
        for (i, &c) in cols.iter().enumerate() {
            cells[i].push(v[c].parse().unwrap_or(f64::NAN));
        }
        flows
            .entry(key)
            .or_default()
            .push(v[flows_c].parse().unwrap_or(f64::NAN));
    }
    let baseline = order.first().map(|(s, _)| s.clone()).unwrap_or_default();
    let med = |key: &(String, String), i: usize| median(values[key][i].clone());
    let ms = |x: Option<f64>| x.map_or("-".into(), |x| format!("{:.1}", x / 1000.0));
    let ratio = |key: &(String, String), i: usize| {
        let base = (baseline.clone(), key.1.clone());
        match (med(key, i), values.get(&base).and_then(|_| med(&base, i))) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "-".into(),
        }
    };
    let mut out = format!(
        "| scheme | load | reps | finished | short avg ms | short p99 ms | large avg ms | large p99 ms | \
         short avg / {baseline} | large avg / {baseline} | retransmits | TM drops | uplink std |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for key in &order {
        let reps = values[key][0].len();
        let n = |i| med(key, i).map_or("-".into(), |x: f64| format!("{x:.0}"));
        let total = median(flows[key].clone()).map_or("-".into(), |x| format!("{x:.0}"));
        out += &format!(
            "| {} | {} | {reps} | {}/{total} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            key.0,
            key.1,
            n(7),
            ms(med(key, 0)),
            ms(med(key, 1)),
            ms(med(key, 2)),
            ms(med(key, 3)),
            ratio(key, 0),
            ratio(key, 2),
            n(4),
            n(5),
            n(6),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_medians_over_reps_with_ratios_to_the_first_scheme() {
        let head = super::super::SUMMARY_HEADER;
        let cols: Vec<&str> = head.split(',').collect();
        let row = |scheme: &str, load: &str, rep: u32, short: f64, large: f64| {
            cols.iter()
                .map(|c| match *c {
                    "scheme" => scheme.to_string(),
                    "load" => load.to_string(),
                    "rep" => rep.to_string(),
                    "flows" => "10".into(),
                    "finished" => "9".into(),
                    "short_avg_fct_us" => short.to_string(),
                    "large_avg_fct_us" => large.to_string(),
                    "short_p99_fct_us" => "".into(),
                    _ => "1".into(),
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        let csv = [
            head.to_string(),
            row("ecmp", "0.2", 1, 1000.0, 10_000.0),
            row("ecmp", "0.2", 2, 3000.0, 30_000.0),
            row("ecmp", "0.2", 3, 2000.0, 20_000.0),
            row("hula", "0.2", 1, 1000.0, 40_000.0),
        ]
        .join("\n");
        let t = fct_table(&csv).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].contains("short avg / ecmp"));
        // ecmp: medians 2 ms and 20 ms over 3 reps; no p99 (empty cells) prints "-".
        assert!(
            lines[2].starts_with("| ecmp | 0.2 | 3 | 9/10 | 2.0 | - | 20.0 |"),
            "{}",
            lines[2]
        );
        assert!(lines[2].contains("| 1.00 | 1.00 |"));
        // hula: 1 ms / 2 ms = 0.5, 40 ms / 20 ms = 2.
        assert!(lines[3].contains("| 0.50 | 2.00 |"), "{}", lines[3]);
        assert!(fct_table("scheme,load\necmp,0.2").is_err());
    }
}
