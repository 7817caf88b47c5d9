//! The CA `charts/pacto-pki` generates, used the way cert-manager's CA Issuer uses it: leaf
//! certificates signed with its key (here by openssl, with the SANs the charts' Certificates
//! request) work with the services' real mTLS stack, and the contract-resolver, served with the
//! binary's default allow-list, admits the status-writer's certificate and refuses one carrying
//! only its DNS names or coming from another render's CA (docs/design/identity.md).

use std::{net::SocketAddr, path::Path, process::Command, sync::Arc};

use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use pacto_chart_tests::{Tools, documents};
use pacto_contract_resolver::{Resolver, ResolverService};
use pacto_proto::resolver::{
    ContractRef, ResolveRequest, contract_resolver_client::ContractResolverClient, resolve_response,
};
use pacto_runtime::{
    AllowList, CancellationToken,
    grpc::Transport,
    service::ServeConfig,
    testing::mtls_channel,
    tls::{TlsFiles, TlsStore},
};

const RESOLVER_NAME: &str = "contract-resolver.pacto.svc";

/// The CA certificate and key (PEM) of one render of the pacto-pki chart.
fn generated_ca(tools: &Tools, dir: &Path, name: &str) -> Result<(String, String)> {
    let text = tools.run(
        "helm",
        [
            "template",
            "pacto-pki",
            "charts/pacto-pki",
            "--namespace",
            "pacto-operator-system",
        ],
    )?;
    let docs = documents(&text)?;
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret" && d["metadata"]["namespace"] == "pacto-operator-system")
        .context("pacto-pki renders no CA Secret")?;
    let mut pem = Vec::new();
    for key in ["tls.crt", "tls.key"] {
        let encoded = secret["data"][key]
            .as_str()
            .with_context(|| format!("CA Secret without {key}"))?;
        let file = dir.join(format!("{name}-{key}.b64"));
        std::fs::write(&file, encoded)?;
        pem.push(run("base64", &["-d".as_ref(), file.as_os_str()])?);
    }
    let key = pem.pop().context("key")?;
    let cert = pem.pop().context("cert")?;
    Ok((cert, key))
}

