//! Test support (feature `test-support`): a throw-away CA issuing certificates with chosen SANs,
//! written as the PEM files the services read, and the admin-port helpers (`admin_get`,
//! `metric_value`, `promtool_check`), [`JsonLog`] for a service process's JSON log, and
//! [`eventually`], the one wait-with-deadline of the tests. Used by the component, process,
//! cluster and end-to-end tests of every service.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

use crate::tls::TlsFiles;

/// Generating or writing test certificates failed.
#[derive(Debug, thiserror::Error)]
pub enum TestCertError {
    /// rcgen refused the parameters.
    #[error("certificate generation failed")]
    Generate(#[from] rcgen::Error),
    /// A file could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// A self-signed test certificate authority.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

/// A leaf certificate and its key, PEM encoded.
#[derive(Debug, Clone)]
pub struct TestCert {
    /// The certificate.
    pub cert_pem: String,
    /// The PKCS#8 private key.
    pub key_pem: String,
}

impl TestCa {
    /// A new CA with the given common name.
    pub fn new(common_name: &str) -> Result<Self, TestCertError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        Ok(Self { issuer })
    }

    /// The CA certificate (the trust bundle).
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// Issues a leaf usable as server and client certificate. Each name becomes a SAN: an IP
    /// address SAN if it parses as one, a URI SAN if it contains `://`, a DNS SAN otherwise.
    pub fn issue(&self, names: &[&str]) -> Result<TestCert, TestCertError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        if let Some(first) = names.first() {
            params.distinguished_name.push(DnType::CommonName, *first);
        }
        for name in names {
            let san = if let Ok(ip) = name.parse::<IpAddr>() {
                SanType::IpAddress(ip)
            } else if name.contains("://") {
                SanType::URI((*name).try_into()?)
            } else {
                SanType::DnsName((*name).try_into()?)
            };
            params.subject_alt_names.push(san);
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(TestCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Writes `ca.pem`, `<name>.pem` and `<name>-key.pem` into `dir` and returns their paths.
/// Rewriting them later (same paths) is how tests rotate certificates.
pub fn write_tls_files(
    dir: &Path,
    name: &str,
    ca_pem: &str,
    cert: &TestCert,
) -> Result<TlsFiles, TestCertError> {
    let files = TlsFiles {
        ca: dir.join(format!("{name}-ca.pem")),
        cert: dir.join(format!("{name}.pem")),
        key: dir.join(format!("{name}-key.pem")),
    };
    for (path, contents) in [
        (&files.ca, ca_pem),
        (&files.cert, cert.cert_pem.as_str()),
        (&files.key, cert.key_pem.as_str()),
    ] {
        write_atomically(path, contents)?;
    }
    Ok(files)
}

/// Writes via a temporary file and a rename, as Kubernetes Secret volume updates do, so a reader
/// never sees a half-written file.
fn write_atomically(path: &Path, contents: &str) -> Result<(), TestCertError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|source| TestCertError::Write {
            path: path.to_owned(),
            source,
        })
}

/// A plain HTTP/1.0 GET against an admin port: (status code, body). Panics when the connection
/// fails, as a test should.
pub async fn admin_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the admin port");
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: admin\r\n\r\n").as_bytes())
        .await
        .expect("send the admin request");
    let mut raw = String::new();
    stream
        .read_to_string(&mut raw)
        .await
        .expect("read the admin response");
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, body.to_owned())
}

