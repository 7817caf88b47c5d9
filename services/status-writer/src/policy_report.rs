//! PolicyReports (`--policy-reports`, off by default): one `wgpolicyk8s.io/v1alpha2`
//! PolicyReport per Pacto, in the Pacto's namespace, owned by the Pacto, with one result per
//! finding of its status (docs/design/status.md#policyreports).
//!
//! The report is a pure function of the composed status ([`report_for`]); writing it is a
//! server-side apply with the status-writer's field manager, made only when its fingerprint
//! (everything but the result timestamps) differs from the one last written for that Pacto.
//! After a restart the memo is empty: the existing report is read once and compared, so a
//! restart writes nothing either when nothing changed.
//!
//! A leaf beside the reconcile: step 5 (`reconcile::apply`) calls [`PolicyReports::export`]
//! with its field manager and the pass's clock.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Client, ResourceExt};
use metrics::counter;
use pacto_api::labels::{GROUP as PACTO_GROUP, LABEL_PACTO, VERSION as PACTO_VERSION};
use pacto_api::{ContractStatus, FindingStatus, Pacto, PactoStatus, Severity, WorkloadKind};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::compose::{LIST_TRUNCATED, counts_message};
use crate::metrics::{POLICY_REPORT_FAILURES_TOTAL, POLICY_REPORT_WRITES_TOTAL};

/// A Pacto's (namespace, name).
pub type PactoKey = (String, String);

/// The PolicyReport API group.
pub const GROUP: &str = "wgpolicyk8s.io";
/// The PolicyReport API version written.
pub const VERSION: &str = "v1alpha2";
/// The kind.
pub const KIND: &str = "PolicyReport";
/// The resource (plural).
pub const PLURAL: &str = "policyreports";
/// `results[].source` of every result: the tool that produced it.
pub const SOURCE: &str = "pacto";
/// Every report's name starts with this, then the Pacto's name.
pub const NAME_PREFIX: &str = "pacto-";
/// The rule of the one result of a report whose status lists no finding: the verdict itself.
pub const VERDICT_RULE: &str = "CONTRACT_STATUS";
/// The rule of a validation error without a code.
pub const VALIDATION_RULE: &str = "VALIDATION_ERROR";
/// `app.kubernetes.io/managed-by` of every report.
pub const MANAGED_BY: &str = "pacto-status-writer";

const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The longest object name the API server accepts (a DNS subdomain).
const NAME_LIMIT: usize = 253;
/// The longest label value.
const LABEL_VALUE_LIMIT: usize = 63;

/// A `wgpolicyk8s.io/v1alpha2` PolicyReport: the fields this exporter writes (the CRD's
/// `scopeSelector` is never set).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicyReport {
    /// `wgpolicyk8s.io/v1alpha2`.
    pub api_version: String,
    /// `PolicyReport`.
    pub kind: String,
    /// Name, namespace, labels and the owner reference to the Pacto.
    pub metadata: ObjectMeta,
    /// The Pacto the report is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ObjectReference>,
    /// Results counted by outcome.
    #[serde(default)]
    pub summary: ReportSummary,
    /// One result per finding (or the verdict alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<ReportResult>,
}

/// `summary`: how many results have each outcome.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportSummary {
    /// `pass` results.
    #[serde(default)]
    pub pass: i64,
    /// `fail` results.
    #[serde(default)]
    pub fail: i64,
    /// `warn` results.
    #[serde(default)]
    pub warn: i64,
    /// `error` results.
    #[serde(default)]
    pub error: i64,
    /// `skip` results.
    #[serde(default)]
    pub skip: i64,
}

/// The outcome of one result (the CRD's enum).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The contract holds.
    Pass,
    /// A required assertion is violated.
    Fail,
    /// An optional assertion is violated, or a structural warning.
    Warn,
    /// The contract could not be obtained, validated or evaluated.
    Error,
    /// Not evaluated (no target), or entries left out of a capped list.
    Skip,
}

/// `results[].severity` (the CRD's enum).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReportSeverity {
    /// Critical.
    Critical,
    /// High.
    High,
    /// Medium.
    Medium,
    /// Low.
    Low,
    /// Informational.
    Info,
}

/// `results[].timestamp` (a protobuf Timestamp).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportTimestamp {
    /// Unix seconds.
    pub seconds: i64,
    /// Nanoseconds (always 0: whole seconds).
    pub nanos: i32,
}

