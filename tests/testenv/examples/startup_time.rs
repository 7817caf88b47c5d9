//! Measures the warm start time of the test environment: from nothing to a ready kube-apiserver
//! (`/readyz`) with the test CRD Established, with and without kube-controller-manager.
//! Binaries must already be built (scripts/k8s-binaries.sh). Prints one line per run and the median.
//!
//!     cargo run -p pacto-testenv --example startup_time -- [runs]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pacto_testenv::{ControlPlane, ControlPlaneOptions};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(3);
    let crd = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/widgets-crd.yaml");
    for kcm in [false, true] {
        let mut times = Vec::new();
        for i in 0..runs {
            let mut options = ControlPlaneOptions::default().with_crd(&crd);
            options.controller_manager = kcm;
            let t = Instant::now();
            let cp = ControlPlane::start(options).await?;
            let elapsed = t.elapsed();
            let t_stop = Instant::now();
            drop(cp);
            println!(
                "run {i}: controller-manager={kcm} ready-with-crds={:.2}s teardown={:.2}s",
                elapsed.as_secs_f64(),
                t_stop.elapsed().as_secs_f64()
            );
            times.push(elapsed);
        }
        times.sort();
        let median = times
            .get(times.len() / 2)
            .copied()
            .unwrap_or(Duration::ZERO);
        println!(
            "median controller-manager={kcm}: {:.2}s over {runs} runs",
            median.as_secs_f64()
        );
    }
    Ok(())
}
