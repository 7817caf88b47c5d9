//! Test support (feature `testing`): the Evidence Server in process the way the tests of every
//! crate that talks to it start it — the real contract-resolver over mTLS (admitting only the
//! evidence-server's identity), the server over the real OCI store, and a Pacto bundle pushed to
//! a real registry. Used by this crate's tests, the status-writer's producer tests and the CLI's
//! `pacto evidence push` test; [`start_payments`] is the one setup of this crate's single-subject
//! tests and benches. Setup failures panic: they fail the test that asked.

#![allow(
    clippy::expect_used,
    reason = "test support: a failed setup step fails the test"
)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ed25519_dalek::SigningKey;
use pacto_contract::bundle::{BundleFiles, CONTRACT_FILE};
use pacto_evidence::store::{Store, StoreOptions, Subjects};
use pacto_evidence::{TrustStore, keys};
use pacto_oci::{
    ArtifactClient, BundleConfig, BundleMeta, ClientOptions, Credentials, ImageManifest, Keychain,
    OCI_MANIFEST_MEDIA_TYPE, Repository, sha256_digest,
};
use pacto_runtime::grpc::RetryPolicy;
use pacto_runtime::testing::{TestCa, TestEndpoint};
use pacto_runtime::{CancellationToken, spiffe_id};
use tokio::net::TcpListener;

use crate::{Api, ContractResolver, Limits, Snapshots, Verifier};

/// The contract-resolver's server name on its certificate.
pub const RESOLVER: &str = "contract-resolver.pacto.svc";

/// The evidence-server's SPIFFE identity (its chart's), the only one the resolver admits.
pub fn evidence_identity() -> String {
    spiffe_id("pacto", "pacto-operator-system", "pacto-evidence-server")
}

/// The real contract-resolver over mTLS on loopback, reading contracts from `registry_host`
/// (plain HTTP, no retries) and admitting only [`evidence_identity`]; its gRPC address.
pub async fn start_resolver(
    ca: &TestCa,
    dir: &Path,
    registry_host: &str,
    stop: &CancellationToken,
) -> SocketAddr {
    let identity = evidence_identity();
    let (endpoint, config) = TestEndpoint::bind(ca, dir, RESOLVER, &[identity.as_str()]).await;
    let mut resolver_config = pacto_contract_resolver::ResolverConfig::default();
    resolver_config.registry.client.insecure_registries = vec![registry_host.to_owned()];
    resolver_config.registry.max_retries = 0;
    let resolver = pacto_contract_resolver::Resolver::new(resolver_config, None)
        .expect("the contract-resolver");
    tokio::spawn(pacto_contract_resolver::serve(
        config,
        pacto_contract_resolver::ResolverService::new(Arc::new(resolver)),
        stop.clone(),
    ));
    endpoint.grpc
}

/// How [`start_server`] configures the server.
#[derive(Debug)]
pub struct ServerOptions {
    /// The registry holding the contracts and the records (plain HTTP).
    pub registry_host: String,
    /// `--subject` values.
    pub subjects: Vec<String>,
    /// The trust configuration.
    pub trust: TrustStore,
    /// `--producer` values.
    pub producers: Vec<String>,
    /// `--read-header-timeout`, `--read-body-timeout`, `--write-timeout`, `--max-connections`.
    pub limits: Limits,
    /// `--targets-max-age`.
    pub targets_max_age: Duration,
    /// The resolver client's retries.
    pub retry: RetryPolicy,
    /// The registry client's connect timeout (the client's default when `None`).
    pub registry_connect_timeout: Option<Duration>,
}

impl ServerOptions {
    /// Options with the flags' default limits, one resolver retry and the registry client's
    /// default timeouts.
    pub fn new(
        registry_host: &str,
        subjects: Vec<String>,
        trust: TrustStore,
        producers: Vec<String>,
    ) -> Self {
        Self {
            registry_host: registry_host.to_owned(),
            subjects,
            trust,
            producers,
            limits: Limits::default(),
            targets_max_age: Duration::from_secs(2),
            retry: RetryPolicy {
                max_retries: 1,
                min_delay: Duration::from_millis(10),
                max_delay: Duration::from_millis(50),
            },
            registry_connect_timeout: None,
        }
    }
}

/// The addresses of a server started by [`start_server`].
#[derive(Debug, Clone, Copy)]
pub struct Server {
    /// The ingestion API (plain HTTP).
    pub api: SocketAddr,
    /// The admin server (health, metrics).
    pub admin: SocketAddr,
}

impl Server {
    /// The API's base URL, `http://<api>` (what `--url`/`--evidence-url` take).
    pub fn url(&self) -> String {
        format!("http://{}", self.api)
    }
}

