//! The health capability (docs/design/observation.md#health): binding checks, the active probe (Tier A, only with
//! `--enable-probing`) and the passive fallback from the pod template (Tier B).

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use pacto_api::InterfaceBinding;
use pacto_contract::model::Binding;
use pacto_engine::{CapabilityValue, Outcome, Value};

use crate::interfaces::{find_service_port, is_external_or_selectorless, ready_endpoints_for_port};
use crate::probe::ProbeResult;
use crate::verdict::{Fetched, Verdict};
use crate::workload::WorkloadObject;

/// The bound Service port of a capability and its declared path.
#[derive(Debug, Clone, PartialEq)]
pub struct CapabilityTarget {
    /// The Service port the owning interface is bound to.
    pub port: ServicePort,
    /// The capability's declared `binding.path`.
    pub path: Option<String>,
}

/// Resolves the Service port a capability is served on, or the verdict when it cannot be:
/// no binding, a non-HTTP binding, an owning interface without an interfaceBinding, or a bound
/// port missing from the Service → `Unsupported`; Service API error → `Failed`; Service
/// NotFound → `Unsupported`.
pub fn capability_target(
    binding: Option<&Binding>,
    interface_bindings: &[InterfaceBinding],
    service: &Fetched<Service>,
) -> Result<CapabilityTarget, Verdict> {
    let binding = binding.ok_or_else(Verdict::unsupported)?;
    if binding.kind != "http" {
        return Err(Verdict::unsupported());
    }
    let interface_binding = interface_bindings
        .iter()
        .find(|b| b.interface == binding.interface)
        .ok_or_else(Verdict::unsupported)?;
    let service = match service {
        Err(_) => return Err(Verdict::failed()),
        Ok(None) => return Err(Verdict::unsupported()),
        Ok(Some(s)) => s,
    };
    let port = find_service_port(service, &interface_binding.service_port)
        .ok_or_else(Verdict::unsupported)?;
    Ok(CapabilityTarget {
        port: port.clone(),
        path: binding.path.clone().filter(|p| !p.is_empty()),
    })
}

/// Why the active probe must not be sent to this Service, if it must not
/// (docs/design/observation.md#probe-safety): an `ExternalName` Service's DNS name points outside
/// the cluster, and a selector-less Service's endpoints are written by hand, so either could
/// reach any address (another namespace, a metadata service).
pub fn probe_refusal(service: &Service) -> Option<&'static str> {
    is_external_or_selectorless(service).then(|| {
        if service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
            "ExternalName Service"
        } else {
            "selector-less Service (hand-made endpoints)"
        }
    })
}

/// Tier A: 2xx/3xx → positive; 404 → a windowed negative; any other status → `Insufficient`;
/// a transport error → `None` (fall back to Tier B).
pub fn active_verdict(result: &ProbeResult) -> Option<Verdict> {
    match result {
        ProbeResult::Status(code) if (200..400).contains(code) => Some(Verdict::Clear(
            Outcome::Observed(Value::Capability(CapabilityValue { present: true })),
        )),
        ProbeResult::Status(404) => Some(Verdict::Negative(Value::Capability(CapabilityValue {
            present: false,
        }))),
        ProbeResult::Status(_) => Some(Verdict::insufficient()),
        ProbeResult::Transport(_) => None,
    }
}

fn with_leading_slash(path: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    }
}

/// Whether the pod template has a container exposing the Service port's target with an
/// `httpGet` readiness probe (whose path equals `path` when one is declared).
pub fn has_readiness_probe(
    port: &ServicePort,
    workload: &WorkloadObject,
    path: Option<&str>,
) -> bool {
    let Some(spec) = workload.template.as_ref().and_then(|t| t.spec.as_ref()) else {
        return false;
    };
    let target = port
        .target_port
        .clone()
        .unwrap_or(IntOrString::Int(port.port));
    spec.containers.iter().any(|container| {
        let exposes =
            container
                .ports
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|p| match &target {
                    IntOrString::Int(n) => p.container_port == *n,
                    IntOrString::String(name) => p.name.as_deref() == Some(name.as_str()),
                });
        let Some(http) = container
            .readiness_probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
        else {
            return false;
        };
        let path_ok = path.is_none_or(|want| {
            http.path
                .as_deref()
                .is_some_and(|got| with_leading_slash(got) == with_leading_slash(want))
        });
        exposes && path_ok
    })
}

