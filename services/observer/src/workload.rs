//! Workload and persistence (docs/design/observation.md#workload-and-persistence), and the legacy `observedRuntime` snapshot (docs/design/observation.md#runtimeobserved-and-the-legacy-snapshot).

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use pacto_api::WorkloadKind;
use pacto_engine::{PersistenceValue, Value, WorkloadValue};

use crate::verdict::{Fetched, Verdict};

/// The parts of a workload object the observer reads, whatever its kind.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkloadObject {
    /// The Kubernetes kind (`Deployment`, …).
    pub kind: String,
    /// The pod template (a CronJob's is inside its job template).
    pub template: Option<PodTemplateSpec>,
    /// A StatefulSet with `volumeClaimTemplates`.
    pub has_claim_templates: bool,
    /// Deployment `spec.strategy.type`.
    pub deployment_strategy: Option<String>,
    /// StatefulSet `spec.podManagementPolicy`.
    pub pod_management_policy: Option<String>,
}

impl WorkloadObject {
    /// The observed contract workload type: `Job` → `job`, `CronJob` → `scheduled`, else
    /// `service`.
    pub fn observed_type(&self) -> &'static str {
        match self.kind.as_str() {
            "Job" => "job",
            "CronJob" => "scheduled",
            _ => "service",
        }
    }
}

impl From<Deployment> for WorkloadObject {
    fn from(d: Deployment) -> Self {
        let spec = d.spec;
        Self {
            kind: WorkloadKind::Deployment.as_str().to_owned(),
            template: Some(spec.template),
            has_claim_templates: false,
            deployment_strategy: spec.strategy.and_then(|s| s.type_),
            pod_management_policy: None,
        }
    }
}

impl From<StatefulSet> for WorkloadObject {
    fn from(s: StatefulSet) -> Self {
        let spec = s.spec;
        Self {
            kind: WorkloadKind::StatefulSet.as_str().to_owned(),
            has_claim_templates: spec
                .volume_claim_templates
                .as_ref()
                .is_some_and(|t| !t.is_empty()),
            template: Some(spec.template),
            deployment_strategy: None,
            pod_management_policy: spec.pod_management_policy,
        }
    }
}

impl From<ReplicaSet> for WorkloadObject {
    fn from(r: ReplicaSet) -> Self {
        Self {
            kind: WorkloadKind::ReplicaSet.as_str().to_owned(),
            template: r.spec.template,
            ..Self::default()
        }
    }
}

impl From<Job> for WorkloadObject {
    fn from(j: Job) -> Self {
        Self {
            kind: WorkloadKind::Job.as_str().to_owned(),
            template: j.spec.map(|s| s.template),
            ..Self::default()
        }
    }
}

impl From<CronJob> for WorkloadObject {
    fn from(c: CronJob) -> Self {
        Self {
            kind: WorkloadKind::CronJob.as_str().to_owned(),
            template: c.spec.job_template.spec.map(|s| s.template),
            ..Self::default()
        }
    }
}

/// The workload assertion: API error → `Failed`; NotFound → no observation; a type that
/// differs from the contract is a confirmed `WORKLOAD_MISMATCH` (immediately) only when the
/// workload kind was explicit, else `Insufficient`; a match → Observed.
pub fn workload_verdict(
    declared: &str,
    explicit: bool,
    fetched: &Fetched<WorkloadObject>,
) -> Verdict {
    let workload = match fetched {
        Err(_) => return Verdict::failed(),
        Ok(None) => return Verdict::Skip,
        Ok(Some(w)) => w,
    };
    let observed = workload.observed_type();
    if observed != declared && !explicit {
        return Verdict::insufficient();
    }
    Verdict::observed(Value::Workload(WorkloadValue {
        workload_type: observed.to_owned(),
    }))
}

/// How the pod template stores data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// A PVC volume or StatefulSet volumeClaimTemplates.
    Durable,
    /// Only ephemeral volume types (or none).
    Ephemeral,
    /// Some volume whose durability cannot be told (hostPath, NFS, CSI inline, …).
    Ambiguous,
}

/// Classifies a workload's storage.
pub fn classify_durability(workload: &WorkloadObject) -> Durability {
    if workload.has_claim_templates {
        return Durability::Durable;
    }
    let volumes = workload
        .template
        .as_ref()
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    if volumes.iter().any(|v| v.persistent_volume_claim.is_some()) {
        return Durability::Durable;
    }
    let ephemeral = |v: &k8s_openapi::api::core::v1::Volume| {
        v.empty_dir.is_some()
            || v.projected.is_some()
            || v.config_map.is_some()
            || v.secret.is_some()
            || v.downward_api.is_some()
    };
    if volumes.iter().all(ephemeral) {
        Durability::Ephemeral
    } else {
        Durability::Ambiguous
    }
}

/// The persistence assertion (contract declares `durability: persistent`): durable →
/// Observed(true); ephemeral → Observed(false), a `PERSISTENCE_MISMATCH` immediately;
/// ambiguous → `Insufficient`.
pub fn persistence_verdict(fetched: &Fetched<WorkloadObject>) -> Verdict {
    let workload = match fetched {
        Err(_) => return Verdict::failed(),
        Ok(None) => return Verdict::Skip,
        Ok(Some(w)) => w,
    };
    match classify_durability(workload) {
        Durability::Durable => {
            Verdict::observed(Value::Persistence(PersistenceValue { durable: true }))
        }
        Durability::Ephemeral => {
            Verdict::observed(Value::Persistence(PersistenceValue { durable: false }))
        }
        Durability::Ambiguous => Verdict::insufficient(),
    }
}

