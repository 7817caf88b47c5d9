//! The release metadata agrees with itself (docs/upgrade.md, "Releases"):
//! - `release/components` lists every installable chart and every service image, once;
//! - each component carries one version: a service's crate `version` (its own, not the
//!   workspace's) is its chart's `version` and `appVersion`, and its image tag (the chart's
//!   `image.tag` default is empty, so the tag is `appVersion`); a chart alone has `version` =
//!   `appVersion`; the CLI's crate has its own `version`;
//! - every service chart states the `pacto-crds` versions it needs
//!   (`pacto.trianalab.io/crds`, a semver range) and the `pacto-crds` chart here meets it;
//! - a component whose files changed since its newest release tag (`<name>-v<semver>`) has a
//!   version above that tag's.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use pacto_chart_tests::{CHARTS, repo_root};
use serde_norway::Value;

/// The annotation a service chart names its `pacto-crds` range with.
const CRDS_ANNOTATION: &str = "pacto.trianalab.io/crds";

/// One line of `release/components`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Component {
    name: String,
    kind: Kind,
    krate: Option<String>,
    chart: Option<String>,
    paths: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Service,
    Chart,
    Cli,
}

fn parse_components(text: &str) -> Result<Vec<Component>> {
    let mut out: Vec<Component> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        ensure!(
            cols.len() == 5,
            "release/components line {}: {} columns, want 5 (name kind crate chart paths)",
            n + 1,
            cols.len()
        );
        let opt = |s: &str| (s != "-").then(|| s.to_owned());
        let kind = match cols[1] {
            "service" => Kind::Service,
            "chart" => Kind::Chart,
            "cli" => Kind::Cli,
            other => bail!(
                "release/components line {}: kind '{other}' is not service, chart or cli",
                n + 1
            ),
        };
        let c = Component {
            name: cols[0].to_owned(),
            kind,
            krate: opt(cols[2]),
            chart: opt(cols[3]),
            paths: cols[4].split(',').map(str::to_owned).collect(),
        };
        ensure!(
            !out.iter().any(|o| o.name == c.name),
            "release/components line {}: '{}' listed twice",
            n + 1,
            c.name
        );
        let wants = match kind {
            Kind::Service => (true, true),
            Kind::Chart => (false, true),
            Kind::Cli => (true, false),
        };
        ensure!(
            (c.krate.is_some(), c.chart.is_some()) == wants,
            "release/components line {}: a {} component has {} crate and {} chart",
            n + 1,
            cols[1],
            if wants.0 { "a" } else { "no" },
            if wants.1 { "a" } else { "no" }
        );
        out.push(c);
    }
    Ok(out)
}

fn components() -> Result<Vec<Component>> {
    let path = repo_root().join("release/components");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    parse_components(&text)
}

fn yaml(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    serde_norway::from_str(&text).with_context(|| format!("{}: not YAML", path.display()))
}

fn str_at<'a>(doc: &'a Value, key: &str, path: &Path) -> Result<&'a str> {
    doc.get(key)
        .and_then(Value::as_str)
        .with_context(|| format!("{}: no string `{key}`", path.display()))
}

/// The crate's own `version = "…"` in `[package]`; an error naming the file when it inherits
/// the workspace's (`version.workspace = true`) or has none.
fn crate_version(root: &Path, krate: &str) -> Result<semver::Version> {
    let dir = crate_dir(root, krate)?;
    let path = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&path)?;
    let package = text
        .split("\n[")
        .find(|s| s.starts_with("package]") || s.starts_with("[package]"))
        .with_context(|| format!("{}: no [package]", path.display()))?;
    for line in package.lines() {
        let line = line.trim();
        if line.starts_with("version.workspace") {
            bail!(
                "{}: `version.workspace = true`; a released crate carries its own `version`",
                path.display()
            );
        }
        if let Some(v) = line.strip_prefix("version") {
            let v = v
                .trim_start()
                .trim_start_matches('=')
                .trim()
                .trim_matches('"');
            return semver::Version::parse(v)
                .with_context(|| format!("{}: version '{v}' is not semver", path.display()));
        }
    }
    bail!("{}: no `version` in [package]", path.display())
}

