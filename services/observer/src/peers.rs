//! Undeclared outbound peers (docs/design/observation.md#undeclared-peers): the addresses the
//! target's pods connect to (TCP, outbound, as the node agent saw them) that the contract does not
//! declare, resolved to a Pacto, a Service or a bare IP. An observation for the status only: never
//! a finding, never part of the verdict.
//!
//! Not listed: loopback and unspecified addresses, the target's own Service and pods, the Services
//! its declared dependencies matched (a sibling Pacto's Service, or the Service named after the
//! dependency), cluster DNS (`kube-system/kube-dns`) and the API server (`default/kubernetes`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use pacto_api::Pacto;

use crate::addresses::{self, canonical};
use crate::k8s::SERVICE_NAME_LABEL;
use crate::node_evidence::{PodRef, PodView};

/// The Services whose addresses are never peers: cluster DNS and the API server
/// (`(namespace, name)`).
pub const SYSTEM_SERVICES: [(&str, &str); 2] =
    [("kube-system", "kube-dns"), ("default", "kubernetes")];

/// What a peer address resolved to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PeerKind {
    /// A Service some Pacto targets (the name is the Pacto's).
    Pacto,
    /// A Service no Pacto targets.
    Service,
    /// An address no Service the observer sees resolves.
    Ip,
}

impl PeerKind {
    /// The status spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pacto => "Pacto",
            Self::Service => "Service",
            Self::Ip => "IP",
        }
    }
}

/// One undeclared outbound peer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Peer {
    /// What it resolved to.
    pub kind: PeerKind,
    /// `<namespace>/<name>` of the Pacto or Service; the address for [`PeerKind::Ip`].
    pub name: String,
    /// The peer ports connected to.
    pub ports: BTreeSet<u32>,
}

/// The outbound peer addresses of `views` with their ports, leaving out loopback, unspecified
/// and `excluded` addresses.
pub fn candidates(
    views: &[(&PodRef, &PodView)],
    excluded: &BTreeSet<IpAddr>,
) -> BTreeMap<IpAddr, BTreeSet<u32>> {
    let mut out: BTreeMap<IpAddr, BTreeSet<u32>> = BTreeMap::new();
    for (_, view) in views {
        for (ip, ports) in &view.outbound {
            let ip = canonical(*ip);
            if ip.is_loopback() || ip.is_unspecified() || excluded.contains(&ip) {
                continue;
            }
            out.entry(ip).or_default().extend(ports);
        }
    }
    out
}

/// Which Service (`(namespace, name)`) each of `wanted` belongs to: a ClusterIP first, else an
/// endpoint address of its slices (a slice's Service is its `kubernetes.io/service-name` label).
/// When several Services claim one address, the first in (namespace, name) order wins.
pub fn services_by_address<'a>(
    services: impl IntoIterator<Item = &'a Service>,
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    wanted: &BTreeSet<IpAddr>,
) -> BTreeMap<IpAddr, (String, String)> {
    let mut by_cluster_ip: BTreeMap<IpAddr, (String, String)> = BTreeMap::new();
    for service in services {
        let key = (service.namespace().unwrap_or_default(), service.name_any());
        for ip in addresses::canonical_of(Some(service), &[]) {
            if wanted.contains(&ip) {
                by_cluster_ip
                    .entry(ip)
                    .and_modify(|k| {
                        if key < *k {
                            k.clone_from(&key);
                        }
                    })
                    .or_insert_with(|| key.clone());
            }
        }
    }
    let mut by_endpoint: BTreeMap<IpAddr, (String, String)> = BTreeMap::new();
    for slice in slices {
        let Some(name) = slice.labels().get(SERVICE_NAME_LABEL) else {
            continue;
        };
        let key = (slice.namespace().unwrap_or_default(), name.clone());
        for ip in addresses::canonical_of(None, std::slice::from_ref(slice)) {
            if wanted.contains(&ip) && !by_cluster_ip.contains_key(&ip) {
                by_endpoint
                    .entry(ip)
                    .and_modify(|k| {
                        if key < *k {
                            k.clone_from(&key);
                        }
                    })
                    .or_insert_with(|| key.clone());
            }
        }
    }
    by_cluster_ip.extend(by_endpoint);
    by_cluster_ip
}

/// The Pacto (its name) targeting each Service (`(namespace, serviceName)`); when several do,
/// the first by name.
pub fn pactos_by_service(pactos: &[Pacto]) -> BTreeMap<(String, String), String> {
    let mut out: BTreeMap<(String, String), String> = BTreeMap::new();
    for pacto in pactos {
        let Some(service) = pacto
            .spec
            .target
            .as_ref()
            .and_then(|t| t.service_name.clone())
            .filter(|s| !s.is_empty())
        else {
            continue;
        };
        let name = pacto.name_any();
        out.entry((pacto.namespace().unwrap_or_default(), service))
            .and_modify(|n| {
                if name < *n {
                    n.clone_from(&name);
                }
            })
            .or_insert(name);
    }
    out
}

