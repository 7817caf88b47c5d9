//! The container images agree with the charts that run them (docs/images.md):
//! - every chart that runs a container (its own spec naming `ghcr.io/trianalab/pacto-operator-rs`,
//!   or the library's Deployment) has a service with a `Containerfile`;
//! - each service `Containerfile` builds `FROM scratch`, starts the crate's own binary from
//!   `/usr/local/bin`, and runs as the non-root user the chart's `podSecurityContext` names (the
//!   node agent as root, in its chart's privileged container: [`ROOT_IMAGES`]);
//! - `release/components` releases (and `scripts/node-images.sh` builds) exactly those services
//!   under the repository the charts default to.

use std::{collections::BTreeSet, path::Path};

use anyhow::{Context, Result, bail, ensure};
use pacto_chart_tests::{LIBRARY_CHART, SERVICE_CHARTS, repo_root};
use serde_norway::Value;

/// The repository the charts' images default to (`pacto.image` in the library chart).
const IMAGE_REPOSITORY: &str = "ghcr.io/trianalab/pacto-operator-rs";

/// Charts with a default image whose service has no Containerfile yet, and why. An entry whose
/// service directory appears fails the test, so the exception cannot outlive its reason.
const NOT_YET_BUILT: &[(&str, &str)] = &[];

/// Images that run as root, and the chart whose privileged container needs it: the node agent
/// loads eBPF programs and reads every process's namespaces under /proc.
const ROOT_IMAGES: &[(&str, &str)] = &[(
    "node-agent",
    "charts/pacto-node-agent/templates/daemonset.yaml",
)];

/// Charts with an image of their own that are not library service charts: the Evidence Server
/// (its own Deployment, released separately).
const OTHER_IMAGES: &[&str] = &["evidence-server"];

/// Every component with an image: the service charts, the root images and [`OTHER_IMAGES`].
fn image_components() -> Vec<&'static str> {
    SERVICE_CHARTS
        .iter()
        .map(|c| c.trim_start_matches("pacto-"))
        .chain(ROOT_IMAGES.iter().map(|(c, _)| *c))
        .chain(OTHER_IMAGES.iter().copied())
        .collect()
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// The instructions of a Containerfile: (keyword in upper case, arguments), comments and blank
/// lines skipped. Our Containerfiles use no line continuations.
fn instructions(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (kw, args) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            (kw.to_ascii_uppercase(), args.trim().to_owned())
        })
        .collect()
}

/// The `name` of the single `[[bin]]` target in a crate manifest.
fn binary_name(manifest: &str) -> Option<String> {
    let after = manifest.split("[[bin]]").nth(1)?;
    after
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with('['))
        .find_map(|l| l.strip_prefix("name"))
        .and_then(|rest| rest.trim().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_owned())
}

/// `podSecurityContext.<key>` of a chart's values.yaml.
fn pod_security(values: &Value, key: &str) -> Option<u64> {
    values.get("podSecurityContext")?.get(key)?.as_u64()
}

/// Checks one service's Containerfile against its crate and chart.
fn check_containerfile(component: &str) -> Result<()> {
    let root = repo_root();
    let file = root.join("services").join(component).join("Containerfile");
    let text = read(&file)?;
    let instr = instructions(&text);
    let shown = file.display();

    ensure!(
        instr.first() == Some(&("FROM".to_owned(), "scratch".to_owned())),
        "{shown}: the first instruction must be `FROM scratch`, found {:?}",
        instr.first()
    );
    ensure!(
        instr.iter().all(|(kw, _)| kw != "RUN"),
        "{shown}: a scratch image cannot RUN anything; stage files with scripts/stage-service-image.sh"
    );

    let manifest = read(&root.join("services").join(component).join("Cargo.toml"))?;
    let binary = binary_name(&manifest)
        .with_context(|| format!("services/{component}/Cargo.toml has no [[bin]] name"))?;
    let entrypoints: Vec<&String> = instr
        .iter()
        .filter(|(kw, _)| kw == "ENTRYPOINT")
        .map(|(_, a)| a)
        .collect();
    let [entrypoint] = entrypoints.as_slice() else {
        bail!("{shown}: expected one ENTRYPOINT, found {entrypoints:?}");
    };
    let argv: Vec<String> = serde_json::from_str(entrypoint).with_context(|| {
        format!("{shown}: ENTRYPOINT must be a JSON array (exec form), found {entrypoint}")
    })?;
    let want = format!("/usr/local/bin/{binary}");
    ensure!(
        argv.first() == Some(&want),
        "{shown}: ENTRYPOINT starts {:?}, but the crate's binary is {want}",
        argv.first()
    );

    let users: Vec<&String> = instr
        .iter()
        .filter(|(kw, _)| kw == "USER")
        .map(|(_, a)| a)
        .collect();
    let [user] = users.as_slice() else {
        bail!("{shown}: expected one USER instruction, found {users:?}");
    };
    let (uid, gid) = user
        .split_once(':')
        .and_then(|(u, g)| Some((u.parse::<u64>().ok()?, g.parse::<u64>().ok()?)))
        .with_context(|| format!("{shown}: USER must be numeric uid:gid, found {user}"))?;
    if let Some((_, template)) = ROOT_IMAGES.iter().find(|(c, _)| *c == component) {
        ensure!(
            uid == 0 && gid == 0,
            "{shown}: USER {user}, but the image must run as root (0:0)"
        );
        ensure!(
            read(&root.join(template))?.contains("privileged: true"),
            "{shown}: runs as root, but {template} no longer runs a privileged container"
        );
        return Ok(());
    }
    ensure!(uid != 0 && gid != 0, "{shown}: USER {user} is root");

    let values_path = root
        .join("charts")
        .join(format!("pacto-{component}"))
        .join("values.yaml");
    let values: Value = serde_norway::from_str(&read(&values_path)?)
        .with_context(|| format!("parsing {}", values_path.display()))?;
    let chart_uid = pod_security(&values, "runAsUser");
    let chart_gid = pod_security(&values, "runAsGroup");
    ensure!(
        chart_uid == Some(uid) && chart_gid == Some(gid),
        "{shown}: USER {user}, but {} runs the pod as {chart_uid:?}:{chart_gid:?}",
        values_path.display()
    );
    Ok(())
}