/// Tier B, which never contradicts: an httpGet readiness probe on the bound port and a Ready
/// endpoint → positive; anything else → `Insufficient` (`Failed` when the EndpointSlice list
/// itself failed).
pub fn passive_verdict(
    target: &CapabilityTarget,
    workload: &Fetched<WorkloadObject>,
    slices: &Fetched<Vec<EndpointSlice>>,
) -> Verdict {
    let Ok(Some(workload)) = workload else {
        return Verdict::insufficient();
    };
    if !has_readiness_probe(&target.port, workload, target.path.as_deref()) {
        return Verdict::insufficient();
    }
    let ready = match slices {
        Err(_) => return Verdict::failed(),
        Ok(None) => 0,
        Ok(Some(s)) => ready_endpoints_for_port(&target.port, s),
    };
    if ready > 0 {
        Verdict::Clear(Outcome::Observed(Value::Capability(CapabilityValue {
            present: true,
        })))
    } else {
        Verdict::insufficient()
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::type_complexity,
        reason = "table-driven tests: each row is a tuple of inputs and the expected verdict"
    )]

    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, ExecAction, HTTPGetAction, PodSpec, PodTemplateSpec, Probe,
    };

    use super::*;
    use crate::interfaces::fixtures::{port, service, slice};
    use crate::verdict::ApiFailure;

    fn http_binding(path: Option<&str>) -> Binding {
        Binding {
            kind: "http".into(),
            interface: "api".into(),
            path: path.map(str::to_owned),
        }
    }

    fn bindings() -> Vec<InterfaceBinding> {
        vec![InterfaceBinding {
            interface: "api".into(),
            service_port: IntOrString::String("http".into()),
        }]
    }

    fn workload(container_port: ContainerPort, probe: Option<Probe>) -> WorkloadObject {
        WorkloadObject {
            kind: "Deployment".into(),
            template: Some(PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        ports: Some(vec![container_port]),
                        readiness_probe: probe,
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            }),
            ..WorkloadObject::default()
        }
    }

    fn cport(name: Option<&str>, n: i32) -> ContainerPort {
        ContainerPort {
            name: name.map(str::to_owned),
            container_port: n,
            ..ContainerPort::default()
        }
    }

    fn http_probe(path: &str) -> Probe {
        Probe {
            http_get: Some(HTTPGetAction {
                path: Some(path.into()),
                port: IntOrString::Int(8080),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        }
    }

    #[test]
    fn capability_target_table() {
        let svc = Ok(Some(service(vec![port(
            Some("http"),
            80,
            Some(IntOrString::Int(8080)),
        )])));
        let grpc = Binding {
            kind: "grpc".into(),
            ..http_binding(None)
        };
        let other_interface = Binding {
            interface: "admin".into(),
            ..http_binding(None)
        };
        let cases: Vec<(
            &str,
            Option<Binding>,
            Fetched<Service>,
            Result<i32, Verdict>,
        )> = vec![
            ("no binding", None, svc.clone(), Err(Verdict::unsupported())),
            (
                "grpc binding",
                Some(grpc),
                svc.clone(),
                Err(Verdict::unsupported()),
            ),
            (
                "interface unbound",
                Some(other_interface),
                svc.clone(),
                Err(Verdict::unsupported()),
            ),
            (
                "service api error",
                Some(http_binding(None)),
                Err(ApiFailure::new("x")),
                Err(Verdict::failed()),
            ),
            (
                "service not found",
                Some(http_binding(None)),
                Ok(None),
                Err(Verdict::unsupported()),
            ),
            (
                "port missing",
                Some(http_binding(None)),
                Ok(Some(service(vec![port(Some("grpc"), 90, None)]))),
                Err(Verdict::unsupported()),
            ),
            (
                "resolved",
                Some(http_binding(Some("/healthz"))),
                svc,
                Ok(80),
            ),
        ];
        for (name, binding, service, want) in cases {
            let got =
                capability_target(binding.as_ref(), &bindings(), &service).map(|t| t.port.port);
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn active_table() {
        let present = Verdict::Clear(Outcome::Observed(Value::Capability(CapabilityValue {
            present: true,
        })));
        let cases = [
            (ProbeResult::Status(200), Some(present.clone())),
            (ProbeResult::Status(204), Some(present.clone())),
            (ProbeResult::Status(302), Some(present)),
            (
                ProbeResult::Status(404),
                Some(Verdict::Negative(Value::Capability(CapabilityValue {
                    present: false,
                }))),
            ),
            (ProbeResult::Status(500), Some(Verdict::insufficient())),
            (ProbeResult::Status(405), Some(Verdict::insufficient())),
            (ProbeResult::Status(401), Some(Verdict::insufficient())),
            (ProbeResult::Transport("refused".into()), None),
        ];
        for (result, want) in cases {
            assert_eq!(active_verdict(&result), want, "{result:?}");
        }
    }

    #[test]
    fn passive_table() {
        let target = |path: Option<&str>| CapabilityTarget {
            port: port(Some("http"), 80, Some(IntOrString::Int(8080))),
            path: path.map(str::to_owned),
        };
        let named_target = CapabilityTarget {
            port: port(Some("http"), 80, Some(IntOrString::String("web".into()))),
            path: None,
        };
        let ready = Ok(Some(vec![slice(&[(Some("http"), 8080)], &[Some(true)])]));
        let unready = Ok(Some(vec![slice(&[(Some("http"), 8080)], &[Some(false)])]));
        let good = Ok(Some(workload(
            cport(None, 8080),
            Some(http_probe("/healthz")),
        )));
        let exec = Ok(Some(workload(
            cport(None, 8080),
            Some(Probe {
                exec: Some(ExecAction {
                    command: Some(vec!["true".into()]),
                }),
                ..Probe::default()
            }),
        )));
        let no_probe = Ok(Some(workload(cport(None, 8080), None)));
        let other_port = Ok(Some(workload(
            cport(None, 9090),
            Some(http_probe("/healthz")),
        )));
        let by_name = Ok(Some(workload(
            cport(Some("web"), 3000),
            Some(http_probe("healthz")),
        )));
        let present = Verdict::Clear(Outcome::Observed(Value::Capability(CapabilityValue {
            present: true,
        })));
        let cases: Vec<(
            &str,
            CapabilityTarget,
            Fetched<WorkloadObject>,
            Fetched<Vec<EndpointSlice>>,
            Verdict,
        )> = vec![
            (
                "probe and ready",
                target(None),
                good.clone(),
                ready.clone(),
                present.clone(),
            ),
            (
                "path equal",
                target(Some("/healthz")),
                good.clone(),
                ready.clone(),
                present.clone(),
            ),
            (
                "path without slash equal",
                target(Some("healthz")),
                good.clone(),
                ready.clone(),
                present.clone(),
            ),
            (
                "path differs",
                target(Some("/live")),
                good.clone(),
                ready.clone(),
                Verdict::insufficient(),
            ),
            (
                "no ready endpoint is insufficient, never failed",
                target(None),
                good.clone(),
                unready,
                Verdict::insufficient(),
            ),
            (
                "exec probe",
                target(None),
                exec,
                ready.clone(),
                Verdict::insufficient(),
            ),
            (
                "no probe",
                target(None),
                no_probe,
                ready.clone(),
                Verdict::insufficient(),
            ),
            (
                "probe on another port",
                target(None),
                other_port,
                ready.clone(),
                Verdict::insufficient(),
            ),
            (
                "named targetPort",
                named_target,
                by_name,
                ready.clone(),
                present,
            ),
            (
                "workload missing",
                target(None),
                Ok(None),
                ready.clone(),
                Verdict::insufficient(),
            ),
            (
                "workload api error",
                target(None),
                Err(ApiFailure::new("x")),
                ready,
                Verdict::insufficient(),
            ),
            (
                "slices api error",
                target(None),
                good,
                Err(ApiFailure::new("x")),
                Verdict::failed(),
            ),
        ];
        for (name, target, workload, slices, want) in cases {
            assert_eq!(passive_verdict(&target, &workload, &slices), want, "{name}");
        }
    }

    #[test]
    fn probes_are_refused_for_external_and_selectorless_services() {
        let bound = port(Some("http"), 80, None);
        let mut selected = service(vec![bound]);
        if let Some(spec) = selected.spec.as_mut() {
            spec.selector = Some([("app".to_owned(), "x".to_owned())].into());
        }
        assert_eq!(
            probe_refusal(&selected),
            None,
            "a selector Service is probed"
        );
        let mut external = selected.clone();
        if let Some(spec) = external.spec.as_mut() {
            spec.type_ = Some("ExternalName".into());
            spec.external_name = Some("metadata.google.internal".into());
        }
        assert_eq!(probe_refusal(&external), Some("ExternalName Service"));
        let mut hand_made = selected.clone();
        if let Some(spec) = hand_made.spec.as_mut() {
            spec.selector = None;
        }
        assert!(probe_refusal(&hand_made).is_some(), "selector-less");
    }
}
