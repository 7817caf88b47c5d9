//! CRD generation: drift against the checked-in chart, structural-schema rules, descriptions
//! and the API surface of docs/design/status.md#the-pacto-api.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use pacto_api::crdgen;

fn crd(plural: &str) -> CustomResourceDefinition {
    crdgen::crds()
        .into_iter()
        .find(|c| c.spec.names.plural == plural)
        .unwrap_or_else(|| panic!("no CRD {plural}"))
}

fn root(crd: &CustomResourceDefinition) -> &JSONSchemaProps {
    crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema")
}

fn at<'a>(schema: &'a JSONSchemaProps, path: &str) -> &'a JSONSchemaProps {
    let mut node = schema;
    for segment in path.split('.') {
        if segment == "[]" {
            node = match node.items.as_ref() {
                Some(JSONSchemaPropsOrArray::Schema(s)) => s,
                other => panic!("{path}: no single items schema: {other:?}"),
            };
            continue;
        }
        node = node
            .properties
            .as_ref()
            .and_then(|p| p.get(segment))
            .unwrap_or_else(|| panic!("{path}: no property {segment}"));
    }
    node
}

#[test]
fn checked_in_crds_match_the_rust_types() {
    let dir = crdgen::default_output_dir();
    let rendered = crdgen::render().expect("render");
    let mut expected_files = BTreeSet::new();
    for (file, yaml) in &rendered {
        expected_files.insert(file.clone());
        let path = dir.join(file);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == *yaml,
            "{} is out of date with the Rust types in services/api; regenerate with `{}`",
            path.display(),
            crdgen::REGENERATE_COMMAND
        );
    }
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("chart templates dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            std::path::Path::new(n)
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("yaml"))
        })
        .collect();
    assert_eq!(
        present,
        expected_files,
        "stale generated files in {}; regenerate with `{}`",
        dir.display(),
        crdgen::REGENERATE_COMMAND
    );
}

#[test]
fn rendered_yaml_is_helm_safe_and_parses_back() {
    for (file, yaml) in crdgen::render().expect("render") {
        assert!(
            !yaml.contains("{{"),
            "{file} contains a Helm template delimiter"
        );
        let parsed: CustomResourceDefinition =
            serde_norway::from_str(&yaml).unwrap_or_else(|e| panic!("{file}: {e}"));
        let original = crdgen::crds()
            .into_iter()
            .find(|c| c.metadata.name == parsed.metadata.name)
            .expect("same CRD");
        assert_eq!(parsed.spec, original.spec, "{file}");
        assert_eq!(
            parsed
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("helm.sh/resource-policy"))
                .map(String::as_str),
            Some("keep")
        );
    }
}

/// Kubernetes structural-schema rules (the subset a derived schema can break), plus our own
/// requirement that every property has a description for `kubectl explain`.
fn check_structural(path: &str, s: &JSONSchemaProps, problems: &mut Vec<String>) {
    let special = s.x_kubernetes_int_or_string == Some(true)
        || s.x_kubernetes_preserve_unknown_fields == Some(true);
    if s.type_.is_none() && !special {
        problems.push(format!("{path}: no type"));
    }
    if s.ref_path.is_some() || s.definitions.is_some() {
        problems.push(format!("{path}: $ref/definitions are not allowed"));
    }
    for (name, list) in [
        ("anyOf", &s.any_of),
        ("oneOf", &s.one_of),
        ("allOf", &s.all_of),
    ] {
        if list.is_some() && !special {
            problems.push(format!("{path}: {name} is not produced structurally"));
        }
    }
    if s.not.is_some() {
        problems.push(format!("{path}: not"));
    }
    if s.unique_items == Some(true) {
        problems.push(format!("{path}: uniqueItems is forbidden"));
    }
    if s.description
        .as_deref()
        .unwrap_or_default()
        .trim()
        .is_empty()
    {
        problems.push(format!("{path}: no description"));
    }
    if s.properties.is_some() && s.additional_properties.is_some() {
        problems.push(format!(
            "{path}: properties and additionalProperties together"
        ));
    }
    if s.enum_.is_some() && s.type_.as_deref() != Some("string") {
        problems.push(format!("{path}: enum on a non-string"));
    }
    if s.type_.as_deref() == Some("array") && s.items.is_none() {
        problems.push(format!("{path}: array without items"));
    }
    if s.type_.as_deref() == Some("object")
        && s.properties.is_none()
        && s.additional_properties.is_none()
        && s.x_kubernetes_preserve_unknown_fields != Some(true)
    {
        problems.push(format!(
            "{path}: object with no properties (would prune everything)"
        ));
    }
    if let Some(required) = &s.required {
        for r in required {
            if !s.properties.as_ref().is_some_and(|p| p.contains_key(r)) {
                problems.push(format!("{path}: required {r} is not a property"));
            }
        }
    }
    for (name, child) in s.properties.iter().flatten() {
        check_structural(&format!("{path}.{name}"), child, problems);
    }
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => {
            // array items inherit the field's description in `kubectl explain`; only check shape
            let mut item_problems = Vec::new();
            check_structural(&format!("{path}[]"), item, &mut item_problems);
            problems.extend(
                item_problems
                    .into_iter()
                    .filter(|p| !p.ends_with("[]: no description")),
            );
        }
        Some(JSONSchemaPropsOrArray::Schemas(_)) => problems.push(format!("{path}: tuple items")),
        None => {}
    }
    match &s.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(extra)) if extra.type_.is_none() => {
            problems.push(format!("{path}: untyped additionalProperties"));
        }
        Some(JSONSchemaPropsOrBool::Bool(_)) => {
            problems.push(format!("{path}: boolean additionalProperties"));
        }
        _ => {}
    }
}

