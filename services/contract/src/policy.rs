//! Layer 3 — policy resolution and enforcement (docs/design/contract.md#layer-3).
//!
//! Local `schema` policies are read from the bundle; `ref` policies go through a caller-supplied
//! [`PolicyResolver`] (the CLI fetches OCI bundles; the operator resolves with the Pacto's
//! credentials). Without a resolver, a `ref` policy is skipped with a `POLICY_REF_NOT_ENFORCED`
//! warning. A referenced contract's own `policies[]` are used recursively, otherwise its fixed
//! `policy/schema.json`. A ref that reappears in its own resolution chain (identity = declaring
//! base + ref text) is a `POLICY_REF_CYCLE`. When resolution produced no error, every resolved
//! schema validates the raw contract document; each leaf violation is a `POLICY_VIOLATION`.

use std::error::Error as StdError;

use jsonschema::Validator;
use serde_json::Value;

pub use crate::bundle::FALLBACK_POLICY_SCHEMA;
use crate::bundle::{BundleFiles, read_file};
use crate::codes;
use crate::finding::{Finding, Layer};
use crate::model::{Contract, Policy};
use crate::parse::SchemaBudget;
use crate::{parse, schema};

/// Maximum nesting of `ref` policy resolution.
pub const MAX_POLICY_DEPTH: usize = 16;

/// Why a policy reference could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum PolicyResolveError {
    /// The referenced artifact or path does not exist.
    #[error("policy reference {reference:?} not found")]
    NotFound { reference: String },
    /// The reference form is not supported by this resolver.
    #[error("policy reference {reference:?} is not supported: {reason}")]
    Unsupported { reference: String, reason: String },
    /// The resolver cannot resolve this reference in its context (e.g. the operator has no
    /// usable credentials for the registry). Unlike the other variants this is not an error of
    /// the contract: the policy is skipped with a `POLICY_REF_NOT_ENFORCED` warning (docs/design/contract.md#layer-3).
    #[error("policy reference {reference:?} cannot be resolved here: {reason}")]
    Unavailable { reference: String, reason: String },
    /// Fetching failed.
    #[error("fetching policy reference {reference:?} failed")]
    Fetch {
        reference: String,
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
}

/// Resolves a policy `ref` (an `oci://…`, `file://…` or bare path) to the files of the
/// referenced bundle.
pub trait PolicyResolver {
    fn resolve(&self, reference: &str) -> Result<BundleFiles, PolicyResolveError>;
}

impl<F> PolicyResolver for F
where
    F: Fn(&str) -> Result<BundleFiles, PolicyResolveError>,
{
    fn resolve(&self, reference: &str) -> Result<BundleFiles, PolicyResolveError> {
        self(reference)
    }
}

/// A resolved policy schema and where it came from.
#[derive(Debug)]
pub struct ResolvedPolicy {
    /// `policies["name"]`, or `<parent ref> → policies["name"]` for nested ones.
    pub origin: String,
    pub validator: Validator,
}

fn finding(code: &str, path: impl Into<String>, message: impl Into<String>) -> Finding {
    Finding::new(code, path, message, Layer::Policy)
}

fn origin_of(p: &Policy, i: usize) -> String {
    if p.name.is_empty() {
        format!("policies[{i}]")
    } else {
        format!("policies[\"{}\"]", p.name)
    }
}

/// Resolves every policy of `contract`. `fs = None` (inline contract) resolves and reports
/// nothing. Returns the resolved schemas and the resolution findings.
pub fn resolve_policies(
    contract: &Contract,
    fs: Option<&BundleFiles>,
    resolver: Option<&dyn PolicyResolver>,
) -> (Vec<ResolvedPolicy>, Vec<Finding>) {
    resolve_policies_within(contract, fs, resolver, &SchemaBudget::new())
}

/// [`resolve_policies`] charging the schema files it compiles to `schemas`.
fn resolve_policies_within(
    contract: &Contract,
    fs: Option<&BundleFiles>,
    resolver: Option<&dyn PolicyResolver>,
    schemas: &SchemaBudget,
) -> (Vec<ResolvedPolicy>, Vec<Finding>) {
    let mut resolved = Vec::new();
    let mut out = Vec::new();
    let Some(fs) = fs else {
        return (resolved, out);
    };
    let mut chain = Vec::new();
    for (i, pol) in contract.policies.iter().enumerate() {
        let origin = origin_of(pol, i);
        match (pol.schema.as_deref(), pol.reference.as_deref()) {
            (Some(file), _) => match load_local(schemas, fs, file) {
                Ok(v) => resolved.push(ResolvedPolicy {
                    origin,
                    validator: v,
                }),
                Err(why) => out.push(finding(
                    codes::POLICY_REF_UNRESOLVED,
                    "",
                    format!("policy {origin}: local schema {file:?} {why}"),
                )),
            },
            (None, Some(r)) => match resolver {
                None => out.push(finding(
                    codes::POLICY_REF_NOT_ENFORCED,
                    format!("policies[{i}].ref"),
                    format!(
                        "policy {origin}: ref {r:?} was not enforced (local-only validation, no resolver)"
                    ),
                )),
                Some(res) => resolve_ref(
                    res,
                    &Step {
                        schemas,
                        base: "",
                        reference: r,
                        origin: &origin,
                        top_path: &format!("policies[{i}].ref"),
                    },
                    &mut chain,
                    &mut resolved,
                    &mut out,
                ),
            },
            (None, None) => out.push(finding(
                codes::POLICY_REF_UNRESOLVED,
                "",
                format!("policy {origin} has neither schema nor ref"),
            )),
        }
    }
    (resolved, out)
}

