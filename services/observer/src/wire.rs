//! The wire boundary of Observe: the request into domain types (bad input names the proto
//! field), and the output back onto the wire.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use pacto_api::{
    ConfigBinding, ConfigBindingKind, ConfigFormat, InterfaceBinding, TargetRef, WorkloadKind,
    WorkloadRef,
};
use pacto_contract::model::Contract;
use pacto_proto::convert::{self, FieldError};
use pacto_proto::observer as pb;
use pacto_runtime::memo::ParseMemo;

use crate::observe::{ObserveInput, ObserveOutput, ResourceExistence};
use crate::target::Target;
use crate::window::{Window, WindowKey, WindowKind};

fn required(field: &str) -> FieldError {
    FieldError::new(field, "required")
}

fn workload_kind(value: &str, field: &str) -> Result<Option<WorkloadKind>, FieldError> {
    Ok(Some(match value {
        "" => return Ok(None),
        "Deployment" => WorkloadKind::Deployment,
        "StatefulSet" => WorkloadKind::StatefulSet,
        "ReplicaSet" => WorkloadKind::ReplicaSet,
        "Job" => WorkloadKind::Job,
        "CronJob" => WorkloadKind::CronJob,
        other => {
            return Err(FieldError::new(
                field,
                format!(
                    "unknown workload kind {other:?} (Deployment, StatefulSet, ReplicaSet, Job, CronJob)"
                ),
            ));
        }
    }))
}

