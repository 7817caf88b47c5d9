//! Resolves/s with caches vs without, and registry HTTP requests per steady-state resolve of an
//! unchanged tag, counted from the docker-registry's own log (one `response completed` line per
//! request), not from the resolver's counters.
//!
//! `cargo bench -p pacto-contract-resolver --bench resolve` (needs `docker-registry`).

#![allow(clippy::unwrap_used, reason = "bench harness")]

use std::time::{Duration, Instant};

use pacto_contract::bundle::{BundleFiles, CONTRACT_FILE};
use pacto_contract::reference::Reference;
use pacto_contract_resolver::RegistryOptions;
use pacto_contract_resolver::{ContractSource, Outcome, ResolveInput};
use pacto_contract_resolver::{Resolver, ResolverConfig};
use pacto_oci::{BundleMeta, ClientOptions, Credentials, RegistryClient};
use pacto_testenv::registry::Registry;

const ITERATIONS: usize = 200;

fn config(host: &str, cached: bool) -> ResolverConfig {
    let mut config = ResolverConfig {
        registry: RegistryOptions {
            client: ClientOptions {
                insecure_registries: vec![host.to_owned()],
                ..ClientOptions::default()
            },
            ..RegistryOptions::default()
        },
        ..ResolverConfig::default()
    };
    if !cached {
        config.bundle_capacity = 0;
        config.tags_capacity = 0;
    }
    config
}

fn input(reference: &str) -> ResolveInput {
    ResolveInput {
        namespace: "bench".into(),
        pacto_name: "svc".into(),
        source: ContractSource::Oci(reference.to_owned()),
        pull_secret: None,
        overrides: Vec::new(),
        constraint: None,
        max_age: std::time::Duration::ZERO,
    }
}

/// Requests the registry has logged so far.
fn logged_requests(registry: &Registry) -> usize {
    registry
        .log()
        .lines()
        .filter(|l| l.contains("msg=\"response completed"))
        .count()
}

/// Waits until the registry's log stops growing (its lines trail the responses slightly).
async fn settled_requests(registry: &Registry) -> usize {
    let mut last = logged_requests(registry);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = logged_requests(registry);
        if now == last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

async fn measure(registry: &Registry, resolver: &Resolver, reference: &str) -> (f64, f64) {
    // Warm up (fills the caches when enabled).
    assert!(matches!(
        resolver.resolve(&input(reference)).await,
        Outcome::Resolved(_)
    ));
    let before = settled_requests(registry).await;
    let start = Instant::now();
    for _ in 0..ITERATIONS {
        match resolver.resolve(&input(reference)).await {
            Outcome::Resolved(_) => {}
            other => panic!("{other:?}"),
        }
    }
    let elapsed = start.elapsed();
    let after = settled_requests(registry).await;
    (
        ITERATIONS as f64 / elapsed.as_secs_f64(),
        (after - before) as f64 / ITERATIONS as f64,
    )
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let registry = Registry::start().unwrap();
    let host = registry.host();
    let pusher = RegistryClient::new(
        ClientOptions {
            insecure_registries: vec![host.clone()],
            ..ClientOptions::default()
        },
        &Credentials::Anonymous,
    )
    .unwrap();
    for version in ["1.0.0", "1.1.0", "2.0.0-rc.1", "latest"] {
        let mut files = BundleFiles::new();
        let yaml = format!(
            "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: {}\nconfigurations:\n  - name: app\n    required: true\n    schema: configuration/schema.json\n    values:\n      port: \"8080\"\n",
            if version == "latest" {
                "9.9.9"
            } else {
                version
            }
        );
        files.insert(CONTRACT_FILE, yaml.into_bytes());
        files.insert(
            "configuration/schema.json",
            br#"{"type":"object","properties":{"port":{"type":"string"}}}"#.to_vec(),
        );
        let reference = Reference::parse(&format!("{host}/acme/svc:{version}")).unwrap();
        let meta = BundleMeta {
            name: "svc".into(),
            version: version.into(),
            pacto_version: "2.0".into(),
        };
        pusher
            .push(&reference, &files, &meta, true, &|_| {})
            .await
            .unwrap();
    }

    println!(
        "contract-resolver bench: {ITERATIONS} sequential resolves per row, docker-registry on loopback"
    );
    println!(
        "{:<22} {:<10} {:>12} {:>22}",
        "reference", "caches", "resolves/s", "registry reqs/resolve"
    );
    for (label, reference) in [
        ("tagged (:1.0.0)", format!("{host}/acme/svc:1.0.0")),
        ("unversioned (Latest)", format!("{host}/acme/svc")),
    ] {
        for cached in [false, true] {
            let resolver = Resolver::new(config(&host, cached), None).unwrap();
            let (rate, requests) = measure(&registry, &resolver, &reference).await;
            println!(
                "{label:<22} {:<10} {rate:>12.0} {requests:>22.2}",
                if cached { "on" } else { "off" }
            );
            if cached {
                assert!(
                    requests <= 1.0,
                    "steady-state resolve of an unchanged tag made {requests} registry requests"
                );
            }
        }
    }
}