/// One result.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReportResult {
    /// [`SOURCE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The contract, `<service.name>@<service.version>`.
    pub policy: String,
    /// The finding code (or [`VERDICT_RULE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The finding's category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// The outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Outcome>,
    /// The severity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<ReportSeverity>,
    /// The finding's message (bounded like the status's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `contractStatus`, `subject`, `contractPath` of the finding.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    /// The target workload, when the Pacto has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ObjectReference>,
    /// When this content was written (left out of the change comparison).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<ReportTimestamp>,
}

/// The PolicyReport of a Pacto: `pacto-<name>`, cut to 253 characters with a hash of the whole
/// name when longer.
pub fn report_name(pacto: &str) -> String {
    let name = format!("{NAME_PREFIX}{pacto}");
    if name.len() <= NAME_LIMIT {
        return name;
    }
    let mut hash = hex::encode(Sha256::digest(pacto.as_bytes()));
    hash.truncate(10);
    // Pacto names are DNS subdomains (ASCII), so any index is a boundary; cut on a safe one.
    let mut keep = NAME_LIMIT - hash.len() - 1;
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    let head = name[..keep].trim_end_matches(['.', '-']);
    format!("{head}-{hash}")
}

/// The policy of a Pacto's results: the contract as `<service.name>@<service.version>`, else
/// (no contract obtained) its OCI reference without `oci://`, else `inline`.
fn policy_of(pacto: &Pacto, status: &PactoStatus) -> String {
    if let Some(contract) = &status.contract {
        return format!("{}@{}", contract.service_name, contract.version);
    }
    match &pacto.spec.contract_ref.oci {
        Some(oci) => oci.trim_start_matches("oci://").to_owned(),
        None => "inline".to_owned(),
    }
}

/// A finding's outcome and report severity (docs/design/status.md#policyreports): a violated
/// required assertion fails, an optional one warns, one that could not be evaluated is an
/// error, information passes, and the entry closing a capped list is a skip.
pub fn finding_outcome(finding: &FindingStatus) -> (Outcome, Option<ReportSeverity>) {
    if finding.code == LIST_TRUNCATED {
        return (Outcome::Skip, None);
    }
    match finding.severity {
        Severity::Error => (Outcome::Fail, Some(ReportSeverity::High)),
        Severity::Warning => (Outcome::Warn, Some(ReportSeverity::Medium)),
        Severity::Unknown => (Outcome::Error, None),
        Severity::Info => (Outcome::Pass, Some(ReportSeverity::Info)),
    }
}

/// The outcome of the verdict result (a status without findings).
pub fn verdict_outcome(verdict: ContractStatus) -> Outcome {
    match verdict {
        ContractStatus::Compliant => Outcome::Pass,
        ContractStatus::Warning => Outcome::Warn,
        ContractStatus::NonCompliant => Outcome::Fail,
        ContractStatus::Reference | ContractStatus::NotEvaluated => Outcome::Skip,
        ContractStatus::Unknown | ContractStatus::Invalid => Outcome::Error,
    }
}

/// The workload a targeted Pacto observes, as a result's resource.
fn workload_of(pacto: &Pacto, namespace: &str) -> Option<ObjectReference> {
    let (name, kind) = pacto.spec.target.as_ref()?.resolved_workload()?;
    let api_version = match kind {
        WorkloadKind::Job | WorkloadKind::CronJob => "batch/v1",
        WorkloadKind::Deployment | WorkloadKind::StatefulSet | WorkloadKind::ReplicaSet => {
            "apps/v1"
        }
    };
    Some(ObjectReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(kind.as_str().to_owned()),
        name: Some(name),
        namespace: Some(namespace.to_owned()),
        ..ObjectReference::default()
    })
}

/// The message of the verdict result: the first condition that does not hold explains it,
/// else the counts.
fn verdict_message(status: &PactoStatus, verdict: ContractStatus) -> String {
    status
        .conditions
        .iter()
        .find(|c| c.status != "True" && !c.message.is_empty())
        .map_or_else(
            || counts_message(verdict, status.summary.as_ref()),
            |c| c.message.clone(),
        )
}