fn run(program: &str, args: &[&std::ffi::OsStr]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program} (openssl and coreutils are needed)"))?;
    if !out.status.success() {
        bail!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// A leaf as the charts' Certificates request it (ECDSA P-256, server and client auth), with
/// `sans` in openssl's subjectAltName syntax, signed by the CA in `ca_cert`/`ca_key`.
fn leaf(dir: &Path, name: &str, ca: &(String, String), sans: &str) -> Result<TlsFiles> {
    let path = |suffix: &str| dir.join(format!("{name}{suffix}"));
    std::fs::write(path("-ca.pem"), &ca.0)?;
    std::fs::write(path("-ca-key.pem"), &ca.1)?;
    std::fs::write(
        path(".ext"),
        format!(
            "subjectAltName={sans}\nextendedKeyUsage=serverAuth,clientAuth\n\
             keyUsage=digitalSignature,keyEncipherment\n"
        ),
    )?;
    let os = |p: &std::path::PathBuf| p.as_os_str().to_owned();
    let subject = format!("/CN={name}");
    run(
        "openssl",
        &[
            "req".as_ref(),
            "-newkey".as_ref(),
            "ec".as_ref(),
            "-pkeyopt".as_ref(),
            "ec_paramgen_curve:P-256".as_ref(),
            "-nodes".as_ref(),
            "-subj".as_ref(),
            subject.as_ref(),
            "-keyout".as_ref(),
            &os(&path("-key.pem")),
            "-out".as_ref(),
            &os(&path(".csr")),
        ],
    )?;
    run(
        "openssl",
        &[
            "x509".as_ref(),
            "-req".as_ref(),
            "-in".as_ref(),
            &os(&path(".csr")),
            "-CA".as_ref(),
            &os(&path("-ca.pem")),
            "-CAkey".as_ref(),
            &os(&path("-ca-key.pem")),
            "-set_serial".as_ref(),
            "1".as_ref(),
            "-days".as_ref(),
            "1".as_ref(),
            "-extfile".as_ref(),
            &os(&path(".ext")),
            "-out".as_ref(),
            &os(&path(".pem")),
        ],
    )?;
    Ok(TlsFiles {
        ca: path("-ca.pem"),
        cert: path(".pem"),
        key: path("-key.pem"),
    })
}

fn request() -> ResolveRequest {
    ResolveRequest {
        namespace: "team-a".into(),
        pacto_name: "svc".into(),
        contract_ref: Some(ContractRef {
            oci: String::new(),
            inline: "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.0.0\n".into(),
            pull_secret_ref: String::new(),
        }),
        overrides: Vec::new(),
        max_age_seconds: 0,
    }
}

#[tokio::test]
async fn the_generated_ca_issues_certificates_the_resolver_admits_by_default() -> Result<()> {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let tools = Tools::new()?;
    let dir = tempfile::tempdir()?;
    let ca = generated_ca(&tools, dir.path(), "ca")?;

    // The contract-resolver with the chart's SANs and the binary's default allow-list.
    let server = leaf(
        dir.path(),
        "resolver",
        &ca,
        &format!(
            "DNS:{RESOLVER_NAME},DNS:pacto-contract-resolver.pacto-operator-system.svc,\
             URI:spiffe://pacto/ns/pacto-operator-system/sa/pacto-contract-resolver"
        ),
    )?;
    let args = pacto_contract_resolver::Args::try_parse_from(["pacto-contract-resolver"])?;
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let grpc = pacto_runtime::grpc::bind(loopback).await?;
    let addr = grpc.local_addr()?;
    let config = ServeConfig {
        grpc,
        admin: pacto_runtime::admin::bind(loopback).await?,
        transport: Transport::Mtls(TlsStore::load(server)?),
        allowed: AllowList::new(&args.server.allowed_identities),
    };
    let service = ResolverService::new(Arc::new(Resolver::new(args.resolver_config(), None)?));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(pacto_contract_resolver::serve(
        config,
        service,
        shutdown.clone(),
    ));
    let client =
        |files: TlsFiles| ContractResolverClient::new(mtls_channel(addr, RESOLVER_NAME, files));

    // The status-writer's certificate as its chart requests it: admitted.
    let writer = leaf(
        dir.path(),
        "writer",
        &ca,
        "DNS:status-writer.pacto.svc,URI:spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer",
    )?;
    let response = client(writer)
        .resolve(request())
        .await
        .context("the status-writer's certificate from the generated CA")?
        .into_inner();
    ensure!(
        matches!(response.result, Some(resolve_response::Result::Resolved(_))),
        "{response:?}"
    );

    // Its DNS names only, from the same CA: refused by Resolve.
    let dns_only = leaf(
        dir.path(),
        "dns-only",
        &ca,
        "DNS:status-writer.pacto.svc,DNS:status-writer.pacto-operator-system.svc",
    )?;
    let status = client(dns_only)
        .resolve(request())
        .await
        .err()
        .context("a certificate with only the status-writer's DNS names was admitted")?;
    ensure!(status.code() == tonic::Code::PermissionDenied, "{status:?}");

    // The full identity from the CA of another render: refused at the handshake.
    let other = generated_ca(&tools, dir.path(), "other")?;
    ensure!(other.0 != ca.0, "two renders generated the same CA");
    let mut foreign = leaf(
        dir.path(),
        "foreign",
        &other,
        "DNS:status-writer.pacto.svc,URI:spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer",
    )?;
    // Trust the server's CA, so that only the client certificate is foreign.
    foreign.ca = dir.path().join("resolver-ca.pem");
    let status = client(foreign)
        .resolve(request())
        .await
        .err()
        .context("a certificate from another CA was admitted")?;
    ensure!(
        !matches!(
            status.code(),
            tonic::Code::Ok | tonic::Code::PermissionDenied
        ),
        "refused before any RPC: {status:?}"
    );

    shutdown.cancel();
    task.await??;
    Ok(())
}

/// The value of `--<flag>=` in the container args of `chart`'s Deployment rendered with `sets`.
fn rendered_flag(tools: &Tools, chart: &str, sets: &[&str], flag: &str) -> Result<String> {
    let docs = pacto_chart_tests::template_in_operator_namespace(tools, chart, sets)?;
    let args = pacto_chart_tests::deployment_args(&docs)
        .with_context(|| format!("{chart} renders no Deployment"))?;
    let prefix = format!("--{flag}=");
    args.iter()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_owned))
        .with_context(|| format!("{chart} renders no {prefix}"))
}

