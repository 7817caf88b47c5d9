//! The library chart `charts/pacto-lib` and the files generated from it:
//! - every chart using it (the four service charts and the node agent's) declares it as a
//!   `file://../pacto-lib` dependency (Chart.yaml and Chart.lock agree with the library's
//!   version), vendors it as the committed symlink `charts/<chart>/charts/pacto-lib ->
//!   ../../pacto-lib` (so Helm always loads the library as it is in the tree: no
//!   `helm dependency build` step, no packaged copy to go stale), and defines none of the
//!   library's templates itself;
//! - the shared part of each service chart's `values.yaml` and its `values.schema.json` are
//!   generated from `charts/pacto-lib/shared/` (drift check; regenerate with
//!   `PACTO_UPDATE_CHARTS=1 cargo test -p pacto-chart-tests --test library`).

use std::{collections::BTreeSet, path::Path};

use anyhow::{Context, Result, ensure};
use pacto_chart_tests::{LIBRARY_CHART, SERVICE_CHARTS, Tools, repo_root};
use serde_norway::Value;

/// The charts that depend on the library: the four service charts render their shared objects
/// with it, the node agent's chart takes its names and labels from it.
fn library_users() -> impl Iterator<Item = &'static str> {
    SERVICE_CHARTS
        .iter()
        .copied()
        .chain(["pacto-node-agent", "pacto-evidence-server"])
}

const REGENERATE: &str = "PACTO_UPDATE_CHARTS=1 cargo test -p pacto-chart-tests --test library";