#[test]
fn every_service_image_runs_its_crate_binary_as_the_charts_non_root_user() -> Result<()> {
    let mut failures = Vec::new();
    for component in image_components() {
        if let Err(e) = check_containerfile(component) {
            failures.push(format!("{e:#}"));
        }
    }
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

#[test]
fn every_chart_that_runs_a_container_has_a_containerfile() -> Result<()> {
    let root = repo_root();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("charts"))? {
        let dir = entry?.path();
        let Some(chart) = dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        // the library chart defines `pacto.image` for its users and runs nothing itself
        if chart == LIBRARY_CHART {
            continue;
        }
        let Some(component) = chart.strip_prefix("pacto-") else {
            continue;
        };
        let templates = dir.join("templates");
        let mut defaults_an_image = false;
        if templates.is_dir() {
            for t in std::fs::read_dir(&templates)? {
                let text = read(&t?.path())?;
                // its own container spec, or the library's Deployment (which uses `pacto.image`)
                defaults_an_image |= text.contains(IMAGE_REPOSITORY)
                    || text.contains("\"pacto.image\"")
                    || text.contains("\"pacto.deployment\"");
            }
        }
        if !defaults_an_image {
            continue;
        }
        let service = root.join("services").join(component);
        if let Some((_, why)) = NOT_YET_BUILT.iter().find(|(c, _)| *c == component) {
            ensure!(
                !service.exists(),
                "services/{component} exists: remove its NOT_YET_BUILT entry ({why}) and add services/{component}/Containerfile"
            );
            continue;
        }
        if !service.join("Containerfile").is_file() {
            missing.push(format!(
                "charts/{chart} defaults to an image but services/{component}/Containerfile is missing"
            ));
        }
    }
    ensure!(missing.is_empty(), "{}", missing.join("\n"));
    Ok(())
}

#[test]
fn node_images_builds_every_service_under_the_charts_repository() -> Result<()> {
    let root = repo_root();
    let script = read(&root.join("scripts/node-images.sh"))?;
    let helpers = read(&root.join("charts/pacto-lib/templates/_helpers.tpl"))?;
    ensure!(
        helpers.contains(&format!("\"{IMAGE_REPOSITORY}/%s\"")),
        "charts/pacto-lib/templates/_helpers.tpl no longer defaults images to {IMAGE_REPOSITORY}/<component>"
    );
    ensure!(
        script.contains(&format!("IMAGE_REPOSITORY=\"{IMAGE_REPOSITORY}\"")),
        "scripts/node-images.sh does not tag the services under {IMAGE_REPOSITORY}"
    );
    ensure!(
        script.contains("release/components"),
        "scripts/node-images.sh does not take its services from release/components"
    );
    let services = pacto_chart_tests::released_services().context("read release/components")?;
    let built: BTreeSet<&str> = services.iter().map(String::as_str).collect();
    let charts: BTreeSet<&str> = image_components().into_iter().collect();
    ensure!(
        built == charts,
        "release/components releases (and scripts/node-images.sh builds) {built:?}, the service \
         charts are {charts:?}"
    );
    Ok(())
}

#[test]
fn the_checks_read_containerfiles_and_manifests_as_intended() {
    let instr = instructions("# c\nFROM scratch\n\nuser 1:2\nENTRYPOINT [\"/x\"]\n");
    assert_eq!(
        instr,
        vec![
            ("FROM".to_owned(), "scratch".to_owned()),
            ("USER".to_owned(), "1:2".to_owned()),
            ("ENTRYPOINT".to_owned(), "[\"/x\"]".to_owned()),
        ]
    );
    let manifest = "[package]\nname = \"pacto-x\"\n\n[[bin]]\nname = \"pacto-x\"\npath = \"src/main.rs\"\n\n[[bench]]\nname = \"b\"\n";
    assert_eq!(binary_name(manifest).as_deref(), Some("pacto-x"));
    assert_eq!(binary_name("[package]\nname = \"y\"\n"), None);
}

/// The words of a text with comment markers and backquotes dropped and whitespace collapsed, so
/// a list wrapped over comment or Markdown lines reads as one line.
fn words(text: &str) -> String {
    text.replace(['#', '`'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_coredns_plugin_list_is_documented_where_the_corefile_is_written() -> Result<()> {
    let root = repo_root();
    let script = read(&root.join("scripts/k8s-binaries.sh"))?;
    let plugins = script
        .lines()
        .find_map(|l| l.strip_prefix("COREDNS_PLUGINS=("))
        .context("scripts/k8s-binaries.sh has no COREDNS_PLUGINS=(...) line")?
        .trim_end_matches(')')
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for doc in ["images/coredns/Containerfile", "docs/images.md"] {
        ensure!(
            words(&read(&root.join(doc))?).contains(&plugins),
            "{doc} does not list the CoreDNS plugins scripts/k8s-binaries.sh builds in ({plugins}); a Corefile may use only those"
        );
    }
    Ok(())
}
