//! The addresses of a Service: its ClusterIPs and the endpoint addresses of its EndpointSlices.
//! A leaf module: node evidence (a dependency's Service, docs/design/observation.md#node-evidence)
//! and undeclared peers (docs/design/observation.md#undeclared-peers) both read them.

use std::collections::BTreeSet;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// `ip` with an IPv4-mapped IPv6 address read as IPv4, so both spellings compare equal.
pub fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// The parsable addresses of `service` (its ClusterIPs) and of `slices`' endpoints, as written.
fn parsed<'a>(
    service: Option<&'a Service>,
    slices: &'a [EndpointSlice],
) -> impl Iterator<Item = IpAddr> + 'a {
    let spec = service.and_then(|s| s.spec.as_ref());
    let cluster_ips = spec
        .and_then(|s| s.cluster_ips.clone())
        .unwrap_or_default()
        .into_iter()
        .chain(spec.and_then(|s| s.cluster_ip.clone()));
    let endpoints = slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .flat_map(|e| e.addresses.iter().cloned());
    cluster_ips.chain(endpoints).filter_map(|a| a.parse().ok())
}

/// The addresses of a Service and of its slices' endpoints, as written (compared with the
/// node agent's outbound peers as it reported them).
pub fn of(service: Option<&Service>, slices: &[EndpointSlice]) -> BTreeSet<IpAddr> {
    parsed(service, slices).collect()
}

/// The addresses of a Service and of its slices' endpoints, [`canonical`].
pub fn canonical_of(service: Option<&Service>, slices: &[EndpointSlice]) -> BTreeSet<IpAddr> {
    parsed(service, slices).map(canonical).collect()
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a malformed fixture should fail the test"
)]
mod tests {
    use k8s_openapi::api::core::v1::ServiceSpec;
    use k8s_openapi::api::discovery::v1::Endpoint;

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn service(cluster_ip: Option<&str>, cluster_ips: &[&str]) -> Service {
        Service {
            spec: Some(ServiceSpec {
                cluster_ip: cluster_ip.map(str::to_owned),
                cluster_ips: Some(cluster_ips.iter().map(|a| (*a).to_owned()).collect()),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    fn slice(addresses: &[&str]) -> EndpointSlice {
        EndpointSlice {
            address_type: "IPv4".into(),
            endpoints: Some(vec![Endpoint {
                addresses: addresses.iter().map(|a| (*a).to_owned()).collect(),
                ..Endpoint::default()
            }]),
            ..EndpointSlice::default()
        }
    }

    #[test]
    fn cluster_ips_and_endpoint_addresses_unparsable_ones_left_out() {
        let svc = service(Some("10.96.0.20"), &["10.96.0.20", "fd00::20"]);
        let slices = [slice(&["10.244.1.9", "not-an-ip"]), slice(&["10.244.2.3"])];
        assert_eq!(
            of(Some(&svc), &slices),
            BTreeSet::from([
                ip("10.96.0.20"),
                ip("fd00::20"),
                ip("10.244.1.9"),
                ip("10.244.2.3")
            ])
        );
        assert_eq!(
            of(None, &slices),
            BTreeSet::from([ip("10.244.1.9"), ip("10.244.2.3")])
        );
        assert_eq!(
            of(Some(&service(Some("None"), &[])), &[]),
            BTreeSet::new(),
            "a headless Service has no ClusterIP"
        );
    }

    #[test]
    fn only_the_canonical_set_reads_ipv4_mapped_addresses_as_ipv4() {
        let svc = service(Some("::ffff:10.96.0.20"), &[]);
        let slices = [slice(&["::ffff:10.244.1.9"])];
        assert_eq!(
            canonical_of(Some(&svc), &slices),
            BTreeSet::from([ip("10.96.0.20"), ip("10.244.1.9")])
        );
        assert_eq!(
            of(Some(&svc), &slices),
            BTreeSet::from([ip("::ffff:10.96.0.20"), ip("::ffff:10.244.1.9")])
        );
    }
}
