//! Layer 1 — structural validation against the embedded 2.0 JSON Schema (draft 2020-12), and the
//! shared JSON Schema compiler used for configuration and policy schemas.
//!
//! Formats are annotations only, patterns use the RE2-like `regex` engine, and no remote `$ref`
//! is ever retrieved (the `jsonschema` crate is built without its resolver features).
//!
//! Leaf causes: `oneOf`/`anyOf` failures are expanded into their branches' causes (identical
//! leaves de-duplicated), and an `additionalProperties` failure yields one violation per unknown
//! key. An unknown key is reported at the path of the object that holds it (the root is `""`,
//! as in worked example 7.4) with the key named in the message (docs/design/contract.md#layer-1). The exactly-one rules of
//! configurations, policies and capabilities are written as `if`/`then`/`else` with `false`
//! sub-schemas rather than `oneOf`, so each cause gets its own path (e.g. a `health` capability
//! with a `ref` fails at `capabilities.0.ref`).

use std::sync::LazyLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::paths::LocationSegment;
use jsonschema::{Draft, PatternOptions, ValidationError, Validator};
use serde_json::Value;

use crate::codes;
use crate::finding::{Finding, Layer};

/// The embedded schema text (`pacto-v2.0.schema.json`).
const SCHEMA_V2_0: &str = include_str!("../schema/pacto-v2.0.schema.json");

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The embedded schema text is not JSON (a build defect).
    #[error("embedded schema is not JSON")]
    EmbeddedJson {
        #[source]
        source: serde_json::Error,
    },
    /// A schema does not compile.
    #[error("schema does not compile: {message}")]
    Compile { message: String },
}

static STRUCTURAL: LazyLock<Result<Validator, SchemaError>> = LazyLock::new(|| {
    let schema: Value =
        serde_json::from_str(SCHEMA_V2_0).map_err(|source| SchemaError::EmbeddedJson { source })?;
    compile(&schema)
});

/// Compiles a JSON Schema with the project's settings: draft 2020-12 unless the schema's
/// `$schema` says otherwise, formats not asserted, RE2-like patterns, no remote references.
pub fn compile(schema: &Value) -> Result<Validator, SchemaError> {
    jsonschema::options()
        .with_draft(Draft::Draft202012)
        .should_validate_formats(false)
        .with_pattern_options(PatternOptions::regex())
        .build(schema)
        .map_err(|e| SchemaError::Compile {
            message: e.to_string(),
        })
}

/// One leaf cause of a schema failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Instance location tokens joined with `.` (`interfaces.0.type`; root `""`).
    pub path: String,
    /// Human message.
    pub message: String,
}

/// Every leaf violation of `instance` against `validator`, in validator order, with
/// `oneOf`/`anyOf` failures expanded into their branches' causes and one violation per
/// unexpected property.
pub fn violations(validator: &Validator, instance: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    for err in validator.iter_errors(instance) {
        leaves(&err, &mut out);
    }
    out
}

fn leaves(err: &ValidationError<'_>, out: &mut Vec<Violation>) {
    match err.kind() {
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context }
            if context.iter().any(|branch| !branch.is_empty()) =>
        {
            let before = out.len();
            for branch in context {
                for e in branch {
                    leaves(e, out);
                }
            }
            dedup_tail(out, before);
        }
        ValidationErrorKind::AdditionalProperties { unexpected } if !unexpected.is_empty() => {
            let path = dotted(err);
            for key in unexpected {
                out.push(Violation {
                    path: path.clone(),
                    message: format!("additional property \"{key}\" is not allowed"),
                });
            }
        }
        ValidationErrorKind::FalseSchema => {
            let path = dotted(err);
            let key = path.rsplit('.').next().unwrap_or_default();
            let message = format!("\"{key}\" is not allowed here");
            out.push(Violation { path, message });
        }
        _ => out.push(Violation {
            path: dotted(err),
            message: err.to_string(),
        }),
    }
}

/// Branches of `oneOf` often repeat the same cause; keep the first of identical leaves.
fn dedup_tail(out: &mut Vec<Violation>, from: usize) {
    let mut i = from;
    while i < out.len() {
        if out[from..i].contains(&out[i]) {
            out.remove(i);
        } else {
            i += 1;
        }
    }
}

