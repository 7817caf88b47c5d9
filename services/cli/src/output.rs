//! Rendering validation reports: human text grouped by layer, or the exact JSON shape
//! `{"valid": bool, "errors": [{"code","path","message"}], "warnings": [...]}`.

use std::fmt::Write as _;

use pacto_contract::{Finding, Layer, ValidationReport};

const LAYERS: [Layer; 4] = [
    Layer::Load,
    Layer::Structural,
    Layer::CrossField,
    Layer::Policy,
];

/// The JSON document printed by `validate --output json`.
pub fn json(report: &ValidationReport) -> String {
    serde_json::to_string_pretty(&report.to_json_output())
        .unwrap_or_else(|e| format!("{{\"valid\":false,\"errors\":[{{\"code\":\"PARSE_ERROR\",\"path\":\"\",\"message\":\"serialising report: {e}\"}}],\"warnings\":[]}}"))
}

fn layer_title(layer: Layer) -> &'static str {
    match layer {
        Layer::Load => "Load",
        Layer::Structural => "Layer 1 (structural)",
        Layer::CrossField => "Layer 2 (cross-field)",
        Layer::Policy => "Layer 3 (policy)",
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Human output: a verdict line, then findings grouped by layer, errors before warnings.
pub fn text(subject: &str, report: &ValidationReport) -> String {
    let mut out = String::new();
    let verdict = if report.is_valid() {
        "valid"
    } else {
        "invalid"
    };
    let _ = writeln!(
        out,
        "{subject}: {verdict} ({}, {})",
        plural(report.errors.len(), "error"),
        plural(report.warnings.len(), "warning")
    );
    for layer in LAYERS {
        let errors: Vec<&Finding> = report.errors.iter().filter(|f| f.layer == layer).collect();
        let warnings: Vec<&Finding> = report
            .warnings
            .iter()
            .filter(|f| f.layer == layer)
            .collect();
        if errors.is_empty() && warnings.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{}:", layer_title(layer));
        for (severity, f) in errors
            .iter()
            .map(|f| ("error", *f))
            .chain(warnings.iter().map(|f| ("warning", *f)))
        {
            let path = if f.path.is_empty() { "(root)" } else { &f.path };
            let _ = writeln!(out, "  {severity:<7} {:<32} {path}: {}", f.code, f.message);
        }
    }
    out
}

/// Prints an error and its causes on stderr (`error: …` then `caused by: …` lines, each cause
/// once; docs/design/architecture.md#failure-handling).
pub(crate) fn print_error(err: &dyn std::error::Error) {
    let mut parent = err.to_string();
    let mut text = format!("error: {parent}");
    let mut source = err.source();
    while let Some(s) = source {
        let line = s.to_string();
        if !pacto_contract::prints_its_cause(&parent, &line) {
            let _ = write!(text, "\n  caused by: {line}");
        }
        parent = line;
        source = s.source();
    }
    eprintln!("{text}");
}
