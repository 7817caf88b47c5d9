//! The public pipeline (`validate_bundle` and friends): layer gating, layer 3 resolution and
//! enforcement, overrides through every layer, and the CLI JSON shape.

use std::cell::Cell;

use pacto_contract::bundle::BundleFiles;
use pacto_contract::codes;
use pacto_contract::parse_contract;
use pacto_contract::{CliOverrides, ConfigurationOverride, apply_cli_overrides};
use pacto_contract::{
    Layer, ValidateOptions, validate_bundle, validate_bundle_with_overrides, validate_document,
};
use pacto_contract::{PolicyResolveError, PolicyResolver, resolve_policies};

fn bundle(files: &[(&str, &str)]) -> BundleFiles {
    let mut b = BundleFiles::new();
    for (p, c) in files {
        b.insert(*p, *c);
    }
    b
}

fn pairs(f: &[pacto_contract::Finding]) -> Vec<(&str, &str)> {
    f.iter()
        .map(|f| (f.code.as_str(), f.path.as_str()))
        .collect()
}

const HEAD: &str = "pactoVersion: \"2.0\"\nservice: { name: svc, version: 1.0.0 }\n";

fn local() -> ValidateOptions<'static> {
    ValidateOptions::default()
}

/// Resolves from an in-memory table and counts calls.
struct Table {
    entries: Vec<(&'static str, BundleFiles)>,
    calls: Cell<usize>,
}

impl PolicyResolver for Table {
    fn resolve(&self, reference: &str) -> Result<BundleFiles, PolicyResolveError> {
        self.calls.set(self.calls.get() + 1);
        self.entries
            .iter()
            .find(|(r, _)| *r == reference)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| PolicyResolveError::NotFound {
                reference: reference.to_owned(),
            })
    }
}

