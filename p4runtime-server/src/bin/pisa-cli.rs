//! `pisa-cli SOCKET [COMMAND...]`: sends commands to a switch's admin socket (one per argument, or
//! one per line of standard input) and prints the replies. Exits non-zero if any command failed.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: pisa-cli SOCKET [COMMAND...]");
        std::process::exit(2);
    };
    let commands: Vec<String> = {
        let given: Vec<String> = args.collect();
        if given.is_empty() {
            std::io::stdin().lines().map_while(Result::ok).collect()
        } else {
            given
        }
    };
    let stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let mut out = stream.try_clone().expect("socket clone");
    let mut replies = BufReader::new(stream).lines();
    let mut failed = false;
    for cmd in commands {
        if out.write_all(format!("{cmd}\n").as_bytes()).is_err() {
            failed = true;
            break;
        }
        for line in replies.by_ref() {
            let Ok(line) = line else { break };
            if line == "ok" {
                break;
            }
            if let Some(e) = line.strip_prefix("error: ") {
                eprintln!("{cmd}: {e}");
                failed = true;
                break;
            }
            println!("{line}");
        }
    }
    std::process::exit(i32::from(failed));
}
