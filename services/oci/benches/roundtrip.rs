//! Push / resolve / pull latency of a typical bundle against a real docker-registry on loopback
//! (started by the bench). Prints min / median / p90 per operation.
//!
//! Run: `cargo bench -p pacto-oci --bench roundtrip` (needs docker-registry installed).

use std::path::Path;
use std::time::{Duration, Instant};

use pacto_contract::bundle::{BundleFiles, Limits};
use pacto_contract::reference::Reference;
use pacto_oci::{BundleMeta, ClientOptions, Credentials, Progress, RegistryClient};
use pacto_testenv::registry::Registry;

const ROUNDS: usize = 30;

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<28} n={:<3} min {:>7.2} ms  median {:>7.2} ms  p90 {:>7.2} ms",
        samples.len(),
        ms(samples[0]),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() * 9 / 10]),
    );
}

fn main() -> anyhow::Result<()> {
    let registry = Registry::start()?;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/contracts/valid/spec-7.1-stateless-http-api");
    let files = BundleFiles::from_dir(&dir, &Limits::default())?;
    let meta = BundleMeta {
        name: "orders-api".into(),
        version: "1.0.0".into(),
        pacto_version: "2.0".into(),
    };
    let client = RegistryClient::new(
        ClientOptions {
            insecure_registries: vec![registry.host()],
            ..ClientOptions::default()
        },
        &Credentials::Anonymous,
    )?;
    let quiet = |_: Progress| {};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (mut push, mut resolve, mut pull) = (Vec::new(), Vec::new(), Vec::new());
    rt.block_on(async {
        for i in 0..ROUNDS {
            let r =
                Reference::parse_oci(&format!("oci://{}/bench/orders:1.0.{i}", registry.host()))?;
            let t = Instant::now();
            client.push(&r, &files, &meta, true, &quiet).await?;
            push.push(t.elapsed());
            let untagged = r.without_version();
            let t = Instant::now();
            let resolved = client.resolve(&untagged, None).await?;
            resolve.push(t.elapsed());
            let t = Instant::now();
            let pulled = client
                .pull(&resolved.reference.with_digest(&resolved.digest)?, &quiet)
                .await?;
            pull.push(t.elapsed());
            anyhow::ensure!(pulled.files == files, "round trip changed the bundle");
        }
        Ok::<_, anyhow::Error>(())
    })?;
    println!(
        "bundle: {} files, {} bytes uncompressed, {} bytes layer",
        files.len(),
        files.total_bytes(),
        files.to_tar_gz()?.len()
    );
    report("push (force, 3 uploads)", push);
    report("resolve highest semver", resolve);
    report("pull by digest + extract", pull);
    Ok(())
}
