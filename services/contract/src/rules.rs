//! Layer 2 — cross-field rules over the typed model (docs/design/contract.md#layer-2), in execution order, plus the
//! bundle file checks ("(FS)" rules) when a bundle is supplied.
//!
//! Every rule is implemented, including the defence-in-depth rules (6a, 6b, 7c, 7d, 15, 16c,
//! 17a, 18) that cannot fire through the pipeline because layer 1 rejects their inputs first;
//! [`cross_field`] is usable on its own.
//!
//! Deviation from upstream (docs/design/contract.md#layer-2): the interface file checks run once, so a missing or
//! malformed interface file is reported once, not twice (upstream rules 8 and 9 are folded into
//! 6c and 6d).

use std::collections::HashSet;

use chrono::NaiveDate;
use jsonschema::Validator;
use serde_json::Value;

use crate::bundle::BundleFiles;
use crate::codes;
use crate::finding::{Finding, Layer};
use crate::model::{Capability, Contract, Interface};
use crate::parse::SchemaBudget;
use crate::reference::{OCI_SCHEME, is_valid_tag, validate_digest};
use crate::schema;
use crate::version::{Constraint, Version};

/// Kept at its former path for callers outside the crate.
pub use crate::bundle::read_file;

fn finding(code: &str, path: impl Into<String>, message: impl Into<String>) -> Finding {
    Finding::new(code, path, message, Layer::CrossField)
}

/// Runs every layer-2 rule. `fs` is the bundle; `None` skips the "(FS)" rules silently.
#[cfg(test)]
pub fn cross_field(c: &Contract, fs: Option<&BundleFiles>) -> Vec<Finding> {
    cross_field_within(c, fs, &SchemaBudget::new())
}

