//! Secure metrics from the scraper's side (docs/design/architecture.md#secure-metrics): the RBAC
//! the charts grant (a service's two review rights, a scraper's `get` on `/metrics`), bound to a
//! ServiceAccount of the control plane, and an HTTPS client that trusts one CA and presents a
//! bearer token, as Prometheus does.

use std::{net::SocketAddr, sync::Arc};

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};
use tokio_rustls::TlsConnector;

use crate::{ControlPlane, controlplane::unique_name};

/// What the charts grant a service for secure metrics: create TokenReviews and
/// SubjectAccessReviews.
pub fn review_rights() -> Vec<PolicyRule> {
    let create = |group: &str, resource: &str| PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(vec![resource.into()]),
        verbs: vec!["create".into()],
        ..PolicyRule::default()
    };
    vec![
        create("authentication.k8s.io", "tokenreviews"),
        create("authorization.k8s.io", "subjectaccessreviews"),
    ]
}

/// What a scraper needs (the charts' `pacto-metrics-reader` ClusterRole).
pub fn metrics_reader() -> Vec<PolicyRule> {
    vec![PolicyRule {
        non_resource_urls: Some(vec!["/metrics".into()]),
        verbs: vec!["get".into()],
        ..PolicyRule::default()
    }]
}

/// A ClusterRole with `rules`, bound to ServiceAccount `namespace/account` (both named after the
/// account, made unique).
pub async fn grant(
    cp: &ControlPlane,
    namespace: &str,
    account: &str,
    rules: Vec<PolicyRule>,
) -> anyhow::Result<()> {
    let client = cp.client()?;
    let name = unique_name(account);
    let meta = ObjectMeta {
        name: Some(name.clone()),
        ..ObjectMeta::default()
    };
    let role = ClusterRole {
        metadata: meta.clone(),
        rules: Some(rules),
        ..ClusterRole::default()
    };
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await?;
    let binding = ClusterRoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name,
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(namespace.into()),
            ..Subject::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(client)
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

/// One answer: status, header lines (lower case), body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// An HTTPS client that trusts only the given CA and presents no client certificate.
pub struct Scraper {
    connector: TlsConnector,
}

impl Scraper {
    /// Trusting the certificates of `ca_pem` alone.
    pub fn trusting(ca_pem: &str) -> anyhow::Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert?)?;
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// One request (`Connection: close`) with an optional `Authorization` header value; the
    /// server's certificate is verified for `addr`'s IP address.
    pub async fn request(
        &self,
        addr: SocketAddr,
        method: &str,
        path: &str,
        authorization: Option<&str>,
    ) -> std::io::Result<Answer> {
        let tcp = TcpStream::connect(addr).await?;
        let mut tls = self
            .connector
            .connect(ServerName::IpAddress(addr.ip().into()), tcp)
            .await?;
        let authorization = authorization
            .map(|value| format!("Authorization: {value}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{authorization}\r\n"
        );
        tls.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        tls.read_to_end(&mut raw).await?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        Ok(Answer {
            status,
            head: head.to_lowercase(),
            body: body.to_owned(),
        })
    }

    /// `GET /metrics` with `token` as the bearer token, if any.
    pub async fn get(&self, addr: SocketAddr, token: Option<&str>) -> std::io::Result<Answer> {
        let authorization = token.map(|token| format!("Bearer {token}"));
        self.request(addr, "GET", "/metrics", authorization.as_deref())
            .await
    }
}
