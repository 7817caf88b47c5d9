//! Interfaces (docs/design/observation.md#interfaces): Ready endpoints behind the bound Service port.
//!
//! A slice port matches the Service port by **name**, or — when the Service port is unnamed — by
//! the resolved `targetPort` (a number, defaulting to the Service port number; an unnamed port
//! whose `targetPort` is a container-port name matches the slice's unnamed port). The Service
//! port *number* is never compared with a slice port.

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use pacto_engine::{InterfaceValue, Value};

use crate::verdict::{Fetched, Verdict};

/// The Service port a binding names: by number for an int, by name for a string.
pub fn find_service_port<'a>(service: &'a Service, port: &IntOrString) -> Option<&'a ServicePort> {
    let ports = service.spec.as_ref()?.ports.as_deref()?;
    ports.iter().find(|p| match port {
        IntOrString::Int(n) => p.port == *n,
        IntOrString::String(name) => p.name.as_deref() == Some(name.as_str()),
    })
}

/// Whether the Service has no endpoints of its own to count: `ExternalName`, or no selector.
pub fn is_external_or_selectorless(service: &Service) -> bool {
    let Some(spec) = service.spec.as_ref() else {
        return true;
    };
    spec.type_.as_deref() == Some("ExternalName")
        || spec
            .selector
            .as_ref()
            .is_none_or(std::collections::BTreeMap::is_empty)
}

fn slice_carries_port(slice: &EndpointSlice, port: &ServicePort) -> bool {
    let Some(ports) = slice.ports.as_deref() else {
        return false;
    };
    let service_name = port.name.as_deref().unwrap_or_default();
    if !service_name.is_empty() {
        return ports
            .iter()
            .any(|p| p.name.as_deref().unwrap_or_default() == service_name);
    }
    match port.target_port.as_ref() {
        None => ports.iter().any(|p| p.port == Some(port.port)),
        Some(IntOrString::Int(target)) => ports.iter().any(|p| p.port == Some(*target)),
        Some(IntOrString::String(_)) => ports
            .iter()
            .any(|p| p.name.as_deref().unwrap_or_default().is_empty()),
    }
}

fn ready_in(slice: &EndpointSlice) -> u32 {
    slice
        .endpoints
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .count() as u32
}

/// Ready endpoints in the slices that carry `port`.
pub fn ready_endpoints_for_port(port: &ServicePort, slices: &[EndpointSlice]) -> u32 {
    slices
        .iter()
        .filter(|s| slice_carries_port(s, port))
        .map(ready_in)
        .sum()
}

/// Ready endpoints over all slices and ports (dependencies).
pub fn ready_endpoints(slices: &[EndpointSlice]) -> u32 {
    slices.iter().map(ready_in).sum()
}

/// Inputs of one interface assertion.
#[derive(Debug, Clone, Copy)]
pub struct InterfaceInput<'a> {
    /// The contract interface name.
    pub name: &'a str,
    /// The contract interface type (`http`, `grpc`, `event`), reported in the payload.
    pub interface_type: &'a str,
    /// The bound Service port, if the interface has a binding.
    pub binding: Option<&'a IntOrString>,
    /// `--interface-name-match-discovery`.
    pub name_match_discovery: bool,
}

