//! Shared helpers of pacto-testenv's integration tests.
#![allow(dead_code)] // each test binary uses a subset

use std::path::PathBuf;

use kube::CustomResource;
use pacto_testenv::{ControlPlane, ControlPlaneOptions};
use serde::{Deserialize, Serialize};

/// The test CRD (`tests/fixtures/widgets-crd.yaml`).
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "testenv.pacto.trianalab.io",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    schema = "disabled"
)]
pub struct WidgetSpec {
    pub size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<i64>,
}

pub fn widget_crd() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/widgets-crd.yaml")
}

pub fn widget(name: &str, size: i64) -> Widget {
    Widget::new(name, WidgetSpec { size, color: None })
}

/// The control plane shared by the tests of one test binary (no kube-controller-manager).
pub async fn cluster() -> &'static ControlPlane {
    pacto_testenv::shared(|| ControlPlaneOptions::default().with_crd(widget_crd()))
        .await
        .expect("start the control plane (build binaries with scripts/k8s-binaries.sh)")
}

pub use pacto_runtime::testing::eventually;

/// Runs a command and returns stdout, failing with stderr when it exits non-zero.
pub fn run(mut cmd: std::process::Command) -> String {
    let out = cmd.output().expect("run command");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