/// One `ref` to resolve: declared in `base` (`""` for the root contract), shown as `origin`,
/// reached from the root policy at `top_path`.
struct Step<'a> {
    schemas: &'a SchemaBudget,
    base: &'a str,
    reference: &'a str,
    origin: &'a str,
    top_path: &'a str,
}

fn resolve_ref(
    resolver: &dyn PolicyResolver,
    step: &Step<'_>,
    chain: &mut Vec<(String, String)>,
    resolved: &mut Vec<ResolvedPolicy>,
    out: &mut Vec<Finding>,
) {
    let Step {
        schemas,
        base,
        reference,
        origin,
        top_path,
    } = *step;
    let identity = (base.to_owned(), reference.to_owned());
    if chain.contains(&identity) {
        out.push(finding(
            codes::POLICY_REF_CYCLE,
            "",
            format!("policy {origin}: ref {reference:?} reappears in its own resolution chain"),
        ));
        return;
    }
    if chain.len() >= MAX_POLICY_DEPTH {
        out.push(finding(
            codes::POLICY_REF_UNRESOLVED,
            "",
            format!("policy {origin}: ref {reference:?} nested deeper than {MAX_POLICY_DEPTH}"),
        ));
        return;
    }
    let files = match resolver.resolve(reference) {
        Ok(f) if !f.is_empty() => f,
        Ok(_) => {
            out.push(finding(
                codes::POLICY_REF_UNRESOLVED,
                "",
                format!("policy {origin}: ref {reference:?} resolved to an empty bundle"),
            ));
            return;
        }
        Err(e @ PolicyResolveError::Unavailable { .. }) => {
            out.push(finding(
                codes::POLICY_REF_NOT_ENFORCED,
                top_path,
                format!("policy {origin} was not enforced: {e}"),
            ));
            return;
        }
        Err(e) => {
            out.push(finding(
                codes::POLICY_REF_UNRESOLVED,
                "",
                format!("policy {origin}: {}", crate::error_chain(&e)),
            ));
            return;
        }
    };
    let nested = files
        .contract()
        .and_then(|b| parse::parse_contract(b).ok())
        .map(|(_, c)| c.policies)
        .filter(|p| !p.is_empty());
    let Some(nested) = nested else {
        match load_local(schemas, &files, FALLBACK_POLICY_SCHEMA) {
            Ok(v) => resolved.push(ResolvedPolicy {
                origin: origin.to_owned(),
                validator: v,
            }),
            Err(why) => out.push(finding(
                codes::POLICY_REF_UNRESOLVED,
                "",
                format!("policy {origin}: ref {reference:?}: {FALLBACK_POLICY_SCHEMA} {why}"),
            )),
        }
        return;
    };
    chain.push(identity);
    for (i, pol) in nested.iter().enumerate() {
        let child = format!("{reference} → {}", origin_of(pol, i));
        match (pol.schema.as_deref(), pol.reference.as_deref()) {
            (Some(file), _) => match load_local(schemas, &files, file) {
                Ok(v) => resolved.push(ResolvedPolicy {
                    origin: child,
                    validator: v,
                }),
                Err(why) => out.push(finding(
                    codes::POLICY_REF_UNRESOLVED,
                    "",
                    format!("policy {child}: schema {file:?} {why}"),
                )),
            },
            (None, Some(r)) => resolve_ref(
                resolver,
                &Step {
                    schemas,
                    base: reference,
                    reference: r,
                    origin: &child,
                    top_path,
                },
                chain,
                resolved,
                out,
            ),
            (None, None) => out.push(finding(
                codes::POLICY_REF_UNRESOLVED,
                "",
                format!("policy {child} has neither schema nor ref"),
            )),
        }
    }
    chain.pop();
}

fn load_local(schemas: &SchemaBudget, fs: &BundleFiles, file: &str) -> Result<Validator, String> {
    let bytes = read_file(fs, file).ok_or_else(|| "not found".to_owned())?;
    let value: Value = schemas.parse_json(bytes)?;
    schema::compile(&value).map_err(|e| format!("does not compile: {e}"))
}

/// Validates the raw document against every resolved policy; one `POLICY_VIOLATION` per leaf,
/// sorted per policy.
pub fn enforce(resolved: &[ResolvedPolicy], raw: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in resolved {
        let mut v: Vec<String> = schema::violations(&p.validator, raw)
            .into_iter()
            .map(|v| {
                if v.path.is_empty() {
                    v.message
                } else {
                    format!("{}: {}", v.path, v.message)
                }
            })
            .collect();
        v.sort();
        for m in v {
            out.push(finding(
                codes::POLICY_VIOLATION,
                "",
                format!("policy {}: {m}", p.origin),
            ));
        }
    }
    out
}

/// Layer 3: resolution, then (if resolution produced no error) enforcement over `raw`.
pub(crate) fn check_policies(
    contract: &Contract,
    raw: &Value,
    fs: Option<&BundleFiles>,
    resolver: Option<&dyn PolicyResolver>,
    schemas: &SchemaBudget,
) -> Vec<Finding> {
    let (resolved, mut out) = resolve_policies_within(contract, fs, resolver, schemas);
    if out
        .iter()
        .any(|f| f.severity == crate::codes::Severity::Error)
    {
        return out;
    }
    out.extend(enforce(&resolved, raw));
    out
}
