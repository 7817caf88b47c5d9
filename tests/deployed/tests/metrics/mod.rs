//! Secure metrics on the real node (docs/metrics.md#secure-metrics): the tier installs with
//! `tls.mode: existing-secret` (certificates of a CA generated here, as the user's own PKI would
//! issue them: no cert-manager on the node), so every service and the node agent serve
//! `/metrics` over HTTPS and authorize each scrape with a TokenReview and a SubjectAccessReview.
//! A ServiceAccount bound to the chart's `pacto-metrics-reader` is the scraper: its token is
//! what Prometheus and the tier's own metric reads present.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context as _, Result, bail, ensure};
use pacto_deployed::{Deployed, OPERATOR_NAMESPACE};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use crate::agent::{AGENT, AGENT_NS};

/// The helmfile state values that switch the tier to existing-secret TLS: the Secrets
/// [`install_tls`] creates, one per release.
pub const TLS_VALUES: [&str; 7] = [
    "tls.mode=existing-secret",
    "tls.existingSecrets.contract-resolver=pacto-contract-resolver-tls",
    "tls.existingSecrets.observer=pacto-observer-tls",
    "tls.existingSecrets.evaluator=pacto-evaluator-tls",
    "tls.existingSecrets.status-writer=pacto-status-writer-tls",
    "nodeAgent.tls.mode=existing-secret",
    "nodeAgent.tls.existingSecret=pacto-node-agent-tls",
];

/// The trust domain of the local environment (`tls.trustDomain`).
const TRUST_DOMAIN: &str = "pacto";
/// The port of the HTTPS metrics listener (`metrics.securePort`).
pub const SECURE_PORT: u16 = 9443;
/// The scraper's ServiceAccount (bound to `pacto-metrics-reader`) and one bound to nothing.
const READER: &str = "pacto-metrics-scraper";
const STRANGER: &str = "pacto-metrics-stranger";
/// The ClusterRole the status-writer chart renders for scrapers (`metricsReader.name`).
const READER_ROLE: &str = "pacto-metrics-reader";
/// The services whose releases read a TLS Secret `pacto-<component>-tls` of the operator namespace.
const COMPONENTS: [&str; 4] = [
    "contract-resolver",
    "observer",
    "evaluator",
    "status-writer",
];

/// The files a scrape needs: the CA that signed every service's certificate, and the reader's
/// token (also as a file, for Prometheus's `credentials_file`).
#[derive(Debug)]
pub struct Scraper {
    dir: tempfile::TempDir,
    token: OnceLock<String>,
}

/// Created by [`install_tls`]; its token set by [`install_reader`].
static SCRAPER: OnceLock<Scraper> = OnceLock::new();

impl Scraper {
    /// The CA certificate (PEM) file.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The reader's token file.
    pub fn token_file(&self) -> PathBuf {
        self.dir.path().join("token")
    }

    fn token(&self) -> Result<&str> {
        self.token
            .get()
            .map(String::as_str)
            .context("the metrics reader is set up right after the first helmfile sync")
    }
}

/// The scraper's CA and token.
pub fn scraper() -> Result<&'static Scraper> {
    SCRAPER
        .get()
        .context("the TLS Secrets are created before the first helmfile sync")
}

/// The first DNS name of a component's certificate (`tls.identity`'s default), the server name
/// its metrics are verified under.
pub fn server_name(component: &str) -> String {
    format!("{component}.pacto.svc")
}

