//! Rendering `pacto diff` (docs/design/contract.md#diff): text grouped by section with `+`/`-`/`~`
//! markers, or one JSON document with sorted keys; and the exit code. The diff itself is
//! computed by `pacto_contract::diff`; this module only renders it.

use std::fmt::Write as _;

use pacto_contract::diff::{Change, ChangeKind, Class, ContractDiff};
use pacto_contract::model::Contract;
use serde_json::{Map, Value, json};

use crate::{EXIT_INVALID, EXIT_OK, FailOn};

/// One side of the diff as the user named it.
pub struct Operand<'a> {
    /// The source as loaded (a path, or the digest-pinned `oci://` reference).
    pub source: &'a str,
    pub contract: &'a Contract,
}

/// The exit code: 1 when `fail_on` is met (by default: the version bump is smaller than the
/// changes imply), else 0.
pub fn exit_code(diff: &ContractDiff, fail_on: FailOn) -> u8 {
    let fail = match fail_on {
        FailOn::Bump => !diff.version.sufficient,
        FailOn::Breaking => diff.has_breaking(),
        FailOn::Any => !diff.changes.is_empty(),
        FailOn::None => false,
    };
    if fail { EXIT_INVALID } else { EXIT_OK }
}

fn marker(kind: ChangeKind) -> char {
    match kind {
        ChangeKind::Added => '+',
        ChangeKind::Removed => '-',
        ChangeKind::Changed => '~',
    }
}

/// The label after a change: `BREAKING`, the bump of a compatible change, or `info`.
fn label(change: &Change) -> &'static str {
    match change.class {
        Class::Breaking => "BREAKING",
        Class::NonBreaking => change.bump.as_str(),
        Class::Informational => "info",
    }
}

/// A scalar value as text; objects and arrays are left to the JSON output.
fn scalar(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Object(_) | Value::Array(_) => None,
        other => Some(other.to_string()),
    }
}

fn values(change: &Change) -> String {
    let (old, new) = (scalar(change.old.as_ref()), scalar(change.new.as_ref()));
    match (change.kind, old, new) {
        (ChangeKind::Changed, Some(o), Some(n)) => format!(" {o} → {n}"),
        (ChangeKind::Added, _, Some(n)) => format!(" {n}"),
        (ChangeKind::Removed, Some(o), _) => format!(" {o}"),
        _ => String::new(),
    }
}

fn describe(op: &Operand<'_>) -> String {
    format!(
        "{} ({} {})",
        op.source, op.contract.service.name, op.contract.service.version
    )
}

/// Human output: the two operands, the changes by section, the version line and a result line.
pub fn text(sides: &[Operand<'_>; 2], diff: &ContractDiff) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} → {}", describe(&sides[0]), describe(&sides[1]));
    if diff.changes.is_empty() {
        out.push_str("\nNo changes.\n");
    }
    let mut section = None;
    for c in &diff.changes {
        if section != Some(c.section) {
            let _ = writeln!(out, "\n{}:", c.section.title());
            section = Some(c.section);
        }
        let _ = writeln!(
            out,
            "  {} {}{} ({}): {}",
            marker(c.kind),
            c.path,
            values(c),
            label(c),
            c.reason
        );
    }
    let v = &diff.version;
    let s = diff.summary();
    let _ = writeln!(
        out,
        "\nVersion: {} → {} ({}); the changes imply {}",
        v.old,
        v.new,
        v.step.as_str(),
        match diff.bump.as_str() {
            "none" => "no release".to_owned(),
            b => format!("a {b} release"),
        }
    );
    let _ = writeln!(
        out,
        "Result: {} breaking, {} non-breaking, {} informational; {}",
        s.breaking,
        s.non_breaking,
        s.informational,
        match (v.sufficient, &v.suggested) {
            (true, _) => "the version covers them".to_owned(),
            (false, Some(next)) => format!("the version bump is too small (at least {next})"),
            (false, None) => "the version bump is too small".to_owned(),
        }
    );
    out
}

/// Rebuilds every object with its keys in sorted order, whatever serde_json's map keeps.
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sorted(v)))
                    .collect::<Map<String, Value>>(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// The JSON document of `pacto diff --output json` (field names in docs/design/contract.md#diff).
pub fn json(sides: &[Operand<'_>; 2], diff: &ContractDiff) -> String {
    let side = |op: &Operand<'_>| {
        json!({
            "source": op.source,
            "name": op.contract.service.name,
            "version": op.contract.service.version,
        })
    };
    let mut doc = json!({
        "old": side(&sides[0]),
        "new": side(&sides[1]),
        "impliedBump": diff.bump,
        "versionStep": diff.version.step,
        "sufficient": diff.version.sufficient,
        "summary": diff.summary(),
        "changes": diff.changes,
    });
    if let (Some(next), Some(map)) = (&diff.version.suggested, doc.as_object_mut()) {
        map.insert("suggestedVersion".into(), Value::from(next.clone()));
    }
    serde_json::to_string_pretty(&sorted(doc))
        .unwrap_or_else(|e| json!({"error": format!("serialising the diff: {e}")}).to_string())
}