/// `status.observedRuntime` facts of an existing workload.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ObservedRuntime {
    /// The workload kind.
    pub workload_kind: String,
    /// Deployment strategy type.
    pub deployment_strategy: Option<String>,
    /// StatefulSet pod management policy.
    pub pod_management_policy: Option<String>,
    /// Pod termination grace period.
    pub termination_grace_period_seconds: Option<i64>,
    /// Container images in container order.
    pub container_images: Vec<String>,
    /// A PVC volume or volumeClaimTemplates.
    pub has_pvc: bool,
    /// An emptyDir volume.
    pub has_empty_dir: bool,
    /// The first container's readiness-probe initial delay, else its liveness-probe delay.
    pub health_probe_initial_delay_seconds: Option<i32>,
}

/// The snapshot of an existing workload.
pub fn observed_runtime(workload: &WorkloadObject) -> ObservedRuntime {
    let spec = workload.template.as_ref().and_then(|t| t.spec.as_ref());
    let volumes = spec.and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let first = containers.first();
    ObservedRuntime {
        workload_kind: workload.kind.clone(),
        deployment_strategy: workload.deployment_strategy.clone(),
        pod_management_policy: workload.pod_management_policy.clone(),
        termination_grace_period_seconds: spec.and_then(|s| s.termination_grace_period_seconds),
        container_images: containers.iter().filter_map(|c| c.image.clone()).collect(),
        has_pvc: workload.has_claim_templates
            || volumes.iter().any(|v| v.persistent_volume_claim.is_some()),
        has_empty_dir: volumes.iter().any(|v| v.empty_dir.is_some()),
        health_probe_initial_delay_seconds: first.and_then(|c| {
            c.readiness_probe
                .as_ref()
                .and_then(|p| p.initial_delay_seconds)
                .or_else(|| {
                    c.liveness_probe
                        .as_ref()
                        .and_then(|p| p.initial_delay_seconds)
                })
        }),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        EmptyDirVolumeSource, HostPathVolumeSource, PersistentVolumeClaimVolumeSource, PodSpec,
        Volume,
    };
    use pacto_engine::Outcome;

    use super::*;
    use crate::verdict::ApiFailure;

    fn with_volumes(kind: &str, volumes: Vec<Volume>) -> WorkloadObject {
        WorkloadObject {
            kind: kind.to_owned(),
            template: Some(PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    volumes: Some(volumes),
                    ..PodSpec::default()
                }),
            }),
            ..WorkloadObject::default()
        }
    }

    fn volume(name: &str) -> Volume {
        Volume {
            name: name.to_owned(),
            ..Volume::default()
        }
    }

    #[test]
    fn workload_table() {
        let deployment = Ok(Some(with_volumes("Deployment", vec![])));
        let job = Ok(Some(with_volumes("Job", vec![])));
        let cron = Ok(Some(with_volumes("CronJob", vec![])));
        let failed: Fetched<WorkloadObject> = Err(ApiFailure::new("boom"));
        let observed = |t: &str| {
            Verdict::observed(Value::Workload(WorkloadValue {
                workload_type: t.to_owned(),
            }))
        };
        let cases: Vec<(&str, &str, bool, &Fetched<WorkloadObject>, Verdict)> = vec![
            ("api error", "service", true, &failed, Verdict::failed()),
            ("not found", "service", true, &Ok(None), Verdict::Skip),
            ("match", "service", false, &deployment, observed("service")),
            ("job match", "job", true, &job, observed("job")),
            (
                "cronjob is scheduled",
                "scheduled",
                false,
                &cron,
                observed("scheduled"),
            ),
            (
                "explicit mismatch",
                "job",
                true,
                &deployment,
                observed("service"),
            ),
            (
                "implicit mismatch",
                "job",
                false,
                &deployment,
                Verdict::insufficient(),
            ),
        ];
        for (name, declared, explicit, fetched, want) in cases {
            assert_eq!(
                workload_verdict(declared, explicit, fetched),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn persistence_table() {
        let pvc = Volume {
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: "data".into(),
                read_only: None,
            }),
            ..volume("data")
        };
        let empty = Volume {
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..volume("tmp")
        };
        let host = Volume {
            host_path: Some(HostPathVolumeSource {
                path: "/data".into(),
                type_: None,
            }),
            ..volume("host")
        };
        let durable = Verdict::observed(Value::Persistence(PersistenceValue { durable: true }));
        let ephemeral = Verdict::observed(Value::Persistence(PersistenceValue { durable: false }));
        let claim_templates = WorkloadObject {
            has_claim_templates: true,
            ..with_volumes("StatefulSet", vec![])
        };
        let cases: Vec<(&str, Fetched<WorkloadObject>, Verdict)> = vec![
            ("api error", Err(ApiFailure::new("x")), Verdict::failed()),
            ("not found", Ok(None), Verdict::Skip),
            (
                "pvc",
                Ok(Some(with_volumes("Deployment", vec![empty.clone(), pvc]))),
                durable.clone(),
            ),
            ("claim templates", Ok(Some(claim_templates)), durable),
            (
                "no volumes",
                Ok(Some(with_volumes("Deployment", vec![]))),
                ephemeral.clone(),
            ),
            (
                "emptyDir only",
                Ok(Some(with_volumes("Deployment", vec![empty.clone()]))),
                ephemeral,
            ),
            (
                "hostPath is ambiguous",
                Ok(Some(with_volumes("Deployment", vec![empty, host]))),
                Verdict::insufficient(),
            ),
        ];
        for (name, fetched, want) in cases {
            assert_eq!(persistence_verdict(&fetched), want, "{name}");
        }
        assert!(matches!(
            persistence_verdict(&Ok(Some(WorkloadObject::default()))),
            Verdict::Report(Outcome::Observed(_))
        ));
    }
}