/// A certificate of `ca` for a service: its identity and Service names as DNS SANs, its
/// ServiceAccount's SPIFFE URI, server and client auth (as charts/pacto-lib's Certificate).
fn issue(ca: &(CertificateParams, KeyPair), dns: &[String], uri: &str) -> Result<(String, String)> {
    let key = KeyPair::generate().context("generating a key")?;
    let mut params = CertificateParams::new(dns.to_owned()).context("certificate parameters")?;
    params.distinguished_name.push(DnType::CommonName, &dns[0]);
    params.subject_alt_names.push(SanType::URI(
        uri.try_into().context("a URI SAN of ASCII characters")?,
    ));
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    let issuer = Issuer::from_params(&ca.0, &ca.1);
    let cert = params.signed_by(&key, &issuer).context("signing")?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A namespace, created unless it exists.
fn ensure_namespace(d: &Deployed, namespace: &str) -> Result<()> {
    d.shell(&format!(
        "kubectl create namespace {namespace} --dry-run=client -o yaml | kubectl apply -f -"
    ))?;
    Ok(())
}

/// Before the first sync: a CA, and for each service and the node agent a Secret with `ca.crt`,
/// `tls.crt` and `tls.key` ([`TLS_VALUES`] names them). The CA is kept for the scrapes.
pub fn install_tls(d: &Deployed) -> Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("pacto-deployed-pki-")
        .tempdir()
        .context("a directory for the certificates")?;
    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).context("CA parameters")?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "pacto deployed tier CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_pem = ca_params
        .self_signed(&ca_key)
        .context("self-signing the CA")?
        .pem();
    let ca = (ca_params, ca_key);
    std::fs::write(dir.path().join("ca.crt"), &ca_pem).context("writing the CA")?;

    let ns = OPERATOR_NAMESPACE;
    let mut secrets: Vec<(String, String, Vec<String>, String)> = Vec::new();
    for component in COMPONENTS {
        let release = format!("pacto-{component}");
        let dns = vec![
            server_name(component),
            release.clone(),
            format!("{release}.{ns}"),
            format!("{release}.{ns}.svc"),
            format!("{release}.{ns}.svc.cluster.local"),
        ];
        let uri = format!("spiffe://{TRUST_DOMAIN}/ns/{ns}/sa/{release}");
        secrets.push((ns.to_owned(), format!("{release}-tls"), dns, uri));
    }
    secrets.push((
        AGENT_NS.to_owned(),
        format!("{AGENT}-tls"),
        vec![server_name("node-agent")],
        format!("spiffe://{TRUST_DOMAIN}/ns/{AGENT_NS}/sa/{AGENT}"),
    ));
    ensure_namespace(d, OPERATOR_NAMESPACE)?;
    ensure_namespace(d, AGENT_NS)?;
    for (namespace, name, dns, uri) in secrets {
        let (cert, key) = issue(&ca, &dns, &uri)?;
        let sub = dir.path().join(&name);
        std::fs::create_dir_all(&sub).context("a directory for one Secret")?;
        std::fs::write(sub.join("ca.crt"), &ca_pem).context("writing ca.crt")?;
        std::fs::write(sub.join("tls.crt"), cert).context("writing tls.crt")?;
        std::fs::write(sub.join("tls.key"), key).context("writing tls.key")?;
        let p = sub.display();
        d.kubectl(&[
            "create",
            "secret",
            "generic",
            &name,
            "-n",
            &namespace,
            &format!("--from-file=ca.crt={p}/ca.crt"),
            &format!("--from-file=tls.crt={p}/tls.crt"),
            &format!("--from-file=tls.key={p}/tls.key"),
        ])?;
    }
    eprintln!("deployed: secure metrics: CA and five TLS Secrets created (existing-secret mode)");
    SCRAPER
        .set(Scraper {
            dir,
            token: OnceLock::new(),
        })
        .map_err(|_| anyhow::anyhow!("install_tls runs once"))?;
    Ok(())
}

/// A token of a ServiceAccount of the operator namespace (`kubectl create token`, the API
/// server's audience).
fn token(d: &Deployed, account: &str) -> Result<String> {
    Ok(d.kubectl(&[
        "create",
        "token",
        account,
        "-n",
        OPERATOR_NAMESPACE,
        "--duration=4h",
    ])?
    .trim()
    .to_owned())
}

/// After the first sync (the status-writer's release renders `pacto-metrics-reader`): the
/// scraper's ServiceAccount bound to it, one bound to nothing, and the scraper's token.
pub fn install_reader(d: &Deployed) -> Result<()> {
    let role = d.kubectl_json(&["get", "clusterrole", READER_ROLE])?;
    ensure!(
        role["rules"] == serde_json::json!([{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }]),
        "{READER_ROLE} grants other rights: {:#}",
        role["rules"]
    );
    for account in [READER, STRANGER] {
        d.kubectl(&[
            "create",
            "serviceaccount",
            account,
            "-n",
            OPERATOR_NAMESPACE,
        ])?;
    }
    d.kubectl(&[
        "create",
        "clusterrolebinding",
        READER,
        &format!("--clusterrole={READER_ROLE}"),
        &format!("--serviceaccount={OPERATOR_NAMESPACE}:{READER}"),
    ])?;
    let token = token(d, READER)?;
    let s = scraper()?;
    std::fs::write(s.token_file(), &token).context("writing the token")?;
    s.token
        .set(token)
        .map_err(|_| anyhow::anyhow!("install_reader runs once"))?;
    Ok(())
}

/// `curl` over HTTPS to `addr` (`ip:port`) as `server` (the certificate's name, verified with
/// the CA), with `token` as the bearer token when given: the HTTP status and the body.
fn curl(ca: &Path, addr: &str, server: &str, token: Option<&str>) -> Result<(u16, String)> {
    let (ip, port) = addr
        .rsplit_once(':')
        .with_context(|| format!("{addr} is not ip:port"))?;
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "10", "--cacert"])
        .arg(ca)
        .arg("--connect-to")
        .arg(format!("{server}:{port}:{ip}:{port}"))
        .args(["-w", "\n%{http_code}"]);
    if let Some(token) = token {
        cmd.arg("-H").arg(format!("Authorization: Bearer {token}"));
    }
    cmd.arg(format!("https://{server}:{port}/metrics"));
    let out = cmd.output().context("starting curl")?;
    ensure!(
        out.status.success(),
        "curl https://{server}:{port}/metrics at {addr} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text
        .rsplit_once('\n')
        .with_context(|| format!("curl printed no status: {text}"))?;
    let code = code
        .trim()
        .parse()
        .with_context(|| format!("curl's status {code:?}"))?;
    Ok((code, body.to_owned()))
}

