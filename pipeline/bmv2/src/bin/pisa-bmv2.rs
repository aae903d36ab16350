//! `pisa-bmv2 check FILE.json...`: whether pisa-switch runs each BMv2 JSON program, and if not,
//! the JSON path of the first construct it refuses.

use std::process::ExitCode;

use pipeline::program::Program;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(("check", files)) = args.split_first().map(|(c, f)| (c.as_str(), f)) else {
        eprintln!("usage: pisa-bmv2 check FILE.json...");
        return ExitCode::from(2);
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