#[test]
fn schemas_are_structural_and_every_field_is_described() {
    for crd in crdgen::crds() {
        let mut problems = Vec::new();
        let schema = root(&crd);
        check_structural(&crd.spec.names.kind, schema, &mut problems);
        assert!(
            problems.is_empty(),
            "{}:\n{}",
            crd.spec.names.kind,
            problems.join("\n")
        );
        // the root may describe only spec and status (metadata comes from the API server)
        let top: BTreeSet<&str> = schema
            .properties
            .as_ref()
            .expect("props")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(top, BTreeSet::from(["spec", "status"]));
        assert_eq!(schema.required.as_deref(), Some(&["spec".to_owned()][..]));
    }
}

#[test]
fn all_three_kinds_are_namespaced_v1alpha1_with_status_subresource() {
    let crds = crdgen::crds();
    let kinds: Vec<&str> = crds.iter().map(|c| c.spec.names.kind.as_str()).collect();
    assert_eq!(kinds, ["Pacto", "PactoRevision", "NodeRuntimeObservation"]);
    for crd in &crds {
        assert_eq!(crd.spec.group, "pacto.trianalab.io");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.versions.len(), 1);
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1alpha1");
        assert!(v.served && v.storage);
        assert!(
            v.subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{} lacks the status subresource",
            crd.spec.names.kind
        );
    }
}

fn columns(plural: &str) -> Vec<(String, String, String)> {
    crd(plural).spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.clone(), c.type_.clone(), c.json_path.clone()))
        .collect()
}

fn cols(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    list.iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect()
}

