//! Unit tests for every layer-2 rule of docs/design/contract.md#layer-2, calling layer 2 directly — including the
//! defence-in-depth rules (6a, 6b, 7c, 7d, 15, 16c, 17a, 18) that layer 1 pre-empts in the
//! pipeline (docs/design/contract.md#layer-2).

use super::{check_binding_path, check_oci_ref, cross_field, is_canonical_date};
use crate::bundle::BundleFiles;
use crate::codes::{self, Category, Severity};
use crate::model::{
    Binding, Capability, Claim, Configuration, Contract, Dependency, Interface, Persistence,
    Policy, Readiness, Revision, Service, State,
};
use crate::{Finding, Layer};
use serde_json::json;

const DIGEST: &str = "sha256:eae24bc941f8f244f0fb3ee7c18c0da3c30792916cb9f41078eef8f9dae4f166";

fn base() -> Contract {
    Contract {
        pacto_version: "2.0".into(),
        service: Service {
            name: "svc".into(),
            version: "1.0.0".into(),
            owner: None,
        },
        ..Contract::default()
    }
}

fn pairs(f: &[Finding]) -> Vec<(&str, &str)> {
    f.iter()
        .map(|f| (f.code.as_str(), f.path.as_str()))
        .collect()
}

fn run(c: &Contract, fs: Option<&BundleFiles>) -> Vec<Finding> {
    let out = cross_field(c, fs);
    for f in &out {
        assert_eq!(f.layer, Layer::CrossField);
        assert_eq!((f.category, f.severity), codes::lookup(&f.code), "{f}");
    }
    out
}

fn iface(name: &str, kind: &str, r: &str) -> Interface {
    Interface {
        name: name.into(),
        kind: kind.into(),
        reference: r.into(),
        visibility: None,
    }
}

fn dep(name: &str, r: &str, compat: &str) -> Dependency {
    Dependency {
        name: name.into(),
        reference: r.into(),
        required: true,
        compatibility: compat.into(),
    }
}

fn cap(kind: &str, r: Option<&str>, binding: Option<(&str, Option<&str>)>) -> Capability {
    Capability {
        kind: kind.into(),
        reference: r.map(Into::into),
        binding: binding.map(|(i, p)| Binding {
            kind: "http".into(),
            interface: i.into(),
            path: p.map(Into::into),
        }),
    }
}

fn claim(id: &str, evidence: &str, description: Option<&str>) -> Claim {
    Claim {
        id: id.into(),
        kind: "url".into(),
        status: "done".into(),
        evidence: evidence.into(),
        weight: 10,
        description: description.map(Into::into),
        ..Claim::default()
    }
}

#[test]
fn valid_base_has_no_findings() {
    assert!(run(&base(), None).is_empty());
    assert!(run(&base(), Some(&BundleFiles::new())).is_empty());
}

#[test]
fn rule_1_invalid_semver() {
    for bad in ["next", "", "1.2.3.4", "01.2.3", "1.2.3-"] {
        let mut c = base();
        c.service.version = bad.into();
        assert_eq!(
            pairs(&run(&c, None)),
            [(codes::INVALID_SEMVER, "service.version")],
            "{bad}"
        );
    }
    for good in ["1", "1.2", "v1.2.3", "1.2.3-rc.1+build.5", "0.9.0-rc.2"] {
        let mut c = base();
        c.service.version = good.into();
        assert!(run(&c, None).is_empty(), "{good}");
    }
}