/// The directory of workspace member `krate` (its `Cargo.toml` names it).
fn crate_dir(root: &Path, krate: &str) -> Result<std::path::PathBuf> {
    for group in ["services", "tests"] {
        let Ok(dir) = std::fs::read_dir(root.join(group)) else {
            continue;
        };
        for entry in dir.flatten() {
            let manifest = entry.path().join("Cargo.toml");
            let Ok(text) = std::fs::read_to_string(&manifest) else {
                continue;
            };
            if text.contains(&format!("\nname = \"{krate}\"")) {
                return Ok(entry.path());
            }
        }
    }
    bail!("no workspace crate named '{krate}' under services/ or tests/")
}

/// Chart `version`, `appVersion` and the parsed Chart.yaml.
fn chart_versions(root: &Path, chart: &str) -> Result<(semver::Version, semver::Version, Value)> {
    let path = root.join("charts").join(chart).join("Chart.yaml");
    let doc = yaml(&path)?;
    let version = semver::Version::parse(str_at(&doc, "version", &path)?)
        .with_context(|| format!("{}: `version` is not semver", path.display()))?;
    let app = semver::Version::parse(str_at(&doc, "appVersion", &path)?)
        .with_context(|| format!("{}: `appVersion` is not semver", path.display()))?;
    Ok((version, app, doc))
}

/// The version a component is released under.
fn component_version(root: &Path, c: &Component) -> Result<semver::Version> {
    match (&c.krate, &c.chart) {
        (Some(k), _) => crate_version(root, k),
        (None, Some(chart)) => Ok(chart_versions(root, chart)?.0),
        (None, None) => bail!("{}: neither crate nor chart", c.name),
    }
}

/// The problems of one component's versions (empty: consistent).
fn version_problems(root: &Path, c: &Component) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let crate_v = match &c.krate {
        Some(k) => match crate_version(root, k) {
            Ok(v) => Some(v),
            Err(e) => {
                problems.push(format!("{}: {e:#}", c.name));
                None
            }
        },
        None => None,
    };
    if let Some(chart) = &c.chart {
        let (version, app, _) = chart_versions(root, chart)?;
        if version != app {
            problems.push(format!(
                "{}: charts/{chart} version {version} != appVersion {app}",
                c.name
            ));
        }
        if let Some(cv) = &crate_v
            && *cv != app
        {
            problems.push(format!(
                "{}: crate {} version {cv} != charts/{chart} appVersion {app}",
                c.name,
                c.krate.as_deref().unwrap_or("-")
            ));
        }
        if c.kind == Kind::Service {
            let values_path = root.join("charts").join(chart).join("values.yaml");
            let values = yaml(&values_path)?;
            let tag = values
                .get("image")
                .and_then(|i| i.get("tag"))
                .and_then(Value::as_str);
            if tag != Some("") {
                problems.push(format!(
                    "{}: {} image.tag is {tag:?}; it must be \"\" so the image tag is the \
                     chart's appVersion",
                    c.name,
                    values_path.display()
                ));
            }
        }
    }
    Ok(problems)
}

#[test]
fn the_component_list_covers_every_chart_and_image() -> Result<()> {
    let listed = components()?;
    let charts: BTreeSet<&str> = listed.iter().filter_map(|c| c.chart.as_deref()).collect();
    for chart in CHARTS {
        ensure!(
            charts.contains(chart),
            "charts/{chart} is installable but release/components does not list it"
        );
    }
    for entry in std::fs::read_dir(repo_root().join("services"))?.flatten() {
        if entry.path().join("Containerfile").is_file() {
            let name = entry.file_name().to_string_lossy().into_owned();
            ensure!(
                listed
                    .iter()
                    .any(|c| c.name == name && c.kind == Kind::Service),
                "services/{name} has a Containerfile but release/components has no service '{name}'"
            );
        }
    }
    for c in &listed {
        for p in &c.paths {
            ensure!(
                repo_root().join(p).exists(),
                "release/components: {} names path {p}, which does not exist",
                c.name
            );
        }
        if c.kind == Kind::Service {
            ensure!(
                repo_root()
                    .join("services")
                    .join(&c.name)
                    .join("Containerfile")
                    .is_file(),
                "release/components: service {} has no services/{}/Containerfile",
                c.name,
                c.name
            );
        }
    }
    Ok(())
}

#[test]
fn each_component_carries_one_version() -> Result<()> {
    let mut problems = Vec::new();
    for c in components()? {
        problems.extend(version_problems(&repo_root(), &c)?);
    }
    ensure!(
        problems.is_empty(),
        "version problems:\n{}",
        problems.join("\n")
    );
    Ok(())
}

