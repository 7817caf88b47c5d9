//! The metrics capability (docs/design/observation.md#metrics), only with `--enable-metrics-observation`: the same
//! binding and Service checks as health, discovery (ServiceMonitor, PodMonitor, annotations,
//! a named port, the contract path; first hit wins), then one scrape whose exposition must parse.
//! Never windowed, never negative.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use pacto_contract::model::Binding;
use pacto_engine::{CapabilityValue, Value};
use reqwest::Url;
use serde_json::Value as Json;

use crate::health::{CapabilityTarget, capability_target, probe_refusal};
use crate::k8s::MANAGED_BY_LABEL;
use crate::probe::{Fetch, MAX_BODY_BYTES, Prober, is_scrapable_ip, service_url};
use crate::target::Target;
use crate::verdict::{Fetched, Verdict};
use crate::workload::WorkloadObject;

/// Where to scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScrapeAt {
    /// The Service DNS name at a Service port.
    Service {
        /// Service port number.
        port: i32,
    },
    /// A Ready pod IP at a container port.
    Pod {
        /// Container port number.
        port: i32,
    },
}

/// A discovered scrape target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// `servicemonitor`, `podmonitor`, `annotation`, `named-port` or `probe` (for logs).
    pub method: &'static str,
    /// Where.
    pub at: ScrapeAt,
    /// The path.
    pub path: String,
}

fn labels_subset(selector: Option<&Json>, labels: &BTreeMap<String, String>) -> bool {
    let Some(Json::Object(match_labels)) = selector.and_then(|s| s.get("matchLabels")) else {
        // an empty selector selects everything, but only matchLabels is supported here
        return selector.is_some_and(|s| s.as_object().is_some_and(serde_json::Map::is_empty));
    };
    match_labels.iter().all(|(k, v)| {
        v.as_str()
            .is_some_and(|v| labels.get(k).map(String::as_str) == Some(v))
    })
}

fn path_of(endpoint: &Json) -> String {
    endpoint
        .get("path")
        .and_then(Json::as_str)
        .filter(|p| !p.is_empty())
        .unwrap_or("/metrics")
        .to_owned()
}

/// The container port number of a slice port named `name` (the Service port's resolved target).
fn slice_port_number(slices: &[EndpointSlice], name: &str) -> Option<i32> {
    slices
        .iter()
        .flat_map(|s| s.ports.as_deref().unwrap_or_default())
        .find(|p| p.name.as_deref() == Some(name))
        .and_then(|p| p.port)
}

fn container_port_number(workload: Option<&WorkloadObject>, name: &str) -> Option<i32> {
    workload?
        .template
        .as_ref()?
        .spec
        .as_ref()?
        .containers
        .iter()
        .flat_map(|c| c.ports.as_deref().unwrap_or_default())
        .find(|p| p.name.as_deref() == Some(name))
        .map(|p| p.container_port)
}

fn port_value(value: &Json, by_name: impl Fn(&str) -> Option<i32>) -> Option<i32> {
    match value {
        Json::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
        Json::String(s) => s.parse().ok().or_else(|| by_name(s)),
        _ => None,
    }
}

/// The inputs of discovery.
#[derive(Debug, Clone, Copy)]
pub struct DiscoveryInput<'a> {
    /// The target Service.
    pub service: &'a Service,
    /// The bound Service port.
    pub bound: &'a ServicePort,
    /// The capability's `binding.path`.
    pub contract_path: Option<&'a str>,
    /// `spec` of the ServiceMonitors in the namespace (empty when not installed or forbidden).
    pub service_monitors: &'a [Json],
    /// `spec` of the PodMonitors in the namespace.
    pub pod_monitors: &'a [Json],
    /// The Service's slices (named Service ports → container ports).
    pub slices: &'a [EndpointSlice],
    /// The workload (named container ports).
    pub workload: Option<&'a WorkloadObject>,
}