/// [`cross_field`] charging the schema files it compiles to `schemas` (shared with layer 3).
pub(crate) fn cross_field_within(
    c: &Contract,
    fs: Option<&BundleFiles>,
    schemas: &SchemaBudget,
) -> Vec<Finding> {
    let mut out = Vec::new();

    // 1
    if let Err(e) = Version::parse(&c.service.version) {
        out.push(finding(
            codes::INVALID_SEMVER,
            "service.version",
            format!(
                "service.version {:?} is not a valid semver: {e}",
                c.service.version
            ),
        ));
    }

    // 2–5
    duplicates(
        &mut out,
        c.interfaces.iter().map(|i| i.name.as_str()),
        "interfaces",
        "interface",
        codes::DUPLICATE_INTERFACE_NAME,
    );
    duplicates(
        &mut out,
        c.configurations.iter().map(|x| x.name.as_str()),
        "configurations",
        "configuration",
        codes::DUPLICATE_CONFIGURATION_NAME,
    );
    duplicates(
        &mut out,
        c.policies.iter().map(|x| x.name.as_str()),
        "policies",
        "policy",
        codes::DUPLICATE_POLICY_NAME,
    );
    duplicates(
        &mut out,
        c.dependencies.iter().map(|x| x.name.as_str()),
        "dependencies",
        "dependency",
        codes::DUPLICATE_DEPENDENCY_NAME,
    );

    // 6a–6d (6c/6d also stand for the upstream second pass, rules 8 and 9)
    for (i, iface) in c.interfaces.iter().enumerate() {
        check_interface(&mut out, i, iface, fs);
    }

    // 7a–7f
    let interface_names: HashSet<&str> = c.interfaces.iter().map(|i| i.name.as_str()).collect();
    let mut keys = HashSet::new();
    for (i, cap) in c.capabilities.iter().enumerate() {
        check_capability(&mut out, i, cap, &interface_names, &mut keys);
    }

    // 10–12
    let mut config_validators: Vec<Option<Validator>> = Vec::with_capacity(c.configurations.len());
    for (i, cfg) in c.configurations.iter().enumerate() {
        let mut compiled = None;
        if let (Some(schema_path), Some(fs)) = (cfg.schema.as_deref(), fs) {
            let path = format!("configurations[{i}].schema");
            compiled = load_schema(
                &mut out,
                (fs, schemas),
                schema_path,
                &path,
                codes::INVALID_CONFIG_JSON,
                codes::INVALID_CONFIG_SCHEMA,
                "configuration schema",
            );
        }
        config_validators.push(compiled);
        if let Some(r) = cfg.reference.as_deref()
            && r.starts_with(OCI_SCHEME)
            && let Err(e) = check_oci_ref(r)
        {
            out.push(finding(
                codes::INVALID_CONFIG_REF,
                format!("configurations[{i}].ref"),
                format!("invalid configuration ref {r:?}: {e}"),
            ));
        }
    }

    // 13a, 13b, 14, 15
    for (i, pol) in c.policies.iter().enumerate() {
        if let (Some(schema_path), Some(fs)) = (pol.schema.as_deref(), fs) {
            load_schema(
                &mut out,
                (fs, schemas),
                schema_path,
                &format!("policies[{i}].schema"),
                codes::INVALID_POLICY_JSON,
                codes::INVALID_POLICY_SCHEMA,
                "policy schema",
            );
        }
        if let Some(r) = pol.reference.as_deref()
            && r.starts_with(OCI_SCHEME)
            && let Err(e) = check_oci_ref(r)
        {
            out.push(finding(
                codes::INVALID_POLICY_REF,
                format!("policies[{i}].ref"),
                format!("invalid policy ref {r:?}: {e}"),
            ));
        }
        if let Some(t) = pol.target.as_deref()
            && !t.is_empty()
            && t != "contract"
        {
            out.push(finding(
                codes::UNSUPPORTED_POLICY_TARGET,
                format!("policies[{i}].target"),
                format!("unsupported policy target {t:?} (only \"contract\")"),
            ));
        }
    }

    // 16a–16d
    for (i, dep) in c.dependencies.iter().enumerate() {
        if dep.reference.starts_with(OCI_SCHEME) {
            match check_oci_ref(&dep.reference) {
                Err(e) => {
                    out.push(finding(
                        codes::INVALID_OCI_REF,
                        format!("dependencies[{i}].ref"),
                        format!("invalid OCI reference {:?}: {e}", dep.reference),
                    ));
                    continue;
                }
                Ok(parts) if parts.tag.is_some() && parts.digest.is_none() => {
                    out.push(finding(
                        codes::TAG_NOT_DIGEST,
                        format!("dependencies[{i}].ref"),
                        format!(
                            "dependency {:?} is pinned by tag only; pin a digest for reproducibility",
                            dep.reference
                        ),
                    ));
                }
                Ok(_) => {}
            }
        }
        if dep.compatibility.is_empty() {
            out.push(finding(
                codes::EMPTY_COMPATIBILITY,
                format!("dependencies[{i}].compatibility"),
                "compatibility must not be empty",
            ));
        } else if let Err(e) = Constraint::parse(&dep.compatibility) {
            out.push(finding(
                codes::INVALID_COMPATIBILITY,
                format!("dependencies[{i}].compatibility"),
                format!(
                    "invalid compatibility {:?}: {}",
                    dep.compatibility,
                    crate::error_chain(&e)
                ),
            ));
        }
    }

    // 17a, 17b
    for (i, cfg) in c.configurations.iter().enumerate() {
        let values = cfg.values.as_ref().filter(|v| !v.is_empty());
        let Some(values) = values else { continue };
        if cfg.schema.is_none() && cfg.reference.is_none() {
            out.push(finding(
                codes::VALUES_WITHOUT_SCHEMA,
                format!("configurations[{i}].values"),
                "configuration values given without a schema or ref",
            ));
            continue;
        }
        if cfg.reference.is_some() {
            continue;
        }
        if let Some(Some(validator)) = config_validators.get(i) {
            let instance = Value::Object(values.clone());
            for v in schema::violations(validator, &instance) {
                let at = if v.path.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", v.path)
                };
                out.push(finding(
                    codes::CONFIG_VALUES_VALIDATION_FAILED,
                    format!("configurations[{i}].values"),
                    format!("{at}{}", v.message),
                ));
            }
        }
    }

    // 18
    if let Some(state) = &c.state
        && state.kind == "stateless"
        && state.persistence.durability == "persistent"
    {
        out.push(finding(
            codes::STATELESS_PERSISTENT_CONFLICT,
            "state.persistence.durability",
            "a stateless service cannot have persistent durability",
        ));
    }

    // 19a–19e
    if let Some(r) = &c.readiness {
        if !is_canonical_date(&r.expires) {
            out.push(finding(
                codes::INVALID_READINESS_EXPIRES,
                "readiness.expires",
                format!("expires {:?} is not a canonical YYYY-MM-DD date", r.expires),
            ));
        }
        for (i, rev) in r.history.iter().enumerate() {
            if !is_canonical_date(&rev.date) {
                out.push(finding(
                    codes::INVALID_READINESS_REVISION,
                    format!("readiness.history[{i}].date"),
                    format!("date {:?} is not a canonical YYYY-MM-DD date", rev.date),
                ));
            }
            for (field, value) in [
                ("version", &rev.version),
                ("author", &rev.author),
                ("description", &rev.description),
            ] {
                if value.trim().is_empty() {
                    out.push(finding(
                        codes::INVALID_READINESS_REVISION,
                        format!("readiness.history[{i}].{field}"),
                        format!("{field} must not be blank"),
                    ));
                }
            }
        }
        let mut ids = HashSet::new();
        for (i, claim) in r.claims.iter().enumerate() {
            if !ids.insert(claim.id.as_str()) {
                out.push(finding(
                    codes::DUPLICATE_READINESS_ID,
                    format!("readiness.claims[{i}].id"),
                    format!("duplicate readiness claim id {:?}", claim.id),
                ));
            }
            if claim.evidence.trim().is_empty() {
                out.push(finding(
                    codes::EMPTY_READINESS_EVIDENCE,
                    format!("readiness.claims[{i}].evidence"),
                    "evidence must not be blank",
                ));
            }
            if let Some(d) = claim.description.as_deref()
                && !d.is_empty()
                && d.trim().is_empty()
            {
                out.push(finding(
                    codes::EMPTY_READINESS_DESCRIPTION,
                    format!("readiness.claims[{i}].description"),
                    "description must not be blank",
                ));
            }
        }
    }

    out
}

