//! Identity of a peer (the SANs of its client certificate) and per-service authorisation.
//!
//! The gRPC server (see [`crate::grpc`]) parses the verified client certificate once per
//! connection into a [`PeerIdentity`] and attaches a [`PeerInfo`] to every request of that
//! connection. An [`Authorizer`] — a tonic interceptor installed per gRPC service with
//! `XxxServer::with_interceptor` — then admits only identities on that service's [`AllowList`].

use std::{fmt, net::SocketAddr, sync::Arc};

use metrics::counter;
use tonic::{Request, Status, service::Interceptor};
use x509_parser::{certificate::X509Certificate, extensions::GeneralName, prelude::FromDer};

use crate::metrics::GRPC_UNAUTHORIZED_TOTAL;

/// Trust domain of the default identities (docs/design/identity.md#identities).
pub const DEFAULT_TRUST_DOMAIN: &str = "pacto";

/// The status-writer's default identity: the URI SAN the charts put on its certificate, the
/// SPIFFE ID of its ServiceAccount `pacto-status-writer` in the namespace `pacto-operator-system`
/// (docs/design/identity.md#identities). The default `--allowed-identities` of every server.
pub const DEFAULT_STATUS_WRITER_IDENTITY: &str =
    "spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer";

/// The node agent's default identity: ServiceAccount `pacto-node-agent` in `pacto-node-agent`.
pub const DEFAULT_NODE_AGENT_IDENTITY: &str =
    "spiffe://pacto/ns/pacto-node-agent/sa/pacto-node-agent";

/// The identity (URI SAN) of a ServiceAccount under a trust domain:
/// `spiffe://<trust_domain>/ns/<namespace>/sa/<service_account>`.
pub fn spiffe_id(trust_domain: &str, namespace: &str, service_account: &str) -> String {
    format!("spiffe://{trust_domain}/ns/{namespace}/sa/{service_account}")
}

/// The client certificate could not be read as X.509.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The DER does not parse.
    #[error("client certificate is not valid X.509: {0}")]
    Parse(String),
    /// The subjectAltName extension is malformed.
    #[error("client certificate has a malformed subjectAltName: {0}")]
    SubjectAltName(String),
}

/// The names a verified peer certificate vouches for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerIdentity {
    /// DNS SANs, e.g. `status-writer.pacto.svc`.
    pub dns_names: Vec<String>,
    /// URI SANs, e.g. `spiffe://pacto/ns/pacto-operator-system/sa/status-writer`.
    pub uris: Vec<String>,
}

impl PeerIdentity {
    /// Reads the DNS and URI SANs of a DER certificate.
    pub fn from_der(der: &[u8]) -> Result<Self, IdentityError> {
        let (_, cert) =
            X509Certificate::from_der(der).map_err(|e| IdentityError::Parse(e.to_string()))?;
        let mut identity = Self::default();
        let san = cert
            .subject_alternative_name()
            .map_err(|e| IdentityError::SubjectAltName(e.to_string()))?;
        if let Some(san) = san {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(dns) => identity.dns_names.push((*dns).to_owned()),
                    GeneralName::URI(uri) => identity.uris.push((*uri).to_owned()),
                    _ => {}
                }
            }
        }
        Ok(identity)
    }

    /// All names (DNS first, then URIs).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.dns_names
            .iter()
            .chain(self.uris.iter())
            .map(String::as_str)
    }
}

impl fmt::Display for PeerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.names().collect();
        if names.is_empty() {
            f.write_str("<certificate without DNS or URI SANs>")
        } else {
            f.write_str(&names.join(","))
        }
    }
}

/// Connection facts attached to every request (as a request extension) by the mTLS server.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    /// The TCP peer address.
    pub remote_addr: Option<SocketAddr>,
    /// The verified client certificate's identity (`None` only if it could not be parsed).
    pub identity: Option<Arc<PeerIdentity>>,
}

/// An allow-list entry: an exact name, or a prefix when it ends with `*`
/// (e.g. `spiffe://pacto/ns/pacto-operator-system/sa/*`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Exact(String),
    Prefix(String),
}