/// Discovery, first hit wins: ServiceMonitor → PodMonitor → annotations → a port named
/// `metrics`/`http-metrics` → the contract path on the bound port. Named monitor ports are
/// resolved (ServiceMonitor: Service port name → slice port; PodMonitor: container port name).
pub fn discover(input: DiscoveryInput<'_>) -> Option<Discovery> {
    let empty = BTreeMap::new();
    let metadata_labels = input.service.metadata.labels.as_ref().unwrap_or(&empty);
    let selector = input
        .service
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .unwrap_or(&empty);
    for monitor in input.service_monitors {
        if !labels_subset(monitor.get("selector"), metadata_labels) {
            continue;
        }
        let endpoints = monitor.get("endpoints").and_then(Json::as_array);
        for endpoint in endpoints.into_iter().flatten() {
            let port = endpoint
                .get("port")
                .and_then(|p| port_value(p, |name| slice_port_number(input.slices, name)))
                .or_else(|| {
                    endpoint.get("targetPort").and_then(|p| {
                        port_value(p, |name| container_port_number(input.workload, name))
                    })
                });
            if let Some(port) = port {
                return Some(Discovery {
                    method: "servicemonitor",
                    at: ScrapeAt::Pod { port },
                    path: path_of(endpoint),
                });
            }
        }
    }
    for monitor in input.pod_monitors {
        if !labels_subset(monitor.get("selector"), selector) {
            continue;
        }
        let endpoints = monitor.get("podMetricsEndpoints").and_then(Json::as_array);
        for endpoint in endpoints.into_iter().flatten() {
            let port = endpoint
                .get("port")
                .or_else(|| endpoint.get("portNumber"))
                .and_then(|p| port_value(p, |name| container_port_number(input.workload, name)));
            if let Some(port) = port {
                return Some(Discovery {
                    method: "podmonitor",
                    at: ScrapeAt::Pod { port },
                    path: path_of(endpoint),
                });
            }
        }
    }
    let annotations = input
        .service
        .metadata
        .annotations
        .as_ref()
        .unwrap_or(&empty);
    if annotations.get("prometheus.io/scrape").map(String::as_str) == Some("true")
        && let Some(port) = annotations
            .get("prometheus.io/port")
            .and_then(|p| p.parse::<i32>().ok())
    {
        return Some(Discovery {
            method: "annotation",
            at: ScrapeAt::Pod { port },
            path: annotations
                .get("prometheus.io/path")
                .filter(|p| !p.is_empty())
                .cloned()
                .unwrap_or_else(|| "/metrics".to_owned()),
        });
    }
    let ports = input
        .service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    if let Some(port) = ports
        .iter()
        .find(|p| matches!(p.name.as_deref(), Some("metrics" | "http-metrics")))
    {
        return Some(Discovery {
            method: "named-port",
            at: ScrapeAt::Service { port: port.port },
            path: input.contract_path.unwrap_or("/metrics").to_owned(),
        });
    }
    input.contract_path.map(|path| Discovery {
        method: "probe",
        at: ScrapeAt::Service {
            port: input.bound.port,
        },
        path: path.to_owned(),
    })
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_sample_line(line: &str) -> bool {
    let (name, rest) = match line.find(['{', ' ', '\t']) {
        Some(i) => line.split_at(i),
        None => return false,
    };
    if !is_metric_name(name) {
        return false;
    }
    let rest = if rest.starts_with('{') {
        match rest.rfind('}') {
            Some(end) => &rest[end + 1..],
            None => return false,
        }
    } else {
        rest
    };
    let value = rest.split_whitespace().next().unwrap_or_default();
    matches!(value, "NaN" | "+Inf" | "-Inf" | "Inf") || value.parse::<f64>().is_ok()
}

/// Whether a body prefix parses as Prometheus/OpenMetrics text with at least one sample. A last
/// line cut by the read bound is ignored.
pub fn parses_exposition(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let mut lines: Vec<&str> = text.split('\n').collect();
    if body.len() >= MAX_BODY_BYTES && !text.ends_with('\n') {
        lines.pop();
    }
    let mut samples = 0;
    for line in lines {
        let line = line.trim_end_matches('\r').trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if !is_sample_line(line) {
            return false;
        }
        samples += 1;
    }
    samples > 0
}

/// The scrape: transport error → `Failed`; status ≠ 200, a content type other than
/// `text/plain`/`application/openmetrics-text`, or an unparseable body → `Insufficient`;
/// otherwise Observed(present).
pub fn scrape_verdict(result: &Result<Fetch, String>) -> Verdict {
    let Ok(fetch) = result else {
        return Verdict::failed();
    };
    if fetch.status != 200 {
        return Verdict::insufficient();
    }
    let content_type_ok = fetch.content_type.as_deref().is_some_and(|ct| {
        let media = ct
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        media == "text/plain" || media == "application/openmetrics-text"
    });
    if !content_type_ok || !parses_exposition(&fetch.body) {
        return Verdict::insufficient();
    }
    Verdict::observed(Value::Capability(CapabilityValue { present: true }))
}

/// The `managed-by` label value of slices the EndpointSlice controller writes.
const MANAGED_BY_CONTROLLER: &str = "endpointslice-controller.k8s.io";

/// The first safe Ready pod address of the slices (docs/design/observation.md#probe-safety):
/// only slices written by the EndpointSlice controller, only endpoints whose `targetRef` is a
/// Pod in `namespace`, only addresses [`is_scrapable_ip`] accepts.
fn ready_pod_ip(slices: &[EndpointSlice], namespace: &str) -> Option<IpAddr> {
    slices
        .iter()
        .filter(|s| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(MANAGED_BY_LABEL))
                .map(String::as_str)
                == Some(MANAGED_BY_CONTROLLER)
        })
        .flat_map(|s| s.endpoints.as_deref().unwrap_or_default())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .filter(|e| {
            e.target_ref.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("Pod") && r.namespace.as_deref() == Some(namespace)
            })
        })
        .flat_map(|e| e.addresses.iter())
        .filter_map(|a| a.parse().ok())
        .find(|ip| is_scrapable_ip(*ip))
}

