//! PolicyReports (`--policy-reports`, docs/design/status.md#policyreports) against a real
//! kube-apiserver + etcd + kube-controller-manager with the UPSTREAM PolicyReport CRD installed
//! (Kyverno's `wgpolicyk8s.io_policyreports.yaml`, fetched by scripts/policy-report-crd.sh and
//! found through `$PACTO_POLICY_REPORT_CRD`). Without the file a developer's run skips in one
//! line; under CI it fails.
//!
//! The Pacto's findings become results, a steady reconcile writes nothing (the report's
//! resourceVersion and our write count stay), a resolved finding updates the report, a restarted
//! exporter (empty memo) writes nothing for an unchanged report, and the deleted Pacto's report is
//! collected by kube-controller-manager's garbage collector through its owner reference.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test")]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::{Client, ResourceExt};
use pacto_api::{ContractStatus, Pacto, TargetRef, WorkloadKind, WorkloadRef};
use pacto_status_writer::policy_report::{
    self, PolicyReport, PolicyReports, ReportWrite, VERDICT_RULE, report_name,
};
use pacto_testenv::ControlPlaneOptions;

/// The pinned version of scripts/policy-report-crd.sh (its default cache path).
const CRD_VERSION: &str = "v1.19.1";

/// The upstream CRD file, or `None` (skipped in one line) off CI when it is missing.
fn upstream_crd() -> Option<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let path = set("PACTO_POLICY_REPORT_CRD").map_or_else(
        || {
            let cache = set("PACTO_CACHE").map_or_else(
                || {
                    PathBuf::from(set("HOME").unwrap_or_else(|| "/root".into()))
                        .join(".cache/pacto")
                },
                PathBuf::from,
            );
            cache
                .join("policy-report-crd")
                .join(format!("kyverno-{CRD_VERSION}"))
                .join("wgpolicyk8s.io_policyreports.yaml")
        },
        PathBuf::from,
    );
    if path.is_file() {
        return Some(path);
    }
    let line = format!(
        "the upstream PolicyReport CRD is missing at {} (run scripts/policy-report-crd.sh)",
        path.display()
    );
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(!ci, "{line}: CI requires the PolicyReport tier to run");
    eprintln!("skipped: {line}");
    None
}

/// The shared control plane of this binary, with kube-controller-manager (its garbage collector
/// removes a deleted Pacto's report) and the upstream PolicyReport CRD installed.
async fn reporting_cluster(crd: PathBuf) {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let cp = pacto_testenv::shared(|| {
        crds()
            .into_iter()
            .fold(
                ControlPlaneOptions::default(),
                ControlPlaneOptions::with_crd,
            )
            .with_controller_manager()
            .with_crd(crd)
    })
    .await
    .expect("start the control plane (scripts/k8s-binaries.sh provides the binaries)");
    assert!(cp.has_controller_manager());
}

fn reports(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(policy_report::GROUP, policy_report::VERSION, "PolicyReport"),
        policy_report::PLURAL,
    );
    Api::namespaced_with(client.clone(), namespace, &resource)
}

fn typed(object: DynamicObject) -> PolicyReport {
    serde_json::from_value(serde_json::to_value(object).unwrap()).unwrap()
}

/// The report once `check` accepts it.
async fn wait_report(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    check: impl Fn(&PolicyReport) -> bool,
) -> (DynamicObject, PolicyReport) {
    eventually(what, Duration::from_secs(30), || async {
        let object = api
            .get_opt(name)
            .await
            .map_err(|e| format!("GET failed: {e}"))?
            .ok_or("no report yet")?;
        let report = typed(object.clone());
        if check(&report) {
            Ok((object, report))
        } else {
            Err(format!("report: {report:?}"))
        }
    })
    .await
}

