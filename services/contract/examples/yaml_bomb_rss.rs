//! Parses a ~16 KiB YAML alias bomb with `pacto_contract::parse_yaml` and prints the outcome, the
//! time and the peak resident memory (`VmHWM` of /proc/self/status), for
//! docs/design/contract.md#yaml-limits. Run: `cargo run --release -p pacto-contract --example yaml_bomb_rss`.

use std::fmt::Write as _;
use std::time::Instant;

fn main() {
    let bomb = alias_bomb();
    let start = Instant::now();
    let outcome = pacto_contract::parse_yaml(bomb.as_bytes());
    let elapsed = start.elapsed();
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.trim_start_matches("VmHWM:").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    match outcome {
        Ok(_) => println!("bomb of {} bytes: parsed (not refused)", bomb.len()),
        Err(e) => println!("bomb of {} bytes: refused: {e}", bomb.len()),
    }
    println!("time {elapsed:?}, peak RSS {peak}");
}

/// ~16 KiB: an anchored list of 2,000 scalars, then five levels that each repeat the previous
/// one ten times (2 * 10^8 nodes once expanded), padded with a comment.
fn alias_bomb() -> String {
    let mut doc = String::from("pactoVersion: \"2.0\"\nbase: &l0 [");
    doc.push_str(&vec!["x"; 2000].join(","));
    doc.push_str("]\n");
    for level in 1..=5 {
        let items = vec![format!("*l{}", level - 1); 10].join(",");
        writeln!(doc, "level{level}: &l{level} [{items}]").expect("writing to a String");
    }
    while doc.len() < 16 * 1024 {
        doc.push_str("# padding\n");
    }
    doc
}
