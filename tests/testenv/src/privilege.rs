//! Which tiers may run here: the privileged ones (a real node, a private mount namespace) need
//! root. Without root a developer's run skips them in one line; under CI (`CI` set to anything
//! but empty, `0` or `false`) they must run, so a missing root fails the test instead.

/// Whether this process runs as root (effective uid 0, from `/proc/self/status`).
pub fn is_root() -> bool {
    effective_uid() == Some(0)
}

/// True as root. Otherwise prints `skipped: <line>` and returns false, or, under CI, fails the
/// test with `line`.
pub fn root_or_skip(line: &str) -> bool {
    if is_root() {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(!ci, "{line}: CI requires every privileged tier to run");
    eprintln!("skipped: {line}");
    false
}

fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}