/// The interface assertion (always required):
///
/// - no binding: with name-match discovery, a Service port named like the interface with ≥1
///   Ready endpoint → Observed(present), never negative; otherwise `Unsupported`;
/// - Service: API error → `Failed`; NotFound → no observation; ExternalName, selector-less, or
///   the bound port missing → `Insufficient`;
/// - EndpointSlices: list error → `Failed`; 0 Ready → a windowed negative; >0 → positive.
pub fn interface_verdict(
    input: InterfaceInput<'_>,
    service: &Fetched<Service>,
    slices: &Fetched<Vec<EndpointSlice>>,
) -> Verdict {
    let value = |present| {
        Value::Interface(InterfaceValue {
            interface_type: input.interface_type.to_owned(),
            present,
        })
    };
    let Some(binding) = input.binding else {
        if !input.name_match_discovery {
            return Verdict::unsupported();
        }
        let port = IntOrString::String(input.name.to_owned());
        if let (Ok(Some(service)), Ok(Some(slices))) = (service, slices)
            && let Some(port) = find_service_port(service, &port)
            && ready_endpoints_for_port(port, slices) > 0
        {
            return Verdict::observed(value(true));
        }
        return Verdict::unsupported();
    };
    let service = match service {
        Err(_) => return Verdict::failed(),
        Ok(None) => return Verdict::Skip,
        Ok(Some(s)) => s,
    };
    if is_external_or_selectorless(service) {
        return Verdict::insufficient();
    }
    let Some(port) = find_service_port(service, binding) else {
        return Verdict::insufficient();
    };
    let slices = match slices {
        Err(_) => return Verdict::failed(),
        Ok(None) => &[][..],
        Ok(Some(s)) => s.as_slice(),
    };
    if ready_endpoints_for_port(port, slices) == 0 {
        Verdict::Negative(value(false))
    } else {
        Verdict::Clear(pacto_engine::Outcome::Observed(value(true)))
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
    use k8s_openapi::api::discovery::v1::{
        Endpoint, EndpointConditions, EndpointPort, EndpointSlice,
    };
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    pub fn port(name: Option<&str>, port: i32, target: Option<IntOrString>) -> ServicePort {
        ServicePort {
            name: name.map(str::to_owned),
            port,
            target_port: target,
            ..ServicePort::default()
        }
    }

    pub fn service(ports: Vec<ServicePort>) -> Service {
        Service {
            spec: Some(ServiceSpec {
                selector: Some(BTreeMap::from([("app".to_owned(), "x".to_owned())])),
                ports: Some(ports),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    /// A slice of `ready.len()` endpoints (10.0.0.0, 10.0.0.1, …) with those Ready conditions.
    pub fn slice(ports: &[(Option<&str>, i32)], ready: &[Option<bool>]) -> EndpointSlice {
        slice_with(
            ports,
            ready
                .iter()
                .enumerate()
                .map(|(i, r)| Endpoint {
                    addresses: vec![format!("10.0.0.{i}")],
                    conditions: Some(EndpointConditions {
                        ready: *r,
                        ..EndpointConditions::default()
                    }),
                    ..Endpoint::default()
                })
                .collect(),
        )
    }

    /// A slice of `endpoints` carrying `ports`.
    pub fn slice_with(ports: &[(Option<&str>, i32)], endpoints: Vec<Endpoint>) -> EndpointSlice {
        EndpointSlice {
            address_type: "IPv4".into(),
            endpoints: Some(endpoints),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p)| EndpointPort {
                        name: n.map(str::to_owned),
                        port: Some(*p),
                        ..EndpointPort::default()
                    })
                    .collect(),
            ),
            ..EndpointSlice::default()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::type_complexity,
        reason = "table-driven tests: each row is a tuple of inputs and the expected verdict"
    )]

    use k8s_openapi::api::core::v1::ServiceSpec;
    use pacto_engine::Outcome;

    use super::fixtures::*;
    use super::*;

    fn err<T>() -> Fetched<T> {
        Err(ApiFailure::new("boom"))
    }
    use crate::verdict::ApiFailure;

    #[test]
    fn port_matching_table() {
        let cases: Vec<(&str, ServicePort, Vec<EndpointSlice>, u32)> = vec![
            (
                "named port matches by name even when numbers differ",
                port(Some("http"), 80, Some(IntOrString::Int(8080))),
                vec![slice(
                    &[(Some("http"), 8080)],
                    &[Some(true), Some(true), Some(false)],
                )],
                2,
            ),
            (
                "named port ignores slices of another port",
                port(Some("http"), 80, None),
                vec![slice(&[(Some("admin"), 80)], &[Some(true)])],
                0,
            ),
            (
                "unnamed port matches the numeric targetPort, never the service port",
                port(None, 80, Some(IntOrString::Int(8080))),
                vec![
                    slice(&[(None, 8080)], &[Some(true)]),
                    slice(&[(None, 80)], &[Some(true)]),
                ],
                1,
            ),
            (
                "unnamed port without targetPort uses the port number",
                port(None, 9000, None),
                vec![slice(&[(None, 9000)], &[Some(true), None])],
                1,
            ),
            (
                "unnamed port with a named targetPort matches the unnamed slice port",
                port(None, 80, Some(IntOrString::String("web".into()))),
                vec![slice(&[(None, 3000)], &[Some(true)])],
                1,
            ),
            (
                "ready unset is not ready",
                port(Some("http"), 80, None),
                vec![slice(&[(Some("http"), 80)], &[None, Some(false)])],
                0,
            ),
        ];
        for (name, port, slices, want) in cases {
            assert_eq!(ready_endpoints_for_port(&port, &slices), want, "{name}");
        }
    }

    fn bound(b: &IntOrString) -> InterfaceInput<'_> {
        InterfaceInput {
            name: "api",
            interface_type: "http",
            binding: Some(b),
            name_match_discovery: false,
        }
    }

    #[test]
    fn interface_table() {
        let svc = service(vec![port(Some("http"), 80, Some(IntOrString::Int(8080)))]);
        let ready = vec![slice(&[(Some("http"), 8080)], &[Some(true)])];
        let unready = vec![slice(&[(Some("http"), 8080)], &[Some(false)])];
        let external = Service {
            spec: Some(ServiceSpec {
                type_: Some("ExternalName".into()),
                external_name: Some("db.example.com".into()),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        let mut selectorless = svc.clone();
        if let Some(spec) = selectorless.spec.as_mut() {
            spec.selector = None;
        }
        let by_name = IntOrString::String("http".into());
        let by_number = IntOrString::Int(80);
        let missing_port = IntOrString::Int(81);
        let present = |p| {
            Value::Interface(InterfaceValue {
                interface_type: "http".into(),
                present: p,
            })
        };
        let by_name = &by_name;
        let by_number = &by_number;
        let missing_port = &missing_port;
        let cases: Vec<(
            &str,
            InterfaceInput<'_>,
            Fetched<Service>,
            Fetched<Vec<EndpointSlice>>,
            Verdict,
        )> = vec![
            (
                "no binding",
                InterfaceInput {
                    binding: None,
                    ..bound(by_name)
                },
                Ok(Some(svc.clone())),
                Ok(Some(ready.clone())),
                Verdict::unsupported(),
            ),
            (
                "name-match discovery present",
                InterfaceInput {
                    name: "http",
                    binding: None,
                    name_match_discovery: true,
                    ..bound(by_name)
                },
                Ok(Some(svc.clone())),
                Ok(Some(ready.clone())),
                Verdict::observed(present(true)),
            ),
            (
                "name-match discovery never negative",
                InterfaceInput {
                    name: "http",
                    binding: None,
                    name_match_discovery: true,
                    ..bound(by_name)
                },
                Ok(Some(svc.clone())),
                Ok(Some(unready.clone())),
                Verdict::unsupported(),
            ),
            (
                "service api error",
                bound(by_name),
                err(),
                Ok(Some(ready.clone())),
                Verdict::failed(),
            ),
            (
                "service not found",
                bound(by_name),
                Ok(None),
                Ok(None),
                Verdict::Skip,
            ),
            (
                "external name",
                bound(by_name),
                Ok(Some(external)),
                Ok(Some(ready.clone())),
                Verdict::insufficient(),
            ),
            (
                "selector-less",
                bound(by_name),
                Ok(Some(selectorless)),
                Ok(Some(ready.clone())),
                Verdict::insufficient(),
            ),
            (
                "bound port missing",
                bound(missing_port),
                Ok(Some(svc.clone())),
                Ok(Some(ready.clone())),
                Verdict::insufficient(),
            ),
            (
                "slices api error",
                bound(by_name),
                Ok(Some(svc.clone())),
                err(),
                Verdict::failed(),
            ),
            (
                "ready by name",
                bound(by_name),
                Ok(Some(svc.clone())),
                Ok(Some(ready.clone())),
                Verdict::Clear(Outcome::Observed(present(true))),
            ),
            (
                "ready by number, port != targetPort",
                bound(by_number),
                Ok(Some(svc.clone())),
                Ok(Some(ready)),
                Verdict::Clear(Outcome::Observed(present(true))),
            ),
            (
                "zero ready is negative",
                bound(by_name),
                Ok(Some(svc.clone())),
                Ok(Some(unready)),
                Verdict::Negative(present(false)),
            ),
            (
                "no slices is negative",
                bound(by_name),
                Ok(Some(svc)),
                Ok(Some(vec![])),
                Verdict::Negative(present(false)),
            ),
        ];
        for (name, input, service, slices, want) in cases {
            assert_eq!(interface_verdict(input, &service, &slices), want, "{name}");
        }
    }
}