/// Identities allowed to call one gRPC service. A peer is admitted when any of its DNS or URI
/// SANs matches any entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllowList(Vec<Pattern>);

impl AllowList {
    /// Builds the list from entries; empty entries are ignored.
    pub fn new<I, S>(entries: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self(
            entries
                .into_iter()
                .filter_map(|entry| {
                    let entry = entry.as_ref().trim();
                    if entry.is_empty() {
                        None
                    } else if let Some(prefix) = entry.strip_suffix('*') {
                        Some(Pattern::Prefix(prefix.to_owned()))
                    } else {
                        Some(Pattern::Exact(entry.to_owned()))
                    }
                })
                .collect(),
        )
    }

    /// Whether the identity is admitted.
    pub fn permits(&self, identity: &PeerIdentity) -> bool {
        identity.names().any(|name| {
            self.0.iter().any(|pattern| match pattern {
                Pattern::Exact(exact) => name == exact,
                Pattern::Prefix(prefix) => name.starts_with(prefix.as_str()),
            })
        })
    }
}

#[derive(Debug, Clone)]
enum Policy {
    AllowList(Arc<AllowList>),
    Unauthenticated,
}

/// A tonic interceptor admitting only allow-listed client identities to one gRPC service.
///
/// Refusals: `Unauthenticated` when the request carries no verified peer identity (e.g. the
/// service was served without mTLS by mistake), `PermissionDenied` naming the presented identity
/// when it is not on the list.
#[derive(Debug, Clone)]
pub struct Authorizer {
    service: &'static str,
    /// Who the callers are, for the refusal's log line (e.g. `node-agent`, so that
    /// `kubectl logs … | grep node-agent` finds a refused agent).
    clients: Option<&'static str>,
    policy: Policy,
}

impl Authorizer {
    /// Admits the identities in `allowed` to `service` (the gRPC service name, for logs/metrics).
    pub fn new(service: &'static str, allowed: AllowList) -> Self {
        Self {
            service,
            clients: None,
            policy: Policy::AllowList(Arc::new(allowed)),
        }
    }

    /// Names the callers in the log line of a refusal (`clients=<name>`), for services whose
    /// callers have a name users search logs by (the node agents: `node-agent`).
    #[must_use]
    pub fn clients(mut self, name: &'static str) -> Self {
        self.clients = Some(name);
        self
    }

    /// Admits everyone: only for the plaintext `--insecure` development mode, where there is no
    /// certificate to authorise.
    pub fn insecure(service: &'static str) -> Self {
        Self {
            service,
            clients: None,
            policy: Policy::Unauthenticated,
        }
    }

    /// Checks one request's peer.
    pub fn check(&self, peer: Option<&PeerInfo>) -> Result<(), Status> {
        let allowed = match &self.policy {
            Policy::Unauthenticated => return Ok(()),
            Policy::AllowList(allowed) => allowed,
        };
        let Some(identity) = peer.and_then(|peer| peer.identity.as_deref()) else {
            counter!(GRPC_UNAUTHORIZED_TOTAL, "service" => self.service).increment(1);
            return Err(Status::unauthenticated(
                "a verified client certificate is required",
            ));
        };
        if allowed.permits(identity) {
            Ok(())
        } else {
            counter!(GRPC_UNAUTHORIZED_TOTAL, "service" => self.service).increment(1);
            match self.clients {
                Some(clients) => tracing::warn!(
                    service = self.service,
                    clients,
                    %identity,
                    "refused {clients} client identity"
                ),
                None => {
                    tracing::warn!(service = self.service, %identity, "refused client identity");
                }
            }
            Err(Status::permission_denied(format!(
                "client identity {identity} may not call {}",
                self.service
            )))
        }
    }
}