/// The report of `pacto` with the composed `status` (`None` before the first verdict, or for
/// a Pacto without namespace or uid). Results carry no timestamp: [`stamped`] adds it when the
/// report is written. Bounded by the status: its findings and validation errors are capped at
/// `LIST_CAP` plus one `LIST_TRUNCATED` entry, each message at 1 KiB
/// (docs/design/status.md#size-limits).
pub fn report_for(pacto: &Pacto, status: &PactoStatus) -> Option<PolicyReport> {
    let verdict = status.contract_status?;
    let namespace = pacto.namespace()?;
    let uid = pacto.metadata.uid.clone()?;
    let name = pacto.name_any();
    let policy = policy_of(pacto, status);
    let resources: Vec<ObjectReference> = workload_of(pacto, &namespace).into_iter().collect();
    let result = |rule: String,
                  category: Option<String>,
                  (outcome, severity): (Outcome, Option<ReportSeverity>),
                  message: String,
                  extra: [(&str, Option<&String>); 2]| {
        let mut properties =
            BTreeMap::from([("contractStatus".to_owned(), verdict.as_str().to_owned())]);
        for (key, value) in extra {
            if let Some(value) = value {
                properties.insert(key.to_owned(), value.clone());
            }
        }
        ReportResult {
            source: Some(SOURCE.to_owned()),
            policy: policy.clone(),
            rule: Some(rule),
            category,
            result: Some(outcome),
            severity,
            message: Some(message),
            properties,
            resources: resources.clone(),
            timestamp: None,
        }
    };
    let mut results = Vec::new();
    // An invalid contract: its validation errors (the contract could not be evaluated).
    if verdict == ContractStatus::Invalid
        && let Some(validation) = &status.validation
    {
        for issue in &validation.errors {
            let (outcome, severity) = if issue.code.as_deref() == Some(LIST_TRUNCATED) {
                (Outcome::Skip, None)
            } else {
                (Outcome::Error, Some(ReportSeverity::High))
            };
            results.push(result(
                issue
                    .code
                    .clone()
                    .unwrap_or_else(|| VALIDATION_RULE.to_owned()),
                Some("Validation".to_owned()),
                (outcome, severity),
                issue.message.clone(),
                [("contractPath", issue.path.as_ref()), ("subject", None)],
            ));
        }
    }
    for finding in &status.findings {
        results.push(result(
            finding.code.clone(),
            Some(finding.category.clone()),
            finding_outcome(finding),
            finding.message.clone(),
            [
                ("contractPath", finding.contract_path.as_ref()),
                ("subject", finding.subject.as_ref()),
            ],
        ));
    }
    if results.is_empty() {
        results.push(result(
            VERDICT_RULE.to_owned(),
            None,
            (verdict_outcome(verdict), None),
            verdict_message(status, verdict),
            [("contractPath", None), ("subject", None)],
        ));
    }
    let mut summary = ReportSummary::default();
    for r in &results {
        match r.result {
            Some(Outcome::Pass) => summary.pass += 1,
            Some(Outcome::Fail) => summary.fail += 1,
            Some(Outcome::Warn) => summary.warn += 1,
            Some(Outcome::Error) => summary.error += 1,
            Some(Outcome::Skip) => summary.skip += 1,
            None => {}
        }
    }
    let mut labels = BTreeMap::from([(LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned())]);
    if name.len() <= LABEL_VALUE_LIMIT {
        labels.insert(LABEL_PACTO.to_owned(), name.clone());
    }
    let api_version = format!("{PACTO_GROUP}/{PACTO_VERSION}");
    Some(PolicyReport {
        api_version: format!("{GROUP}/{VERSION}"),
        kind: KIND.to_owned(),
        metadata: ObjectMeta {
            name: Some(report_name(&name)),
            namespace: Some(namespace.clone()),
            labels: Some(labels),
            // Collected with the Pacto (docs/design/status.md#policyreports).
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.clone(),
                kind: "Pacto".to_owned(),
                name: name.clone(),
                uid: uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        scope: Some(ObjectReference {
            api_version: Some(api_version),
            kind: Some("Pacto".to_owned()),
            name: Some(name),
            namespace: Some(namespace),
            uid: Some(uid),
            ..ObjectReference::default()
        }),
        summary,
        results,
    })
}

/// `report` with every result stamped `now`.
pub fn stamped(mut report: PolicyReport, now: &Time) -> PolicyReport {
    let stamp = ReportTimestamp {
        seconds: now.0.as_second(),
        nanos: 0,
    };
    for result in &mut report.results {
        result.timestamp = Some(stamp);
    }
    report
}

/// What decides whether a report must be written: our labels, the owner references, the scope,
/// the summary and the results without their timestamps, hashed. The same for the report
/// [`report_for`] composes and for that report read back from the API server.
pub fn fingerprint(report: &PolicyReport) -> String {
    let labels: BTreeMap<&String, &String> = report
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| *k == LABEL_MANAGED_BY || *k == LABEL_PACTO)
        .collect();
    let results: Vec<ReportResult> = report
        .results
        .iter()
        .cloned()
        .map(|mut r| {
            r.timestamp = None;
            r
        })
        .collect();
    let value = serde_json::json!({
        "labels": labels,
        "ownerReferences": report.metadata.owner_references,
        "scope": report.scope,
        "summary": report.summary,
        "results": results,
    });
    hex::encode(Sha256::digest(value.to_string().as_bytes()))
}

