//! Component tests: the ContractResolver gRPC service on 127.0.0.1:0 with real mTLS certificates,
//! resolving from a real docker-registry; refusal of non-status-writer identities, missing and
//! foreign client certificates and bad arguments (with an explicit allow-list and with the
//! binary's default one, docs/design/identity.md); admin endpoints with promtool-clean metrics.

#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use pacto_contract_resolver::ResolverService;
use pacto_proto::resolver::{
    ContractRef, ListRevisionsRequest, ResolutionPolicy, ResolveRequest,
    contract_resolver_client::ContractResolverClient, resolve_response,
};
use pacto_runtime::testing::{admin_get, eventually, metric_value, promtool_check};
use pacto_runtime::{
    CancellationToken,
    grpc::{self, ChannelSpec},
    testing::{TestCa, TestCert, TestEndpoint, mtls_channel, write_tls_files},
    tls::TlsFiles,
};
use pacto_testenv::registry::Registry;
use rustls::pki_types::pem::PemObject;
use tonic::Code;
use tonic::transport::Channel;

const SERVER_NAME: &str = "contract-resolver.pacto.svc";
const STATUS_WRITER: &str = "status-writer.pacto.svc";
const DEADLINE: Duration = Duration::from_secs(10);

struct Server {
    dir: tempfile::TempDir,
    ca: TestCa,
    grpc: SocketAddr,
    admin: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), pacto_contract_resolver::ResolverError>>,
}

impl Server {
    async fn start(registry: &Registry, allowed: &[&str]) -> Self {
        pacto_testenv::controlplane::ensure_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("pacto test CA").unwrap();
        let (endpoint, config) = TestEndpoint::bind(&ca, dir.path(), SERVER_NAME, allowed).await;
        let (grpc, admin) = (endpoint.grpc, endpoint.admin);
        let shutdown = CancellationToken::new();
        let service = ResolverService::new(Arc::new(resolver(registry, None)));
        let task = tokio::spawn(pacto_contract_resolver::serve(
            config,
            service,
            shutdown.clone(),
        ));
        Self {
            dir,
            ca,
            grpc,
            admin,
            shutdown,
            task,
        }
    }

    fn client_with(&self, files: TlsFiles) -> ContractResolverClient<Channel> {
        ContractResolverClient::new(mtls_channel(self.grpc, SERVER_NAME, files))
    }

    /// A client presenting `cert` (issued by a CA the server does not trust) is refused at the
    /// TLS handshake: the call fails, and not with an RPC's PERMISSION_DENIED.
    async fn assert_refused_at_handshake(&self, name: &str, cert: &TestCert, inline: &str) {
        let files = write_tls_files(self.dir.path(), name, &self.ca.pem(), cert).unwrap();
        let status = self
            .client_with(files)
            .resolve(request("", inline))
            .await
            .unwrap_err();
        assert_ne!(status.code(), Code::Ok);
        assert_ne!(
            status.code(),
            Code::PermissionDenied,
            "{name}: refused before any RPC: {status:?}"
        );
    }

    fn client(&self, name: &str, identity: &[&str]) -> ContractResolverClient<Channel> {
        ContractResolverClient::new(self.ca.channel(
            self.dir.path(),
            name,
            identity,
            self.grpc,
            SERVER_NAME,
        ))
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("server drains")
            .unwrap()
            .unwrap();
    }
}

fn request(oci: &str, inline: &str) -> ResolveRequest {
    ResolveRequest {
        namespace: "team-a".into(),
        pacto_name: "svc".into(),
        contract_ref: Some(ContractRef {
            oci: oci.into(),
            inline: inline.into(),
            pull_secret_ref: String::new(),
        }),
        overrides: Vec::new(),
        max_age_seconds: 0,
    }
}

