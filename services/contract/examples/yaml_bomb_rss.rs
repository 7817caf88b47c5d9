//! Parses a ~16 KiB YAML alias bomb with `pacto_contract::parse_yaml` and prints the outcome, the
//! time and the peak resident memory (`VmHWM` of /proc/self/status), for
//! docs/design/contract.md#yaml-limits. Run: `cargo run --release -p pacto-contract --features test-support --example yaml_bomb_rss`.

use std::time::Instant;

fn main() {
    let bomb = pacto_contract::testing::alias_bomb("pactoVersion: \"2.0\"\n");
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
