//! The contract resolver fits the memory its chart gives it (docs/design/resolution.md#memory):
//!
//! - the budgets the resolver derives from the command line the chart renders by default (bundle
//!   cache, concurrent pulls, concurrent parses and the fixed reserve) add up to no more than the
//!   container's `resources.limits.memory`;
//! - the real binary, started with the chart's default flags against a real registry, resolves
//!   8 gzip bombs at once (layers of a few hundred KiB that expand to 50 MiB of files, within
//!   every extraction limit: a 10 MiB `pacto.yaml` of 4.6 million plain scalars, 10 MiB YAML and
//!   JSON files a contract references, files of zeros) and then 10 distinct valid bundles, and
//!   its peak resident memory (`VmHWM` of /proc/<pid>/status) stays under that limit.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use clap::Parser as _;
use pacto_chart_tests::{Tools, documents, repo_root};
use pacto_contract::bundle::{
    BundleFiles, CONFIG_MEDIA_TYPE, CONTRACT_FILE, LAYER_MEDIA_TYPE, MANIFEST_MEDIA_TYPE,
};
use pacto_contract_resolver::sha256_hex;
use pacto_proto::resolver::{
    ContractRef, ResolveRequest, contract_resolver_client::ContractResolverClient, resolve_response,
};
use pacto_runtime::testing::{JsonLog, TestCa, addr_field, service_command, write_tls_files};
use pacto_testenv::registry::Registry;
use serde_json::Value;

const CHART: &str = "pacto-contract-resolver";
const SERVER_NAME: &str = "contract-resolver.pacto.svc";
const STATUS_WRITER: &str = "status-writer.pacto.svc";
const MIB: u64 = 1024 * 1024;

/// `helm template` of the chart with its default values.
fn rendered_deployment() -> Result<Value> {
    let tools = Tools::new()?;
    let out = tools.run(
        "helm",
        [
            "template",
            CHART,
            &format!("charts/{CHART}"),
            "--namespace",
            "pacto-operator-system",
        ],
    )?;
    documents(&out)?
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .context("the chart renders no Deployment")
}

fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