#[tokio::test]
async fn status_writer_resolves_over_mtls() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    let mut files = bundle(
        "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.2.0\nconfigurations:\n  - name: app\n    required: true\n    schema: configuration/schema.json\n",
    );
    files.insert(
        "configuration/schema.json",
        br#"{"type":"object"}"#.to_vec(),
    );
    let digest = push(&registry, "acme/svc", "1.2.0", &files).await;
    let server = Server::start(&registry, &[STATUS_WRITER]).await;
    let mut client = server.client("status-writer", &[STATUS_WRITER]);

    let response = client
        .resolve(request(&format!("oci://{host}/acme/svc"), ""))
        .await
        .unwrap()
        .into_inner();
    let Some(resolve_response::Result::Resolved(resolved)) = response.result else {
        panic!("{response:?}");
    };
    assert_eq!(resolved.resolved_ref, format!("{host}/acme/svc:1.2.0"));
    assert_eq!(resolved.digest, digest);
    assert_eq!(resolved.resolution_policy(), ResolutionPolicy::Latest);
    assert_eq!(
        resolved.content_hash,
        pacto_contract_resolver::sha256_hex(&resolved.raw_yaml)
    );
    assert_eq!(
        resolved.configuration_schemas.get("app").map(Vec::as_slice),
        Some(&br#"{"type":"object"}"#[..])
    );
    assert!(resolved.validation.unwrap().valid);
    // The effective contract parses with the shared crate.
    let contract =
        pacto_proto::convert::contract_from_proto(resolved.contract.as_ref(), "contract").unwrap();
    assert_eq!(contract.service.version, "1.2.0");

    // Unavailable and Invalid outcomes are responses, not errors.
    let response = client
        .resolve(request(&format!("{host}/acme/svc:9.9.9"), ""))
        .await
        .unwrap()
        .into_inner();
    match response.result {
        Some(resolve_response::Result::Unavailable(u)) => {
            assert!(u.reason.contains("not found"), "{}", u.reason);
            assert_eq!(u.resolution_policy(), ResolutionPolicy::PinnedTag);
        }
        other => panic!("{other:?}"),
    }
    let response = client
        .resolve(request("", "pactoVersion: \"2.0\"\nservice: {}\n"))
        .await
        .unwrap()
        .into_inner();
    match response.result {
        Some(resolve_response::Result::Invalid(i)) => {
            assert!(
                i.message.starts_with("Contract validation failed:"),
                "{}",
                i.message
            );
            let validation = i.validation.unwrap();
            assert!(!validation.valid && !validation.errors.is_empty());
        }
        other => panic!("{other:?}"),
    }

    let revisions = client
        .list_revisions(ListRevisionsRequest {
            namespace: "team-a".into(),
            pacto_name: "svc".into(),
            oci: format!("{host}/acme/svc"),
            pull_secret_ref: String::new(),
            tags: Vec::new(),
            max_age_seconds: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .revisions;
    assert_eq!(revisions.len(), 1);
    assert_eq!(revisions[0].digest, digest);
    assert_eq!(revisions[0].version, "1.2.0");
    assert_eq!(revisions[0].content_hash.len(), 64);
    assert_eq!(revisions[0].service_name, "svc");

    // A malformed request names the field.
    let mut bad = request("", "x");
    bad.namespace.clear();
    let status = client.resolve(bad).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("namespace"),
        "{}",
        status.message()
    );
    let status = client
        .list_revisions(ListRevisionsRequest {
            namespace: "n".into(),
            pacto_name: "p".into(),
            oci: "UPPER/Case".into(),
            pull_secret_ref: String::new(),
            tags: Vec::new(),
            max_age_seconds: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

    // Admin endpoints; every series is described (promtool clean).
    assert_eq!(admin_get(server.admin, "/readyz").await.0, 200);
    let (code, metrics) = admin_get(server.admin, "/metrics").await;
    assert_eq!(code, 200);
    for (name, labels) in [
        (
            "pacto_resolver_resolves_total",
            &["outcome=\"resolved\"", "source=\"oci\""][..],
        ),
        (
            "pacto_resolver_resolves_total",
            &["outcome=\"unavailable\""][..],
        ),
        (
            "pacto_resolver_resolves_total",
            &["outcome=\"invalid\"", "source=\"inline\""][..],
        ),
        (
            "pacto_resolver_registry_requests_total",
            &["kind=\"manifest_head\""][..],
        ),
        (
            "pacto_resolver_registry_requests_total",
            &["kind=\"bundle_pull\""][..],
        ),
        (
            "pacto_resolver_registry_requests_total",
            &["kind=\"tags_list\""][..],
        ),
        (
            "pacto_resolver_cache_lookups_total",
            &["cache=\"bundle\"", "result=\"miss\""][..],
        ),
    ] {
        assert!(
            metric_value(&metrics, name, labels) >= 1.0,
            "{name}{labels:?}:\n{metrics}"
        );
    }
    // ListRevisions hit the bundle pulled by Resolve.
    assert!(
        metric_value(
            &metrics,
            "pacto_resolver_cache_lookups_total",
            &["cache=\"bundle\"", "result=\"hit\""]
        ) >= 1.0,
        "{metrics}"
    );
    promtool_check(&metrics);
    server.stop().await;
}

#[tokio::test]
async fn default_allow_list_admits_only_the_status_writers_spiffe_id() {
    use clap::Parser;
    const WRITER_SPIFFE_ID: &str = "spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer";
    let registry = Registry::start().unwrap();
    // The allow-list the binary runs with when no --allowed-identities is given.
    let defaults = pacto_contract_resolver::Args::try_parse_from(["pacto-contract-resolver"])
        .unwrap()
        .server
        .allowed_identities;
    let allowed: Vec<&str> = defaults.iter().map(String::as_str).collect();
    let server = Server::start(&registry, &allowed).await;
    let inline = contract_yaml("svc", "1.0.0", "x");

    // (a) The status-writer's full identity, signed by another CA: refused at the handshake.
    let rogue = TestCa::new("tenant CA").unwrap();
    let cert = rogue
        .issue(&[
            "status-writer.pacto-operator-system.svc",
            STATUS_WRITER,
            WRITER_SPIFFE_ID,
        ])
        .unwrap();
    server
        .assert_refused_at_handshake("other-ca", &cert, &inline)
        .await;

    // (b) The right CA, but not the status-writer's URI SAN: what a tenant could request from a
    // shared issuer (bare DNS names, or the URI of a ServiceAccount in its own namespace or
    // under another trust domain) is refused by Resolve.
    let forged: [&[&str]; 5] = [
        &["status-writer.pacto-operator-system.svc"],
        &[
            STATUS_WRITER,
            "status-writer.pacto-operator-system.svc.cluster.local",
        ],
        &[
            "status-writer.pacto-operator-system.svc",
            "spiffe://pacto/ns/tenant/sa/pacto-status-writer",
        ],
        &["spiffe://other/ns/pacto-operator-system/sa/pacto-status-writer"],
        &["spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer-2"],
    ];
    for (i, identity) in forged.iter().enumerate() {
        let mut client = server.client(&format!("forged-{i}"), identity);
        let Err(status) = client.resolve(request("", &inline)).await else {
            panic!("the default allow-list admitted {identity:?}");
        };
        assert_eq!(
            status.code(),
            Code::PermissionDenied,
            "{identity:?}: {status:?}"
        );
        assert!(
            status.message().contains(identity[0]),
            "names the presented identity: {}",
            status.message()
        );
    }

    // (c) The right CA and the status-writer's URI SAN (next to its DNS names): admitted.
    let mut writer = server.client(
        "status-writer",
        &[
            "status-writer.pacto-operator-system.svc",
            STATUS_WRITER,
            WRITER_SPIFFE_ID,
        ],
    );
    let response = writer
        .resolve(request("", &inline))
        .await
        .unwrap()
        .into_inner();
    assert!(
        matches!(response.result, Some(resolve_response::Result::Resolved(_))),
        "{response:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn other_identities_and_certificates_are_refused() {
    let registry = Registry::start().unwrap();
    let server = Server::start(&registry, &[STATUS_WRITER]).await;
    let inline = contract_yaml("svc", "1.0.0", "x");

    // A valid certificate from the right CA, but not status-writer.
    for identity in ["observer.pacto.svc", "evaluator.pacto.svc"] {
        let mut client = server.client(identity, &[identity]);
        let status = client.resolve(request("", &inline)).await.unwrap_err();
        assert_eq!(
            status.code(),
            Code::PermissionDenied,
            "{identity}: {status:?}"
        );
        assert!(status.message().contains(identity), "{}", status.message());
        let status = client
            .list_revisions(ListRevisionsRequest {
                namespace: "n".into(),
                pacto_name: "p".into(),
                oci: "ghcr.io/a/b".into(),
                pull_secret_ref: String::new(),
                tags: Vec::new(),
                max_age_seconds: 0,
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied);
    }

    // status-writer's identity, signed by a CA the server does not trust: refused at the handshake.
    let rogue = TestCa::new("rogue CA").unwrap();
    let cert = rogue.issue(&[STATUS_WRITER]).unwrap();
    server
        .assert_refused_at_handshake("rogue", &cert, &inline)
        .await;

    // No client certificate at all.
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(server.ca.pem().as_bytes()).unwrap())
        .unwrap();
    let mut config =
        rustls::ClientConfig::builder_with_provider(pacto_runtime::tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let spec = ChannelSpec {
        address: server.grpc.to_string(),
        server_name: Some(SERVER_NAME.to_owned()),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(5),
    };
    let mut anonymous = ContractResolverClient::new(
        grpc::channel_with_tls_config(&spec, Arc::new(config)).unwrap(),
    );
    let status = anonymous.resolve(request("", &inline)).await.unwrap_err();
    assert_ne!(status.code(), Code::Ok);

    // The allowed identity still works on the same server.
    let mut ok = server.client("status-writer", &[STATUS_WRITER]);
    let response = ok.resolve(request("", &inline)).await.unwrap().into_inner();
    assert!(matches!(
        response.result,
        Some(resolve_response::Result::Resolved(_))
    ));

    eventually("the refusals to be counted", DEADLINE, || async {
        let (_, metrics) = admin_get(server.admin, "/metrics").await;
        let refused = metric_value(&metrics, "pacto_grpc_server_unauthorized_total", &[]);
        let handshakes = metric_value(
            &metrics,
            "pacto_tls_handshake_failures_total",
            &["reason=\"no_client_certificate\""],
        ) + metric_value(
            &metrics,
            "pacto_tls_handshake_failures_total",
            &["reason=\"untrusted_certificate\""],
        );
        if refused >= 4.0 && handshakes >= 2.0 {
            Ok(())
        } else {
            Err(metrics)
        }
    })
    .await;
    server.stop().await;
}
