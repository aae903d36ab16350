//! `pisa-dbb`: the DBB compiler of issue 13 on the command line.
//!
//! ```text
//! pisa-dbb compile docs/dbb/fig2a.json
//! ```
//!
//! Reads `{"source": .., "sink": .., "links": [{"from", "to", "bandwidth", "id"?}, ..]}`, runs
//! [`analysis::dbb::compile`] (the switches' compiler: the balanced max-flow where the paper's
//! leaves links idle) and prints `{"N", "link_packets", "paths", "lists"}` on stdout.
//! Bandwidths are parsed from their JSON text, so `2.5` is exactly 5/2. Ignored links are
//! reported on stderr; errors go to stderr with exit status 1.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use analysis::dbb::{self, Input, Link, Output, Ratio};
use anyhow::Context;
use clap::{Parser, Subcommand};
use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "DBB: deterministic bandwidth-based packet spraying (issue 13)"
)]
struct Args {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compile a topology (JSON) into the packet dispatching cycle and per-switch lists.
    Compile {
        /// Input JSON file.
        file: PathBuf,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InputJson {
    source: String,
    sink: String,
    links: Vec<LinkJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkJson {
    #[serde(default)]
    id: Option<String>,
    from: String,
    to: String,
    /// Kept as JSON text so that decimals are read exactly.
    bandwidth: Box<RawValue>,
}

/// Parses the input JSON; bandwidths must be JSON numbers.
fn parse_input(text: &str) -> anyhow::Result<Input> {
    let raw: InputJson = serde_json::from_str(text).context("invalid input")?;
    let links = raw
        .links
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let bandwidth = Ratio::parse_decimal(l.bandwidth.get().trim())
                .with_context(|| format!("links[{i}].bandwidth"))?;
            Ok(Link {
                id: l.id,
                from: l.from,
                to: l.to,
                bandwidth,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(Input {
        source: raw.source,
        sink: raw.sink,
        links,
    })
}

/// A JSON string literal.
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn js_list<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    let items: Vec<String> = items.into_iter().map(|s| js(s)).collect();
    format!("[{}]", items.join(", "))
}

/// The output JSON, one link, path or list per line, lists in stage order.
fn render(input: &Input, out: &Output) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{{\n  \"N\": {},", out.n);
    let links: Vec<String> = out
        .link_packets
        .iter()
        .map(|lp| {
            let l = &input.links[lp.link];
            let id = l.id.as_deref().map(|id| format!("\"id\": {}, ", js(id)));
            format!(
                "    {{{}\"from\": {}, \"to\": {}, \"packets\": {}}}",
                id.unwrap_or_default(),
                js(&l.from),
                js(&l.to),
                lp.packets
            )
        })
        .collect();
    let _ = writeln!(s, "  \"link_packets\": [\n{}\n  ],", links.join(",\n"));
    let paths: Vec<String> = out
        .paths
        .iter()
        .map(|p| format!("    {}", js_list(p)))
        .collect();
    let _ = writeln!(s, "  \"paths\": [\n{}\n  ],", paths.join(",\n"));
    let lists: Vec<String> = out
        .lists
        .iter()
        .map(|l| format!("    {}: {}", js(&l.switch), js_list(&l.next_hops)))
        .collect();
    let _ = writeln!(s, "  \"lists\": {{\n{}\n  }}\n}}", lists.join(",\n"));
    s
}

/// One stderr line per link left out.
fn ignored_report(input: &Input, out: &Output) -> Vec<String> {
    out.ignored
        .iter()
        .map(|g| {
            let l = &input.links[g.link];
            let id =
                l.id.as_deref()
                    .map(|id| format!(" {id:?}"))
                    .unwrap_or_default();
            format!(
                "pisa-dbb: ignored links[{}]{id} ({} -> {}): {}",
                g.link, l.from, l.to, g.reason
            )
        })
        .collect()
}

fn run(args: Args) -> anyhow::Result<()> {
    let Command::Compile { file } = args.cmd;
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let input = parse_input(&text).with_context(|| file.display().to_string())?;
    let out = dbb::compile(&input).with_context(|| file.display().to_string())?;
    for line in ignored_report(&input, &out) {
        eprintln!("{line}");
    }
    print!("{}", render(&input, &out));
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pisa-dbb: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> String {
        let path = format!("{}/../../docs/dbb/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn decimals_are_parsed_exactly() {
        let input = parse_input(
            r#"{"source": "A", "sink": "B", "links": [
                {"from": "A", "to": "B", "bandwidth": 0.1, "id": "x"},
                {"from": "A", "to": "B", "bandwidth": 2.5e-1, "id": "y"}]}"#,
        )
        .unwrap();
        assert_eq!(input.links[0].bandwidth, Ratio::new(1, 10).unwrap());
        assert_eq!(input.links[1].bandwidth, Ratio::new(1, 4).unwrap());
        let out = dbb::compile(&input).unwrap();
        // 0.1 : 0.25 = 2 : 5, exactly.
        assert_eq!(out.n, 7);
    }

    #[test]
    fn bad_input_is_reported() {
        let err = |text: &str| format!("{:#}", parse_input(text).unwrap_err());
        assert!(err(r#"{"source": "A", "sink": "B", "links": [{"from": "A", "to": "B", "bandwidth": "3"}]}"#)
            .contains("links[0].bandwidth: \"\\\"3\\\"\" is not a decimal number"));
        assert!(err(r#"{"source": "A", "sink": "B"}"#).contains("missing field `links`"));
        assert!(
            err(r#"{"source": "A", "sink": "B", "links": [], "extra": 1}"#)
                .contains("unknown field `extra`")
        );
    }

    #[test]
    fn sec_iii_d_fig2a_example_gives_table_iii() {
        let input = parse_input(&example("fig2a.json")).unwrap();
        let out = dbb::compile(&input).unwrap();
        let json: serde_json::Value = serde_json::from_str(&render(&input, &out)).unwrap();
        assert_eq!(json["N"], 4);
        assert_eq!(
            json["paths"],
            serde_json::json!([
                ["S1", "S2", "S4", "S6"],
                ["S1", "S3", "S5", "S6"],
                ["S1", "S2", "S5", "S6"],
                ["S1", "S3", "S4", "S6"]
            ])
        );
        assert_eq!(
            json["lists"]["S1"],
            serde_json::json!(["S2", "S3", "S2", "S3"])
        );
        assert_eq!(
            json["link_packets"][0],
            serde_json::json!({"from": "S1", "to": "S2", "packets": 2})
        );
    }

    #[test]
    fn sec_iii_d_fig5_example_gives_table_iv() {
        let input = parse_input(&example("fig5.json")).unwrap();
        let out = dbb::compile(&input).unwrap();
        let json: serde_json::Value = serde_json::from_str(&render(&input, &out)).unwrap();
        assert_eq!(json["N"], 10);
        let stage2: Vec<&str> = json["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[1].as_str().unwrap())
            .collect();
        assert_eq!(
            stage2,
            ["S2", "S3", "S3", "S3", "S3", "S2", "S3", "S3", "S3", "S3"]
        );
        assert_eq!(
            json["lists"]["S3"],
            serde_json::json!(["S5", "S5", "S4", "S5", "S4", "S5", "S4", "S5"])
        );
    }

    /// The tool prints what the switches run: on a k=4 fat-tree (equal rates) the balanced
    /// max-flow, N = 4 over all four cores. It printed the paper's raw flow (N = 2 over two
    /// cores) while the switches ran the balanced one (issue 33).
    #[test]
    fn a_k4_fat_tree_pair_uses_all_four_cores_as_the_switches_do() {
        let mut links = Vec::new();
        let mut both = |a: String, b: String| {
            for (from, to) in [(&a, &b), (&b, &a)] {
                links.push(format!(
                    r#"{{"from": "{from}", "to": "{to}", "bandwidth": 1000000000}}"#
                ));
            }
        };
        for p in 1..=4 {
            for e in 1..=2 {
                for a in 1..=2 {
                    both(format!("p{p}e{e}"), format!("p{p}a{a}"));
                }
            }
            for a in 1..=2 {
                for c in 1..=2 {
                    both(format!("p{p}a{a}"), format!("core{}", 2 * (a - 1) + c));
                }
            }
        }
        let text = format!(
            r#"{{"source": "p1e1", "sink": "p2e1", "links": [{}]}}"#,
            links.join(",")
        );
        let input = parse_input(&text).unwrap();
        let out = dbb::compile(&input).unwrap();
        let json: serde_json::Value = serde_json::from_str(&render(&input, &out)).unwrap();
        assert_eq!(json["N"], 4);
        let mut cores: Vec<&str> = json["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[2].as_str().unwrap())
            .collect();
        cores.sort_unstable();
        assert_eq!(cores, ["core1", "core2", "core3", "core4"]);
        // The paper's steps alone leave two cores idle.
        assert_eq!(dbb::compile_unbalanced(&input).unwrap().n, 2);
    }

    #[test]
    fn ids_appear_in_link_packets_and_ignored_links_are_reported() {
        let input = parse_input(
            r#"{"source": "A", "sink": "B", "links": [
                {"from": "A", "to": "B", "bandwidth": 1, "id": "x"},
                {"from": "A", "to": "B", "bandwidth": 1, "id": "y"},
                {"from": "B", "to": "A", "bandwidth": 1}]}"#,
        )
        .unwrap();
        let out = dbb::compile(&input).unwrap();
        let json: serde_json::Value = serde_json::from_str(&render(&input, &out)).unwrap();
        assert_eq!(
            json["link_packets"][1],
            serde_json::json!({"id": "y", "from": "A", "to": "B", "packets": 1})
        );
        assert_eq!(json["lists"]["A"], serde_json::json!(["x", "y"]));
        assert_eq!(
            ignored_report(&input, &out),
            ["pisa-dbb: ignored links[2] (B -> A): goes back from stage 2 to stage 1"]
        );
    }
}