fn dotted(err: &ValidationError<'_>) -> String {
    let mut s = String::new();
    for seg in err.instance_path().segments() {
        if !s.is_empty() {
            s.push('.');
        }
        match seg {
            LocationSegment::Property(p) => s.push_str(&p),
            LocationSegment::Index(i) => s.push_str(&i.to_string()),
        }
    }
    s
}

/// Layer 1 (after version selection): one `SCHEMA_VIOLATION` per leaf cause, or a single
/// `SCHEMA_ERROR` if the validator itself is unusable.
pub fn validate_structure(doc: &Value) -> Vec<Finding> {
    match &*STRUCTURAL {
        Ok(validator) => violations(validator, doc)
            .into_iter()
            .map(|v| {
                Finding::new(
                    codes::SCHEMA_VIOLATION,
                    v.path,
                    v.message,
                    Layer::Structural,
                )
            })
            .collect(),
        Err(e) => vec![Finding::new(
            codes::SCHEMA_ERROR,
            "",
            crate::error_chain(&e),
            Layer::Structural,
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(doc: &Value) -> Vec<String> {
        validate_structure(doc)
            .into_iter()
            .map(|f| f.path)
            .collect()
    }

    fn base() -> Value {
        json!({"pactoVersion": "2.0", "service": {"name": "svc", "version": "1.0.0"}})
    }

    #[test]
    fn embedded_schema_compiles_and_minimal_contract_passes() {
        assert!(STRUCTURAL.is_ok());
        assert!(validate_structure(&base()).is_empty());
    }

    #[test]
    fn unknown_keys_are_reported_one_per_key_at_their_object() {
        let mut doc = base();
        doc["runtime"] = json!({});
        doc["verification"] = json!({});
        doc["service"]["image"] = json!("x");
        let f = validate_structure(&doc);
        assert_eq!(f.len(), 3, "{f:?}");
        assert!(f.iter().all(|f| f.code == codes::SCHEMA_VIOLATION));
        assert!(
            f.iter()
                .any(|f| f.path.is_empty() && f.message.contains("runtime"))
        );
        assert!(
            f.iter()
                .any(|f| f.path.is_empty() && f.message.contains("verification"))
        );
        assert!(
            f.iter()
                .any(|f| f.path == "service" && f.message.contains("image"))
        );
    }

    #[test]
    fn free_form_sections_accept_anything() {
        let mut doc = base();
        doc["metadata"] = json!({"a": {"b": [1, 2]}});
        doc["extensions"] = json!({"example.com/x": {"y": true}});
        doc["configurations"] =
            json!([{"name": "c", "required": true, "schema": "s.json", "values": {"K": {"n": 1}}}]);
        assert!(paths(&doc).is_empty());
        doc["metadata"] = json!("str");
        assert_eq!(paths(&doc), vec!["metadata"]);
    }

    #[test]
    fn dotted_paths_for_nested_items() {
        let mut doc = base();
        doc["interfaces"] = json!([{"name": "a", "type": "openapi", "ref": "x.yaml"},
                                   {"name": "b", "type": "rest", "ref": "y.yaml"}]);
        assert_eq!(paths(&doc), vec!["interfaces.1.type"]);
    }

    #[test]
    fn stateless_requires_ephemeral() {
        let mut doc = base();
        doc["state"] = json!({"type": "stateless",
            "persistence": {"scope": "local", "durability": "persistent"}, "dataCriticality": "low"});
        assert_eq!(paths(&doc), vec!["state.persistence.durability"]);
        doc["state"]["type"] = json!("stateful");
        assert!(paths(&doc).is_empty());
    }

    #[test]
    fn capability_one_of_rules() {
        let mut doc = base();
        doc["capabilities"] = json!([{"type": "health", "ref": "example.com/h"}]);
        let p = paths(&doc);
        assert!(
            !p.is_empty() && p.iter().all(|p| p.starts_with("capabilities.0")),
            "{p:?}"
        );
        doc["capabilities"] = json!([{"type": "extension"}]);
        assert!(!paths(&doc).is_empty());
        doc["capabilities"] = json!([{"type": "extension", "ref": "example.com/x",
            "binding": {"type": "http", "interface": "i"}}]);
        assert!(!paths(&doc).is_empty());
        doc["capabilities"] = json!([{"type": "metrics",
            "binding": {"type": "grpc", "interface": "i"}}]);
        assert!(
            paths(&doc)
                .iter()
                .any(|p| p == "capabilities.0.binding.type")
        );
        doc["capabilities"] = json!([{"type": "metrics",
            "binding": {"type": "http", "interface": "i", "path": "//x"}}]);
        assert!(
            paths(&doc)
                .iter()
                .any(|p| p == "capabilities.0.binding.path")
        );
        doc["capabilities"] = json!([{"type": "extension", "ref": "example.com/x"},
            {"type": "health", "binding": {"type": "http", "interface": "i", "path": "/"}}]);
        assert!(paths(&doc).is_empty());
    }

    #[test]
    fn configuration_and_policy_exactly_one_of() {
        let mut doc = base();
        doc["configurations"] =
            json!([{"name": "c", "required": true, "ref": "oci://r/x", "values": {"a": 1}}]);
        assert!(
            paths(&doc)
                .iter()
                .all(|p| p.starts_with("configurations.0"))
        );
        assert!(!paths(&doc).is_empty());
        doc["configurations"] = json!([{"name": "c", "required": true}]);
        assert!(!paths(&doc).is_empty());
        doc["configurations"] = json!([{"name": "c", "schema": "s.json"}]);
        assert!(!paths(&doc).is_empty(), "required is mandatory");
        doc["configurations"] = json!([{"name": "c", "required": false, "ref": "oci://r/x"}]);
        assert!(paths(&doc).is_empty());
        doc.as_object_mut().unwrap().remove("configurations");
        doc["policies"] = json!([]);
        assert_eq!(paths(&doc), vec!["policies"]);
        doc["policies"] = json!([{"name": "p", "schema": "a.json", "ref": "oci://r/x"}]);
        assert!(!paths(&doc).is_empty());
        doc["policies"] = json!([{"name": "p", "schema": "a.json", "target": "runtime"}]);
        assert_eq!(paths(&doc), vec!["policies.0.target"]);
        doc["policies"] = json!([{"name": "p", "ref": "oci://r/x", "target": "contract"}]);
        assert!(paths(&doc).is_empty());
    }

    #[test]
    fn formats_are_not_asserted_and_integers_accept_integral_floats() {
        let mut doc = base();
        doc["readiness"] = json!({"expires": "not-a-date", "minScore": 50.0,
            "claims": [{"id": "a", "type": "url", "status": "done", "evidence": "e", "weight": 10}]});
        assert!(paths(&doc).is_empty());
        doc["readiness"]["minScore"] = json!(50.5);
        assert_eq!(paths(&doc), vec!["readiness.minScore"]);
    }

    #[test]
    fn readiness_constraints() {
        let mut doc = base();
        doc["readiness"] = json!({"expires": "2027-01-01", "claims": []});
        assert_eq!(paths(&doc), vec!["readiness.claims"]);
        doc["readiness"]["claims"] = json!([{"id": "Bad", "type": "url", "status": "maybe",
            "evidence": "", "weight": 101}]);
        let mut p = paths(&doc);
        p.sort();
        assert_eq!(
            p,
            vec![
                "readiness.claims.0.evidence",
                "readiness.claims.0.id",
                "readiness.claims.0.status",
                "readiness.claims.0.weight"
            ]
        );
    }

    #[test]
    fn service_rules() {
        let doc = json!({"pactoVersion": "2.0", "service": {"name": "Billing_API", "version": 1.0,
            "owner": {}}});
        let mut p = paths(&doc);
        p.sort();
        assert_eq!(p, vec!["service.name", "service.owner", "service.version"]);
        let doc = json!({"pactoVersion": "2.0"});
        assert_eq!(paths(&doc), vec![""]);
    }

    #[test]
    fn compile_rejects_bad_schemas_and_remote_refs() {
        assert!(compile(&json!({"type": "nope"})).is_err());
        assert!(compile(&json!({"$ref": "https://example.com/schema.json"})).is_err());
        assert!(compile(&json!({"type": "object"})).is_ok());
    }
}