#[test]
fn rules_2_to_5_duplicate_names_on_later_entries() {
    let mut c = base();
    c.interfaces = vec![
        iface("a", "openapi", "x"),
        iface("b", "grpc", "y"),
        iface("a", "openapi", "z"),
    ];
    c.configurations = vec![
        Configuration {
            name: "c".into(),
            schema: Some("s.json".into()),
            ..Configuration::default()
        },
        Configuration {
            name: "c".into(),
            schema: Some("s.json".into()),
            ..Configuration::default()
        },
    ];
    c.policies = vec![
        Policy {
            name: "p".into(),
            schema: Some("p.json".into()),
            ..Policy::default()
        },
        Policy {
            name: "c".into(),
            schema: Some("p.json".into()),
            ..Policy::default()
        },
        Policy {
            name: "p".into(),
            schema: Some("p.json".into()),
            ..Policy::default()
        },
    ];
    c.dependencies = vec![
        dep("d", "./d", "*"),
        dep("d", "./e", "*"),
        dep("d", "./f", "*"),
    ];
    assert_eq!(
        pairs(&run(&c, None)),
        [
            (codes::DUPLICATE_INTERFACE_NAME, "interfaces[2].name"),
            (
                codes::DUPLICATE_CONFIGURATION_NAME,
                "configurations[1].name"
            ),
            (codes::DUPLICATE_POLICY_NAME, "policies[2].name"),
            (codes::DUPLICATE_DEPENDENCY_NAME, "dependencies[1].name"),
            (codes::DUPLICATE_DEPENDENCY_NAME, "dependencies[2].name"),
        ]
    );
}

#[test]
fn rule_6a_6b_interface_type_and_ref() {
    let mut c = base();
    c.interfaces = vec![iface("a", "http", "x.yaml"), iface("b", "grpc", "")];
    assert_eq!(
        pairs(&run(&c, None)),
        [
            (codes::INVALID_INTERFACE_TYPE, "interfaces[0].type"),
            (codes::INTERFACE_REF_REQUIRED, "interfaces[1].ref"),
        ]
    );
    // An empty ref is not looked up in the bundle.
    let mut c = base();
    c.interfaces = vec![iface("b", "grpc", "")];
    assert_eq!(
        pairs(&run(&c, Some(&BundleFiles::new()))),
        [(codes::INTERFACE_REF_REQUIRED, "interfaces[0].ref")]
    );
}

#[test]
fn rule_6c_6d_interface_files_reported_once() {
    let mut fs = BundleFiles::new();
    fs.insert("i/ok.yaml", "a: 1\n");
    fs.insert("i/OK.YML", "a: 1\n");
    fs.insert("i/ok.json", "{\"a\": 1}");
    fs.insert("i/bad.yaml", "a: [\n");
    fs.insert("i/bad.json", "a: 1\n");
    fs.insert("i/s.proto", "syntax = \"proto3\";");
    let mut c = base();
    c.interfaces = vec![
        iface("a", "openapi", "i/ok.yaml"),
        iface("b", "openapi", "./i/OK.YML"),
        iface("c", "grpc", "i/ok.json"),
        iface("d", "openapi", "i/bad.yaml"),
        iface("e", "grpc", "i/bad.json"),
        iface("f", "grpc", "i/s.proto"),
        iface("g", "asyncapi", "i/missing.yaml"),
        iface("h", "asyncapi", "/etc/passwd"),
        iface("i", "asyncapi", "../escape.yaml"),
    ];
    assert_eq!(
        pairs(&run(&c, Some(&fs))),
        [
            (codes::INVALID_INTERFACE_SPEC, "interfaces[3].ref"),
            (codes::INVALID_INTERFACE_SPEC, "interfaces[4].ref"),
            (codes::INVALID_INTERFACE_SPEC, "interfaces[5].ref"),
            (codes::FILE_NOT_FOUND, "interfaces[6].ref"),
            (codes::FILE_NOT_FOUND, "interfaces[7].ref"),
            (codes::FILE_NOT_FOUND, "interfaces[8].ref"),
        ]
    );
    // Without a bundle filesystem every file check is skipped silently.
    assert!(run(&c, None).is_empty());
}

