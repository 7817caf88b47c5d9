//! Every chart that runs one of our images can pin it by digest (docs/images.md, "Pinning by
//! digest"): `image.digest` (`sha256:<64 hex>`, checked by the chart's values schema) renders
//! `repository@digest` and the tag is ignored; the default, empty, keeps `repository:tag` with the
//! tag defaulting to the chart's `appVersion`.

use anyhow::{Context, Result, ensure};
use pacto_chart_tests::{SERVICE_CHARTS, Tools, documents, repo_root, required_sets};
use serde_json::Value;

const REPOSITORY: &str = "ghcr.io/trianalab/pacto-operator-rs";
const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The charts with a container of ours: the four service charts, the node agent's DaemonSet and
/// the Evidence Server; with the component their image is named after.
fn image_charts() -> Vec<(&'static str, &'static str)> {
    SERVICE_CHARTS
        .iter()
        .chain(&["pacto-node-agent", "pacto-evidence-server"])
        .map(|c| (*c, c.trim_start_matches("pacto-")))
        .collect()
}

/// The chart's `appVersion`.
fn app_version(chart: &str) -> Result<String> {
    let path = repo_root().join("charts").join(chart).join("Chart.yaml");
    let doc: serde_norway::Value = serde_norway::from_str(&std::fs::read_to_string(&path)?)?;
    doc.get("appVersion")
        .and_then(serde_norway::Value::as_str)
        .map(str::to_owned)
        .with_context(|| format!("{}: no appVersion", path.display()))
}

/// The image of every container of the chart's workloads, rendered with `sets`.
fn images(tools: &Tools, chart: &str, sets: &[&str]) -> Result<Vec<String>> {
    let mut args = vec![
        "template".to_owned(),
        chart.to_owned(),
        format!("charts/{chart}"),
    ];
    for set in required_sets(chart).iter().chain(sets) {
        args.push("--set".into());
        args.push((*set).to_owned());
    }
    let docs = documents(&tools.run("helm", &args)?)?;
    let images: Vec<String> = docs
        .iter()
        .filter(|d| d["kind"] == "Deployment" || d["kind"] == "DaemonSet")
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c["image"].as_str().map(str::to_owned))
        .collect();
    ensure!(!images.is_empty(), "{chart}: no container rendered");
    Ok(images)
}

#[test]
fn the_image_is_pinned_by_digest_when_one_is_set() -> Result<()> {
    let tools = Tools::new()?;
    for (chart, component) in image_charts() {
        let tagged = format!("{REPOSITORY}/{component}:{}", app_version(chart)?);
        let by_default = images(&tools, chart, &[])?;
        ensure!(
            by_default.iter().all(|i| *i == tagged),
            "{chart}: default image {by_default:?}, want {tagged}"
        );

        let digest_set = format!("image.digest={DIGEST}");
        let pinned = format!("{REPOSITORY}/{component}@{DIGEST}");
        let by_digest = images(&tools, chart, &[&digest_set, "image.tag=9.9.9"])?;
        ensure!(
            by_digest.iter().all(|i| *i == pinned),
            "{chart}: with image.digest the image is {by_digest:?}, want {pinned} (the tag ignored)"
        );

        let mirrored = images(
            &tools,
            chart,
            &[&digest_set, "image.repository=mirror.example.com/pacto/x"],
        )?;
        ensure!(
            mirrored
                .iter()
                .all(|i| *i == format!("mirror.example.com/pacto/x@{DIGEST}")),
            "{chart}: a repository override with a digest gives {mirrored:?}"
        );
    }
    Ok(())
}

#[test]
fn a_digest_that_is_not_sha256_hex_is_refused_by_the_schema() -> Result<()> {
    let tools = Tools::new()?;
    for (chart, _) in image_charts() {
        for bad in [
            "latest",
            "sha256:0123",
            "sha512:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "sha256:0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF",
        ] {
            let mut args = vec![
                "template".to_owned(),
                chart.to_owned(),
                format!("charts/{chart}"),
            ];
            for set in required_sets(chart) {
                args.push("--set".into());
                args.push((*set).to_owned());
            }
            args.push("--set".into());
            args.push(format!("image.digest={bad}"));
            let out = tools.output("helm", &args)?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            ensure!(!out.status.success(), "{chart} accepted image.digest={bad}");
            ensure!(
                stderr.contains("digest"),
                "{chart} image.digest={bad}: the error does not name the value: {stderr}"
            );
        }
    }
    Ok(())
}

/// Each chart's `values.yaml` offers `image.digest`, empty by default (so an upgrade keeps pulling
/// by tag until a digest is set).
#[test]
fn every_image_block_offers_an_empty_digest() -> Result<()> {
    for (chart, _) in image_charts() {
        let path = repo_root().join("charts").join(chart).join("values.yaml");
        let values: Value = serde_norway::from_str(&std::fs::read_to_string(&path)?)?;
        ensure!(
            values["image"]["digest"] == "",
            "{}: image.digest is {}, want \"\"",
            path.display(),
            values["image"]["digest"]
        );
    }
    Ok(())
}