/// The peers of `candidates`, resolved through `services` (address → Service) and `pactos`
/// (Service → Pacto), one per (kind, name) with their ports merged, sorted.
pub fn resolve(
    candidates: &BTreeMap<IpAddr, BTreeSet<u32>>,
    services: &BTreeMap<IpAddr, (String, String)>,
    pactos: &BTreeMap<(String, String), String>,
) -> Vec<Peer> {
    let mut peers: BTreeMap<(PeerKind, String), BTreeSet<u32>> = BTreeMap::new();
    for (ip, ports) in candidates {
        let key = match services.get(ip) {
            Some(service) => match pactos.get(service) {
                Some(pacto) => (PeerKind::Pacto, format!("{}/{pacto}", service.0)),
                None => (PeerKind::Service, format!("{}/{}", service.0, service.1)),
            },
            None => (PeerKind::Ip, ip.to_string()),
        };
        peers.entry(key).or_default().extend(ports);
    }
    peers
        .into_iter()
        .map(|((kind, name), ports)| Peer { kind, name, ports })
        .collect()
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a malformed fixture should fail the test"
)]
mod tests {
    use k8s_openapi::api::core::v1::ServiceSpec;
    use k8s_openapi::api::discovery::v1::Endpoint;
    use kube::api::ObjectMeta;

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn svc(ns: &str, name: &str, cluster_ip: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some(cluster_ip.into()),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    fn slice(ns: &str, service: &str, addresses: &[&str]) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(format!("{service}-x")),
                labels: Some([(SERVICE_NAME_LABEL.to_owned(), service.to_owned())].into()),
                ..ObjectMeta::default()
            },
            address_type: "IPv4".into(),
            endpoints: Some(
                addresses
                    .iter()
                    .map(|a| Endpoint {
                        addresses: vec![(*a).to_owned()],
                        ..Endpoint::default()
                    })
                    .collect(),
            ),
            ports: None,
        }
    }

    fn pod_view(peers: &[(&str, u32)]) -> PodView {
        let mut view = PodView::default();
        for (peer, port) in peers {
            view.outbound.entry(ip(peer)).or_default().insert(*port);
        }
        view
    }

    #[test]
    fn loopback_unspecified_and_excluded_addresses_are_not_candidates() {
        let pod = PodRef {
            uid: "u".into(),
            name: "ns/p".into(),
            node: Some("n".into()),
        };
        let view = pod_view(&[
            ("127.0.0.1", 9000),
            ("::1", 9000),
            ("::ffff:127.0.0.1", 9000),
            ("0.0.0.0", 1),
            ("10.96.0.1", 443),
            ("::ffff:10.96.0.10", 53),
            ("203.0.113.7", 443),
            ("203.0.113.7", 80),
        ]);
        let other = pod_view(&[("203.0.113.7", 8443)]);
        let excluded = BTreeSet::from([ip("10.96.0.1"), ip("10.96.0.10")]);
        let found = candidates(&[(&pod, &view), (&pod, &other)], &excluded);
        assert_eq!(
            found,
            BTreeMap::from([(ip("203.0.113.7"), BTreeSet::from([80, 443, 8443]))]),
            "only the external address is left, with the ports of every pod"
        );
    }

    #[test]
    fn addresses_resolve_to_pactos_services_or_stay_ips() {
        let services = [
            svc("shop", "payments", "10.96.0.20"),
            svc("shop", "cache", "10.96.0.30"),
            svc("shop", "headless", "None"),
        ];
        let slices = [
            slice("shop", "payments", &["10.244.1.5"]),
            slice("shop", "headless", &["10.244.2.9"]),
            // A slice without the service-name label names no Service.
            EndpointSlice {
                metadata: ObjectMeta {
                    namespace: Some("shop".into()),
                    ..ObjectMeta::default()
                },
                ..slice("shop", "x", &["10.244.3.3"])
            },
        ];
        let wanted = BTreeSet::from([
            ip("10.96.0.20"),
            ip("10.244.1.5"),
            ip("10.96.0.30"),
            ip("10.244.2.9"),
            ip("10.244.3.3"),
            ip("203.0.113.7"),
        ]);
        let by_address = services_by_address(&services, &slices, &wanted);
        assert_eq!(by_address.len(), 4, "{by_address:?}");
        let pacto: Pacto = serde_json::from_value(serde_json::json!({
            "apiVersion": "pacto.trianalab.io/v1alpha1",
            "kind": "Pacto",
            "metadata": {"name": "payments-contract", "namespace": "shop"},
            "spec": {"contractRef": {"oci": "ghcr.io/x/payments:1.0.0"},
                     "target": {"serviceName": "payments"}}
        }))
        .unwrap();
        let pactos = pactos_by_service(&[pacto]);
        let candidates: BTreeMap<IpAddr, BTreeSet<u32>> =
            wanted.iter().map(|a| (*a, BTreeSet::from([443]))).collect();
        let peers = resolve(&candidates, &by_address, &pactos);
        let listed: Vec<(&str, &str)> = peers
            .iter()
            .map(|p| (p.kind.as_str(), p.name.as_str()))
            .collect();
        assert_eq!(
            listed,
            [
                ("Pacto", "shop/payments-contract"),
                ("Service", "shop/cache"),
                ("Service", "shop/headless"),
                ("IP", "10.244.3.3"),
                ("IP", "203.0.113.7"),
            ],
            "the ClusterIP and the endpoint of payments are one peer"
        );
    }
}