fn duplicates<'a>(
    out: &mut Vec<Finding>,
    names: impl Iterator<Item = &'a str>,
    section: &str,
    what: &str,
    code: &str,
) {
    let mut seen = HashSet::new();
    for (i, name) in names.enumerate() {
        if !seen.insert(name) {
            out.push(finding(
                code,
                format!("{section}[{i}].name"),
                format!("duplicate {what} name {name:?}"),
            ));
        }
    }
}

fn check_interface(out: &mut Vec<Finding>, i: usize, iface: &Interface, fs: Option<&BundleFiles>) {
    if iface.interface_type().is_none() {
        out.push(finding(
            codes::INVALID_INTERFACE_TYPE,
            format!("interfaces[{i}].type"),
            format!(
                "interface type {:?} is not one of openapi, asyncapi, grpc",
                iface.kind
            ),
        ));
    }
    if iface.reference.is_empty() {
        out.push(finding(
            codes::INTERFACE_REF_REQUIRED,
            format!("interfaces[{i}].ref"),
            "interface ref is required",
        ));
        return;
    }
    let Some(fs) = fs else { return };
    let path = format!("interfaces[{i}].ref");
    let Some(bytes) = read_file(fs, &iface.reference) else {
        out.push(finding(
            codes::FILE_NOT_FOUND,
            path,
            format!("interface file {:?} not found in bundle", iface.reference),
        ));
        return;
    };
    if let Err(e) = parse_interface_spec(&iface.reference, bytes) {
        out.push(finding(
            codes::INVALID_INTERFACE_SPEC,
            path,
            format!("interface file {:?} does not parse: {e}", iface.reference),
        ));
    }
}

/// `.yaml`/`.yml` (case-insensitive) parse as YAML, anything else as JSON.
fn parse_interface_spec(name: &str, bytes: &[u8]) -> Result<(), String> {
    let ext = std::path::Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    if ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml") {
        // Only whether it parses matters: the YAML value, not its JSON copy.
        crate::parse::first_document_with(bytes, &crate::parse::YamlLimits::DOCUMENT)
            .map(drop)
            .map_err(|e| crate::error_chain(&e))
    } else {
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes)
            .map(drop)
            .map_err(|e| format!("not JSON: {e}"))
    }
}

fn check_capability<'a>(
    out: &mut Vec<Finding>,
    i: usize,
    cap: &'a Capability,
    interfaces: &HashSet<&str>,
    keys: &mut HashSet<&'a str>,
) {
    if let Some(b) = &cap.binding {
        if !interfaces.contains(b.interface.as_str()) {
            out.push(finding(
                codes::CAPABILITY_INTERFACE_UNKNOWN,
                format!("capabilities[{i}].binding.interface"),
                format!(
                    "binding interface {:?} is not a declared interface",
                    b.interface
                ),
            ));
        }
        if let Some(p) = b.path.as_deref()
            && let Err(why) = check_binding_path(p)
        {
            out.push(finding(
                codes::CAPABILITY_PATH_INVALID,
                format!("capabilities[{i}].binding.path"),
                format!("binding path {p:?} is invalid: {why}"),
            ));
        }
    }
    let known = matches!(cap.kind.as_str(), "health" | "metrics" | "extension");
    if !known {
        out.push(finding(
            codes::INVALID_CAPABILITY_TYPE,
            format!("capabilities[{i}].type"),
            format!(
                "capability type {:?} is not one of health, metrics, extension",
                cap.kind
            ),
        ));
    }
    if cap.kind == "extension" {
        match cap.reference.as_deref() {
            None | Some("") => out.push(finding(
                codes::CAPABILITY_REF_REQUIRED,
                format!("capabilities[{i}].ref"),
                "an extension capability requires a ref",
            )),
            Some(r) if !is_namespaced(r) => out.push(finding(
                codes::CAPABILITY_REF_INVALID,
                format!("capabilities[{i}].ref"),
                format!("extension ref {r:?} must be namespaced (e.g. example.com/name)"),
            )),
            Some(_) => {}
        }
    }
    let key = cap.assertion_key();
    if !key.is_empty() && !keys.insert(key) {
        out.push(finding(
            codes::DUPLICATE_CAPABILITY,
            format!("capabilities[{i}]"),
            format!("duplicate capability {key:?}"),
        ));
    }
}