#[test]
fn rule_7a_7b_binding_interface_and_path() {
    let mut c = base();
    c.interfaces = vec![iface("api", "openapi", "x")];
    c.capabilities = vec![
        cap("health", None, Some(("nope", Some("/ok")))),
        cap("metrics", None, Some(("api", Some("metrics")))),
    ];
    assert_eq!(
        pairs(&run(&c, None)),
        [
            (
                codes::CAPABILITY_INTERFACE_UNKNOWN,
                "capabilities[0].binding.interface"
            ),
            (
                codes::CAPABILITY_PATH_INVALID,
                "capabilities[1].binding.path"
            ),
        ]
    );
}

#[test]
fn binding_path_rule_details() {
    for ok in ["/", "/healthz", "/a/b?x=1&y=//z", "/a%20b", "/a:b", "/a//b"] {
        assert!(check_binding_path(ok).is_ok(), "{ok}");
    }
    for bad in [
        "",
        "healthz",
        "//evil.example.com/x",
        "/%2Fevil",
        "/%2f%2fx",
        "/x#frag",
        "/%zz",
        "/%2",
        "/a\nb",
        "http://h/x",
    ] {
        assert!(check_binding_path(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn rule_7c_to_7f_capability_type_ref_and_duplicates() {
    let mut c = base();
    c.capabilities = vec![
        cap("tracer", None, None),
        cap("extension", None, None),
        cap("extension", Some(""), None),
        cap("extension", Some("tracing"), None),
        cap("extension", Some("example/tracing"), None),
        cap("extension", Some("example.com/tracing"), None),
        cap("extension", Some("example.com/tracing"), None),
        cap("health", None, None),
        cap("health", None, None),
        cap("metrics", None, None),
    ];
    assert_eq!(
        pairs(&run(&c, None)),
        [
            (codes::INVALID_CAPABILITY_TYPE, "capabilities[0].type"),
            (codes::CAPABILITY_REF_REQUIRED, "capabilities[1].ref"),
            (codes::CAPABILITY_REF_REQUIRED, "capabilities[2].ref"),
            (codes::CAPABILITY_REF_INVALID, "capabilities[3].ref"),
            (codes::CAPABILITY_REF_INVALID, "capabilities[4].ref"),
            (codes::DUPLICATE_CAPABILITY, "capabilities[6]"),
            (codes::DUPLICATE_CAPABILITY, "capabilities[8]"),
        ]
    );
}

fn cfg(
    name: &str,
    schema: Option<&str>,
    r: Option<&str>,
    values: Option<serde_json::Value>,
) -> Configuration {
    Configuration {
        name: name.into(),
        required: true,
        schema: schema.map(Into::into),
        reference: r.map(Into::into),
        values: values.and_then(|v| v.as_object().cloned()),
    }
}

#[test]
fn rules_10_11_12_configuration_schema_files_and_refs() {
    let mut fs = BundleFiles::new();
    fs.insert("c/ok.json", r#"{"type": "object"}"#);
    fs.insert("c/yaml.json", "type: object\n");
    fs.insert("c/bad.json", r#"{"type": 12}"#);
    fs.insert("c/remote.json", r#"{"$ref": "https://example.com/s.json"}"#);
    let mut c = base();
    c.configurations = vec![
        cfg("a", Some("c/ok.json"), None, None),
        cfg("b", Some("c/missing.json"), None, None),
        cfg("c", Some("c/yaml.json"), None, None),
        cfg("d", Some("c/bad.json"), None, None),
        cfg("e", Some("c/remote.json"), None, None),
        cfg("f", None, Some("oci://nginx:1.0"), None),
        cfg(
            "g",
            None,
            Some(&format!("oci://r.example.com/a/b@{DIGEST}")),
            None,
        ),
        cfg("h", None, Some("file://../base"), None),
        cfg("i", None, Some("ghcr.io/not-oci:1"), None),
    ];
    assert_eq!(
        pairs(&run(&c, Some(&fs))),
        [
            (codes::FILE_NOT_FOUND, "configurations[1].schema"),
            (codes::INVALID_CONFIG_JSON, "configurations[2].schema"),
            (codes::INVALID_CONFIG_SCHEMA, "configurations[3].schema"),
            (codes::INVALID_CONFIG_SCHEMA, "configurations[4].schema"),
            (codes::INVALID_CONFIG_REF, "configurations[5].ref"),
        ]
    );
    // Rule 12 needs no filesystem.
    assert_eq!(
        pairs(&run(&c, None)),
        [(codes::INVALID_CONFIG_REF, "configurations[5].ref")]
    );
}

#[test]
fn rules_13_14_15_policies() {
    let mut fs = BundleFiles::new();
    fs.insert("p/ok.json", r#"{"required": ["service"]}"#);
    fs.insert("p/notjson.json", "{");
    fs.insert("p/bad.json", r#"{"required": "service"}"#);
    let pol = |name: &str, schema: Option<&str>, r: Option<&str>, target: Option<&str>| Policy {
        name: name.into(),
        schema: schema.map(Into::into),
        reference: r.map(Into::into),
        target: target.map(Into::into),
    };
    let mut c = base();
    c.policies = vec![
        pol("a", Some("p/ok.json"), None, Some("contract")),
        pol("b", Some("p/missing.json"), None, None),
        pol("c", None, Some("oci://r.example.com/p:-bad"), None),
        pol("d", Some("p/notjson.json"), None, None),
        pol("e", Some("p/bad.json"), None, Some("")),
        pol(
            "f",
            None,
            Some("oci://r.example.com/team/p:1.0.0"),
            Some("runtime"),
        ),
    ];
    assert_eq!(
        pairs(&run(&c, Some(&fs))),
        [
            (codes::FILE_NOT_FOUND, "policies[1].schema"),
            (codes::INVALID_POLICY_REF, "policies[2].ref"),
            (codes::INVALID_POLICY_JSON, "policies[3].schema"),
            (codes::INVALID_POLICY_SCHEMA, "policies[4].schema"),
            (codes::UNSUPPORTED_POLICY_TARGET, "policies[5].target"),
        ]
    );
}

#[test]
fn rule_16_dependencies() {
    let mut c = base();
    c.dependencies = vec![
        dep("a", "oci://ghcr.io/acme/a:1.0.0", "^1.2"),
        dep("b", "oci://ghcr.io/acme/b@sha256:abc", "not-a-range"),
        dep("c", "oci://ghcr.io/acme/c", ""),
        dep("d", "oci://ghcr.io/acme/d", "not-a-range"),
        dep(
            "e",
            &format!("oci://ghcr.io/acme/e:1.0@{DIGEST}"),
            ">= 2.0.0, < 4.0.0",
        ),
        dep("f", "ghcr.io/acme/f:1", "~1.3.0"),
        dep("g", "oci://nginx:1.0", "*"),
        dep("h", "oci://localhost:5000/x", "1.2 - 1.4 || ^3"),
    ];
    let out = run(&c, None);
    assert_eq!(
        pairs(&out),
        [
            (codes::TAG_NOT_DIGEST, "dependencies[0].ref"),
            (codes::INVALID_OCI_REF, "dependencies[1].ref"),
            (codes::EMPTY_COMPATIBILITY, "dependencies[2].compatibility"),
            (
                codes::INVALID_COMPATIBILITY,
                "dependencies[3].compatibility"
            ),
            (codes::INVALID_OCI_REF, "dependencies[6].ref"),
        ]
    );
    assert_eq!(out[0].severity, Severity::Warning);
    assert_eq!(out[0].category, Category::InvalidReference);
}

#[test]
fn oci_ref_grammar() {
    let p = check_oci_ref("oci://localhost:5000/team/repo:1.0").unwrap();
    assert_eq!(
        (p.registry, p.repository, p.tag, p.digest),
        ("localhost:5000", "team/repo", Some("1.0"), None)
    );
    let p = check_oci_ref("oci://localhost:5000/team/repo").unwrap();
    assert_eq!(p.tag, None, "a : before the last / is a port");
    let d = format!("oci://r.io/a:t@{DIGEST}");
    let p = check_oci_ref(&d).unwrap();
    assert_eq!((p.tag, p.digest), (Some("t"), Some(DIGEST)));
    for bad in [
        "oci://nginx:1.0",
        "oci://nginx",
        "oci:///repo",
        "oci://r.io/",
        "oci://r.io/a:",
        "oci://r.io/a:-bad",
        "oci://r.io/a@sha256:ABC",
        "oci://r.io/a@md5:abc",
    ] {
        assert!(check_oci_ref(bad).is_err(), "{bad}");
    }
}

#[test]
fn rule_17a_values_without_schema() {
    let mut c = base();
    c.configurations = vec![
        cfg("a", None, None, Some(json!({"A": 1}))),
        cfg("b", None, None, Some(json!({}))),
    ];
    assert_eq!(
        pairs(&run(&c, None)),
        [(codes::VALUES_WITHOUT_SCHEMA, "configurations[0].values")]
    );
}

#[test]
fn rule_17b_values_validate_against_local_schema() {
    let mut fs = BundleFiles::new();
    fs.insert(
        "s.json",
        r#"{"type": "object", "required": ["PORT"], "properties": {"PORT": {"type": "integer"}}}"#,
    );
    fs.insert("bad.json", r#"{"type": "nope"}"#);
    let mut c = base();
    c.configurations = vec![
        cfg("ok", Some("s.json"), None, Some(json!({"PORT": 80}))),
        cfg("str", Some("s.json"), None, Some(json!({"PORT": "80"}))),
        cfg("missing", Some("s.json"), None, Some(json!({"OTHER": 1}))),
        cfg("empty", Some("s.json"), None, Some(json!({}))),
        cfg(
            "uncompiled",
            Some("bad.json"),
            None,
            Some(json!({"PORT": "x"})),
        ),
        cfg(
            "absent",
            Some("absent.json"),
            None,
            Some(json!({"PORT": "x"})),
        ),
        cfg(
            "ref",
            None,
            Some("oci://r.io/a/b:1"),
            Some(json!({"PORT": "x"})),
        ),
    ];
    let out = run(&c, Some(&fs));
    assert_eq!(
        pairs(&out),
        [
            (codes::INVALID_CONFIG_SCHEMA, "configurations[4].schema"),
            (codes::FILE_NOT_FOUND, "configurations[5].schema"),
            (
                codes::CONFIG_VALUES_VALIDATION_FAILED,
                "configurations[1].values"
            ),
            (
                codes::CONFIG_VALUES_VALIDATION_FAILED,
                "configurations[2].values"
            ),
        ]
    );
    assert!(out[2].message.contains("PORT"), "{}", out[2].message);
    // Without a filesystem 17b is skipped.
    assert!(run(&c, None).is_empty());
}

#[test]
fn rule_18_stateless_persistent_conflict() {
    let mut c = base();
    c.state = Some(State {
        kind: "stateless".into(),
        persistence: Persistence {
            scope: "local".into(),
            durability: "persistent".into(),
        },
        data_criticality: "low".into(),
    });
    assert_eq!(
        pairs(&run(&c, None)),
        [(
            codes::STATELESS_PERSISTENT_CONFLICT,
            "state.persistence.durability"
        )]
    );
    if let Some(s) = c.state.as_mut() {
        s.kind = "hybrid".into();
    }
    assert!(run(&c, None).is_empty());
}

#[test]
fn rule_19_readiness() {
    let mut c = base();
    c.readiness = Some(Readiness {
        expires: "2026-1-1".into(),
        history: vec![
            Revision {
                date: "2026-02-30".into(),
                version: " ".into(),
                author: "a".into(),
                description: "d".into(),
            },
            Revision {
                date: "2026-02-28".into(),
                version: "1".into(),
                author: String::new(),
                description: "\n".into(),
            },
        ],
        claims: vec![
            claim("a", "e", None),
            claim("a", " \t", Some("   ")),
            claim("b", "", Some("")),
            claim("c", "ok", Some("fine")),
        ],
        ..Readiness::default()
    });
    assert_eq!(
        pairs(&run(&c, None)),
        [
            (codes::INVALID_READINESS_EXPIRES, "readiness.expires"),
            (
                codes::INVALID_READINESS_REVISION,
                "readiness.history[0].date"
            ),
            (
                codes::INVALID_READINESS_REVISION,
                "readiness.history[0].version"
            ),
            (
                codes::INVALID_READINESS_REVISION,
                "readiness.history[1].author"
            ),
            (
                codes::INVALID_READINESS_REVISION,
                "readiness.history[1].description"
            ),
            (codes::DUPLICATE_READINESS_ID, "readiness.claims[1].id"),
            (
                codes::EMPTY_READINESS_EVIDENCE,
                "readiness.claims[1].evidence"
            ),
            (
                codes::EMPTY_READINESS_DESCRIPTION,
                "readiness.claims[1].description"
            ),
            (
                codes::EMPTY_READINESS_EVIDENCE,
                "readiness.claims[2].evidence"
            ),
        ]
    );
}

#[test]
fn canonical_dates() {
    for ok in ["2026-01-01", "2024-02-29", "0001-01-01", "9999-12-31"] {
        assert!(is_canonical_date(ok), "{ok}");
    }
    for bad in [
        "2026-1-1",
        "2026-02-30",
        "2023-02-29",
        "2026-01-01T00:00:00Z",
        "20260101",
        " 2026-01-01",
        "",
    ] {
        assert!(!is_canonical_date(bad), "{bad}");
    }
}

#[test]
fn execution_order_across_rules() {
    // One violation of each family, to pin the order 1 → 2..5 → 6 → 7 → 10..12 → 13..15 → 16 → 17 → 18 → 19.
    let mut fs = BundleFiles::new();
    fs.insert("bad.json", "{");
    let mut c = base();
    c.service.version = "x".into();
    c.interfaces = vec![
        iface("a", "openapi", "missing.yaml"),
        iface("a", "openapi", "x"),
    ];
    c.capabilities = vec![cap("extension", Some("nope"), None)];
    c.configurations = vec![
        cfg("c", Some("bad.json"), None, None),
        cfg("d", None, None, Some(json!({"A": 1}))),
    ];
    c.policies = vec![Policy {
        name: "p".into(),
        schema: Some("bad.json".into()),
        ..Policy::default()
    }];
    c.dependencies = vec![dep("x", "./x", "")];
    c.state = Some(State {
        kind: "stateless".into(),
        persistence: Persistence {
            scope: "local".into(),
            durability: "persistent".into(),
        },
        data_criticality: "low".into(),
    });
    c.readiness = Some(Readiness {
        expires: "bad".into(),
        claims: vec![claim("a", "e", None)],
        ..Readiness::default()
    });
    let codes: Vec<String> = run(&c, Some(&fs)).into_iter().map(|f| f.code).collect();
    assert_eq!(
        codes,
        [
            codes::INVALID_SEMVER,
            codes::DUPLICATE_INTERFACE_NAME,
            codes::FILE_NOT_FOUND,
            codes::FILE_NOT_FOUND,
            codes::CAPABILITY_REF_INVALID,
            codes::INVALID_CONFIG_JSON,
            codes::INVALID_POLICY_JSON,
            codes::EMPTY_COMPATIBILITY,
            codes::VALUES_WITHOUT_SCHEMA,
            codes::STATELESS_PERSISTENT_CONFLICT,
            codes::INVALID_READINESS_EXPIRES,
        ]
    );
}
