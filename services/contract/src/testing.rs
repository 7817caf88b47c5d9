//! Test support (feature `test-support`): hostile documents shared by the unit tests, the
//! end-to-end tests and the memory example (docs/design/contract.md#yaml-limits).

use std::fmt::Write as _;

/// A YAML alias bomb of about 16 KiB after `head` (leading lines, e.g. a contract's
/// `pactoVersion` and `service`): 2,000 anchored scalars, then five levels that each repeat the
/// previous one ten times (2 * 10^8 nodes once expanded, under serde_norway's own repetition
/// limit), padded with comments.
pub fn alias_bomb(head: &str) -> String {
    let mut doc = format!("{head}base: &l0 [{}]\n", vec!["x"; 2000].join(","));
    for level in 1..=5 {
        let items = vec![format!("*l{}", level - 1); 10].join(",");
        let _ = writeln!(doc, "level{level}: &l{level} [{items}]");
    }
    while doc.len() < 16 * 1024 {
        doc.push_str("# padding\n");
    }
    doc
}
