//! Data-driven check of the fixture corpus `tests/fixtures/contracts/{valid,invalid}/<case>/`.
//!
//! Each case directory is a bundle (`pacto.yaml` and any files) plus `expected.json`:
//!
//! ```json
//! { "description": "...",
//!   "errors":   [{"code": "...", "path": "..."}],      // exact, in emission order
//!   "warnings": [{"code": "...", "path": "..."}],
//!   "refs":     {"oci://…": "refs/dir"},                // optional: enables a policy resolver
//!   "inline":   false,                                  // optional: validate without bundle FS
//!   "readiness": {"now": "RFC 3339", "score": 0, "passing": false, ...}  // optional
//! }
//! ```
//!
//! `expected.json` and the `refs/` directory are not part of the bundle.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use pacto_contract::bundle::BundleFiles;
use pacto_contract::readiness;
use pacto_contract::{PolicyResolveError, PolicyResolver};
use pacto_contract::{ValidateOptions, validate_bundle};
use serde::Deserialize;

#[derive(Debug, Deserialize, PartialEq, Eq, Clone)]
struct Expect {
    code: String,
    path: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadinessExpect {
    now: String,
    score: i64,
    passing: bool,
    expired: Option<bool>,
    total_weight: Option<i64>,
    earned_weight: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct Expected {
    #[allow(dead_code)]
    description: Option<String>,
    errors: Vec<Expect>,
    warnings: Vec<Expect>,
    #[serde(default)]
    refs: BTreeMap<String, String>,
    #[serde(default)]
    inline: bool,
    readiness: Option<ReadinessExpect>,
    reference: Option<bool>,
}

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/contracts")
}

/// Reads a directory into a bundle, skipping `expected.json` and `refs/` at the top level.
fn read_bundle(dir: &Path) -> Result<BundleFiles> {
    fn walk(root: &Path, dir: &Path, files: &mut BundleFiles, top: bool) -> Result<()> {
        let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(fs::DirEntry::file_name);
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            if top && (name == "expected.json" || name == "refs") {
                continue;
            }
            let path = e.path();
            if e.file_type()?.is_dir() {
                walk(root, &path, files, false)?;
            } else {
                let rel = path
                    .strip_prefix(root)?
                    .to_string_lossy()
                    .replace('\\', "/");
                files.insert(rel, fs::read(&path)?);
            }
        }
        Ok(())
    }
    let mut files = BundleFiles::new();
    walk(dir, dir, &mut files, true)?;
    Ok(files)
}

struct DirResolver {
    base: PathBuf,
    refs: BTreeMap<String, String>,
}

impl PolicyResolver for DirResolver {
    fn resolve(&self, reference: &str) -> Result<BundleFiles, PolicyResolveError> {
        let dir = self
            .refs
            .get(reference)
            .ok_or_else(|| PolicyResolveError::NotFound {
                reference: reference.to_owned(),
            })?;
        read_bundle(&self.base.join(dir)).map_err(|e| PolicyResolveError::Fetch {
            reference: reference.to_owned(),
            source: e.into(),
        })
    }
}

fn check_case(dir: &Path, must_be_valid: bool) -> Result<()> {
    let expected: Expected = serde_json::from_slice(
        &fs::read(dir.join("expected.json")).context("reading expected.json")?,
    )
    .context("parsing expected.json")?;
    let files = read_bundle(dir)?;
    let resolver = DirResolver {
        base: dir.to_owned(),
        refs: expected.refs.clone(),
    };
    let options = ValidateOptions {
        policy_resolver: (!expected.refs.is_empty()).then_some(&resolver as &dyn PolicyResolver),
        inline: expected.inline,
    };
    let outcome = validate_bundle(&files, &options);
    let report = &outcome.report;
    let got = |v: &[pacto_contract::Finding]| {
        v.iter()
            .map(|f| Expect {
                code: f.code.clone(),
                path: f.path.clone(),
            })
            .collect::<Vec<_>>()
    };
    let (errors, warnings) = (got(&report.errors), got(&report.warnings));
    if errors != expected.errors || warnings != expected.warnings {
        bail!(
            "findings differ\n  expected errors:   {:?}\n  got errors:        {:?}\n  expected warnings: {:?}\n  got warnings:      {:?}\n  messages: {:#?}",
            expected.errors,
            errors,
            expected.warnings,
            warnings,
            report.all().map(ToString::to_string).collect::<Vec<_>>()
        );
    }
    if must_be_valid != report.is_valid() {
        bail!(
            "valid = {}, but the case is filed under the other directory",
            report.is_valid()
        );
    }
    for f in &report.errors {
        if f.severity != pacto_contract::codes::Severity::Error {
            bail!("{f} filed as error with severity {}", f.severity);
        }
    }
    // The CLI JSON shape.
    let json = serde_json::to_value(report.to_json_output())?;
    let obj = json.as_object().context("json output is an object")?;
    if obj.keys().map(String::as_str).collect::<Vec<_>>() != ["errors", "valid", "warnings"] {
        bail!("json output keys: {json}");
    }
    for f in obj["errors"].as_array().into_iter().flatten() {
        let keys: Vec<_> = f.as_object().into_iter().flat_map(|o| o.keys()).collect();
        if keys != ["code", "message", "path"] {
            bail!("finding JSON keys {keys:?}");
        }
    }
    if let Some(r) = &expected.readiness {
        let contract = outcome.contract.as_ref().context("typed contract")?;
        let now: DateTime<Utc> = DateTime::parse_from_rfc3339(&r.now)?.with_timezone(&Utc);
        let a = readiness::assess(contract.readiness.as_ref(), now).context("assessment")?;
        if a.score != r.score || a.passing != r.passing {
            bail!(
                "readiness score {} passing {} (want {} {})",
                a.score,
                a.passing,
                r.score,
                r.passing
            );
        }
        if r.expired.is_some_and(|e| e != a.expired)
            || r.total_weight.is_some_and(|t| t != a.total_weight)
            || r.earned_weight.is_some_and(|e| e != a.earned_weight)
        {
            bail!("readiness {a:?} differs from {r:?}");
        }
    }
    if let Some(reference) = expected.reference {
        let contract = outcome.contract.as_ref().context("typed contract")?;
        if contract.is_reference() != reference {
            bail!("is_reference = {}", contract.is_reference());
        }
    }
    Ok(())
}

#[test]
fn fixture_corpus() -> Result<()> {
    let root = corpus_root();
    let mut failures = Vec::new();
    let mut count = 0;
    for (sub, valid) in [("valid", true), ("invalid", false)] {
        let mut cases: Vec<_> = fs::read_dir(root.join(sub))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        cases.sort();
        for case in cases {
            count += 1;
            if let Err(e) = check_case(&case, valid) {
                failures.push(format!("{}: {e:#}", case.display()));
            }
        }
    }
    assert!(count >= 30, "corpus unexpectedly small: {count} cases");
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    Ok(())
}