/// Reading or writing a PolicyReport failed (logged and counted; the next pass tries again).
#[derive(Debug, thiserror::Error)]
pub enum PolicyReportError {
    /// Reading the existing report failed.
    #[error("cannot read PolicyReport {namespace}/{name}")]
    Get {
        /// Namespace.
        namespace: String,
        /// Report name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Applying the report failed (e.g. the PolicyReport CRD is not installed).
    #[error("cannot apply PolicyReport {namespace}/{name}")]
    Apply {
        /// Namespace.
        namespace: String,
        /// Report name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Serialising or reading back the report failed.
    #[error("cannot (de)serialise PolicyReport {name}")]
    Serde {
        /// Report name.
        name: String,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
}

/// The fingerprint last written (or found) per Pacto, with the Pacto's uid.
#[derive(Debug, Default)]
struct ReportMemo(Mutex<HashMap<PactoKey, (String, String)>>);

impl ReportMemo {
    fn lock(&self) -> MutexGuard<'_, HashMap<PactoKey, (String, String)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How a pass writes: the client, the field manager of every status-writer write, and the
/// pass's clock (the results' timestamp).
#[derive(Clone)]
pub struct ReportWrite<'a> {
    /// The Kubernetes client.
    pub client: &'a Client,
    /// The field manager of the server-side apply.
    pub field_manager: &'a str,
    /// Now, in whole seconds.
    pub now: Time,
}

impl std::fmt::Debug for ReportWrite<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportWrite")
            .field("field_manager", &self.field_manager)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// The exporter: the write memo and the count of reports written.
#[derive(Debug, Default)]
pub struct PolicyReports {
    memo: ReportMemo,
    writes: AtomicU64,
}

/// The PolicyReport resource.
fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL)
}

impl PolicyReports {
    /// Reports written so far by this process.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// Forgets a deleted Pacto (its report goes with it, by its owner reference).
    pub fn forget(&self, key: &PactoKey) {
        self.memo.lock().remove(key);
    }

    /// Forgets every Pacto (a leader term ended: another replica may write the reports until
    /// this one leads again).
    pub fn clear(&self) {
        self.memo.lock().clear();
    }

    /// Forgets the Pactos for which `exists` is false.
    pub fn retain(&self, exists: impl Fn(&PactoKey) -> bool) {
        self.memo.lock().retain(|key, _| exists(key));
    }

    /// Writes the report of `pacto` with `status` when it differs from the one last written;
    /// returns whether it wrote. Never fails the reconcile: errors are logged and counted, and
    /// the memo keeps the old fingerprint, so the next pass tries again.
    pub async fn export(
        &self,
        write: &ReportWrite<'_>,
        pacto: &Pacto,
        key: &PactoKey,
        status: &PactoStatus,
    ) {
        match self.sync(write, pacto, key, status).await {
            Ok(true) => tracing::debug!(namespace = %key.0, pacto = %key.1, "PolicyReport written"),
            Ok(false) => {}
            Err(error) => {
                counter!(POLICY_REPORT_FAILURES_TOTAL).increment(1);
                tracing::warn!(error = %pacto_runtime::tls::error_chain(&error), namespace = %key.0, pacto = %key.1, "cannot write the PolicyReport");
            }
        }
    }