/// `/metrics` of the endpoint `addr` (`ip:port` of a Service or a pod) of `component`, read as
/// the scraper does: HTTPS verified with the CA under [`server_name`], the reader's token.
pub fn scrape(addr: &str, component: &str) -> Result<String> {
    let s = scraper()?;
    let (code, body) = curl(
        &s.ca_file(),
        addr,
        &server_name(component),
        Some(s.token()?),
    )?;
    ensure!(
        code == 200,
        "{component} /metrics at {addr}: HTTP {code}: {body}"
    );
    Ok(body)
}

/// The metrics Service of `release` in `namespace` as `ClusterIP:port` of its `metrics` port.
pub fn metrics_service(d: &Deployed, namespace: &str, release: &str) -> Result<String> {
    let name = format!("{release}-metrics");
    let svc = d.kubectl_json(&["get", "service", "-n", namespace, &name])?;
    let ip = svc["spec"]["clusterIP"].as_str().unwrap_or_default();
    let port = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "metrics")
        .and_then(|p| p["port"].as_u64());
    let Some(port) = port.filter(|_| !ip.is_empty()) else {
        bail!(
            "{name} has no ClusterIP and `metrics` port: {:#}",
            svc["spec"]
        );
    };
    Ok(format!("{ip}:{port}"))
}

/// The refusals: on each secure endpoint, no token is `401`, the token of a ServiceAccount
/// bound to nothing `403`, the reader's `200`; the plain admin port answers `404` on `/metrics`
/// and keeps `/healthz`.
pub fn refusals(d: &Deployed, targets: &[(String, String, String)]) -> Result<()> {
    let s = scraper()?;
    let stranger = token(d, STRANGER)?;
    for (release, component, addr) in targets {
        let server = server_name(component);
        let (none, body) = curl(&s.ca_file(), addr, &server, None)?;
        ensure!(none == 401, "{release}: no token: HTTP {none} {body}");
        let (unbound, body) = curl(&s.ca_file(), addr, &server, Some(&stranger))?;
        ensure!(
            unbound == 403,
            "{release}: an unbound ServiceAccount's token: HTTP {unbound} {body}"
        );
        let (reader, _) = curl(&s.ca_file(), addr, &server, Some(s.token()?))?;
        ensure!(
            reader == 200,
            "{release}: the reader's token: HTTP {reader}"
        );
        eprintln!(
            "deployed: secure metrics: {release} at {addr}: no token 401, unbound token 403, reader 200"
        );
    }
    Ok(())
}

/// The plain admin port of `release` (in the operator namespace) no longer serves `/metrics`
/// (`404`) but keeps `/healthz`, through its metrics Service and the API server's proxy.
pub fn admin_port_keeps_only_probes(d: &Deployed, release: &str) -> Result<()> {
    let base =
        format!("/api/v1/namespaces/{OPERATOR_NAMESPACE}/services/{release}-metrics:admin/proxy");
    d.kubectl(&["get", "--raw", &format!("{base}/healthz")])?;
    match d.kubectl(&["get", "--raw", &format!("{base}/metrics")]) {
        Ok(text) => bail!("{release}: the admin port still serves /metrics: {text:.200}"),
        Err(e) => ensure!(
            format!("{e:#}").contains("NotFound") || format!("{e:#}").contains("404"),
            "{release}: /metrics on the admin port: {e:#}"
        ),
    }
    Ok(())
}

/// After `helmfile destroy`: removes what the tier itself created beside the releases (the TLS
/// Secrets of existing-secret mode, the scraper's and the stranger's ServiceAccounts and the
/// reader's binding), as a user removes their own Secrets, so that the uninstall check sees only
/// what the releases left.
pub fn remove(d: &Deployed) -> Result<()> {
    let mut secrets: Vec<String> = COMPONENTS
        .iter()
        .map(|component| format!("secret/pacto-{component}-tls"))
        .collect();
    secrets.extend([
        format!("serviceaccount/{READER}"),
        format!("serviceaccount/{STRANGER}"),
    ]);
    let mut args = vec!["delete", "--ignore-not-found", "-n", OPERATOR_NAMESPACE];
    args.extend(secrets.iter().map(String::as_str));
    d.kubectl(&args)?;
    let agent_secret = format!("secret/{AGENT}-tls");
    d.kubectl(&[
        "delete",
        "--ignore-not-found",
        "-n",
        AGENT_NS,
        &agent_secret,
    ])?;
    d.kubectl(&[
        "delete",
        "--ignore-not-found",
        &format!("clusterrolebinding/{READER}"),
    ])?;
    Ok(())
}