/// The sum of a metric's series in Prometheus text whose labels contain every fragment of
/// `labels` (0 when there is none).
pub fn metric_value(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|line| labels.iter().all(|label| line.contains(label)))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Runs `promtool check metrics` on the exposition text; panics on any problem it reports, or
/// when promtool is missing (Debian package `prometheus`).
pub fn promtool_check(metrics: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool must be installed (Debian package `prometheus`)");
    child
        .stdin
        .take()
        .expect("promtool stdin is piped")
        .write_all(metrics.as_bytes())
        .expect("write the metrics to promtool");
    let output = child.wait_with_output().expect("wait for promtool");
    assert!(
        output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
        "promtool check metrics failed:\nstdout: {}\nstderr: {}\n--- metrics ---\n{metrics}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The JSON log lines a service process writes to stderr, read on a thread so that a test can
/// wait for a given line with a deadline. Every line read is kept for failure messages.
#[derive(Debug)]
pub struct JsonLog {
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
    deadline: std::time::Duration,
}

impl JsonLog {
    /// Starts reading `stderr` (e.g. `child.stderr.take()` of a process spawned with
    /// `Stdio::piped()` and `--log-format=json`); each wait gives up after `deadline`.
    pub fn follow(stderr: std::process::ChildStderr, deadline: std::time::Duration) -> Self {
        use std::io::BufRead;
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            lines,
            seen: Vec::new(),
            deadline,
        }
    }

    /// Reads lines until `pick` returns `Some` for one (parsed as JSON); panics with the log so
    /// far when the deadline passes or the process closes stderr first.
    pub fn wait_for<T>(&mut self, what: &str, pick: impl Fn(&serde_json::Value) -> Option<T>) -> T {
        let start = std::time::Instant::now();
        loop {
            let remaining = self
                .deadline
                .checked_sub(start.elapsed())
                .unwrap_or_else(|| panic!("timed out waiting for {what}; logs:\n{}", self.text()));
            let line = self
                .lines
                .recv_timeout(remaining)
                .unwrap_or_else(|_| panic!("no {what}; logs:\n{}", self.text()));
            self.seen.push(line.clone());
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(&line)
                && let Some(found) = pick(&value)
            {
                return found;
            }
        }
    }

    /// Waits for the line whose `message` field is `message`.
    pub fn wait_for_message(&mut self, message: &str) {
        self.wait_for(&format!("the log line {message:?}"), |v| {
            (v.get("message")?.as_str()? == message).then_some(())
        });
    }

    /// Every line read so far, one per line.
    pub fn text(&self) -> String {
        self.seen.join("\n")
    }
}

/// The `pacto_tls_handshake_failures_total{reason}` count on the admin port `admin`. The
/// recorder is process-wide, so a test compares it before and after its own connection, on a
/// `reason` no other test of its binary produces.
pub async fn handshake_failures(admin: std::net::SocketAddr, reason: &str) -> f64 {
    let (_, metrics) = admin_get(admin, "/metrics").await;
    let fragment = format!("reason=\"{reason}\"");
    metric_value(
        &metrics,
        "pacto_tls_handshake_failures_total",
        &[fragment.as_str()],
    )
}

/// Waits until [`handshake_failures`] for `reason` exceeds `before`.
pub async fn wait_for_handshake_failure(
    admin: std::net::SocketAddr,
    reason: &str,
    before: f64,
    deadline: std::time::Duration,
) {
    eventually(
        &format!("{reason} handshake failure above {before}"),
        deadline,
        || async { (handshake_failures(admin, reason).await > before).then_some(()) },
    )
    .await;
}

/// Sends SIGTERM to `child` (what Kubernetes sends a pod's containers); fails the test if
/// `kill` does.
pub fn sigterm(child: &std::process::Child) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("running kill");
    assert!(status.success(), "kill -TERM {}: {status}", child.id());
}