impl Interceptor for Authorizer {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        self.check(request.extensions().get::<PeerInfo>())?;
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(dns: &[&str], uris: &[&str]) -> PeerIdentity {
        PeerIdentity {
            dns_names: dns.iter().map(|s| (*s).to_owned()).collect(),
            uris: uris.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn default_identities_are_spiffe_ids_of_service_accounts() {
        assert_eq!(
            spiffe_id(
                DEFAULT_TRUST_DOMAIN,
                "pacto-operator-system",
                "pacto-status-writer"
            ),
            DEFAULT_STATUS_WRITER_IDENTITY
        );
        assert_eq!(
            spiffe_id(DEFAULT_TRUST_DOMAIN, "pacto-node-agent", "pacto-node-agent"),
            DEFAULT_NODE_AGENT_IDENTITY
        );
        // The status-writer's DNS name no longer passes a default list, nor does its
        // ServiceAccount in another namespace.
        let list = AllowList::new([DEFAULT_STATUS_WRITER_IDENTITY]);
        assert!(!list.permits(&identity(&["status-writer.pacto.svc"], &[])));
        assert!(!list.permits(&identity(
            &["status-writer.pacto.svc"],
            &["spiffe://pacto/ns/tenant/sa/pacto-status-writer"]
        )));
        assert!(list.permits(&identity(
            &["status-writer.pacto.svc"],
            &[DEFAULT_STATUS_WRITER_IDENTITY]
        )));
    }

    #[test]
    fn allow_list_matches_exact_and_prefix() {
        let list = AllowList::new(["status-writer.pacto.svc", "spiffe://pacto/sa/*", " "]);
        assert!(list.permits(&identity(&["status-writer.pacto.svc"], &[])));
        assert!(list.permits(&identity(&["x"], &["spiffe://pacto/sa/observer"])));
        assert!(!list.permits(&identity(&["observer.pacto.svc"], &[])));
        assert!(!list.permits(&identity(&["status-writer.pacto.svc.evil"], &[])));
        assert!(!list.permits(&PeerIdentity::default()));
        assert!(!AllowList::new(Vec::<String>::new()).permits(&identity(&["a"], &[])));
    }

    /// A refusal's log line names the callers when the service has a name for them, so that
    /// `kubectl logs … | grep node-agent` finds a refused node agent.
    #[test]
    fn a_refusal_log_line_names_the_clients() {
        use std::sync::Mutex;
        let lines = Arc::new(Mutex::new(Vec::<u8>::new()));
        let writer = {
            let lines = Arc::clone(&lines);
            move || LogSink(Arc::clone(&lines))
        };
        let subscriber = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false)
            .finish();
        let denied = PeerInfo {
            remote_addr: None,
            identity: Some(Arc::new(identity(&["b"], &["spiffe://x/ns/y/sa/z"]))),
        };
        tracing::subscriber::with_default(subscriber, || {
            let named =
                Authorizer::new("pacto.observer.v1.NodeAgentReports", AllowList::new(["a"]))
                    .clients("node-agent");
            assert!(named.check(Some(&denied)).is_err());
            let plain = Authorizer::new("pacto.evaluator.v1.Evaluator", AllowList::new(["a"]));
            assert!(plain.check(Some(&denied)).is_err());
        });
        let text = String::from_utf8(lines.lock().unwrap().clone()).unwrap();
        let logged: Vec<&str> = text.lines().collect();
        assert_eq!(logged.len(), 2, "{text}");
        assert!(
            logged[0].contains("refused node-agent client identity")
                && logged[0].contains("clients=\"node-agent\"")
                && logged[0].contains("spiffe://x/ns/y/sa/z"),
            "{text}"
        );
        assert!(
            logged[1].contains("refused client identity") && !logged[1].contains("node-agent"),
            "{text}"
        );
    }

    struct LogSink(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for LogSink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn authorizer_codes() {
        let auth = Authorizer::new("pacto.evaluator.v1.Evaluator", AllowList::new(["a"]));
        assert_eq!(
            auth.check(None).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        let denied = PeerInfo {
            remote_addr: None,
            identity: Some(Arc::new(identity(&["b"], &[]))),
        };
        let status = auth.check(Some(&denied)).unwrap_err();
        assert_eq!(status.code(), tonic::Code::PermissionDenied);
        assert!(status.message().contains('b'), "{}", status.message());
        let ok = PeerInfo {
            remote_addr: None,
            identity: Some(Arc::new(identity(&["a"], &[]))),
        };
        assert!(auth.check(Some(&ok)).is_ok());
        assert!(Authorizer::insecure("x").check(None).is_ok());
    }
}
