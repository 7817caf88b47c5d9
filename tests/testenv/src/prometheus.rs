//! A real Prometheus server (Debian's `/usr/bin/prometheus`) on loopback with a generated scrape
//! configuration and a temporary TSDB, plus a query helper with a deadline.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::bins::{self, BinaryError};
use crate::process::{ManagedProcess, ProcessError};

/// Errors of the Prometheus helper.
#[derive(Debug, thiserror::Error)]
pub enum PrometheusError {
    #[error(transparent)]
    Binary(#[from] BinaryError),
    #[error("creating the working directory")]
    WorkDir(#[source] std::io::Error),
    #[error("writing {path}")]
    WriteConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("finding a free loopback port")]
    FreePort(#[source] std::io::Error),
    #[error("starting prometheus")]
    Start(#[source] ProcessError),
    #[error("prometheus not ready within {timeout:?}; last error: {last}; log:\n{log}")]
    NotReady {
        timeout: Duration,
        last: String,
        log: String,
    },
    #[error("building the HTTP client")]
    HttpClient(#[source] reqwest::Error),
    #[error("querying {expr}")]
    Query {
        expr: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("query {expr}: the response is not valid JSON")]
    Decode {
        expr: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("query {expr} failed: {error}")]
    QueryFailed { expr: String, error: String },
    #[error(
        "query {expr}: no result satisfied the condition within {timeout:?}; last result: {last}"
    )]
    Timeout {
        expr: String,
        timeout: Duration,
        last: String,
    },
}

/// One scrape job: a name and `host:port` targets, scraped at `metrics_path`, over plain HTTP
/// or, with `https`, over HTTPS with a bearer token.
#[derive(Debug, Clone)]
pub struct ScrapeTarget {
    pub job: String,
    pub targets: Vec<String>,
    pub metrics_path: String,
    pub https: Option<HttpsScrape>,
}

/// HTTPS scraping as a secure metrics endpoint wants it: the server verified with `ca_file`
/// under `server_name` (the certificate's DNS name, not the target's address), and the token
/// read from `bearer_token_file` sent as `Authorization: Bearer`.
#[derive(Debug, Clone)]
pub struct HttpsScrape {
    pub ca_file: PathBuf,
    pub server_name: String,
    pub bearer_token_file: PathBuf,
}

impl ScrapeTarget {
    /// A job scraping `/metrics` on the given `host:port` targets.
    pub fn new(job: &str, targets: &[&str]) -> Self {
        Self {
            job: job.to_owned(),
            targets: targets.iter().map(|t| (*t).to_owned()).collect(),
            metrics_path: "/metrics".to_owned(),
            https: None,
        }
    }

    /// The same job over HTTPS.
    #[must_use]
    pub fn with_https(mut self, https: HttpsScrape) -> Self {
        self.https = Some(https);
        self
    }
}

/// A running Prometheus, stopped (and its TSDB removed) on drop.
pub struct Prometheus {
    url: String,
    http: reqwest::Client,
    process: ManagedProcess,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prometheus")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Renders the scrape configuration.
pub fn render_config(targets: &[ScrapeTarget], scrape_interval: Duration) -> String {
    let interval = format!("{}ms", scrape_interval.as_millis().max(100));
    let mut out = format!(
        "global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\nscrape_configs:\n"
    );
    for t in targets {
        let list = t
            .targets
            .iter()
            .map(|x| format!("'{x}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(
            out,
            "  - job_name: '{}'\n    metrics_path: '{}'\n    scrape_timeout: {interval}\n",
            t.job, t.metrics_path
        );
        if let Some(https) = &t.https {
            let _ = write!(
                out,
                "    scheme: https\n    authorization:\n      credentials_file: '{}'\n    tls_config:\n      ca_file: '{}'\n      server_name: '{}'\n      insecure_skip_verify: false\n",
                https.bearer_token_file.display(),
                https.ca_file.display(),
                https.server_name
            );
        }
        let _ = writeln!(out, "    static_configs:\n      - targets: [{list}]");
    }
    out
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` every `scrape_interval`, waits for `/-/ready`.
    pub async fn start(
        targets: &[ScrapeTarget],
        scrape_interval: Duration,
        timeout: Duration,
    ) -> Result<Self, PrometheusError> {
        let bin = bins::prometheus()?;
        let dir = tempfile::Builder::new()
            .prefix("pacto-prometheus-")
            .tempdir()
            .map_err(PrometheusError::WorkDir)?;
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, render_config(targets, scrape_interval)).map_err(|source| {
            PrometheusError::WriteConfig {
                path: config.clone(),
                source,
            }
        })?;
        let port = crate::ports::free_port().map_err(PrometheusError::FreePort)?;
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .current_dir(dir.path());
        let process = ManagedProcess::spawn(
            "prometheus",
            cmd,
            &dir.path().join("prometheus.log"),
            &[dir.path()],
        )
        .map_err(PrometheusError::Start)?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(PrometheusError::HttpClient)?;
        let mut prom = Self {
            url: format!("http://127.0.0.1:{port}"),
            http,
            process,
            _dir: dir,
        };
        let deadline = Instant::now() + timeout;
        let mut last;
        loop {
            if let Some(status) = prom.process.exited() {
                return Err(PrometheusError::NotReady {
                    timeout,
                    last: format!("prometheus exited: {status}"),
                    log: prom.process.log_tail(4000),
                });
            }
            match prom.http.get(format!("{}/-/ready", prom.url)).send().await {
                Ok(r) if r.status().is_success() => return Ok(prom),
                Ok(r) => last = format!("HTTP {}", r.status()),
                Err(e) => last = e.to_string(),
            }
            if Instant::now() >= deadline {
                return Err(PrometheusError::NotReady {
                    timeout,
                    last,
                    log: prom.process.log_tail(4000),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Base URL (`http://127.0.0.1:<port>`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Runs an instant query and returns `data.result` (a JSON array for vector results).
    pub async fn query(&self, expr: &str) -> Result<serde_json::Value, PrometheusError> {
        let url = reqwest::Url::parse_with_params(
            &format!("{}/api/v1/query", self.url),
            [("query", expr)],
        )
        .map_err(|e| PrometheusError::QueryFailed {
            expr: expr.to_owned(),
            error: e.to_string(),
        })?;
        let response =
            self.http
                .get(url)
                .send()
                .await
                .map_err(|source| PrometheusError::Query {
                    expr: expr.to_owned(),
                    source,
                })?;
        let text = response
            .text()
            .await
            .map_err(|source| PrometheusError::Query {
                expr: expr.to_owned(),
                source,
            })?;
        let mut body: serde_json::Value =
            serde_json::from_str(&text).map_err(|source| PrometheusError::Decode {
                expr: expr.to_owned(),
                source,
            })?;
        if body.get("status").and_then(serde_json::Value::as_str) != Some("success") {
            return Err(PrometheusError::QueryFailed {
                expr: expr.to_owned(),
                error: body
                    .get("error")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or(&text)
                    .to_owned(),
            });
        }
        Ok(body["data"]["result"].take())
    }

    /// Polls `expr` until `accept` returns true for its result, or `timeout` passes.
    pub async fn wait_for_query(
        &self,
        expr: &str,
        timeout: Duration,
        mut accept: impl FnMut(&serde_json::Value) -> bool,
    ) -> Result<serde_json::Value, PrometheusError> {
        let deadline = Instant::now() + timeout;
        let mut last;
        loop {
            match self.query(expr).await {
                Ok(result) if accept(&result) => return Ok(result),
                Ok(result) => last = result.to_string(),
                Err(e @ PrometheusError::QueryFailed { .. }) => return Err(e),
                Err(e) => last = e.to_string(),
            }
            if Instant::now() >= deadline {
                return Err(PrometheusError::Timeout {
                    expr: expr.to_owned(),
                    timeout,
                    last,
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The first sample value of a vector query result, parsed as a number.
pub fn first_value(result: &serde_json::Value) -> Option<f64> {
    result.get(0)?.get("value")?.get(1)?.as_str()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_one_job_per_target() {
        let cfg = render_config(
            &[
                ScrapeTarget::new("a", &["127.0.0.1:1", "127.0.0.1:2"]),
                ScrapeTarget::new("b", &["127.0.0.1:3"]),
            ],
            Duration::from_secs(1),
        );
        assert!(cfg.contains("scrape_interval: 1000ms"));
        assert!(cfg.contains("job_name: 'a'"));
        assert!(cfg.contains("targets: ['127.0.0.1:1', '127.0.0.1:2']"));
        assert!(cfg.contains("job_name: 'b'"));
    }

    #[test]
    fn renders_https_jobs_with_token_ca_and_server_name() {
        let cfg = render_config(
            &[
                ScrapeTarget::new("plain", &["127.0.0.1:1"]),
                ScrapeTarget::new("secure", &["10.0.0.1:9443"]).with_https(HttpsScrape {
                    ca_file: PathBuf::from("/tmp/ca.crt"),
                    server_name: "evaluator.pacto.svc".to_owned(),
                    bearer_token_file: PathBuf::from("/tmp/token"),
                }),
            ],
            Duration::from_secs(1),
        );
        let (plain, secure) = cfg.split_once("job_name: 'secure'").expect("two jobs");
        assert!(!plain.contains("scheme:"), "{plain}");
        for line in [
            "scheme: https",
            "credentials_file: '/tmp/token'",
            "ca_file: '/tmp/ca.crt'",
            "server_name: 'evaluator.pacto.svc'",
            "insecure_skip_verify: false",
            "targets: ['10.0.0.1:9443']",
        ] {
            assert!(secure.contains(line), "no {line:?} in {secure}");
        }
    }

    #[test]
    fn first_value_reads_vector_results() {
        let v = serde_json::json!([{ "metric": {}, "value": [1.0, "42"] }]);
        assert_eq!(first_value(&v), Some(42.0));
        assert_eq!(first_value(&serde_json::json!([])), None);
    }
}