fn pod_url(ip: IpAddr, port: i32, path: &str) -> Option<Url> {
    let port = u16::try_from(port).ok().filter(|p| *p > 0)?;
    let host = match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    Url::parse(&format!(
        "http://{host}:{port}{}",
        crate::probe::sanitize_path(path)
    ))
    .ok()
}

/// The bound Service port and path of the metrics capability, and the Service: the same
/// binding checks as health; a missing Service is Unsupported.
pub fn bound_service<'a>(
    target: &Target,
    binding: Option<&Binding>,
    service: &'a Fetched<Service>,
) -> Result<(CapabilityTarget, &'a Service), Verdict> {
    let resolved = capability_target(binding, &target.spec.interface_bindings, service)?;
    match service {
        Ok(Some(service)) => Ok((resolved, service)),
        _ => Err(Verdict::unsupported()),
    }
}

/// What the metrics capability reads besides the target's Service.
#[derive(Debug, Clone, Copy)]
pub struct MetricsInput<'a> {
    /// The Service's slices.
    pub slices: &'a Fetched<Vec<EndpointSlice>>,
    /// The workload.
    pub workload: &'a Fetched<WorkloadObject>,
    /// `spec` of the ServiceMonitors in the namespace (empty when not installed or forbidden).
    pub service_monitors: &'a [Json],
    /// `spec` of the PodMonitors in the namespace.
    pub pod_monitors: &'a [Json],
}

