//! `helmfile lint` and `helmfile template` for each environment, the release order, and the
//! committed golden output (`tests/charts/golden/helmfile-<env>.yaml`) with a drift check.

use anyhow::{Context, Result, ensure};
use pacto_chart_tests::{Tools, documents, repo_root};

const ENVIRONMENTS: &[&str] = &["local", "production"];
const REGENERATE: &str = "PACTO_UPDATE_GOLDEN=1 cargo test -p pacto-chart-tests --test helmfile";

/// `helmfile -e <env> template`, releases one at a time so the output order is stable.
pub fn helmfile_template(tools: &Tools, env: &str) -> Result<String> {
    Ok(tools.run(
        "helmfile",
        [
            "--environment",
            env,
            "template",
            "--concurrency",
            "1",
            "--skip-deps",
        ],
    )?)
}

/// Whether `scripts/node-images.sh` builds the node agent's image (`COMPONENTS=(... node-agent ...)`).
fn node_agent_image_is_built() -> Result<bool> {
    let script = std::fs::read_to_string(repo_root().join("scripts/node-images.sh"))
        .context("read scripts/node-images.sh")?;
    let components = script
        .lines()
        .find_map(|line| line.trim().strip_prefix("COMPONENTS=("))
        .context("scripts/node-images.sh has no COMPONENTS=(...) line")?;
    Ok(components
        .trim_end_matches(')')
        .split_whitespace()
        .any(|c| c == "node-agent"))
}

#[test]
fn helmfile_lints_in_every_environment() -> Result<()> {
    let tools = Tools::new()?;
    for env in ENVIRONMENTS {
        tools.run("helmfile", ["--environment", env, "lint", "--skip-deps"])?;
    }
    Ok(())
}

#[test]
fn helmfile_orders_crds_first_and_needs_are_declared() -> Result<()> {
    let tools = Tools::new()?;
    for env in ENVIRONMENTS {
        let out = tools.run(
            "helmfile",
            [
                "--environment",
                env,
                "list",
                "--output",
                "json",
                "--skip-charts",
            ],
        )?;
        let releases: serde_json::Value =
            serde_json::from_str(&out).context("helmfile list json")?;
        let names: Vec<&str> = releases
            .as_array()
            .context("list")?
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        for service in [
            "pacto-contract-resolver",
            "pacto-observer",
            "pacto-evaluator",
            "pacto-status-writer",
        ] {
            ensure!(
                names.contains(&service),
                "{env}: release {service} missing: {names:?}"
            );
        }
        ensure!(names.first() == Some(&"pacto-crds"), "{env}: {names:?}");
        ensure!(
            names.contains(&"pacto-pki") == (*env == "production"),
            "{env}: {names:?}"
        );
        // An environment deploys the node agent only once scripts/node-images.sh builds its
        // image (its COMPONENTS list names node-agent).
        ensure!(
            !names.contains(&"pacto-node-agent") || node_agent_image_is_built()?,
            "{env} deploys the node agent, but scripts/node-images.sh does not build its image: {names:?}"
        );
    }
    // The DAG: `helmfile template` renders in dependency order (crds, pki, node agent,
    // backends, status-writer), with the node agent switched on.
    let text = tools.run(
        "helmfile",
        [
            "--state-values-set",
            "nodeAgent.enabled=true",
            "--environment",
            "production",
            "template",
            "--concurrency",
            "1",
            "--skip-deps",
        ],
    )?;
    let order: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# Source: "))
        .filter_map(|s| s.split('/').next())
        .fold(Vec::new(), |mut acc, chart| {
            if acc.last() != Some(&chart) {
                acc.push(chart);
            }
            acc
        });
    ensure!(order.first() == Some(&"pacto-crds"), "{order:?}");
    ensure!(order.get(1) == Some(&"pacto-pki"), "{order:?}");
    let pos = |chart: &str| order.iter().position(|c| *c == chart);
    for backend in [
        "pacto-contract-resolver",
        "pacto-observer",
        "pacto-evaluator",
    ] {
        ensure!(
            pos(backend) < pos("pacto-status-writer"),
            "{backend} after the status-writer: {order:?}"
        );
    }
    // The agent's release creates its namespace, where the observer's Role goes: it comes
    // first (a fresh install failed with `namespaces "pacto-node-agent" not found` otherwise).
    ensure!(
        pos("pacto-node-agent").is_some() && pos("pacto-node-agent") < pos("pacto-observer"),
        "{order:?}"
    );
    Ok(())
}

#[test]
fn helmfile_template_matches_the_golden_files() -> Result<()> {
    let tools = Tools::new()?;
    let update = std::env::var_os("PACTO_UPDATE_GOLDEN").is_some_and(|v| v == "1");
    for env in ENVIRONMENTS {
        let text = helmfile_template(&tools, env)?;
        ensure!(
            !documents(&text)?.is_empty(),
            "{env}: helmfile renders nothing"
        );
        let path = repo_root()
            .join("tests/charts/golden")
            .join(format!("helmfile-{env}.yaml"));
        if update {
            std::fs::write(&path, &text)?;
            continue;
        }
        let golden = std::fs::read_to_string(&path).with_context(|| {
            format!("{} missing; regenerate with `{REGENERATE}`", path.display())
        })?;
        if golden != text {
            let line = golden
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| golden.lines().count().min(text.lines().count()));
            anyhow::bail!(
                "helmfile template ({env}) differs from {} from line {} on:\n  golden:   {:?}\n  rendered: {:?}\n\
                 If the change is intended, regenerate with `{REGENERATE}` and commit the golden files.",
                path.display(),
                line + 1,
                golden.lines().nth(line),
                text.lines().nth(line)
            );
        }
    }
    Ok(())
}

#[test]
fn helmfile_output_passes_kubernetes_validate_strict() -> Result<()> {
    let tools = Tools::new()?;
    let dir = tempfile::tempdir()?;
    for env in ENVIRONMENTS {
        let file = dir.path().join(format!("{env}.yaml"));
        std::fs::write(&file, helmfile_template(&tools, env)?)?;
        let out = tools.output(
            "kubernetes-validate",
            [
                "--strict".as_ref(),
                "--quiet".as_ref(),
                "--no-warn".as_ref(),
                file.as_os_str(),
            ],
        )?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ensure!(
            out.status.success() && !text.contains("ERROR"),
            "kubernetes-validate --strict rejected the {env} environment:\n{text}"
        );
    }
    Ok(())
}