/// The container's plain environment variables (`value`, not `valueFrom`), e.g.
/// `MALLOC_ARENA_MAX`: the process runs with what the pod sets.
fn rendered_env(deployment: &Value) -> Vec<(String, String)> {
    container(deployment)["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_owned(),
                e["value"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

fn rendered_args(deployment: &Value) -> Vec<String> {
    container(deployment)["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A Kubernetes memory quantity (`256Mi`, `1Gi`, `300M`, `268435456`) in bytes.
fn quantity_bytes(text: &str) -> Result<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: u64 = number
        .parse()
        .with_context(|| format!("quantity {text:?}"))?;
    let unit: u64 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "k" => 1000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        other => bail!("unsupported quantity suffix {other:?} in {text:?}"),
    };
    Ok(number * unit)
}

/// `resources.limits.memory` of the chart's defaults, in bytes, as the Deployment renders it
/// and as charts/pacto-contract-resolver/values.yaml writes it (the two must agree).
fn chart_memory_limit(deployment: &Value) -> Result<u64> {
    let rendered = container(deployment)["resources"]["limits"]["memory"]
        .as_str()
        .context("the Deployment sets no memory limit")?;
    let values: Value = serde_norway::from_str(&std::fs::read_to_string(
        repo_root().join("charts").join(CHART).join("values.yaml"),
    )?)?;
    let written = values["resources"]["limits"]["memory"]
        .as_str()
        .context("values.yaml sets no resources.limits.memory")?;
    ensure!(
        rendered == written,
        "{rendered} rendered, {written} in values.yaml"
    );
    quantity_bytes(rendered)
}

#[test]
fn the_budgets_of_the_default_flags_fit_the_memory_limit() -> Result<()> {
    let deployment = rendered_deployment()?;
    let limit = chart_memory_limit(&deployment)?;
    let args = rendered_args(&deployment);
    let argv = std::iter::once(CHART.to_owned()).chain(args.iter().cloned());
    let parsed = pacto_contract_resolver::Args::try_parse_from(argv)
        .with_context(|| format!("the chart's arguments {args:?}"))?;
    let plan = parsed.memory_plan();
    println!("{plan}");
    ensure!(
        plan.limit == limit,
        "the resolver plans for {} bytes, the container has {limit}: {args:?}",
        plan.limit
    );
    ensure!(
        plan.total() <= limit,
        "the budgets add up to {} bytes, over the {limit}-byte limit:\n{plan}",
        plan.total()
    );
    ensure!(
        plan.concurrent_pulls >= 1 && plan.concurrent_parses >= 1,
        "{plan}"
    );
    // The configuration the binary runs with is the plan's.
    let config = parsed.resolver_config();
    ensure!(
        config.bundle_cache_bytes == plan.bundle_cache_bytes,
        "{plan}"
    );
    ensure!(
        config.registry.max_concurrent_pulls == plan.concurrent_pulls,
        "{plan}"
    );
    Ok(())
}

// ---- the real process ---------------------------------------------------------------------

/// Builds the resolver binary into the target directory and profile of this test (cargo does
/// not build other packages' binaries for a test) and returns its path.
fn resolver_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("the test binary is not in <target>/<profile>/deps")?
        .to_owned();
    let target_dir = profile_dir.parent().context("no target directory")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", CHART, "--bin", CHART])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(repo_root());
    if profile_dir.file_name().and_then(|n| n.to_str()) == Some("release") {
        cmd.arg("--release");
    }
    let out = cmd.output()?;
    ensure!(
        out.status.success(),
        "cargo build of {CHART} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(profile_dir.join(CHART))
}

/// One HTTP/1.1 request to the registry on loopback; returns the status and the headers.
fn http(
    host: &str,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(host)?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(ct) = content_type {
        let _ = write!(head, "Content-Type: {ct}\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("{method} {path}: {text}"))?;
    let headers = text.split("\r\n\r\n").next().unwrap_or_default().to_owned();
    Ok((status, headers))
}

fn push_blob(host: &str, repo: &str, bytes: &[u8]) -> Result<String> {
    let digest = format!("sha256:{}", sha256_hex(bytes));
    let (status, headers) = http(
        host,
        "POST",
        &format!("/v2/{repo}/blobs/uploads/"),
        None,
        &[],
    )?;
    ensure!(status == 202, "start upload: {status}\n{headers}");
    let location = headers
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("location")
                .then(|| v.trim().to_owned())
        })
        .context("no Location")?;
    let path = location
        .strip_prefix(&format!("http://{host}"))
        .unwrap_or(&location);
    let sep = if path.contains('?') { '&' } else { '?' };
    let (status, headers) = http(
        host,
        "PUT",
        &format!("{path}{sep}digest={digest}"),
        Some("application/octet-stream"),
        bytes,
    )?;
    ensure!(status == 201, "finish upload: {status}\n{headers}");
    Ok(digest)
}

/// Pushes `layer` (a tar.gz) as the single layer of a bundle artifact `<repo>:<tag>`.
fn push_layer(host: &str, repo: &str, tag: &str, layer: &[u8]) -> Result<()> {
    let config = br#"{"architecture":"","os":"","config":{}}"#;
    let config_digest = push_blob(host, repo, config)?;
    let layer_digest = push_blob(host, repo, layer)?;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": layer_digest, "size": layer.len()}],
    });
    let (status, headers) = http(
        host,
        "PUT",
        &format!("/v2/{repo}/manifests/{tag}"),
        Some(MANIFEST_MEDIA_TYPE),
        manifest.to_string().as_bytes(),
    )?;
    ensure!(status == 201, "put manifest: {status}\n{headers}");
    Ok(())
}

/// Just under the per-file extraction limit (10 MiB).
const FILE: usize = 10 * 1024 * 1024 - 4096;

/// `[1,1,…]`: a plain flow list of about `bytes` bytes, no aliases (the issue's 9.2 MB document).
fn flow_list(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes);
    out.push(b'[');
    while out.len() + 3 < bytes {
        out.extend_from_slice(b"1,");
    }
    out.extend_from_slice(b"1]\n");
    out
}

const VALID_HEAD: &str = "pactoVersion: \"2.0\"\nservice:\n  name: bomb\n  version: 1.0.0\n";

/// Gzip bomb `i` of 8: 50 MiB of files (each under 10 MiB), within every extraction limit.
fn bomb(i: usize) -> BundleFiles {
    let mut files = BundleFiles::new();
    let zeros = |n: usize| {
        let mut v = vec![0u8; FILE];
        v[..8].copy_from_slice(&(n as u64).to_le_bytes());
        v
    };
    if i.is_multiple_of(2) {
        // The contract itself is the 10 MiB flow list.
        files.insert(CONTRACT_FILE, flow_list(FILE));
    } else {
        // A small valid contract whose interface and configuration schema are 10 MiB documents.
        files.insert(
            CONTRACT_FILE,
            format!(
                "{VALID_HEAD}interfaces:\n  - name: api\n    type: openapi\n    ref: interfaces/api.yaml\n\
                 configurations:\n  - name: app\n    required: false\n    schema: configuration/schema.json\n"
            ),
        );
        files.insert("interfaces/api.yaml", flow_list(FILE));
        files.insert("configuration/schema.json", flow_list(FILE));
    }
    for n in 0..5 {
        if files.total_bytes() as usize + FILE > 50 * 1024 * 1024 {
            break;
        }
        files.insert(format!("docs/zeros-{n}.bin"), zeros(i * 10 + n));
    }
    files
}