/// `(rule, result)` of each result.
fn outcomes(report: &PolicyReport) -> Vec<(String, String)> {
    report
        .results
        .iter()
        .map(|r| {
            (
                r.rule.clone().unwrap_or_default(),
                serde_json::to_value(r.result)
                    .unwrap()
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

fn contract(workload: &str) -> String {
    format!(
        "pactoVersion: \"2.0\"\nservice:\n  name: batch\n  version: 2.0.0\nworkload: {workload}\n"
    )
}

#[tokio::test]
async fn a_report_follows_the_findings_writes_nothing_when_steady_and_goes_with_the_pacto() {
    let Some(crd) = upstream_crd() else { return };
    reporting_cluster(crd).await;
    let h = start_reporting().await;
    let ns = h.namespace.clone();
    // A Deployment the contract says must be a Job: WORKLOAD_MISMATCH, an error finding.
    create_batch_deployment(&h.client, &ns).await;
    let pactos: Api<Pacto> = Api::namespaced(h.client.clone(), &ns);
    let mut p = pacto("batch", &contract("job"), None);
    p.spec.check_interval_seconds = Some(30);
    p.spec.target = Some(TargetRef {
        workload_ref: Some(WorkloadRef {
            name: "batch".into(),
            kind: Some(WorkloadKind::Deployment),
        }),
        ..TargetRef::default()
    });
    let created = pactos.create(&PostParams::default(), &p).await.unwrap();
    let (_, status) = wait_status(&pactos, "batch", ContractStatus::NonCompliant).await;

    // 1. The findings, one result each.
    let api = reports(&h.client, &ns);
    let name = report_name("batch");
    let (object, report) = wait_report(&api, &name, "a report with the finding", |r| {
        r.results
            .iter()
            .any(|x| x.rule.as_deref() == Some("WORKLOAD_MISMATCH"))
    })
    .await;
    assert_eq!(
        outcomes(&report),
        [("WORKLOAD_MISMATCH".to_owned(), "fail".to_owned())]
    );
    assert_eq!(report.results.len(), status.findings.len());
    let result = &report.results[0];
    assert_eq!(result.policy, "batch@2.0.0");
    assert_eq!(result.source.as_deref(), Some("pacto"));
    assert_eq!(result.properties["contractStatus"], "NonCompliant");
    assert_eq!(result.message.as_ref(), Some(&status.findings[0].message));
    assert_eq!(result.resources[0].kind.as_deref(), Some("Deployment"));
    assert_eq!(result.resources[0].name.as_deref(), Some("batch"));
    assert!(result.timestamp.is_some());
    assert_eq!((report.summary.fail, report.summary.pass), (1, 0));
    let scope = report.scope.as_ref().unwrap();
    assert_eq!(scope.kind.as_deref(), Some("Pacto"));
    assert_eq!(scope.uid, created.metadata.uid);
    let owner = &object.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(&owner.uid)),
        ("Pacto", created.metadata.uid.as_ref())
    );
    if std::env::var_os("PACTO_SHOW_POLICY_REPORT").is_some() {
        let cp = pacto_testenv::shared(ControlPlaneOptions::default)
            .await
            .unwrap();
        let out = cp
            .kubectl()
            .unwrap()
            .args(["-n", &ns, "get", "policyreport", &name, "-o", "yaml"])
            .output()
            .unwrap();
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
        let out = cp
            .kubectl()
            .unwrap()
            .args(["-n", &ns, "get", "policyreports"])
            .output()
            .unwrap();
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    }

    // 2. Steady reconciles write nothing: metadata changes start passes that change nothing.
    let version = object.resource_version();
    let writes = h.ctx.policy_report_writes();
    assert!(writes >= 1);
    for i in 0..3 {
        let passes = h.ctx.reconciles();
        let patch =
            serde_json::json!({"metadata": {"annotations": {"test/steady": i.to_string()}}});
        pactos
            .patch(
                "batch",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .unwrap();
        eventually("a steady pass", Duration::from_secs(20), || async {
            (h.ctx.reconciles() > passes).then_some(())
        })
        .await;
    }
    let after = api.get(&name).await.unwrap();
    assert_eq!(
        after.resource_version(),
        version,
        "a steady pass rewrote the report"
    );
    assert_eq!(h.ctx.policy_report_writes(), writes);

    // 3. A restarted exporter (nothing in its memo) reads the report once and writes nothing.
    let cached = pactos.get("batch").await.unwrap();
    let restarted = PolicyReports::default();
    let key = (ns.clone(), "batch".to_owned());
    let wrote = restarted
        .sync(
            &ReportWrite {
                client: &h.client,
                field_manager: "pacto-status-writer",
                now: Time(k8s_openapi::jiff::Timestamp::now()),
            },
            &cached,
            &key,
            cached.status.as_ref().unwrap(),
        )
        .await
        .unwrap();
    assert!(!wrote, "an unchanged report was written after a restart");
    assert_eq!(api.get(&name).await.unwrap().resource_version(), version);

    // 4. The finding resolved (the contract now says a service, which a Deployment is): the
    // report follows with the verdict as its one result.
    let patch = serde_json::json!({"spec": {"contractRef": {"inline": contract("service")}}});
    pactos
        .patch(
            "batch",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let (_, status) = wait_status(&pactos, "batch", ContractStatus::Compliant).await;
    assert!(status.findings.is_empty(), "{:?}", status.findings);
    let (object, report) =
        wait_report(&api, &name, "the report updated", |r| r.summary.fail == 0).await;
    assert_eq!(
        outcomes(&report),
        [(VERDICT_RULE.to_owned(), "pass".to_owned())]
    );
    assert_eq!(report.summary.pass, 1);
    assert_ne!(object.resource_version(), version);
    assert_eq!(h.ctx.policy_report_writes(), writes + 1);

    // 5. The Pacto deleted: the garbage collector removes its report (owner reference).
    pactos
        .delete("batch", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the report collected", Duration::from_mins(1), || async {
        match api.get_opt(&name).await {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err("still there".to_owned()),
            Err(e) => Err(format!("GET failed: {e}")),
        }
    })
    .await;
}

#[tokio::test]
async fn without_the_flag_no_report_is_written() {
    let Some(crd) = upstream_crd() else { return };
    reporting_cluster(crd).await;
    let h = start(true).await;
    let pactos: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    pactos
        .create(&PostParams::default(), &pacto("orders", VALID, None))
        .await
        .unwrap();
    wait_status(&pactos, "orders", ContractStatus::Reference).await;
    // The pass that wrote the status has finished (a report would have been written in it).
    eventually(
        "the first pass finished",
        Duration::from_secs(20),
        || async { (h.ctx.reconciles() >= 1).then_some(()) },
    )
    .await;
    let list = reports(&h.client, &h.namespace)
        .list(&kube::api::ListParams::default())
        .await
        .unwrap();
    assert!(list.items.is_empty(), "{:?}", list.items);
    assert_eq!(h.ctx.policy_report_writes(), 0);
}