/// The wire target as a domain [`Target`].
pub fn target_from_proto(target: Option<&pb::Target>, field: &str) -> Result<Target, FieldError> {
    let target = target.ok_or_else(|| required(field))?;
    if target.namespace.is_empty() {
        return Err(required(&format!("{field}.namespace")));
    }
    if target.pacto_name.is_empty() {
        return Err(required(&format!("{field}.pacto_name")));
    }
    let workload_ref = match &target.workload_ref {
        None => None,
        Some(w) => {
            if w.name.is_empty() {
                return Err(required(&format!("{field}.workload_ref.name")));
            }
            Some(WorkloadRef {
                name: w.name.clone(),
                kind: workload_kind(&w.kind, &format!("{field}.workload_ref.kind"))?,
            })
        }
    };
    let interface_bindings = target
        .interface_bindings
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let at = format!("{field}.interface_bindings[{i}]");
            if b.interface.is_empty() {
                return Err(required(&format!("{at}.interface")));
            }
            let service_port = match &b.service_port {
                Some(pb::interface_binding::ServicePort::PortName(name)) if !name.is_empty() => {
                    IntOrString::String(name.clone())
                }
                Some(pb::interface_binding::ServicePort::PortNumber(n))
                    if (1..=65535).contains(n) =>
                {
                    IntOrString::Int(*n)
                }
                Some(pb::interface_binding::ServicePort::PortNumber(n)) => {
                    return Err(FieldError::new(
                        format!("{at}.port_number"),
                        format!("{n} is outside 1..65535"),
                    ));
                }
                _ => return Err(required(&format!("{at}.service_port"))),
            };
            Ok(InterfaceBinding {
                interface: b.interface.clone(),
                service_port,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let config_bindings = target
        .config_bindings
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let at = format!("{field}.config_bindings[{i}]");
            if b.configuration.is_empty() {
                return Err(required(&format!("{at}.configuration")));
            }
            if b.name.is_empty() {
                return Err(required(&format!("{at}.name")));
            }
            let kind = match b.kind.as_str() {
                "ConfigMap" => ConfigBindingKind::ConfigMap,
                "Secret" => ConfigBindingKind::Secret,
                other => {
                    return Err(FieldError::new(
                        format!("{at}.kind"),
                        format!("unknown kind {other:?} (ConfigMap or Secret)"),
                    ));
                }
            };
            let format = match b.format.as_str() {
                "" => None,
                "yaml" => Some(ConfigFormat::Yaml),
                "json" => Some(ConfigFormat::Json),
                other => {
                    return Err(FieldError::new(
                        format!("{at}.format"),
                        format!("unknown format {other:?} (yaml or json)"),
                    ));
                }
            };
            Ok(ConfigBinding {
                configuration: b.configuration.clone(),
                kind,
                name: b.name.clone(),
                key: Some(b.key.clone()).filter(|k| !k.is_empty()),
                format,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Target {
        namespace: target.namespace.clone(),
        pacto_name: target.pacto_name.clone(),
        spec: TargetRef {
            service_name: Some(target.service_name.clone()).filter(|s| !s.is_empty()),
            workload_ref,
            interface_bindings,
            config_bindings,
        },
    })
}

/// Persisted windows from the wire.
pub fn windows_from_proto(
    windows: &[pb::ObservationWindow],
    field: &str,
) -> Result<Vec<Window>, FieldError> {
    windows
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let at = format!("{field}[{i}]");
            let kind = WindowKind::parse(&w.kind).ok_or_else(|| {
                FieldError::new(
                    format!("{at}.kind"),
                    format!(
                        "unknown kind {:?} (interface, dependency, configuration, capability)",
                        w.kind
                    ),
                )
            })?;
            if w.subject.is_empty() {
                return Err(required(&format!("{at}.subject")));
            }
            let first = w
                .first_observed_negative_at
                .as_ref()
                .ok_or_else(|| required(&format!("{at}.first_observed_negative_at")))?;
            Ok(Window {
                key: WindowKey::new(kind, w.subject.clone()),
                first_observed_negative_at: convert::timestamp_from_proto(
                    first,
                    &format!("{at}.first_observed_negative_at"),
                )?,
            })
        })
        .collect()
}

fn duration_from_proto(
    value: &pacto_proto::prost_types::Duration,
    field: &str,
) -> Result<Duration, FieldError> {
    let seconds = u64::try_from(value.seconds)
        .map_err(|_| FieldError::new(field, format!("{}s is negative", value.seconds)))?;
    let nanos = u32::try_from(value.nanos)
        .ok()
        .filter(|n| *n < 1_000_000_000)
        .ok_or_else(|| {
            FieldError::new(
                format!("{field}.nanos"),
                format!("{} is outside 0..999999999", value.nanos),
            )
        })?;
    Ok(Duration::new(seconds, nanos))
}

/// An Observe request in domain types.
/// The contract comes from `contracts` when the same document was parsed before
/// (docs/design/crates.md#parse-memo).
pub fn observe_input_from_proto(
    request: &pb::ObserveRequest,
    contracts: &ParseMemo<Contract>,
) -> Result<ObserveInput, FieldError> {
    let target = target_from_proto(request.target.as_ref(), "target")?;
    let contract = contracts.get_or_parse_optional(
        request
            .contract
            .as_ref()
            .map(|document| document.yaml.as_slice()),
        || convert::contract_from_proto(request.contract.as_ref(), "contract"),
    )?;
    let windows = windows_from_proto(&request.windows, "windows")?;
    let stabilization_window = request
        .stabilization_window
        .as_ref()
        .map(|d| duration_from_proto(d, "stabilization_window"))
        .transpose()?;
    Ok(ObserveInput {
        target,
        contract,
        schemas: request
            .configuration_schemas
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
        contract_ref: request.contract_ref.clone(),
        windows,
        stabilization_window,
    })
}

fn existence(value: &ResourceExistence) -> pb::ResourceExistence {
    pb::ResourceExistence {
        name: value.name.clone(),
        kind: value.kind.clone(),
        exists: value.exists,
    }
}

/// The Observe response on the wire.
pub fn observe_output_to_proto(output: &ObserveOutput) -> pb::ObserveResponse {
    let snapshot = &output.snapshot;
    pb::ObserveResponse {
        evidence: Some(convert::evidence_to_proto(&output.evidence)),
        windows: output
            .windows
            .iter()
            .map(|w| pb::ObservationWindow {
                kind: w.key.kind.as_str().to_owned(),
                subject: w.key.subject.clone(),
                first_observed_negative_at: Some(convert::timestamp_to_proto(
                    &w.first_observed_negative_at,
                )),
            })
            .collect(),
        api_errors: output.api_errors.clone(),
        window_due_at: output
            .window_due_at
            .as_ref()
            .map(convert::timestamp_to_proto),
        undeclared_peers: output
            .undeclared_peers
            .as_ref()
            .map(|peers| pb::UndeclaredPeers {
                peers: peers
                    .iter()
                    .map(|p| pb::UndeclaredPeer {
                        kind: p.kind.as_str().to_owned(),
                        name: p.name.clone(),
                        ports: p.ports.iter().copied().collect(),
                    })
                    .collect(),
            }),
        snapshot: Some(pb::RuntimeSnapshot {
            service: snapshot.service.as_ref().map(existence),
            workload: snapshot.workload.as_ref().map(existence),
            observed_runtime: snapshot
                .observed_runtime
                .as_ref()
                .map(|r| pb::ObservedRuntime {
                    workload_kind: r.workload_kind.clone(),
                    deployment_strategy: r.deployment_strategy.clone().unwrap_or_default(),
                    pod_management_policy: r.pod_management_policy.clone().unwrap_or_default(),
                    termination_grace_period_seconds: r.termination_grace_period_seconds,
                    container_images: r.container_images.clone(),
                    has_pvc: r.has_pvc,
                    has_empty_dir: r.has_empty_dir,
                    health_probe_initial_delay_seconds: r.health_probe_initial_delay_seconds,
                }),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> pb::Target {
        pb::Target {
            namespace: "team".into(),
            pacto_name: "orders".into(),
            service_name: "orders".into(),
            workload_ref: Some(pb::WorkloadRef {
                name: "orders".into(),
                kind: "StatefulSet".into(),
            }),
            interface_bindings: vec![pb::InterfaceBinding {
                interface: "api".into(),
                service_port: Some(pb::interface_binding::ServicePort::PortNumber(80)),
            }],
            config_bindings: vec![pb::ConfigBinding {
                configuration: "app".into(),
                kind: "ConfigMap".into(),
                name: "app".into(),
                key: "c.yaml".into(),
                format: "yaml".into(),
            }],
        }
    }

    #[test]
    fn valid_target_converts() {
        let t = target_from_proto(Some(&target()), "target").unwrap();
        assert!(t.spec.workload_explicit());
        assert_eq!(
            t.spec.resolved_workload(),
            Some(("orders".into(), WorkloadKind::StatefulSet))
        );
        assert_eq!(
            t.spec.interface_bindings[0].service_port,
            IntOrString::Int(80)
        );
        assert_eq!(t.spec.config_bindings[0].format, Some(ConfigFormat::Yaml));
    }

    #[test]
    fn bad_targets_name_the_field() {
        type Edit = fn(&mut pb::Target);
        let cases: Vec<(Edit, &str)> = vec![
            (|t| t.namespace.clear(), "target.namespace: required"),
            (|t| t.pacto_name.clear(), "target.pacto_name: required"),
            (
                |t| t.workload_ref.as_mut().unwrap().kind = "Pod".into(),
                "target.workload_ref.kind: unknown workload kind \"Pod\"",
            ),
            (
                |t| t.interface_bindings[0].service_port = None,
                "target.interface_bindings[0].service_port: required",
            ),
            (
                |t| {
                    t.interface_bindings[0].service_port =
                        Some(pb::interface_binding::ServicePort::PortNumber(0));
                },
                "target.interface_bindings[0].port_number: 0 is outside",
            ),
            (
                |t| t.config_bindings[0].kind = "Pod".into(),
                "target.config_bindings[0].kind: unknown kind",
            ),
            (
                |t| t.config_bindings[0].format = "toml".into(),
                "target.config_bindings[0].format: unknown format",
            ),
        ];
        for (edit, want) in cases {
            let mut t = target();
            edit(&mut t);
            let error = target_from_proto(Some(&t), "target")
                .unwrap_err()
                .to_string();
            assert!(error.starts_with(want), "{error} vs {want}");
        }
        assert_eq!(
            target_from_proto(None, "target").unwrap_err().to_string(),
            "target: required"
        );
    }

    #[test]
    fn windows_convert_and_reject() {
        let ok = pb::ObservationWindow {
            kind: "interface".into(),
            subject: "api".into(),
            first_observed_negative_at: Some(pacto_proto::prost_types::Timestamp {
                seconds: 1_780_000_000,
                nanos: 0,
            }),
        };
        let w = windows_from_proto(std::slice::from_ref(&ok), "windows").unwrap();
        assert_eq!(w[0].key.to_string(), "interface/api");
        let mut bad = ok.clone();
        bad.kind = "workload".into();
        assert!(
            windows_from_proto(&[bad], "windows")
                .unwrap_err()
                .to_string()
                .starts_with("windows[0].kind")
        );
        let mut bad = ok;
        bad.first_observed_negative_at = None;
        assert_eq!(
            windows_from_proto(&[bad], "windows")
                .unwrap_err()
                .to_string(),
            "windows[0].first_observed_negative_at: required"
        );
    }
}