/// Valid bundle `i` of 10: the spec-7.1 fixture under another version, so every digest differs.
fn valid(i: usize) -> Result<BundleFiles> {
    let dir = repo_root().join("tests/fixtures/contracts/valid/spec-7.1-stateless-http-api");
    let fixture = BundleFiles::from_dir(&dir, &pacto_contract::bundle::Limits::default())?;
    let mut files = BundleFiles::new();
    for (path, bytes) in fixture.iter() {
        if path == "expected.json" {
            continue;
        }
        if path == CONTRACT_FILE {
            let text = String::from_utf8(bytes.to_vec())?;
            files.insert(
                path,
                text.replace("version: 3.4.1", &format!("version: 3.4.{}", 100 + i)),
            );
        } else {
            files.insert(path, bytes.to_vec());
        }
    }
    Ok(files)
}

/// `VmHWM` (peak resident set) of a process, in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    status_field(pid, "VmHWM:")
}

fn status_field(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Kills the process when its resident set passes `ceiling` (the test has failed by then), so a
/// regression cannot take the machine's memory.
fn watchdog(pid: u32, ceiling: u64, stop: Arc<AtomicBool>, seen: Arc<AtomicU64>) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match status_field(pid, "VmRSS:") {
                Some(rss) => {
                    seen.fetch_max(rss, Ordering::Relaxed);
                    if rss > ceiling {
                        let _ = Command::new("kill")
                            .args(["-KILL", &pid.to_string()])
                            .status();
                        return;
                    }
                }
                None => return,
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
}

/// The chart's arguments, minus what a process on loopback must set itself (addresses, TLS
/// files, the allow-list, secure metrics, whose reviews need the Kubernetes API), plus plain
/// HTTP for the test registry and no Kubernetes.
fn process_args(chart_args: &[String], registry: &str) -> Vec<String> {
    const OWN: &[&str] = &[
        "--listen-addr=",
        "--admin-addr=",
        "--metrics-secure",
        "--metrics-addr=",
        "--allowed-identities=",
        "--tls-ca=",
        "--tls-cert=",
        "--tls-key=",
    ];
    let mut args: Vec<String> = chart_args
        .iter()
        .filter(|a| !OWN.iter().any(|p| a.starts_with(p)))
        .cloned()
        .collect();
    args.push(format!("--insecure-registries={registry}"));
    args.push("--no-kubernetes".to_owned());
    args
}

fn request(host: &str, repo: &str) -> ResolveRequest {
    ResolveRequest {
        namespace: "team".into(),
        pacto_name: repo.replace('/', "-"),
        contract_ref: Some(ContractRef {
            oci: format!("oci://{host}/{repo}:1.0.0"),
            inline: String::new(),
            pull_secret_ref: String::new(),
        }),
        overrides: Vec::new(),
        max_age_seconds: 0,
    }
}

/// The outcome of one Resolve, as `resolved`, `invalid: …` or `unavailable: …`.
async fn resolve(
    client: &ContractResolverClient<tonic::transport::Channel>,
    request: ResolveRequest,
) -> String {
    match client.clone().resolve(request).await {
        Err(status) => format!("rpc error: {status}"),
        Ok(response) => match response.into_inner().result {
            Some(resolve_response::Result::Resolved(_)) => "resolved".to_owned(),
            Some(resolve_response::Result::Invalid(i)) => format!("invalid: {}", i.message),
            Some(resolve_response::Result::Unavailable(u)) => format!("unavailable: {}", u.reason),
            None => "empty answer".to_owned(),
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_resolver_resolves_gzip_bombs_and_valid_bundles_within_the_chart_memory_limit()
-> Result<()> {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let deployment = rendered_deployment()?;
    let limit = chart_memory_limit(&deployment)?;
    let binary = resolver_binary()?;
    let registry = Registry::start()?;
    let host = registry.host();

    let started = Instant::now();
    let mut layers = Vec::new();
    for i in 0..8 {
        let files = bomb(i);
        let layer = files.to_tar_gz()?;
        println!(
            "bomb {i}: {} files, {} MiB expanded, layer {} KiB",
            files.len(),
            files.total_bytes() / MIB,
            layer.len() / 1024
        );
        layers.push((format!("bombs/b{i}"), layer));
    }
    for i in 0..10 {
        layers.push((format!("valid/v{i}"), valid(i)?.to_tar_gz()?));
    }
    for (repo, layer) in &layers {
        push_layer(&host, repo, "1.0.0", layer)?;
    }
    drop(layers);
    println!(
        "bundles built and pushed in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let dir = tempfile::tempdir()?;
    let ca = TestCa::new("pacto resolver memory test CA")?;
    let cert = ca.issue(&[SERVER_NAME, "127.0.0.1"])?;
    let files = write_tls_files(dir.path(), "server", &ca.pem(), &cert)?;
    let args = process_args(&rendered_args(&deployment), &host);
    println!("{CHART} {}", args.join(" "));
    let mut child: Child = service_command(
        binary.to_str().context("path")?,
        "RESOLVER",
        &files,
        STATUS_WRITER,
    )
    .args(&args)
    .envs(rendered_env(&deployment))
    .env_remove("KUBECONFIG")
    .spawn()?;
    let pid = child.id();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(AtomicU64::new(0));
    watchdog(pid, 4 * limit, Arc::clone(&stop), Arc::clone(&seen));
    let mut log = JsonLog::follow(
        child.stderr.take().context("stderr")?,
        Duration::from_mins(5),
    );
    let grpc_addr = log.wait_for("the serving log line", |v| {
        (v.get("message")?.as_str()? == "serving ContractResolver")
            .then(|| addr_field(v, "grpc_addr"))
            .flatten()
    });
    let idle = peak_rss(pid).unwrap_or_default();
    let client = ContractResolverClient::new(ca.channel(
        dir.path(),
        "client",
        &[STATUS_WRITER],
        grpc_addr,
        SERVER_NAME,
    ));

    // 8 bombs at once.
    let bombs = futures_join(
        (0..8)
            .map(|i| {
                let client = client.clone();
                let request = request(&host, &format!("bombs/b{i}"));
                tokio::spawn(async move { resolve(&client, request).await })
            })
            .collect(),
    )
    .await;
    let after_bombs = peak_rss(pid);
    // Then 10 distinct valid bundles at once.
    let valids = futures_join(
        (0..10)
            .map(|i| {
                let client = client.clone();
                let request = request(&host, &format!("valid/v{i}"));
                tokio::spawn(async move { resolve(&client, request).await })
            })
            .collect(),
    )
    .await;
    let peak = peak_rss(pid);
    stop.store(true, Ordering::Relaxed);
    let alive = child.try_wait()?.is_none();
    let _ = child.kill();
    let _ = child.wait();

    let mib = |b: u64| b as f64 / MIB as f64;
    for (i, outcome) in bombs.iter().enumerate() {
        println!("bomb {i}: {outcome}");
    }
    for (i, outcome) in valids.iter().enumerate() {
        println!("valid {i}: {outcome}");
    }
    println!(
        "resolver VmHWM: idle {:.1} MiB, after the bombs {}, at the end {} (highest VmRSS sampled \
         {:.1} MiB); chart limit {:.0} MiB",
        mib(idle),
        after_bombs.map_or("unknown".to_owned(), |b| format!("{:.1} MiB", mib(b))),
        peak.map_or("unknown".to_owned(), |b| format!("{:.1} MiB", mib(b))),
        mib(seen.load(Ordering::Relaxed)),
        mib(limit)
    );
    ensure!(
        alive,
        "the resolver died (killed past {:.0} MiB resident, or crashed); logs:\n{}",
        mib(4 * limit),
        log.text()
    );
    let peak = peak.context("no VmHWM")?;
    ensure!(
        peak < limit,
        "peak RSS {:.1} MiB is over the chart's {:.0} MiB limit",
        mib(peak),
        mib(limit)
    );
    for (i, outcome) in bombs.iter().enumerate() {
        ensure!(outcome.starts_with("invalid: "), "bomb {i}: {outcome}");
    }
    for (i, outcome) in valids.iter().enumerate() {
        ensure!(outcome == "resolved", "valid {i}: {outcome}");
    }
    Ok(())
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<String>>) -> Vec<String> {
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.unwrap_or_else(|e| format!("task failed: {e}")));
    }
    out
}
