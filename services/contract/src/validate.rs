//! The validation pipeline (docs/design/contract.md#validation-pipeline) and its public result types.
//!
//! ```text
//! parse → Layer 1 structural (JSON Schema on the raw document)   ── any error ⇒ stop
//!       → Layer 2 cross-field (typed model + bundle files)        ── any error ⇒ stop
//!       → Layer 3 policy resolution; if still no errors → policy enforcement
//! ```
//!
//! CLI-level overrides (`-f`, `--set`) are applied by the caller to the `pacto.yaml` bytes before
//! calling [`validate_bundle`] (see [`crate::overrides::apply_cli_overrides`]); operator-style
//! per-configuration overrides go through [`validate_bundle_with_overrides`], which applies them
//! to the raw document and therefore to every layer (docs/design/contract.md#operator-overrides).

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::bundle::BundleFiles;
use crate::codes::{self, Severity};
use crate::model::Contract;
use crate::overrides::{ConfigurationOverride, OverrideError};
use crate::parse::{self, VersionCheck};
use crate::policy::{self, PolicyResolver};
use crate::{rules, schema};

use crate::finding::{Finding, Layer};

/// Errors and warnings of a validation run. Valid ⇔ no errors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ValidationReport {
    pub errors: Vec<Finding>,
    pub warnings: Vec<Finding>,
}

impl ValidationReport {
    /// True when there are no errors (warnings never invalidate).
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    /// Files a finding under errors or warnings by its severity (`warning`/`info` → warnings).
    pub fn push(&mut self, finding: Finding) {
        match finding.severity {
            Severity::Warning | Severity::Info => self.warnings.push(finding),
            Severity::Error | Severity::Unknown => self.errors.push(finding),
        }
    }

    /// Files every finding.
    pub fn extend(&mut self, findings: impl IntoIterator<Item = Finding>) {
        for f in findings {
            self.push(f);
        }
    }

    /// The CLI's `--output json` shape: `{"valid": bool, "errors": [...], "warnings": [...]}`.
    pub fn to_json_output(&self) -> JsonOutput<'_> {
        JsonOutput {
            valid: self.is_valid(),
            errors: &self.errors,
            warnings: &self.warnings,
        }
    }

    /// Errors then warnings, in emission order within each list.
    pub fn all(&self) -> impl Iterator<Item = &Finding> {
        self.errors.iter().chain(self.warnings.iter())
    }

    fn has_errors_from(&self, layer: Layer) -> bool {
        self.errors.iter().any(|f| f.layer == layer)
    }
}

/// `{"valid": bool, "errors": [{"code","path","message"}], "warnings": [...]}` in this key order.
#[derive(Debug, Clone, Serialize)]
pub struct JsonOutput<'a> {
    pub valid: bool,
    pub errors: &'a [Finding],
    pub warnings: &'a [Finding],
}

/// Options of a validation run.
#[derive(Clone, Copy, Default)]
pub struct ValidateOptions<'a> {
    /// Resolver for `ref` policies. `None` means local-only validation: each `ref` policy is
    /// skipped with a `POLICY_REF_NOT_ENFORCED` warning.
    pub policy_resolver: Option<&'a dyn PolicyResolver>,
    /// Treat the contract as inline (no bundle filesystem): every file-based layer-2 check and
    /// all local policy resolution are skipped silently (docs/design/contract.md#validation-pipeline).
    pub inline: bool,
}

impl fmt::Debug for ValidateOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValidateOptions")
            .field("policy_resolver", &self.policy_resolver.is_some())
            .field("inline", &self.inline)
            .finish()
    }
}

/// The result of [`validate_bundle`]: the report plus both views of the contract when they
/// could be built (`raw` after YAML parsing; `contract` when the typed model could be derived).
#[derive(Debug, Clone, Default)]
pub struct ValidationOutcome {
    pub report: ValidationReport,
    pub contract: Option<Contract>,
    pub raw: Option<Value>,
}

impl ValidationOutcome {
    /// Shorthand for `report.is_valid()`.
    pub fn is_valid(&self) -> bool {
        self.report.is_valid()
    }
}