/// Starts the Evidence Server in process with the resolver at `resolver` (from
/// [`start_resolver`] with the same `ca`), until `stop` is cancelled.
pub async fn start_server(
    ca: &TestCa,
    dir: &Path,
    resolver: SocketAddr,
    options: ServerOptions,
    stop: &CancellationToken,
) -> Server {
    let subjects = Subjects::parse(&options.subjects).expect("the --subject values");
    let mut client = ClientOptions {
        insecure_registries: vec![options.registry_host.clone()],
        ..ClientOptions::default()
    };
    if let Some(timeout) = options.registry_connect_timeout {
        client.connect_timeout = timeout;
    }
    let storage = Store::new(
        subjects,
        StoreOptions {
            client,
            ..StoreOptions::default()
        },
        &Keychain::new(),
    )
    .expect("the evidence store");
    let channel = ca.channel(
        dir,
        "evidence-server",
        &[&evidence_identity()],
        resolver,
        RESOLVER,
    );
    let api = Api {
        verifier: Verifier::new(options.trust),
        producers: options.producers,
        storage,
        resolver: ContractResolver::new(channel, options.retry, "pacto-operator-system"),
        ready_timeout: Duration::from_secs(3),
        body_timeout: options.limits.body_timeout,
        snapshots: Snapshots::new(options.targets_max_age),
    };
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the API");
    let admin = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the admin server");
    let server = Server {
        api: listener.local_addr().expect("the API address"),
        admin: admin.local_addr().expect("the admin address"),
    };
    tokio::spawn(crate::serve(
        api,
        listener,
        admin,
        options.limits,
        stop.clone(),
    ));
    server
}

/// The resolver and the server with a fresh test CA whose files go to `dir`.
pub async fn start(dir: &Path, options: ServerOptions, stop: &CancellationToken) -> Server {
    let ca = TestCa::new("evidence server test CA").expect("the test CA");
    let resolver = start_resolver(&ca, dir, &options.registry_host, stop).await;
    start_server(&ca, dir, resolver, options, stop).await
}

/// The contract of [`start_payments`]: service `payments`, workload `job` (an evidence set that
/// observes `job` is compliant).
pub const PAYMENTS_CONTRACT: &str =
    "pactoVersion: \"2.0\"\nservice:\n  name: payments\n  version: 1.0.0\nworkload: job\n";

/// The structured trust configuration of `key`, written to `dir`: key id `ci-1` of producer
/// `ci`, subjects `payments*`, any contract repository.
pub fn trust(dir: &Path, key: &SigningKey) -> TrustStore {
    std::fs::write(
        dir.join("ci__ci-1.pub"),
        keys::verifying_key_text(&key.verifying_key()),
    )
    .expect("write the public key");
    let config = "apiVersion: pacto.dev/evidence-trust/v1\nkeys:\n  - keyId: ci-1\n    producerId: ci\n    publicKeyFile: ci__ci-1.pub\n    allowedSubjects: [\"payments*\"]\n    allowedContractRepos: []\n";
    let path = dir.join("trust.yaml");
    std::fs::write(&path, config).expect("write the trust configuration");
    TrustStore::load(&path).expect("the trust configuration")
}

/// A server over one subject, from [`start_payments`].
#[derive(Debug)]
pub struct Payments {
    /// The server's addresses.
    pub server: Server,
    /// The subject, `oci://<registry>/team/payments@<digest>`.
    pub subject: String,
    /// The contract manifest's digest.
    pub digest: String,
    /// The signing key of key id `ci-1`, producer `ci` ([`trust`]).
    pub key: SigningKey,
}

/// The setup of every single-subject test and bench: [`PAYMENTS_CONTRACT`] pushed as
/// `<registry_host>/team/payments:1.0.0`, a fresh key trusted as `ci-1` of producer `ci`
/// ([`trust`]), and the resolver and the server ([`start`], a fresh test CA whose files go to
/// `dir`) over that one subject, with producer `ci` and the options `configure` adjusts.
pub async fn start_payments(
    dir: &Path,
    registry_host: &str,
    configure: impl FnOnce(&mut ServerOptions),
    stop: &CancellationToken,
) -> Payments {
    let digest = push_bundle(registry_host, "team/payments", "1.0.0", PAYMENTS_CONTRACT).await;
    let subject = format!("oci://{registry_host}/team/payments@{digest}");
    let key = keys::generate().expect("a signing key");
    let mut options = ServerOptions::new(
        registry_host,
        vec![subject.clone()],
        trust(dir, &key),
        vec!["ci".to_owned()],
    );
    configure(&mut options);
    let server = start(dir, options, stop).await;
    Payments {
        server,
        subject,
        digest,
        key,
    }
}

/// Pushes `yaml` as the only file of a Pacto bundle `<host>/<repo>:<tag>` (the manifest
/// `pacto push` writes, through the artifact client); the manifest digest.
pub async fn push_bundle(host: &str, repo: &str, tag: &str, yaml: &str) -> String {
    let mut files = BundleFiles::new();
    files.insert(CONTRACT_FILE, yaml.as_bytes().to_vec());
    let tar = files.to_tar().expect("the bundle tar");
    let layer = pacto_contract::bundle::gzip(&tar).expect("the bundle layer");
    let meta = BundleMeta {
        name: repo.to_owned(),
        version: tag.to_owned(),
        pacto_version: "2.0".to_owned(),
    };
    let config = BundleConfig::new(&meta, &sha256_digest(&tar)).to_json();
    let manifest = ImageManifest::bundle(
        (&sha256_digest(&config), config.len() as u64),
        (&sha256_digest(&layer), layer.len() as u64),
    )
    .to_json();
    let client = ArtifactClient::new(
        ClientOptions {
            insecure_registries: vec![host.to_owned()],
            ..ClientOptions::default()
        },
        &Credentials::Anonymous,
    )
    .expect("the registry client");
    let repository = Repository::new(host, repo);
    client
        .push_blob(&repository, &config, true)
        .await
        .expect("push the config");
    client
        .push_blob(&repository, &layer, true)
        .await
        .expect("push the layer");
    client
        .put_manifest(&repository, tag, OCI_MANIFEST_MEDIA_TYPE, &manifest)
        .await
        .expect("push the manifest")
}