    /// [`Self::export`], returning the error.
    pub async fn sync(
        &self,
        write: &ReportWrite<'_>,
        pacto: &Pacto,
        key: &PactoKey,
        status: &PactoStatus,
    ) -> Result<bool, PolicyReportError> {
        let Some(report) = report_for(pacto, status) else {
            return Ok(false);
        };
        let uid = pacto.metadata.uid.clone().unwrap_or_default();
        let print = fingerprint(&report);
        let known = self.memo.lock().get(key).cloned();
        let (namespace, name) = (key.0.as_str(), report_name(&key.1));
        let api: Api<DynamicObject> =
            Api::namespaced_with(write.client.clone(), namespace, &api_resource());
        match known {
            Some((known_uid, known_print)) if known_uid == uid => {
                if known_print == print {
                    return Ok(false);
                }
            }
            // Nothing written by this process for this Pacto (a start, or a re-created Pacto):
            // the report on the server may already say the same.
            _ => {
                let existing =
                    api.get_opt(&name)
                        .await
                        .map_err(|source| PolicyReportError::Get {
                            namespace: namespace.to_owned(),
                            name: name.clone(),
                            source,
                        })?;
                if let Some(existing) = existing {
                    let value = serde_json::to_value(existing).map_err(|source| {
                        PolicyReportError::Serde {
                            name: name.clone(),
                            source,
                        }
                    })?;
                    let existing: PolicyReport =
                        serde_json::from_value(value).map_err(|source| {
                            PolicyReportError::Serde {
                                name: name.clone(),
                                source,
                            }
                        })?;
                    if fingerprint(&existing) == print {
                        self.memo.lock().insert(key.clone(), (uid, print));
                        return Ok(false);
                    }
                }
            }
        }
        let body = stamped(report, &write.now);
        api.patch(
            &name,
            &PatchParams::apply(write.field_manager).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(|source| PolicyReportError::Apply {
            namespace: namespace.to_owned(),
            name: name.clone(),
            source,
        })?;
        self.memo.lock().insert(key.clone(), (uid, print));
        self.writes.fetch_add(1, Ordering::SeqCst);
        counter!(POLICY_REPORT_WRITES_TOTAL).increment(1);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use pacto_api::testing::PactoBuilder;
    use pacto_api::{ContractInfo, Summary, ValidationIssue, ValidationResult};

    use super::*;

    fn finding(code: &str, severity: Severity) -> FindingStatus {
        FindingStatus {
            code: code.to_owned(),
            severity,
            category: "RuntimeDrift".to_owned(),
            subject: Some("interface/http".to_owned()),
            contract_path: Some("interfaces[name=http]".to_owned()),
            message: format!("{code} message"),
            evidence_refs: Vec::new(),
        }
    }

    fn pacto() -> Pacto {
        let mut p = PactoBuilder::inline("orders", "x")
            .service("orders")
            .build();
        p.metadata.namespace = Some("shop".into());
        p.metadata.uid = Some("uid-1".into());
        p
    }

    fn status(verdict: ContractStatus, findings: Vec<FindingStatus>) -> PactoStatus {
        PactoStatus {
            contract_status: Some(verdict),
            contract: Some(ContractInfo {
                service_name: "orders".into(),
                version: "1.2.0".into(),
                ..ContractInfo::default()
            }),
            summary: Some(Summary::default()),
            findings,
            ..PactoStatus::default()
        }
    }

    #[test]
    fn one_result_per_finding_mapped_by_severity() {
        let report = report_for(
            &pacto(),
            &status(
                ContractStatus::NonCompliant,
                vec![
                    finding("INTERFACE_ABSENT", Severity::Error),
                    finding("OPTIONAL_ABSENT", Severity::Warning),
                    finding("EVIDENCE_MISSING", Severity::Unknown),
                    finding("NOTE", Severity::Info),
                    finding(LIST_TRUNCATED, Severity::Info),
                ],
            ),
        )
        .expect("a report");
        assert_eq!(report.metadata.name.as_deref(), Some("pacto-orders"));
        assert_eq!(report.metadata.namespace.as_deref(), Some("shop"));
        let outcomes: Vec<_> = report
            .results
            .iter()
            .map(|r| (r.rule.as_deref().unwrap(), r.result.unwrap(), r.severity))
            .collect();
        assert_eq!(
            outcomes,
            [
                (
                    "INTERFACE_ABSENT",
                    Outcome::Fail,
                    Some(ReportSeverity::High)
                ),
                (
                    "OPTIONAL_ABSENT",
                    Outcome::Warn,
                    Some(ReportSeverity::Medium)
                ),
                ("EVIDENCE_MISSING", Outcome::Error, None),
                ("NOTE", Outcome::Pass, Some(ReportSeverity::Info)),
                (LIST_TRUNCATED, Outcome::Skip, None),
            ]
        );
        assert_eq!(
            report.summary,
            ReportSummary {
                pass: 1,
                fail: 1,
                warn: 1,
                error: 1,
                skip: 1
            }
        );
        let first = &report.results[0];
        assert_eq!(first.policy, "orders@1.2.0");
        assert_eq!(first.source.as_deref(), Some(SOURCE));
        assert_eq!(first.properties["subject"], "interface/http");
        assert_eq!(first.properties["contractStatus"], "NonCompliant");
        assert_eq!(first.resources[0].kind.as_deref(), Some("Deployment"));
        assert_eq!(first.resources[0].name.as_deref(), Some("orders"));
        let owner = &report.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Pacto", "uid-1")
        );
        assert_eq!(
            report.scope.as_ref().and_then(|s| s.uid.as_deref()),
            Some("uid-1")
        );
    }

    #[test]
    fn without_findings_the_verdict_is_the_one_result() {
        for (verdict, outcome) in [
            (ContractStatus::Compliant, Outcome::Pass),
            (ContractStatus::Warning, Outcome::Warn),
            (ContractStatus::NonCompliant, Outcome::Fail),
            (ContractStatus::Reference, Outcome::Skip),
            (ContractStatus::Unknown, Outcome::Error),
            (ContractStatus::Invalid, Outcome::Error),
        ] {
            let report = report_for(&pacto(), &status(verdict, Vec::new())).unwrap();
            assert_eq!(report.results.len(), 1);
            assert_eq!(report.results[0].rule.as_deref(), Some(VERDICT_RULE));
            assert_eq!(report.results[0].result, Some(outcome), "{verdict:?}");
        }
        // No verdict yet: no report.
        assert!(report_for(&pacto(), &PactoStatus::default()).is_none());
    }

    #[test]
    fn an_invalid_contract_reports_its_validation_errors() {
        let mut s = status(ContractStatus::Invalid, Vec::new());
        s.contract = None;
        s.validation = Some(ValidationResult {
            valid: false,
            errors: vec![
                ValidationIssue {
                    code: Some("SCHEMA_VIOLATION".into()),
                    path: Some("service.version".into()),
                    message: "not semver".into(),
                },
                ValidationIssue {
                    code: None,
                    path: None,
                    message: "bad".into(),
                },
            ],
            ..ValidationResult::default()
        });
        let report = report_for(&pacto(), &s).unwrap();
        let rules: Vec<_> = report
            .results
            .iter()
            .map(|r| (r.rule.as_deref().unwrap(), r.result.unwrap()))
            .collect();
        assert_eq!(
            rules,
            [
                ("SCHEMA_VIOLATION", Outcome::Error),
                (VALIDATION_RULE, Outcome::Error)
            ]
        );
        assert_eq!(report.results[0].policy, "inline");
        assert_eq!(report.summary.error, 2);
    }

    #[test]
    fn the_fingerprint_ignores_timestamps_and_sees_everything_else() {
        let report = report_for(
            &pacto(),
            &status(
                ContractStatus::NonCompliant,
                vec![finding("INTERFACE_ABSENT", Severity::Error)],
            ),
        )
        .unwrap();
        let now = Time(k8s_openapi::jiff::Timestamp::from_second(1_796_566_813).unwrap());
        assert_eq!(
            fingerprint(&report),
            fingerprint(&stamped(report.clone(), &now))
        );
        // Read back as JSON (what the API server returns), the same.
        let back: PolicyReport =
            serde_json::from_value(serde_json::to_value(stamped(report.clone(), &now)).unwrap())
                .unwrap();
        assert_eq!(fingerprint(&report), fingerprint(&back));
        let mut changed = report.clone();
        changed.results[0].message = Some("other".into());
        assert_ne!(fingerprint(&report), fingerprint(&changed));
    }

    #[test]
    fn long_names_are_cut_with_a_hash() {
        assert_eq!(report_name("a"), "pacto-a");
        let long = "a".repeat(253);
        let name = report_name(&long);
        assert_eq!(name.len(), 253);
        assert_ne!(name, report_name(&"a".repeat(252)));
    }
}