/// The Evidence Server's certificate as its chart requests it (the URI SAN of its rendered
/// Certificate) is refused by the contract-resolver's default allow-list and admitted by the one
/// the resolver's chart renders with `evidenceServer.enabled` (what the helmfile sets).
#[tokio::test]
async fn the_resolver_admits_the_evidence_server_when_its_chart_enables_it() -> Result<()> {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let tools = Tools::new()?;
    let dir = tempfile::tempdir()?;
    let ca = generated_ca(&tools, dir.path(), "ca")?;

    let mut sets = pacto_chart_tests::required_sets("pacto-evidence-server").to_vec();
    sets.push("tls.mode=cert-manager");
    let mut args = vec![
        "template".to_owned(),
        "pacto-evidence-server".to_owned(),
        "charts/pacto-evidence-server".to_owned(),
        "--namespace".to_owned(),
        "pacto-operator-system".to_owned(),
    ];
    for set in &sets {
        args.push("--set".to_owned());
        args.push((*set).to_owned());
    }
    let docs = documents(&tools.run("helm", &args)?)?;
    let certificate = docs
        .iter()
        .find(|d| d["kind"] == "Certificate")
        .context("the evidence-server chart renders no Certificate")?;
    let uri = certificate["spec"]["uris"][0]
        .as_str()
        .context("the Certificate has no URI SAN")?
        .to_owned();
    ensure!(
        uri == "spiffe://pacto/ns/pacto-operator-system/sa/pacto-evidence-server",
        "{uri}"
    );
    let evidence = leaf(
        dir.path(),
        "evidence",
        &ca,
        &format!("DNS:evidence-server.pacto.svc,URI:{uri}"),
    )?;

    for (allowed, admitted) in [
        (
            rendered_flag(&tools, "pacto-contract-resolver", &[], "allowed-identities")?,
            false,
        ),
        (
            rendered_flag(
                &tools,
                "pacto-contract-resolver",
                &["evidenceServer.enabled=true"],
                "allowed-identities",
            )?,
            true,
        ),
    ] {
        let server = leaf(
            dir.path(),
            "resolver",
            &ca,
            &format!(
                "DNS:{RESOLVER_NAME},URI:spiffe://pacto/ns/pacto-operator-system/sa/pacto-contract-resolver"
            ),
        )?;
        let args = pacto_contract_resolver::Args::try_parse_from([
            "pacto-contract-resolver".to_owned(),
            format!("--allowed-identities={allowed}"),
        ])?;
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let grpc = pacto_runtime::grpc::bind(loopback).await?;
        let addr = grpc.local_addr()?;
        let config = ServeConfig {
            grpc,
            admin: pacto_runtime::admin::bind(loopback).await?,
            transport: Transport::Mtls(TlsStore::load(server)?),
            allowed: AllowList::new(&args.server.allowed_identities),
        };
        let service = ResolverService::new(Arc::new(Resolver::new(args.resolver_config(), None)?));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(pacto_contract_resolver::serve(
            config,
            service,
            shutdown.clone(),
        ));
        let answer =
            ContractResolverClient::new(mtls_channel(addr, RESOLVER_NAME, evidence.clone()))
                .resolve(request())
                .await;
        if admitted {
            let response = answer
                .with_context(|| format!("refused with --allowed-identities={allowed}"))?
                .into_inner();
            ensure!(
                matches!(response.result, Some(resolve_response::Result::Resolved(_))),
                "{response:?}"
            );
        } else {
            let status = answer
                .err()
                .with_context(|| format!("admitted with --allowed-identities={allowed}"))?;
            ensure!(status.code() == tonic::Code::PermissionDenied, "{status:?}");
        }
        shutdown.cancel();
        task.await??;
    }
    Ok(())
}