#[test]
fn printer_columns_match_the_spec() {
    assert_eq!(
        columns("pactos"),
        cols(&[
            ("Status", "string", ".status.contractStatus"),
            ("Service", "string", ".spec.target.serviceName"),
            ("Version", "string", ".status.contractVersion"),
            ("Errors", "integer", ".status.summary.errorCount"),
            ("Warnings", "integer", ".status.summary.warningCount"),
            ("Last Reconciled", "date", ".status.lastReconciledAt"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ])
    );
    assert_eq!(
        columns("pactorevisions"),
        cols(&[
            ("Version", "string", ".spec.version"),
            ("Pacto", "string", ".spec.pactoRef"),
            ("Resolved", "boolean", ".status.resolved"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ])
    );
    assert_eq!(
        columns("noderuntimeobservations"),
        cols(&[
            ("Node", "string", ".spec.nodeName"),
            ("Pods", "integer", ".status.podCount"),
            ("State", "string", ".status.collection.state"),
            ("Last Published", "date", ".status.lastPublished"),
        ])
    );
}

fn enum_values(s: &JSONSchemaProps) -> Vec<String> {
    s.enum_
        .iter()
        .flatten()
        .map(|v| v.0.as_str().expect("string enum").to_owned())
        .collect()
}

fn required(s: &JSONSchemaProps) -> BTreeSet<String> {
    s.required.iter().flatten().cloned().collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn pacto_spec_fields_defaults_enums_and_minimums() {
    let pacto = crd("pactos");
    let s = root(&pacto);
    let spec = at(s, "spec");
    assert_eq!(required(spec), set(&["contractRef"]));
    let interval = at(s, "spec.checkIntervalSeconds");
    assert_eq!(interval.type_.as_deref(), Some("integer"));
    assert_eq!(interval.format.as_deref(), Some("int32"));
    assert_eq!(interval.minimum, Some(30.0));
    assert_eq!(
        interval.default.as_ref().map(|d| d.0.clone()),
        Some(serde_json::json!(300))
    );
    for f in ["oci", "inline", "pullSecretRef"] {
        assert_eq!(
            at(s, &format!("spec.contractRef.{f}")).type_.as_deref(),
            Some("string")
        );
    }
    let workload = at(s, "spec.target.workloadRef");
    assert_eq!(required(workload), set(&["name"]));
    let kind = at(s, "spec.target.workloadRef.kind");
    assert_eq!(
        enum_values(kind),
        ["Deployment", "StatefulSet", "ReplicaSet", "Job", "CronJob"]
    );
    assert!(
        kind.default.is_none(),
        "workloadRef.kind must have no default"
    );
    assert!(
        kind.description
            .as_deref()
            .unwrap_or_default()
            .contains("WORKLOAD_MISMATCH")
    );
    let ib = at(s, "spec.target.interfaceBindings.[]");
    assert_eq!(required(ib), set(&["interface", "servicePort"]));
    assert_eq!(
        at(s, "spec.target.interfaceBindings.[].servicePort").x_kubernetes_int_or_string,
        Some(true)
    );
    let cb = at(s, "spec.target.configBindings.[]");
    assert_eq!(required(cb), set(&["configuration", "kind", "name"]));
    assert_eq!(
        enum_values(at(s, "spec.target.configBindings.[].kind")),
        ["ConfigMap", "Secret"]
    );
    assert_eq!(
        enum_values(at(s, "spec.target.configBindings.[].format")),
        ["yaml", "json"]
    );
    let ov = at(s, "spec.overrides.configurations.[]");
    assert_eq!(required(ov), set(&["name", "values"]));
    assert_eq!(
        at(s, "spec.overrides.configurations.[].name").min_length,
        Some(1)
    );
    let values = at(s, "spec.overrides.configurations.[].values");
    assert_eq!(values.min_properties, Some(1));
    assert!(matches!(
        values.additional_properties,
        Some(JSONSchemaPropsOrBool::Schema(ref v)) if v.type_.as_deref() == Some("string")
    ));
}

#[test]
fn pacto_status_fields_and_enums() {
    let pacto = crd("pactos");
    let s = root(&pacto);
    let status = at(s, "status");
    let fields: BTreeSet<String> = status
        .properties
        .as_ref()
        .expect("props")
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        fields,
        set(&[
            "contractStatus",
            "evaluationCoverage",
            "observationWindows",
            "resolutionPolicy",
            "summary",
            "contractVersion",
            "contract",
            "validation",
            "findings",
            "totalFindings",
            "resources",
            "interfaces",
            "capabilities",
            "configurations",
            "dependencies",
            "policies",
            "observedRuntime",
            "readiness",
            "metadata",
            "conditions",
            "currentRevision",
            "lastReconciledAt",
            "observedGeneration",
        ])
    );
    assert_eq!(
        enum_values(at(s, "status.contractStatus")),
        [
            "Compliant",
            "Warning",
            "NonCompliant",
            "Reference",
            "Unknown",
            "Invalid",
            "NotEvaluated"
        ]
    );
    assert_eq!(
        enum_values(at(s, "status.resolutionPolicy")),
        ["Latest", "PinnedTag", "PinnedDigest"]
    );
    assert_eq!(
        required(at(s, "status.evaluationCoverage")),
        set(&["evaluated", "required"])
    );
    assert_eq!(
        required(at(s, "status.observationWindows.[]")),
        set(&["kind", "subject", "firstObservedNegativeAt"])
    );
    assert_eq!(
        enum_values(at(s, "status.observationWindows.[].kind")),
        ["interface", "dependency", "configuration", "capability"]
    );
    assert_eq!(
        required(at(s, "status.summary")),
        set(&["errorCount", "warningCount", "infoCount", "unknownCount"])
    );
    assert_eq!(
        required(at(s, "status.contract")),
        set(&["serviceName", "version"])
    );
    assert_eq!(at(s, "status.contract.owner").min_properties, Some(1));
    assert_eq!(required(at(s, "status.validation")), set(&["valid"]));
    assert_eq!(
        required(at(s, "status.validation.errors.[]")),
        set(&["message"])
    );
    let finding = at(s, "status.findings.[]");
    assert_eq!(
        required(finding),
        set(&["code", "severity", "category", "message"])
    );
    assert_eq!(
        enum_values(at(s, "status.findings.[].severity")),
        ["error", "warning", "info", "unknown"]
    );
    let evref = at(s, "status.findings.[].evidenceRefs.[]");
    assert_eq!(required(evref), set(&["source", "observedAt"]));
    let evfields: BTreeSet<String> = evref
        .properties
        .as_ref()
        .expect("p")
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        evfields,
        set(&["source", "observedAt", "collector", "detectedAt"])
    );
    assert_eq!(
        enum_values(at(s, "status.interfaces.[].type")),
        ["openapi", "asyncapi", "grpc"]
    );
    assert_eq!(required(at(s, "status.capabilities.[]")), set(&["type"]));
    assert_eq!(
        required(at(s, "status.observedRuntime")),
        set(&["hasPVC", "hasEmptyDir"])
    );
    assert_eq!(
        enum_values(at(s, "status.readiness.claims.[].status")),
        ["done", "partial", "not-done", "deferred"]
    );
    let conditions = at(s, "status.conditions");
    assert_eq!(conditions.x_kubernetes_list_type.as_deref(), Some("map"));
    assert_eq!(
        conditions.x_kubernetes_list_map_keys.as_deref(),
        Some(&["type".to_owned()][..])
    );
    assert_eq!(
        at(s, "status.lastReconciledAt").format.as_deref(),
        Some("date-time")
    );
    assert_eq!(
        at(s, "status.observedGeneration").format.as_deref(),
        Some("int64")
    );
}

#[test]
fn pacto_revision_schema() {
    let revision = crd("pactorevisions");
    let s = root(&revision);
    assert_eq!(
        required(at(s, "spec")),
        set(&["version", "source", "pactoRef"])
    );
    assert_eq!(at(s, "spec.version").min_length, Some(1));
    assert_eq!(at(s, "spec.pactoRef").min_length, Some(1));
    assert_eq!(
        at(s, "spec.source.inline").type_.as_deref(),
        Some("boolean")
    );
    assert_eq!(required(at(s, "status")), set(&["resolved"]));
    for f in ["contractHash", "createdAt", "observedDigest", "conditions"] {
        at(s, &format!("status.{f}"));
    }
}

#[test]
fn node_runtime_observation_schema() {
    let nro = crd("noderuntimeobservations");
    let s = root(&nro);
    assert_eq!(required(at(s, "spec")), set(&["nodeName"]));
    assert_eq!(
        enum_values(at(s, "status.collection.state")),
        ["Running", "Failed"]
    );
    assert_eq!(at(s, "status.kernel.btf").type_.as_deref(), Some("boolean"));
    assert_eq!(
        enum_values(at(s, "status.pods.[].coverage")),
        ["Complete", "Partial"]
    );
    at(s, "status.pods.[].partialReason");
    let listener = at(s, "status.pods.[].listeners.[]");
    assert_eq!(required(listener), set(&["protocol", "port"]));
    let conn = at(s, "status.pods.[].connections.[]");
    let fields: BTreeSet<String> = conn
        .properties
        .as_ref()
        .expect("p")
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        fields,
        set(&[
            "direction",
            "protocol",
            "peerIP",
            "peerPort",
            "firstSeen",
            "lastSeen",
            "count"
        ])
    );
    assert_eq!(at(s, "status.truncated").type_.as_deref(), Some("boolean"));
    assert_eq!(
        at(s, "status.lastPublished").format.as_deref(),
        Some("date-time")
    );
}
