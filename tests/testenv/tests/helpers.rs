//! The other real helpers: Prometheus scraping a real target, and process teardown guarantees
//! (no orphan processes when the owner is killed).
// Helper functions outside #[test] fns unwrap too: in a test a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::eventually;
use pacto_testenv::prometheus::{Prometheus, ScrapeTarget, first_value};

/// Pids of processes whose command line mentions `needle`.
fn pids_mentioning(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(needle) && is_alive(pid) {
            out.push(pid);
        }
    }
    out
}

fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[tokio::test]
async fn prometheus_scrapes_etcd_and_answers_queries() {
    let cp = common::cluster().await;
    let etcd = cp.etcd_url().trim_start_matches("http://").to_owned();
    let prom = Prometheus::start(
        &[ScrapeTarget::new("etcd", &[&etcd])],
        Duration::from_millis(500),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let result = prom
        .wait_for_query(
            "etcd_server_has_leader{job=\"etcd\"}",
            Duration::from_secs(30),
            |r| first_value(r).is_some(),
        )
        .await
        .unwrap();
    assert_eq!(first_value(&result), Some(1.0));
    let up = prom.query("up{job=\"etcd\"}").await.unwrap();
    assert_eq!(first_value(&up), Some(1.0));
    // A bad expression is reported, not retried.
    assert!(prom.query("sum(").await.is_err());
}

/// The dev-cluster binary owns a full control plane; SIGKILL on it leaves no process behind (the
/// watchdogs kill etcd, kube-apiserver and kube-controller-manager), and SIGTERM stops it cleanly.
#[tokio::test]
async fn no_orphans_when_the_owner_is_killed() {
    pacto_testenv::bins::require_kubernetes();
    for (signal, graceful) in [("-KILL", false), ("-TERM", true)] {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ready");
        let mut owner = Command::new(env!("CARGO_BIN_EXE_pacto-dev-cluster"))
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let needle = dir.path().display().to_string();
        eventually(
            "the dev cluster to be ready",
            Duration::from_mins(2),
            || {
                assert!(
                    owner.try_wait().unwrap().is_none(),
                    "dev cluster exited early"
                );
                std::future::ready(marker.exists())
            },
        )
        .await;
        let children = pids_mentioning(&needle);
        // etcd, kube-apiserver, kube-controller-manager and their watchdogs (plus the owner).
        let names: Vec<String> = children
            .iter()
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).ok())
            .map(|s| s.trim().to_owned())
            .collect();
        for expected in ["etcd", "kube-apiserver", "kube-controller"] {
            assert!(
                names.iter().any(|n| n.starts_with(expected)),
                "{expected} not running: {names:?}"
            );
        }
        let status = Command::new("kill")
            .args([signal, &owner.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = owner.wait().unwrap();
        assert_eq!(exit.success(), graceful, "{signal}: {exit:?}");
        eventually(
            "every control-plane process to exit",
            Duration::from_secs(30),
            || {
                let left = pids_mentioning(&needle);
                std::future::ready(if left.is_empty() {
                    Ok(())
                } else {
                    Err(format!("still running: {left:?}"))
                })
            },
        )
        .await;
        if graceful {
            assert!(!marker.exists());
        }
        assert!(Path::new(&dir.path().join("kube-apiserver.log")).exists());
    }
}

/// The `pacto-sim` binary does for a separate cluster client what the library does in-process:
/// schedules a bare Pod onto its node and reports it Running, Ready or not per `--not-ready`.
#[tokio::test]
async fn pacto_sim_binary_runs_pods() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;
    use kube::api::PostParams;
    use pacto_testenv::process::ManagedProcess;

    let cp = common::cluster().await;
    let client = cp.client().unwrap();
    for (not_ready, want) in [(false, "True"), (true, "False")] {
        let ns = cp.create_namespace("sim-bin").await.unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pacto-sim"));
        cmd.arg("--kubeconfig").arg(cp.kubeconfig_path()).args([
            "--namespace",
            &ns,
            "--nodes",
            "1",
        ]);
        if not_ready {
            cmd.arg("--not-ready");
        }
        let log = cp.dir().join(format!("{ns}-pacto-sim.log"));
        let _sim = ManagedProcess::spawn("pacto-sim", cmd, &log, &[]).unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "bare" },
            "spec": { "containers": [{ "name": "c", "image": "example.invalid/c:1" }] }
        }))
        .unwrap();
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let pod = eventually(
            "the simulated pod to run",
            Duration::from_secs(30),
            || async {
                let p = pods.get("bare").await.ok()?;
                let status = p.status.clone()?;
                (status.phase.as_deref() == Some("Running")).then_some(p)
            },
        )
        .await;
        assert_eq!(pod.spec.unwrap().node_name.as_deref(), Some("sim-node-0"));
        let status = pod.status.unwrap();
        let ready = status
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(
            ready.status,
            want,
            "log: {}",
            pacto_testenv::process::log_tail(&log, 2000)
        );
        assert!(status.pod_ip.unwrap().starts_with("10.244.0."));
    }
}