/// A service binary as the process tests start it: gRPC and admin on ephemeral loopback ports,
/// mTLS with `files`, accepting the client identities `allowed`, JSON logs on a piped stderr
/// (follow them with [`JsonLog`]), stdin and stdout closed, and no `PACTO_INSECURE` inherited.
/// `service` is the infix of the service's own variables (`RESOLVER` for
/// `PACTO_RESOLVER_LISTEN_ADDR`). The caller adds its own flags or variables, then spawns.
pub fn service_command(
    binary: &str,
    service: &str,
    files: &TlsFiles,
    allowed: &str,
) -> std::process::Command {
    let mut command = std::process::Command::new(binary);
    command
        .env(format!("PACTO_{service}_LISTEN_ADDR"), "127.0.0.1:0")
        .env(format!("PACTO_{service}_ALLOWED_IDENTITIES"), allowed)
        .env("PACTO_ADMIN_ADDR", "127.0.0.1:0")
        .env("PACTO_TLS_CA", &files.ca)
        .env("PACTO_TLS_CERT", &files.cert)
        .env("PACTO_TLS_KEY", &files.key)
        .env("PACTO_LOG_FORMAT", "json")
        .env_remove("PACTO_INSECURE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    command
}

/// A socket address logged with Debug formatting (`Some(127.0.0.1:1234)`) in field `field`.
pub fn addr_field(value: &serde_json::Value, field: &str) -> Option<std::net::SocketAddr> {
    let text = value.get(field)?.as_str()?;
    text.strip_prefix("Some(")?.strip_suffix(')')?.parse().ok()
}

/// Waits (polling, up to `deadline`) for `child` to exit; panics with `log` if it does not.
pub async fn wait_exit(
    child: &mut std::process::Child,
    deadline: std::time::Duration,
    log: &JsonLog,
) -> std::process::ExitStatus {
    let waited = within("the process to exit", deadline, || {
        let exit = child.try_wait().expect("poll the child process");
        std::future::ready(exit)
    })
    .await;
    waited.unwrap_or_else(|timeout| panic!("{timeout}; logs:\n{}", log.text()))
}

impl TestCa {
    /// Writes a certificate carrying `identity` (SANs) and this CA's bundle as `<name>*.pem` in
    /// `dir`.
    pub fn client_files(&self, dir: &Path, name: &str, identity: &[&str]) -> TlsFiles {
        let cert = self.issue(identity).expect("issue a test certificate");
        write_tls_files(dir, name, &self.pem(), &cert).expect("write the test certificate")
    }

    /// An mTLS channel to `addr`, expecting `server_name` on the server's certificate and
    /// presenting a certificate from this CA that carries `identity`.
    pub fn channel(
        &self,
        dir: &Path,
        name: &str,
        identity: &[&str],
        addr: std::net::SocketAddr,
        server_name: &str,
    ) -> tonic::transport::Channel {
        mtls_channel(addr, server_name, self.client_files(dir, name, identity))
    }
}

/// An mTLS channel to `addr` with the material of `files`, expecting `server_name`.
pub fn mtls_channel(
    addr: std::net::SocketAddr,
    server_name: &str,
    files: TlsFiles,
) -> tonic::transport::Channel {
    let store = crate::tls::TlsStore::load(files).expect("load the client TLS files");
    let spec = crate::grpc::ChannelSpec {
        address: addr.to_string(),
        server_name: Some(server_name.to_owned()),
        connect_timeout: std::time::Duration::from_secs(5),
        request_timeout: std::time::Duration::from_secs(30),
    };
    crate::grpc::channel(&spec, &crate::grpc::Transport::Mtls(store)).expect("build the channel")
}

/// An in-process service's endpoint on loopback: its certificate (for `server_name` and
/// 127.0.0.1, from the test CA), bound gRPC and admin listeners, and the [`ServeConfig`] to hand
/// to the service's `serve`.
///
/// [`ServeConfig`]: crate::service::ServeConfig
#[derive(Debug)]
pub struct TestEndpoint {
    /// The gRPC address.
    pub grpc: std::net::SocketAddr,
    /// The admin address.
    pub admin: std::net::SocketAddr,
    /// The server's TLS files (rewrite them to rotate).
    pub files: TlsFiles,
    /// The server's TLS material (reloadable).
    pub store: std::sync::Arc<crate::tls::TlsStore>,
}

impl TestEndpoint {
    /// Binds both listeners on ephemeral loopback ports, allowing `allowed` client identities.
    pub async fn bind(
        ca: &TestCa,
        dir: &Path,
        server_name: &str,
        allowed: &[&str],
    ) -> (Self, crate::service::ServeConfig) {
        let files = ca.client_files(dir, server_name, &[server_name, "127.0.0.1"]);
        let store = crate::tls::TlsStore::load(files.clone()).expect("load the server TLS files");
        let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let grpc = crate::grpc::bind(loopback).await.expect("bind gRPC");
        let admin = crate::admin::bind(loopback).await.expect("bind admin");
        let endpoint = Self {
            grpc: grpc.local_addr().expect("gRPC address"),
            admin: admin.local_addr().expect("admin address"),
            files,
            store: std::sync::Arc::clone(&store),
        };
        let config = crate::service::ServeConfig {
            grpc,
            admin,
            transport: crate::grpc::Transport::Mtls(store),
            allowed: crate::identity::AllowList::new(allowed),
        };
        (endpoint, config)
    }
}

/// What one attempt of an [`eventually`] check returns: done (with a value), or not yet (with,
/// when the check can tell, the state it saw, which the timeout message prints).
pub trait Attempt {
    /// The value the wait returns once the check holds.
    type Output;
    /// `Ok(value)` when the check holds, `Err(last observed state)` when not yet.
    fn outcome(self) -> Result<Self::Output, Option<String>>;
}

/// `Some(value)`: done; `None`: not yet.
impl<T> Attempt for Option<T> {
    type Output = T;
    fn outcome(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

/// `true`: done; `false`: not yet.
impl Attempt for bool {
    type Output = ();
    fn outcome(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

/// `Ok(value)`: done; `Err(state)`: not yet, `state` being what the check saw.
impl<T, E: std::fmt::Display> Attempt for Result<T, E> {
    type Output = T;
    fn outcome(self) -> Result<T, Option<String>> {
        self.map_err(|state| Some(format!("{state:#}")))
    }
}

/// A wait that did not see its condition within its deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedOut {
    /// What was waited for.
    pub what: String,
    /// How long.
    pub deadline: std::time::Duration,
    /// The state the last attempt saw, when the check reports one.
    pub last: Option<String>,
}

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "timed out after {:?} waiting for {}",
            self.deadline, self.what
        )?;
        match &self.last {
            Some(last) => write!(f, "; last observed:\n{last}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for TimedOut {}

/// The [`ServiceNames`](crate::service::ServiceNames) of a runtime under test: `grpc` and
/// `process` as given, no metrics of its own, a fixed build.
pub fn service_names(grpc: &'static str, process: &'static str) -> crate::service::ServiceNames {
    crate::service::ServiceNames {
        grpc,
        process,
        describe_metrics: || {},
        build: crate::build_info::BuildInfo {
            name: "pacto-test",
            version: "0.0.0",
            commit: "0",
            build_time: "2026-12-06T00:00:00Z",
        },
    }
}

/// The pause between two attempts: a two-hundredth of the deadline, at least 50 ms and at most
/// 500 ms (a 10 s wait polls every 50 ms, a one-minute wait every 300 ms).
pub fn poll_interval(deadline: std::time::Duration) -> std::time::Duration {
    (deadline / 200).clamp(
        std::time::Duration::from_millis(50),
        std::time::Duration::from_millis(500),
    )
}

/// Runs `check` until it holds (see [`Attempt`]: `Some`, `true` or `Ok`) and returns its value;
/// the first attempt runs at once, the next ones [`poll_interval`] apart. After `deadline` the
/// test fails with one message naming `what`, the deadline and the state the last attempt saw.
pub async fn eventually<A, F, Fut>(what: &str, deadline: std::time::Duration, check: F) -> A::Output
where
    A: Attempt,
    F: FnMut() -> Fut,
    Fut: Future<Output = A>,
{
    within(what, deadline, check)
        .await
        .unwrap_or_else(|timeout| panic!("{timeout}"))
}

/// [`eventually`] for callers that report the timeout themselves (with logs, or as their own
/// error): the same polling, with the timeout returned instead of failing the test.
pub async fn within<A, F, Fut>(
    what: &str,
    deadline: std::time::Duration,
    mut check: F,
) -> Result<A::Output, TimedOut>
where
    A: Attempt,
    F: FnMut() -> Fut,
    Fut: Future<Output = A>,
{
    let start = tokio::time::Instant::now();
    let interval = poll_interval(deadline);
    loop {
        let last = match check().await.outcome() {
            Ok(value) => return Ok(value),
            Err(last) => last,
        };
        if start.elapsed() >= deadline {
            return Err(TimedOut {
                what: what.to_owned(),
                deadline,
                last,
            });
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn eventually_returns_the_first_value_that_holds() {
        let mut attempts = 0;
        let value = eventually("the third attempt", Duration::from_secs(5), || {
            attempts += 1;
            std::future::ready((attempts >= 3).then_some(attempts))
        })
        .await;
        assert_eq!(value, 3);
    }

    #[tokio::test]
    async fn a_timeout_names_the_wait_and_the_last_observed_state() {
        let mut seen = 0;
        let timeout = within("a green light", Duration::from_millis(120), || {
            seen += 1;
            std::future::ready(Err::<(), _>(format!("red after {seen} looks")))
        })
        .await
        .unwrap_err();
        assert_eq!(timeout.what, "a green light");
        let message = timeout.to_string();
        assert!(
            message.starts_with(
                "timed out after 120ms waiting for a green light; last observed:\nred after "
            ),
            "{message}"
        );
        assert_eq!(timeout.last, Some(format!("red after {seen} looks")));
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 60ms waiting for nothing")]
    async fn eventually_fails_the_test_at_the_deadline() {
        eventually("nothing", Duration::from_millis(60), || {
            std::future::ready(false)
        })
        .await;
    }

    #[test]
    fn the_poll_interval_scales_with_the_deadline() {
        assert_eq!(
            poll_interval(Duration::from_secs(1)),
            Duration::from_millis(50)
        );
        assert_eq!(
            poll_interval(Duration::from_secs(20)),
            Duration::from_millis(100)
        );
        assert_eq!(
            poll_interval(Duration::from_mins(1)),
            Duration::from_millis(300)
        );
        assert_eq!(
            poll_interval(Duration::from_mins(10)),
            Duration::from_millis(500)
        );
    }
}