#[test]
fn a_service_whose_crate_chart_and_tag_disagree_is_caught() -> Result<()> {
    let root = tempfile::tempdir()?;
    let write = |rel: &str, text: &str| -> Result<()> {
        let path = root.path().join(rel);
        std::fs::create_dir_all(path.parent().context("parent")?)?;
        std::fs::write(path, text)?;
        Ok(())
    };
    write(
        "services/x/Cargo.toml",
        "[package]\nname = \"pacto-x\"\nversion = \"0.2.0\"\n",
    )?;
    write(
        "services/y/Cargo.toml",
        "[package]\nname = \"pacto-y\"\nversion.workspace = true\n",
    )?;
    write(
        "charts/pacto-x/Chart.yaml",
        "name: pacto-x\nversion: 0.1.0\nappVersion: \"0.1.0\"\n",
    )?;
    write("charts/pacto-x/values.yaml", "image:\n  tag: \"0.1.0\"\n")?;
    let listed =
        parse_components("x service pacto-x pacto-x services/x\ny cli pacto-y - services/y\n")?;
    let mut problems = Vec::new();
    for c in &listed {
        problems.extend(version_problems(root.path(), c)?);
    }
    let text = problems.join("\n");
    ensure!(problems.len() == 3, "{text}");
    ensure!(
        text.contains("crate pacto-x version 0.2.0 != charts/pacto-x appVersion 0.1.0"),
        "{text}"
    );
    ensure!(text.contains("image.tag is Some(\"0.1.0\")"), "{text}");
    ensure!(text.contains("`version.workspace = true`"), "{text}");
    Ok(())
}

#[test]
fn service_charts_state_a_crd_range_the_crd_chart_meets() -> Result<()> {
    let (crds, _, _) = chart_versions(&repo_root(), "pacto-crds")?;
    for c in components()?.iter().filter(|c| c.kind == Kind::Service) {
        let chart = c.chart.as_deref().unwrap_or_default();
        let path = repo_root().join("charts").join(chart).join("Chart.yaml");
        let (_, _, doc) = chart_versions(&repo_root(), chart)?;
        let range = doc
            .get("annotations")
            .and_then(|a| a.get(CRDS_ANNOTATION))
            .and_then(Value::as_str)
            .with_context(|| {
                format!(
                    "{}: no annotation {CRDS_ANNOTATION} (the pacto-crds versions it needs)",
                    path.display()
                )
            })?;
        let req = semver::VersionReq::parse(range).with_context(|| {
            format!(
                "{}: {CRDS_ANNOTATION} '{range}' is not a semver range",
                path.display()
            )
        })?;
        ensure!(
            req.matches(&crds),
            "{}: needs pacto-crds {range}, charts/pacto-crds is {crds}",
            path.display()
        );
    }
    Ok(())
}

/// `git args…` in the repository; `None` when git or the repository is not there.
/// `git <args>` in the repository at `root`; `None` when git cannot run there (or failed with an
/// exit code above 1: `git diff --quiet` uses 1 for "differs").
fn git_in(root: &Path, args: &[&str]) -> Option<std::process::Output> {
    Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.code().is_some_and(|c| c <= 1))
}

/// The components of the git repository at `root` whose files (their `paths`) changed since their
/// newest release tag `<name>-v<semver>` while their version stayed at or below the tagged one,
/// and how many components had a tag to compare with; `None` when `root` is not a git repository.
fn unbumped_since_tag(
    root: &Path,
    components: &[Component],
) -> Result<Option<(Vec<String>, usize)>> {
    let Some(tags) = git_in(root, &["tag", "--list"]) else {
        return Ok(None);
    };
    let tags = String::from_utf8_lossy(&tags.stdout).into_owned();
    let mut problems = Vec::new();
    let mut compared = 0;
    for c in components {
        let prefix = format!("{}-v", c.name);
        let newest = tags
            .lines()
            .filter_map(|t| {
                let v = semver::Version::parse(t.strip_prefix(&prefix)?).ok()?;
                Some((v, t.to_owned()))
            })
            .max();
        let Some((tagged, tag)) = newest else {
            continue;
        };
        compared += 1;
        let current = component_version(root, c)?;
        let mut args = vec!["diff", "--quiet", tag.as_str(), "HEAD", "--"];
        args.extend(c.paths.iter().map(String::as_str));
        let changed = git_in(root, &args).is_some_and(|o| o.status.code() == Some(1));
        if changed && current <= tagged {
            problems.push(format!(
                "{}: files under {} changed since {tag} but the version is still {current}",
                c.name,
                c.paths.join(",")
            ));
        }
    }
    Ok(Some((problems, compared)))
}