/// Validates the bundle's `pacto.yaml` through every layer, with the bundle files available to
/// the file-based checks (unless `options.inline`).
pub fn validate_bundle(files: &BundleFiles, options: &ValidateOptions<'_>) -> ValidationOutcome {
    let Some(bytes) = files.contract() else {
        let mut report = ValidationReport::default();
        report.push(Finding::new(
            codes::PARSE_ERROR,
            "",
            format!("{} not found in bundle", crate::bundle::CONTRACT_FILE),
            Layer::Load,
        ));
        return ValidationOutcome {
            report,
            ..ValidationOutcome::default()
        };
    };
    let fs = (!options.inline).then_some(files);
    match parse_raw(bytes) {
        Ok(raw) => validate_raw(raw, fs, options),
        Err(outcome) => *outcome,
    }
}

/// Validates contract bytes with no bundle filesystem (an inline contract): file-based checks
/// and local policy resolution are skipped.
pub fn validate_document(bytes: &[u8], options: &ValidateOptions<'_>) -> ValidationOutcome {
    match parse_raw(bytes) {
        Ok(raw) => validate_raw(raw, None, options),
        Err(outcome) => *outcome,
    }
}

/// Applies operator-style per-configuration overrides (docs/design/contract.md#operator-overrides) to the raw document — so every
/// layer sees them (docs/design/contract.md#operator-overrides) — then validates. An override naming an unknown configuration is an
/// error of the caller's input (not a finding), reported before anything is applied.
pub fn validate_bundle_with_overrides(
    files: &BundleFiles,
    overrides: &[ConfigurationOverride],
    options: &ValidateOptions<'_>,
) -> Result<ValidationOutcome, OverrideError> {
    let Some(bytes) = files.contract() else {
        return Ok(validate_bundle(files, options));
    };
    let raw = match parse_raw(bytes) {
        Ok(raw) => raw,
        Err(outcome) => return Ok(*outcome),
    };
    let raw = if overrides.is_empty() {
        raw
    } else {
        crate::overrides::apply_configuration_overrides_raw(&raw, overrides)?.0
    };
    let fs = (!options.inline).then_some(files);
    Ok(validate_raw(raw, fs, options))
}

fn parse_raw(bytes: &[u8]) -> Result<Value, Box<ValidationOutcome>> {
    parse::parse_contract_yaml(bytes).map_err(|e| {
        let mut report = ValidationReport::default();
        report.push(Finding::new(
            codes::YAML_PARSE_ERROR,
            "",
            crate::error_chain(&e),
            Layer::Structural,
        ));
        Box::new(ValidationOutcome {
            report,
            ..ValidationOutcome::default()
        })
    })
}

/// Runs layers 1–3 over an already parsed raw document.
pub fn validate_raw(
    raw: Value,
    fs: Option<&BundleFiles>,
    options: &ValidateOptions<'_>,
) -> ValidationOutcome {
    let mut report = ValidationReport::default();
    let schemas = parse::SchemaBudget::new();

    // Layer 1: version selection, then the embedded schema.
    let version = parse::check_version(&raw);
    if let Some(message) = version.message() {
        debug_assert!(version != VersionCheck::Supported);
        report.push(Finding::new(
            codes::UNSUPPORTED_PACTO_VERSION,
            "pactoVersion",
            message,
            Layer::Structural,
        ));
        let contract = parse::to_contract(&raw).ok();
        return ValidationOutcome {
            report,
            contract,
            raw: Some(raw),
        };
    }
    report.extend(schema::validate_structure(&raw));
    let contract = parse::to_contract(&raw);
    if report.has_errors_from(Layer::Structural) {
        return ValidationOutcome {
            report,
            contract: contract.ok(),
            raw: Some(raw),
        };
    }
    let contract = match contract {
        Ok(c) => c,
        Err(e) => {
            report.push(Finding::new(
                codes::PARSE_ERROR,
                "",
                crate::error_chain(&e),
                Layer::Load,
            ));
            return ValidationOutcome {
                report,
                contract: None,
                raw: Some(raw),
            };
        }
    };

    // Layer 2.
    report.extend(rules::cross_field_within(&contract, fs, &schemas));
    if report.has_errors_from(Layer::CrossField) {
        return ValidationOutcome {
            report,
            contract: Some(contract),
            raw: Some(raw),
        };
    }

    // Layer 3.
    report.extend(policy::check_policies(
        &contract,
        &raw,
        fs,
        options.policy_resolver,
        &schemas,
    ));
    ValidationOutcome {
        report,
        contract: Some(contract),
        raw: Some(raw),
    }
}