/// Discovery on the fetched state, then one scrape with `prober`.
pub async fn observe(
    prober: &Prober,
    target: &Target,
    (resolved, service): (CapabilityTarget, &Service),
    input: MetricsInput<'_>,
) -> Verdict {
    let namespace = target.namespace.as_str();
    let slices = input
        .slices
        .as_ref()
        .ok()
        .and_then(Option::as_deref)
        .unwrap_or_default();
    let Some(discovery) = discover(DiscoveryInput {
        service,
        bound: &resolved.port,
        contract_path: resolved.path.as_deref(),
        service_monitors: input.service_monitors,
        pod_monitors: input.pod_monitors,
        slices,
        workload: input.workload.as_ref().ok().and_then(Option::as_ref),
    }) else {
        return Verdict::unsupported();
    };
    let url = match discovery.at {
        ScrapeAt::Service { port } => {
            if let Some(reason) = probe_refusal(service) {
                tracing::debug!(reason, "metrics scrape by Service name refused");
                return Verdict::insufficient();
            }
            target
                .service_name()
                .and_then(|s| service_url(s, namespace, port, &discovery.path).ok())
        }
        ScrapeAt::Pod { port } => {
            let Some(ip) = ready_pod_ip(slices, namespace) else {
                tracing::debug!("no safe Ready pod address to scrape");
                return Verdict::insufficient();
            };
            pod_url(ip, port, &discovery.path)
        }
    };
    let Some(url) = url else {
        return Verdict::insufficient();
    };
    tracing::debug!(method = discovery.method, %url, "scraping metrics");
    scrape_verdict(&prober.fetch(url).await)
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::type_complexity,
        reason = "table-driven tests: each row is a tuple of inputs and the expected verdict"
    )]

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use serde_json::json;

    use super::*;
    use crate::interfaces::fixtures::{port, service, slice};

    fn labelled(
        mut svc: Service,
        labels: &[(&str, &str)],
        annotations: &[(&str, &str)],
    ) -> Service {
        let map = |kv: &[(&str, &str)]| {
            kv.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        svc.metadata = ObjectMeta {
            labels: Some(map(labels)),
            annotations: Some(map(annotations)),
            ..ObjectMeta::default()
        };
        svc
    }

    #[test]
    fn discovery_table() {
        let bound = port(Some("http"), 80, Some(IntOrString::Int(8080)));
        let plain = labelled(service(vec![bound.clone()]), &[("team", "a")], &[]);
        let annotated = labelled(
            service(vec![bound.clone()]),
            &[],
            &[
                ("prometheus.io/scrape", "true"),
                ("prometheus.io/port", "9100"),
            ],
        );
        let named = service(vec![bound.clone(), port(Some("http-metrics"), 9090, None)]);
        let slices = vec![slice(&[(Some("http"), 8080)], &[Some(true)])];
        let sm = json!({"selector": {"matchLabels": {"team": "a"}}, "endpoints": [{"port": "http", "path": "/m"}]});
        let sm_other =
            json!({"selector": {"matchLabels": {"team": "b"}}, "endpoints": [{"port": "http"}]});
        let pm = json!({"selector": {"matchLabels": {"app": "x"}}, "podMetricsEndpoints": [{"port": "7070"}]});
        let d = |method, at, path: &str| {
            Some(Discovery {
                method,
                at,
                path: path.to_owned(),
            })
        };
        let cases: Vec<(
            &str,
            Service,
            Vec<Json>,
            Vec<Json>,
            Option<&str>,
            Option<Discovery>,
        )> = vec![
            (
                "servicemonitor, named port resolved through the slice",
                plain.clone(),
                vec![sm_other.clone(), sm],
                vec![pm.clone()],
                None,
                d("servicemonitor", ScrapeAt::Pod { port: 8080 }, "/m"),
            ),
            (
                "podmonitor",
                plain.clone(),
                vec![sm_other],
                vec![pm],
                None,
                d("podmonitor", ScrapeAt::Pod { port: 7070 }, "/metrics"),
            ),
            (
                "annotation",
                annotated,
                vec![],
                vec![],
                None,
                d("annotation", ScrapeAt::Pod { port: 9100 }, "/metrics"),
            ),
            (
                "named port",
                named,
                vec![],
                vec![],
                Some("/stats"),
                d("named-port", ScrapeAt::Service { port: 9090 }, "/stats"),
            ),
            (
                "contract path",
                plain.clone(),
                vec![],
                vec![],
                Some("/metrics"),
                d("probe", ScrapeAt::Service { port: 80 }, "/metrics"),
            ),
            ("nothing", plain, vec![], vec![], None, None),
        ];
        for (name, svc, sms, pms, path, want) in cases {
            let got = discover(DiscoveryInput {
                service: &svc,
                bound: &bound,
                contract_path: path,
                service_monitors: &sms,
                pod_monitors: &pms,
                slices: &slices,
                workload: None,
            });
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn exposition_and_scrape_table() {
        let ok_body = b"# HELP up Up.\n# TYPE up gauge\nup 1\nhttp_requests_total{code=\"200\",method=\"get\"} 1027 1395066363000\n".to_vec();
        let fetch = |status, ct: Option<&str>, body: &[u8]| {
            Ok(Fetch {
                status,
                content_type: ct.map(str::to_owned),
                body: body.to_vec(),
            })
        };
        let present = Verdict::observed(Value::Capability(CapabilityValue { present: true }));
        let cases: Vec<(&str, Result<Fetch, String>, Verdict)> = vec![
            (
                "ok",
                fetch(200, Some("text/plain; version=0.0.4"), &ok_body),
                present.clone(),
            ),
            (
                "openmetrics",
                fetch(
                    200,
                    Some("application/openmetrics-text; version=1.0.0"),
                    b"a_total 1\n# EOF\n",
                ),
                present,
            ),
            ("transport", Err("refused".into()), Verdict::failed()),
            (
                "500",
                fetch(500, Some("text/plain"), &ok_body),
                Verdict::insufficient(),
            ),
            (
                "json",
                fetch(200, Some("application/json"), b"{}"),
                Verdict::insufficient(),
            ),
            (
                "html",
                fetch(200, Some("text/plain"), b"<html>hi</html>\n"),
                Verdict::insufficient(),
            ),
            (
                "comments only",
                fetch(200, Some("text/plain"), b"# nothing\n"),
                Verdict::insufficient(),
            ),
            (
                "no content type",
                fetch(200, None, &ok_body),
                Verdict::insufficient(),
            ),
        ];
        for (name, result, want) in cases {
            assert_eq!(scrape_verdict(&result), want, "{name}");
        }
        // a truncated last line is ignored
        let mut long = b"a 1\n".repeat(MAX_BODY_BYTES / 4);
        long.truncate(MAX_BODY_BYTES - 2);
        long.extend_from_slice(b"b_");
        assert!(parses_exposition(&long));
    }

    /// A slice with one Ready endpoint at `address`, labelled like the controller's unless
    /// `managed_by` says otherwise, whose targetRef is `target_ref` (kind, namespace).
    fn pod_slice(
        address: &str,
        managed_by: Option<&str>,
        target_ref: Option<(&str, &str)>,
    ) -> EndpointSlice {
        let mut s = slice(&[(Some("http"), 8080)], &[Some(true)]);
        s.metadata.labels =
            managed_by.map(|m| BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), m.to_owned())]));
        if let Some(endpoint) = s.endpoints.as_mut().and_then(|e| e.first_mut()) {
            endpoint.addresses = vec![address.to_owned()];
            endpoint.target_ref =
                target_ref.map(|(kind, ns)| k8s_openapi::api::core::v1::ObjectReference {
                    kind: Some(kind.to_owned()),
                    namespace: Some(ns.to_owned()),
                    name: Some("web-0".to_owned()),
                    ..Default::default()
                });
        }
        s
    }

    #[test]
    fn only_safe_ready_pod_addresses_of_controller_slices_are_scraped() {
        let ctl = Some(MANAGED_BY_CONTROLLER);
        let own = Some(("Pod", "shop"));
        let cases: &[(&str, EndpointSlice, Option<&str>)] = &[
            (
                "a pod of the namespace",
                pod_slice("10.244.0.7", ctl, own),
                Some("10.244.0.7"),
            ),
            ("IPv6 pod", pod_slice("fd00::7", ctl, own), Some("fd00::7")),
            (
                "cloud metadata",
                pod_slice("169.254.169.254", ctl, own),
                None,
            ),
            ("loopback", pod_slice("127.0.0.1", ctl, own), None),
            ("IPv6 loopback", pod_slice("::1", ctl, own), None),
            ("IPv6 link-local", pod_slice("fe80::1", ctl, own), None),
            (
                "v4-mapped metadata",
                pod_slice("::ffff:169.254.169.254", ctl, own),
                None,
            ),
            ("unspecified", pod_slice("0.0.0.0", ctl, own), None),
            ("multicast", pod_slice("224.0.0.1", ctl, own), None),
            ("broadcast", pod_slice("255.255.255.255", ctl, own), None),
            (
                "pod of another namespace",
                pod_slice("10.244.0.7", ctl, Some(("Pod", "bank"))),
                None,
            ),
            (
                "not a pod",
                pod_slice("10.244.0.7", ctl, Some(("Node", "shop"))),
                None,
            ),
            ("no targetRef", pod_slice("10.244.0.7", ctl, None), None),
            ("hand-made slice", pod_slice("10.244.0.7", None, own), None),
            (
                "another manager",
                pod_slice("10.244.0.7", Some("someone"), own),
                None,
            ),
        ];
        for (name, s, want) in cases {
            let want = want.map(|w| w.parse::<IpAddr>().unwrap());
            assert_eq!(
                ready_pod_ip(std::slice::from_ref(s), "shop"),
                want,
                "{name}"
            );
        }
        // an unsafe endpoint is skipped, a safe one after it is used
        let both = [
            pod_slice("169.254.169.254", ctl, own),
            pod_slice("10.244.0.8", ctl, own),
        ];
        assert_eq!(ready_pod_ip(&both, "shop"), "10.244.0.8".parse().ok());
    }

    #[tokio::test]
    async fn an_unsafe_pod_address_is_never_scraped() {
        // discovery picks the pod (annotations); the only endpoint is the metadata address
        let bound = port(Some("http"), 80, Some(IntOrString::Int(8080)));
        let svc = labelled(
            service(vec![bound.clone()]),
            &[],
            &[
                ("prometheus.io/scrape", "true"),
                ("prometheus.io/port", "8080"),
            ],
        );
        let target = Target {
            namespace: "shop".into(),
            pacto_name: "web".into(),
            spec: serde_json::from_value(json!({"serviceName": "web",
                "interfaceBindings": [{"interface": "api", "servicePort": "http"}]}))
            .unwrap(),
        };
        let resolved = CapabilityTarget {
            port: bound,
            path: Some("/metrics".into()),
        };
        let slices: Fetched<Vec<EndpointSlice>> = Ok(Some(vec![pod_slice(
            "169.254.169.254",
            Some(MANAGED_BY_CONTROLLER),
            Some(("Pod", "shop")),
        )]));
        let input = MetricsInput {
            slices: &slices,
            workload: &Ok(None),
            service_monitors: &[],
            pod_monitors: &[],
        };
        let prober = Prober::new().unwrap();
        let verdict = observe(&prober, &target, (resolved, &svc), input).await;
        assert_eq!(verdict, Verdict::insufficient());
    }
}