#[test]
fn a_component_changed_since_its_release_tag_has_a_higher_version() -> Result<()> {
    let Some((problems, compared)) = unbumped_since_tag(&repo_root(), &components()?)? else {
        eprintln!("skipped: no git repository here (release tags cannot be read)");
        return Ok(());
    };
    // A checkout without release tags compares nothing here; the rule itself is checked on a
    // fixture repository with tags (next test).
    eprintln!("release tags compared: {compared} component(s)");
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

/// The rule on a fixture repository with release tags: a change under a component's paths after
/// its tag needs a higher version; a change elsewhere does not.
#[test]
fn the_version_rule_holds_on_a_repository_with_release_tags() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    let run = |args: &[&str]| -> Result<()> {
        let out = Command::new("git")
            .current_dir(root)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()?;
        ensure!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    let chart_yaml = |version: &str| {
        format!("apiVersion: v2\nname: demo\nversion: {version}\nappVersion: \"{version}\"\n")
    };
    std::fs::create_dir_all(root.join("charts/demo/templates"))?;
    std::fs::write(root.join("charts/demo/Chart.yaml"), chart_yaml("0.1.0"))?;
    std::fs::write(root.join("charts/demo/templates/a.yaml"), "a: 1\n")?;
    std::fs::write(root.join("README.md"), "fixture\n")?;
    let components = parse_components("demo chart - demo charts/demo\n")?;
    run(&["init", "-q", "-b", "main"])?;
    run(&["add", "-A"])?;
    run(&["commit", "-q", "-m", "first"])?;
    run(&["tag", "demo-v0.1.0"])?;

    let problems = |root: &Path| -> Result<Vec<String>> {
        let (problems, compared) =
            unbumped_since_tag(root, &components)?.context("a git repository")?;
        ensure!(compared == 1, "the tag demo-v0.1.0 was not compared");
        Ok(problems)
    };
    ensure!(problems(root)?.is_empty(), "nothing changed since the tag");

    // A change outside the component's paths needs no new version.
    std::fs::write(root.join("README.md"), "fixture, changed\n")?;
    run(&["commit", "-q", "-am", "docs"])?;
    ensure!(problems(root)?.is_empty(), "a change outside charts/demo");

    // A change under its paths with the version left at the tag's is refused, naming both.
    std::fs::write(root.join("charts/demo/templates/a.yaml"), "a: 2\n")?;
    run(&["commit", "-q", "-am", "change"])?;
    let found = problems(root)?;
    ensure!(
        found.len() == 1 && found[0].contains("demo-v0.1.0") && found[0].contains("0.1.0"),
        "{found:?}"
    );

    // Bumped: accepted again.
    std::fs::write(root.join("charts/demo/Chart.yaml"), chart_yaml("0.2.0"))?;
    run(&["commit", "-q", "-am", "bump"])?;
    ensure!(problems(root)?.is_empty(), "bumped to 0.2.0");
    Ok(())
}

#[test]
fn a_malformed_component_line_is_refused_with_its_line() {
    let err = parse_components("# c\nobserver service pacto-observer\n").unwrap_err();
    assert!(err.to_string().contains("line 2: 3 columns"), "{err}");
    let err = parse_components("x daemon a b c\n").unwrap_err();
    assert!(err.to_string().contains("kind 'daemon'"), "{err}");
    let err = parse_components("x chart pacto a c\n").unwrap_err();
    assert!(
        err.to_string().contains("a chart component has no crate"),
        "{err}"
    );
}

/// A release builds the node agent's kernel program from source: `SOCKWATCH_REQUIRE_CLANG=0`
/// (which lets a developer build fall back to the committed object) is refused before anything
/// is built.
#[test]
fn a_release_without_the_kernel_program_built_from_source_is_refused() -> Result<()> {
    let root = repo_root();
    let version = Command::new(root.join("scripts/release.sh"))
        .args(["--version-of", "node-agent"])
        .output()?;
    ensure!(version.status.success(), "{version:?}");
    let version = String::from_utf8(version.stdout)?;
    let out = Command::new(root.join("scripts/release.sh"))
        .args([
            "node-agent",
            version.trim(),
            "--registry",
            "none",
            "--no-push",
        ])
        .env("SOCKWATCH_REQUIRE_CLANG", "0")
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success(), "the release went ahead: {stderr}");
    ensure!(
        stderr.contains("SOCKWATCH_REQUIRE_CLANG=0") && stderr.contains("clang is required"),
        "{stderr}"
    );
    Ok(())
}