/// Contains `/` and the segment before the first `/` contains `.`.
pub fn is_namespaced(r: &str) -> bool {
    r.split_once('/')
        .is_some_and(|(domain, _)| domain.contains('.'))
}

/// The binding path rule (docs/design/contract.md#capabilities-and-assertion-keys): starts with `/`, not `//`, a URL path with no scheme, host,
/// userinfo, fragment or opaque part (a query is tolerated), valid percent escapes, no control
/// characters, and the percent-decoded path does not start with `//`.
pub fn check_binding_path(p: &str) -> Result<(), &'static str> {
    if !p.starts_with('/') {
        return Err("must start with /");
    }
    if p.starts_with("//") {
        return Err("must not start with //");
    }
    if p.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("contains a control character");
    }
    if p.contains('#') {
        return Err("must not contain a fragment");
    }
    let path = p.split_once('?').map_or(p, |(path, _)| path);
    let decoded = percent_decode(path).ok_or("contains an invalid percent escape")?;
    if decoded.starts_with(b"//") {
        return Err("decoded path must not start with //");
    }
    Ok(())
}

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The parts of an OCI reference as layer 2 sees them (docs/design/contract.md#references-and-versions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRefParts<'a> {
    pub registry: &'a str,
    pub repository: &'a str,
    pub tag: Option<&'a str>,
    pub digest: Option<&'a str>,
}

/// Checks an `oci://` reference with the layer-2 grammar: strip `oci://`; split the digest at
/// the first `@`; the tag is the text after the last `:` when that `:` follows the last `/`; the
/// rest must be `registry/repository` with both parts non-empty. Registry and repository
/// character sets are not checked here.
pub fn check_oci_ref(r: &str) -> Result<OciRefParts<'_>, String> {
    let rest = r.strip_prefix(OCI_SCHEME).unwrap_or(r);
    let (name, digest) = match rest.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (rest, None),
    };
    if let Some(d) = digest {
        validate_digest(d).map_err(|e| format!("invalid digest {d:?}: {e}"))?;
    }
    let last_slash = name.rfind('/');
    let (name, tag) = match name.rfind(':') {
        Some(colon) if last_slash.is_none_or(|s| colon > s) => {
            (&name[..colon], Some(&name[colon + 1..]))
        }
        _ => (name, None),
    };
    if let Some(t) = tag
        && !is_valid_tag(t)
    {
        return Err(format!("invalid tag {t:?}"));
    }
    let Some((registry, repository)) = name.split_once('/') else {
        return Err("expected registry/repository".to_owned());
    };
    if registry.is_empty() || repository.is_empty() {
        return Err("registry and repository must not be empty".to_owned());
    }
    Ok(OciRefParts {
        registry,
        repository,
        tag,
        digest,
    })
}

/// Parses as a proleptic `YYYY-MM-DD` and re-formats to the identical string.
pub fn is_canonical_date(s: &str) -> bool {
    parse_canonical_date(s).is_some()
}

/// The date of a canonical `YYYY-MM-DD` string.
pub fn parse_canonical_date(s: &str) -> Option<NaiveDate> {
    let d = NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    (d.format("%Y-%m-%d").to_string() == s).then_some(d)
}

/// Loads and compiles a JSON Schema file of the bundle, pushing `FILE_NOT_FOUND`, `json_code`
/// or `schema_code` on failure.
fn load_schema(
    out: &mut Vec<Finding>,
    (fs, schemas): (&BundleFiles, &SchemaBudget),
    file: &str,
    path: &str,
    json_code: &str,
    schema_code: &str,
    what: &str,
) -> Option<Validator> {
    let Some(bytes) = read_file(fs, file) else {
        out.push(finding(
            codes::FILE_NOT_FOUND,
            path,
            format!("{what} file {file:?} not found in bundle"),
        ));
        return None;
    };
    let value: Value = match schemas.parse_json(bytes) {
        Ok(v) => v,
        Err(e) => {
            out.push(finding(json_code, path, format!("{what} {file:?} {e}")));
            return None;
        }
    };
    match schema::compile(&value) {
        Ok(v) => Some(v),
        Err(e) => {
            out.push(finding(
                schema_code,
                path,
                format!("{what} {file:?} does not compile: {e}"),
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests;
