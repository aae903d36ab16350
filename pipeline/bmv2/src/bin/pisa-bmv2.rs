//! `pisa-bmv2 check FILE.json...`: whether pisa-switch runs each BMv2 JSON program, and if not,
//! the JSON path of the first construct it refuses.
//!
//! `pisa-bmv2 p4info FILE.json`: the P4Info (protobuf text) pisa-switch serves for the program
//! when it runs it without one, ids derived from names.

use std::process::ExitCode;

use pipeline::program::Program;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let files = match args.split_first().map(|(c, f)| (c.as_str(), f)) {
        Some(("check", files)) => files,
        Some(("p4info", [file])) => return p4info(file),
        _ => {
            eprintln!("usage: pisa-bmv2 check FILE.json... | pisa-bmv2 p4info FILE.json");
            return ExitCode::from(2);
        }
    };
    let mut failed = false;
    for file in files {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                println!("{file}: cannot read: {e}");
                failed = true;
                continue;
            }
        };
        match bmv2::load(&text, "program") {
            Ok(p) => {
                let s = p.schema();
                println!(
                    "{file}: runs ({} tables, {} actions, {} registers, {} counters, {} meters)",
                    s.tables.len(),
                    s.actions.len(),
                    s.registers.len(),
                    s.counters.len() + s.direct_counters.len(),
                    s.meters.len() + s.direct_meters.len()
                );
            }
            Err(e) => {
                println!("{file}: refused: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn p4info(file: &str) -> ExitCode {
    let loaded = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read: {e}"))
        .and_then(|t| {
            let name = std::path::Path::new(file)
                .file_stem()
                .map_or("program".into(), |s| s.to_string_lossy().into_owned());
            bmv2::load(&t, &name).map_err(|e| format!("refused: {e}"))
        });
    match loaded {
        Ok(p) => {
            print!("{}", pipeline::p4info::to_text(p.schema()));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{file}: {e}");
            ExitCode::FAILURE
        }
    }
}