fn table(entries: Vec<(&'static str, BundleFiles)>) -> Table {
    Table {
        entries,
        calls: Cell::new(0),
    }
}

#[test]
fn layer_2_errors_stop_layer_3() {
    let yaml = format!(
        "{HEAD}policies:\n  - {{ name: p, schema: p.json }}\ninterfaces:\n  - {{ name: a, type: openapi, ref: missing.yaml }}\n"
    );
    let b = bundle(&[
        ("pacto.yaml", &yaml),
        ("p.json", r#"{"required": ["workload"]}"#),
    ]);
    let out = validate_bundle(&b, &local());
    assert_eq!(
        pairs(&out.report.errors),
        [(codes::FILE_NOT_FOUND, "interfaces[0].ref")]
    );
    assert!(out.contract.is_some() && out.raw.is_some());
    // Fix the interface: now the policy is enforced.
    let b = bundle(&[
        ("pacto.yaml", &yaml),
        ("p.json", r#"{"required": ["workload"]}"#),
        ("missing.yaml", "openapi: 3.0.0\n"),
    ]);
    let out = validate_bundle(&b, &local());
    assert_eq!(pairs(&out.report.errors), [(codes::POLICY_VIOLATION, "")]);
    let f = &out.report.errors[0];
    assert_eq!(f.layer, Layer::Policy);
    assert!(
        f.message.starts_with("policy policies[\"p\"]: "),
        "{}",
        f.message
    );
}

#[test]
fn policy_violations_are_sorted_per_policy() {
    let yaml = format!(
        "{HEAD}policies:\n  - {{ name: b, schema: b.json }}\n  - {{ name: a, schema: a.json }}\n"
    );
    let b = bundle(&[
        ("pacto.yaml", &yaml),
        ("a.json", r#"{"required": ["workload"]}"#),
        (
            "b.json",
            r#"{"properties": {"service": {"properties": {"version": {"const": "9"}, "name": {"const": "x"}}}}}"#,
        ),
    ]);
    let out = validate_bundle(&b, &local());
    let msgs: Vec<&str> = out
        .report
        .errors
        .iter()
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(
        msgs[0].starts_with("policy policies[\"b\"]: service.name"),
        "{msgs:?}"
    );
    assert!(
        msgs[1].starts_with("policy policies[\"b\"]: service.version"),
        "{msgs:?}"
    );
    assert!(msgs[2].starts_with("policy policies[\"a\"]: "), "{msgs:?}");
}

#[test]
fn ref_policy_without_resolver_is_a_warning() {
    let yaml = format!(
        "{HEAD}policies:\n  - {{ name: org, ref: \"oci://r.example.com/p/policy:1.0.0\" }}\n"
    );
    let out = validate_bundle(&bundle(&[("pacto.yaml", &yaml)]), &local());
    assert!(out.report.is_valid());
    assert_eq!(
        pairs(&out.report.warnings),
        [(codes::POLICY_REF_NOT_ENFORCED, "policies[0].ref")]
    );
    // Inline contracts (no bundle FS): nothing resolved, nothing reported.
    let out = validate_document(yaml.as_bytes(), &local());
    assert!(out.report.is_valid() && out.report.warnings.is_empty());
}

#[test]
fn ref_policy_resolution_failures() {
    let yaml = format!(
        "{HEAD}policies:\n  - {{ name: org, ref: \"oci://r.example.com/p/policy:1.0.0\" }}\n"
    );
    let b = bundle(&[("pacto.yaml", &yaml)]);
    let cases: Vec<(&str, Option<BundleFiles>)> = vec![
        ("fetch fails", None),
        ("empty bundle", Some(BundleFiles::new())),
        ("no fallback schema", Some(bundle(&[("pacto.yaml", HEAD)]))),
        (
            "fallback not JSON",
            Some(bundle(&[("policy/schema.json", "type: object")])),
        ),
        (
            "fallback does not compile",
            Some(bundle(&[("policy/schema.json", r#"{"type": 1}"#)])),
        ),
        (
            "nested entry without schema or ref",
            Some(bundle(&[(
                "pacto.yaml",
                &format!("{HEAD}policies:\n  - {{ name: x }}\n"),
            )])),
        ),
        (
            "nested local schema missing",
            Some(bundle(&[(
                "pacto.yaml",
                &format!("{HEAD}policies:\n  - {{ name: x, schema: nope.json }}\n"),
            )])),
        ),
    ];
    for (what, files) in cases {
        let t = table(
            files
                .into_iter()
                .map(|f| ("oci://r.example.com/p/policy:1.0.0", f))
                .collect(),
        );
        let out = validate_bundle(
            &b,
            &ValidateOptions {
                policy_resolver: Some(&t),
                ..local()
            },
        );
        assert_eq!(
            pairs(&out.report.errors),
            [(codes::POLICY_REF_UNRESOLVED, "")],
            "{what}"
        );
        assert!(out.report.warnings.is_empty(), "{what}");
    }
}

#[test]
fn nested_policies_are_resolved_recursively_with_origins() {
    let root = format!("{HEAD}policies:\n  - {{ name: org, ref: \"oci://r.io/a/org:1\" }}\n");
    let org = format!(
        "{HEAD}policies:\n  - {{ name: owner, schema: owner.json }}\n  - {{ name: team, ref: \"oci://r.io/a/team:1\" }}\n"
    );
    let t = table(vec![
        (
            "oci://r.io/a/org:1",
            bundle(&[
                ("pacto.yaml", &org),
                (
                    "owner.json",
                    r#"{"properties": {"service": {"required": ["owner"]}}}"#,
                ),
            ]),
        ),
        (
            "oci://r.io/a/team:1",
            bundle(&[("policy/schema.json", r#"{"required": ["workload"]}"#)]),
        ),
    ]);
    let out = validate_bundle(
        &bundle(&[("pacto.yaml", &root)]),
        &ValidateOptions {
            policy_resolver: Some(&t),
            ..local()
        },
    );
    let msgs: Vec<&str> = out
        .report
        .errors
        .iter()
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(
        msgs[0].starts_with("policy oci://r.io/a/org:1 → policies[\"owner\"]: "),
        "{msgs:?}"
    );
    assert!(
        msgs[1].starts_with("policy oci://r.io/a/org:1 → policies[\"team\"]: "),
        "{msgs:?}"
    );
    assert!(
        out.report
            .errors
            .iter()
            .all(|f| f.code == codes::POLICY_VIOLATION)
    );
    assert_eq!(t.calls.get(), 2);
}

#[test]
fn self_referencing_policy_is_a_cycle_and_terminates() {
    let root = format!("{HEAD}policies:\n  - {{ name: loop, ref: \"oci://r.io/a/loop:1\" }}\n");
    let looped = format!("{HEAD}policies:\n  - {{ name: again, ref: \"oci://r.io/a/loop:1\" }}\n");
    let t = table(vec![(
        "oci://r.io/a/loop:1",
        bundle(&[("pacto.yaml", &looped)]),
    )]);
    let out = validate_bundle(
        &bundle(&[("pacto.yaml", &root)]),
        &ValidateOptions {
            policy_resolver: Some(&t),
            ..local()
        },
    );
    assert_eq!(pairs(&out.report.errors), [(codes::POLICY_REF_CYCLE, "")]);
    assert!(t.calls.get() <= 3);
}

#[test]
fn diamond_policy_graph_is_not_a_cycle() {
    let root = format!(
        "{HEAD}policies:\n  - {{ name: a, ref: \"oci://r.io/x/a:1\" }}\n  - {{ name: b, ref: \"oci://r.io/x/b:1\" }}\n"
    );
    let via =
        |target: &str| format!("{HEAD}policies:\n  - {{ name: shared, ref: \"{target}\" }}\n");
    let (va, vb) = (via("oci://r.io/x/shared:1"), via("oci://r.io/x/shared:1"));
    let t = table(vec![
        ("oci://r.io/x/a:1", bundle(&[("pacto.yaml", &va)])),
        ("oci://r.io/x/b:1", bundle(&[("pacto.yaml", &vb)])),
        (
            "oci://r.io/x/shared:1",
            bundle(&[("policy/schema.json", "{}")]),
        ),
    ]);
    let out = validate_bundle(
        &bundle(&[("pacto.yaml", &root)]),
        &ValidateOptions {
            policy_resolver: Some(&t),
            ..local()
        },
    );
    assert!(out.report.is_valid(), "{:?}", out.report);
}

#[test]
fn unusable_local_policy_is_unresolved_in_layer_3() {
    // Reachable when layer 3 is used on its own (layer 2 reports these files first).
    let yaml =
        format!("{HEAD}policies:\n  - {{ name: p, schema: p.json }}\n  - {{ schema: q.json }}\n");
    let (_, contract) = parse_contract(yaml.as_bytes()).unwrap();
    let (resolved, findings) = resolve_policies(&contract, Some(&bundle(&[])), None);
    assert!(resolved.is_empty());
    assert_eq!(
        pairs(&findings),
        [
            (codes::POLICY_REF_UNRESOLVED, ""),
            (codes::POLICY_REF_UNRESOLVED, "")
        ]
    );
    assert!(
        findings[1].message.contains("policies[1]"),
        "{}",
        findings[1].message
    );
    let (_, none) = resolve_policies(&contract, None, None);
    assert!(none.is_empty());
}

#[test]
fn operator_overrides_reach_every_layer() {
    let yaml = format!(
        "{HEAD}configurations:\n  - {{ name: runtime, schema: s.json, required: true, values: {{ PORT: 8080 }} }}\n  - {{ name: base, ref: \"oci://r.io/a/b:1\", required: false }}\npolicies:\n  - {{ name: p, schema: p.json }}\n"
    );
    let b = bundle(&[
        ("pacto.yaml", &yaml),
        (
            "s.json",
            r#"{"type": "object", "properties": {"PORT": {"type": "integer"}, "MODE": {"type": "string"}}}"#,
        ),
        (
            "p.json",
            r#"{"properties": {"configurations": {"items": {"properties": {"values": {"properties": {"MODE": {"not": {"const": "debug"}}}}}}}}}"#,
        ),
    ]);
    let ov = |name: &str, k: &str, v: &str| ConfigurationOverride {
        name: name.into(),
        values: [(k.to_owned(), v.to_owned())].into(),
    };
    assert!(validate_bundle(&b, &local()).report.is_valid());
    // Layer 2 (rule 17b): override values are strings (docs/design/contract.md#operator-overrides).
    let out =
        validate_bundle_with_overrides(&b, &[ov("runtime", "PORT", "9090")], &local()).unwrap();
    assert_eq!(
        pairs(&out.report.errors),
        [(
            codes::CONFIG_VALUES_VALIDATION_FAILED,
            "configurations[0].values"
        )]
    );
    let values = out.contract.unwrap().configurations[0]
        .values
        .clone()
        .unwrap();
    assert_eq!(values["PORT"], "9090");
    // Layer 1: values on a ref configuration.
    let out = validate_bundle_with_overrides(&b, &[ov("base", "X", "1")], &local()).unwrap();
    assert_eq!(
        pairs(&out.report.errors),
        [(codes::SCHEMA_VIOLATION, "configurations.1.values")]
    );
    // Layer 3: the policy sees the overridden raw document.
    let out =
        validate_bundle_with_overrides(&b, &[ov("runtime", "MODE", "debug")], &local()).unwrap();
    assert_eq!(pairs(&out.report.errors), [(codes::POLICY_VIOLATION, "")]);
    let ok =
        validate_bundle_with_overrides(&b, &[ov("runtime", "MODE", "prod")], &local()).unwrap();
    assert!(ok.report.is_valid());
    // Unknown configuration name.
    let err = validate_bundle_with_overrides(&b, &[ov("nope", "A", "b")], &local()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "configuration \"nope\" not found in contract"
    );
}

#[test]
fn cli_overrides_cannot_bypass_the_schema() {
    let base = b"pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.0.0\n";
    let apply = |set: &[&str]| {
        let o = CliOverrides {
            values_files: vec![],
            set: set.iter().map(|s| (*s).to_owned()).collect(),
        };
        let bytes = apply_cli_overrides(base, &o).unwrap().into_owned();
        validate_bundle(
            &bundle(&[("pacto.yaml", std::str::from_utf8(&bytes).unwrap())]),
            &local(),
        )
    };
    assert!(apply(&["service.version=2.0.0"]).report.is_valid());
    assert_eq!(
        pairs(&apply(&["service.version=1.0"]).report.errors),
        [(codes::SCHEMA_VIOLATION, "service.version")]
    );
    assert_eq!(
        pairs(&apply(&["workload=daemon"]).report.errors),
        [(codes::SCHEMA_VIOLATION, "workload")]
    );
    assert_eq!(
        pairs(&apply(&["pactoVersion=2.0"]).report.errors),
        [(codes::UNSUPPORTED_PACTO_VERSION, "pactoVersion")],
        "--set typing turns 2.0 into a float"
    );
}

#[test]
fn json_output_shape_is_exact() {
    let yaml = "pactoVersion: \"2.0\"\nservice: { name: svc, version: next }\ndependencies:\n  - { name: d, ref: \"oci://r.io/a/b:1\", required: true, compatibility: \"*\" }\n";
    let out = validate_bundle(&bundle(&[("pacto.yaml", yaml)]), &local());
    let json = serde_json::to_string(&out.report.to_json_output()).unwrap();
    assert!(
        json.starts_with(r#"{"valid":false,"errors":[{"code":"INVALID_SEMVER","path":"service.version","message":""#),
        "{json}"
    );
    assert!(
        json.contains(
            r#""warnings":[{"code":"TAG_NOT_DIGEST","path":"dependencies[0].ref","message":""#
        ),
        "{json}"
    );
    let detailed = serde_json::to_value(out.report.errors[0].detailed()).unwrap();
    assert_eq!(detailed["category"], "InvalidVersion");
    assert_eq!(detailed["severity"], "error");
    assert_eq!(detailed["layer"], 2);
}

#[test]
fn yaml_errors_and_versions() {
    let out = validate_bundle(&bundle(&[("pacto.yaml", "a: [1,\nb: 2\n")]), &local());
    assert_eq!(pairs(&out.report.errors), [(codes::YAML_PARSE_ERROR, "")]);
    assert!(
        out.report.errors[0].message.starts_with("yaml: line "),
        "{}",
        out.report.errors[0].message
    );
    assert!(out.raw.is_none() && out.contract.is_none());
    for (yaml, needle) in [
        ("pactoVersion: \"1.2\"\n", "1.2"),
        ("pactoVersion: 2.0\n", "\"\""),
        ("pactoVersion: \"2.1\"\n", "2.1"),
        ("pactoVersion: [2]\n", "\"\""),
    ] {
        let out = validate_bundle(&bundle(&[("pacto.yaml", yaml)]), &local());
        assert_eq!(
            pairs(&out.report.errors),
            [(codes::UNSUPPORTED_PACTO_VERSION, "pactoVersion")]
        );
        assert!(
            out.report.errors[0].message.contains(needle),
            "{}",
            out.report.errors[0].message
        );
        assert!(out.report.errors[0].message.contains("2.0"));
    }
    let out = validate_bundle(&BundleFiles::new(), &local());
    assert_eq!(pairs(&out.report.errors), [(codes::PARSE_ERROR, "")]);
}

#[test]
fn unavailable_ref_policy_is_a_warning_operator_style() {
    // The operator's resolver reports refs it cannot resolve with the Pacto's credentials as
    // `Unavailable`: the policy is skipped with POLICY_REF_NOT_ENFORCED (docs/design/contract.md#layer-3).
    struct Operator;
    impl PolicyResolver for Operator {
        fn resolve(&self, reference: &str) -> Result<BundleFiles, PolicyResolveError> {
            if reference.contains("nested") {
                return Err(PolicyResolveError::Unavailable {
                    reference: reference.to_owned(),
                    reason: "no credentials for registry".into(),
                });
            }
            let yaml =
                format!("{HEAD}policies:\n  - {{ name: n, ref: \"oci://r.io/a/nested:1\" }}\n");
            Ok(bundle(&[("pacto.yaml", &yaml)]))
        }
    }
    let root = format!(
        "{HEAD}policies:\n  - {{ name: local, schema: p.json }}\n  - {{ name: org, ref: \"oci://r.io/a/org:1\" }}\n"
    );
    let out = validate_bundle(
        &bundle(&[("pacto.yaml", &root), ("p.json", "{}")]),
        &ValidateOptions {
            policy_resolver: Some(&Operator),
            ..local()
        },
    );
    assert!(out.report.is_valid(), "{:?}", out.report);
    assert_eq!(
        pairs(&out.report.warnings),
        [(codes::POLICY_REF_NOT_ENFORCED, "policies[1].ref")]
    );
}