/// The line of a service chart's `values.yaml` after which the shared values follow.
fn marker() -> String {
    format!(
        "# ==== shared values: generated from charts/{LIBRARY_CHART}/shared/values.yaml by `{REGENERATE}`; edit them there ===="
    )
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// A YAML (or JSON) file as an order-preserving value.
fn parse(path: &Path) -> Result<Value> {
    serde_norway::from_str(&read(path)?).with_context(|| format!("parsing {}", path.display()))
}

/// Deep merge of `overlay` into `base`: mappings merge key by key (new keys are appended, existing
/// keys keep their place), anything else is replaced. This is jq's `*`, which wrote these files
/// before.
fn merge(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (Value::Mapping(b), Value::Mapping(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(existing) if existing.is_mapping() && v.is_mapping() => {
                        merge(existing, v);
                    }
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// `charts/<chart>/values.yaml` as it should be: the chart's own head, the marker, the shared
/// values.
fn expected_values(chart: &str) -> Result<String> {
    let root = repo_root().join("charts");
    let current = read(&root.join(chart).join("values.yaml"))?;
    let marker = marker();
    // The head ends at the first marker line, whatever its wording was.
    let head = current
        .lines()
        .position(|l| l.starts_with("# ==== shared values:"))
        .map_or(current.as_str(), |n| {
            let offset: usize = current.lines().take(n).map(|l| l.len() + 1).sum();
            &current[..offset]
        });
    let shared = read(&root.join(LIBRARY_CHART).join("shared/values.yaml"))?;
    Ok(format!(
        "{}\n\n{marker}\n{shared}",
        head.trim_end_matches('\n')
    ))
}

/// `charts/<chart>/values.schema.json` as it should be: the shared schema with the chart's
/// `values.schema.part.json` merged over it, pretty-printed with two-space indentation.
fn expected_schema(chart: &str) -> Result<String> {
    let root = repo_root().join("charts");
    let mut schema = parse(&root.join(LIBRARY_CHART).join("shared/values.schema.json"))?;
    merge(
        &mut schema,
        &parse(&root.join(chart).join("values.schema.part.json"))?,
    );
    Ok(format!("{}\n", serde_json::to_string_pretty(&schema)?))
}

#[test]
fn generated_values_and_schemas_match_the_library() -> Result<()> {
    let update = std::env::var_os("PACTO_UPDATE_CHARTS").is_some_and(|v| v == "1");
    let root = repo_root().join("charts");
    let mut stale = Vec::new();
    for chart in SERVICE_CHARTS {
        for (file, want) in [
            ("values.yaml", expected_values(chart)?),
            ("values.schema.json", expected_schema(chart)?),
        ] {
            let path = root.join(chart).join(file);
            if read(&path)? == want {
                continue;
            }
            if update {
                std::fs::write(&path, want)?;
            } else {
                stale.push(format!("charts/{chart}/{file}"));
            }
        }
    }
    ensure!(
        stale.is_empty(),
        "generated from charts/{LIBRARY_CHART}/shared and out of date: {}\n\
         Regenerate with `{REGENERATE}` and commit the result.",
        stale.join(", ")
    );
    Ok(())
}

#[test]
fn schema_merge_is_deep_for_mappings_and_replaces_the_rest() {
    let mut base: Value =
        serde_norway::from_str(r#"{"a": {"x": 1, "y": [1]}, "b": 2, "c": {"z": 1}}"#).unwrap();
    let overlay: Value =
        serde_norway::from_str(r#"{"a": {"y": [2], "w": 3}, "c": 4, "d": {}}"#).unwrap();
    merge(&mut base, &overlay);
    assert_eq!(
        serde_json::to_string(&base).unwrap(),
        r#"{"a":{"x":1,"y":[2],"w":3},"b":2,"c":4,"d":{}}"#
    );
}

fn library_version() -> Result<String> {
    let chart = parse(
        &repo_root()
            .join("charts")
            .join(LIBRARY_CHART)
            .join("Chart.yaml"),
    )?;
    ensure!(
        chart["type"].as_str() == Some("library"),
        "charts/{LIBRARY_CHART} must be a library chart"
    );
    chart["version"]
        .as_str()
        .map(str::to_owned)
        .context("library chart version")
}

/// `(name, version, repository)` of every dependency in a Chart.yaml or Chart.lock.
fn dependencies(path: &Path) -> Result<Vec<(String, String, String)>> {
    let doc = parse(path)?;
    let field = |dep: &Value, key: &str| dep[key].as_str().unwrap_or_default().to_owned();
    Ok(doc["dependencies"]
        .as_sequence()
        .with_context(|| format!("{}: no dependencies", path.display()))?
        .iter()
        .map(|d| {
            (
                field(d, "name"),
                field(d, "version"),
                field(d, "repository"),
            )
        })
        .collect())
}

/// Names of the templates a file defines (`define "…"`).
fn defined_templates(text: &str) -> BTreeSet<String> {
    text.split("define \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect()
}

fn templates_defined_in(dir: &Path) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        out.extend(defined_templates(&read(&entry?.path())?));
    }
    Ok(out)
}

#[test]
fn service_charts_depend_on_the_library_chart_through_a_symlink() -> Result<()> {
    let root = repo_root().join("charts");
    let version = library_version()?;
    let want = vec![(
        LIBRARY_CHART.to_owned(),
        version.clone(),
        format!("file://../{LIBRARY_CHART}"),
    )];
    let library = templates_defined_in(&root.join(LIBRARY_CHART).join("templates"))?;
    ensure!(
        library.contains("pacto.deployment"),
        "library templates: {library:?}"
    );
    for chart in library_users() {
        let dir = root.join(chart);
        for file in ["Chart.yaml", "Chart.lock"] {
            ensure!(
                dependencies(&dir.join(file))? == want,
                "charts/{chart}/{file} must declare exactly {want:?} (after changing the library's \
                 version, run `helm dependency update charts/{chart}` and delete the .tgz it leaves)"
            );
        }
        let link = dir.join("charts").join(LIBRARY_CHART);
        let target = std::fs::read_link(&link).with_context(|| {
            format!(
                "{} must be a symlink to ../../{LIBRARY_CHART} (git config core.symlinks true)",
                link.display()
            )
        })?;
        ensure!(
            target == Path::new("../..").join(LIBRARY_CHART),
            "{} points to {}",
            link.display(),
            target.display()
        );
        let own = templates_defined_in(&dir.join("templates"))?;
        let copied: Vec<_> = own.intersection(&library).collect();
        ensure!(
            copied.is_empty(),
            "charts/{chart} defines templates the library defines: {copied:?}"
        );
    }
    Ok(())
}

#[test]
fn library_chart_lints_strictly() -> Result<()> {
    let tools = Tools::new()?;
    tools.run(
        "helm",
        ["lint", "--strict", &format!("charts/{LIBRARY_CHART}")],
    )?;
    Ok(())
}

#[test]
fn template_names_are_read_from_define_actions() {
    let names = defined_templates(
        "{{- define \"a.b\" -}}x{{- end }}\n{{/* c */}}\n{{ define \"c\" }}{{ include \"d\" . }}{{ end }}",
    );
    assert_eq!(names, ["a.b", "c"].into_iter().map(str::to_owned).collect());
}