/// The workflows pin every action by commit (a tag can be moved to other code) and give the token
/// write access only in the job that publishes.
#[test]
fn workflows_pin_actions_by_commit_and_scope_write_permissions() -> Result<()> {
    let root = repo_root();
    for name in ["ci.yml", "release.yml"] {
        let path = root.join(".github/workflows").join(name);
        let text = std::fs::read_to_string(&path)?;
        for line in text
            .lines()
            .filter(|l| l.trim_start().starts_with("- uses:"))
        {
            let reference = line
                .split_once('@')
                .map_or("", |(_, r)| r.split_whitespace().next().unwrap_or(""));
            ensure!(
                reference.len() == 40 && reference.chars().all(|c| c.is_ascii_hexdigit()),
                "{name}: not pinned by commit: {line}"
            );
        }
        let doc: Value = serde_norway::from_str(&text)?;
        ensure!(
            doc["permissions"]["contents"].as_str() == Some("read")
                && doc["permissions"]
                    .as_mapping()
                    .map(serde_norway::Mapping::len)
                    == Some(1),
            "{name}: workflow-wide permissions must be contents: read only"
        );
    }
    Ok(())
}

/// The release workflow builds without credentials and publishes in a separate job
/// (docs/images.md, "Service images"): the build job has no write permission and no secret and
/// runs `scripts/release.sh --no-push`; the push job needs it, holds `packages: write` and
/// `id-token: write` (keyless signing), and pushes what was built with `--from … --sign`. Every
/// action names its release next to the commit.
#[test]
fn the_release_is_built_without_credentials_and_pushed_signed() -> Result<()> {
    let path = repo_root().join(".github/workflows/release.yml");
    let text = std::fs::read_to_string(&path)?;
    let doc: Value = serde_norway::from_str(&text)?;
    let jobs = doc["jobs"].as_mapping().context("release.yml: no jobs")?;
    let job_text = |name: &str| -> Result<String> {
        Ok(serde_norway::to_string(
            jobs.get(name)
                .with_context(|| format!("release.yml: no job {name}"))?,
        )?)
    };

    let build = &doc["jobs"]["build"];
    let build_text = job_text("build")?;
    let build_writes = build["permissions"]
        .as_mapping()
        .is_some_and(|p| p.values().any(|v| v.as_str() == Some("write")));
    ensure!(
        !build_writes,
        "release.yml: the build job must not get write permissions"
    );
    ensure!(
        !build_text.contains("secrets."),
        "release.yml: the build job must not see a secret"
    );
    ensure!(
        build_text.contains("scripts/release.sh") && build_text.contains("--no-push"),
        "release.yml: the build job runs scripts/release.sh --no-push"
    );

    let push = &doc["jobs"]["push"];
    ensure!(
        push["needs"].as_str() == Some("build"),
        "release.yml: the push job needs the build job"
    );
    for (permission, level) in [
        ("packages", "write"),
        ("id-token", "write"),
        ("contents", "write"),
    ] {
        ensure!(
            push["permissions"][permission].as_str() == Some(level),
            "release.yml: the push job needs {permission}: {level}"
        );
    }
    let push_text = job_text("push")?;
    ensure!(
        push_text.contains("scripts/release.sh")
            && push_text.contains("--from")
            && push_text.contains("--sign"),
        "release.yml: the push job runs scripts/release.sh --from … --sign"
    );
    ensure!(
        push_text.contains("sigstore/cosign-installer@"),
        "release.yml: the push job installs cosign"
    );

    for line in text
        .lines()
        .filter(|l| l.trim_start().starts_with("- uses:"))
    {
        ensure!(
            line.split_once(" # v").is_some(),
            "release.yml: an action without its release in a comment: {line}"
        );
    }
    Ok(())
}
