//! Support for the chart tests: where the pinned client tools are, how to run them hermetically
//! (a private `HOME` and Helm directories, the tools first on `PATH`) and how to read what they
//! render. The tools come from `scripts/chart-tools.sh`; a missing tool is an error naming that
//! script, never a skipped test.

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use serde::Deserialize;

pub mod values;

/// The versions `scripts/chart-tools.sh` installs (its cache directory name); a test keeps the two
/// in step.
pub const TOOLS_VERSION_KEY: &str = "helm-3.19.0-helmfile-0.167.1-kubectl-1.34.0-kv-1.37.0";

/// Every installable chart under `charts/` (the library chart [`LIBRARY_CHART`] aside).
pub const CHARTS: &[&str] = &[
    "pacto-crds",
    "pacto-pki",
    "pacto-contract-resolver",
    "pacto-observer",
    "pacto-evaluator",
    "pacto-status-writer",
    "pacto-node-agent",
    "pacto-evidence-server",
];

/// `--set` values a chart cannot render without (its schema requires them): the Evidence
/// Server needs a subject and its trust Secret. Every generic render of a chart adds these.
pub fn required_sets(chart: &str) -> &'static [&'static str] {
    match chart {
        "pacto-evidence-server" => &[
            "subjects[0]=oci://registry.example.com/team/payments@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,trust.keysSecret=evidence-keys",
        ],
        _ => &[],
    }
}

/// The charts of the four services (their common templates come from [`LIBRARY_CHART`],
/// their common values and schema are generated from it).
pub const SERVICE_CHARTS: &[&str] = &[
    "pacto-contract-resolver",
    "pacto-observer",
    "pacto-evaluator",
    "pacto-status-writer",
];

/// The `service` components of `release/components` (a crate, an image and a chart each), in
/// file order: what `scripts/node-images.sh` and `scripts/release.sh` build images for.
pub fn released_services() -> Result<Vec<String>, std::io::Error> {
    let text = std::fs::read_to_string(repo_root().join("release").join("components"))?;
    Ok(text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.len() == 5 && cols[1] == "service").then(|| cols[0].to_owned())
        })
        .collect())
}

/// The library chart holding the templates the service charts share (`charts/pacto-lib`).
pub const LIBRARY_CHART: &str = "pacto-lib";

/// The tools the chart tests run.
pub const TOOLS: &[&str] = &["helm", "helmfile", "kubectl", "kubernetes-validate"];

/// A tool could not be found or run, or its output could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The tool is not installed where the tests look.
    #[error(
        "{tool} not found at {path}: run `scripts/chart-tools.sh` (it prints the tool directory; \
         export PACTO_CHART_TOOLS=<that directory> if you changed PACTO_CACHE)"
    )]
    Missing {
        /// Tool name.
        tool: String,
        /// Where it was expected.
        path: PathBuf,
    },
    /// The private home directory could not be created.
    #[error("cannot create a temporary HOME for the tools")]
    Home(#[source] std::io::Error),
    /// The process could not be started.
    #[error("cannot start `{command}`")]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The process exited unsuccessfully.
    #[error("`{command}` failed ({status}):\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Exit status.
        status: std::process::ExitStatus,
        /// Its standard output.
        stdout: String,
        /// Its standard error.
        stderr: String,
    },
    /// A rendered YAML document does not parse.
    #[error("rendered YAML document {index} does not parse")]
    Yaml {
        /// Position of the document in the stream.
        index: usize,
        /// Parser error.
        #[source]
        source: serde_norway::Error,
    },
}

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The directory holding the tools: `$PACTO_CHART_TOOLS`, else the cache path
/// `scripts/chart-tools.sh` uses (`${PACTO_CACHE:-$HOME/.cache/pacto}/chart-tools/<versions>/bin`).
pub fn tools_dir() -> PathBuf {
    tools_dir_with(|name| std::env::var_os(name))
}

fn tools_dir_with(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    if let Some(dir) = set("PACTO_CHART_TOOLS") {
        return PathBuf::from(dir);
    }
    let cache = set("PACTO_CACHE").map_or_else(
        || {
            PathBuf::from(set("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache")
                .join("pacto")
        },
        PathBuf::from,
    );
    cache
        .join("chart-tools")
        .join(TOOLS_VERSION_KEY)
        .join("bin")
}

/// The tools with a private, throw-away `HOME` and Helm directories.
#[derive(Debug)]
pub struct Tools {
    bin: PathBuf,
    home: tempfile::TempDir,
}

impl Tools {
    /// Finds every tool (an error names the install script when one is missing).
    pub fn new() -> Result<Self, ToolError> {
        let bin = tools_dir();
        for tool in TOOLS {
            let path = bin.join(tool);
            if !path.is_file() {
                return Err(ToolError::Missing {
                    tool: (*tool).to_owned(),
                    path,
                });
            }
        }
        let home = tempfile::tempdir().map_err(ToolError::Home)?;
        Ok(Self { bin, home })
    }

    /// The private home directory.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// A command for `tool` with the hermetic environment, run from the repository root.
    pub fn command(&self, tool: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(tool));
        let home = self.home.path();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![self.bin.clone()];
        paths.extend(std::env::split_paths(&path));
        cmd.current_dir(repo_root())
            .env("HOME", home)
            .env("HELM_CACHE_HOME", home.join("helm-cache"))
            .env("HELM_CONFIG_HOME", home.join("helm-config"))
            .env("HELM_DATA_HOME", home.join("helm-data"))
            .env("KUBECONFIG", home.join("no-kubeconfig"))
            .env("PATH", std::env::join_paths(paths).unwrap_or(path));
        cmd
    }

    /// Runs `tool args…` and returns its standard output; a non-zero exit is an error carrying
    /// both output streams.
    pub fn run<I, S>(&self, tool: &str, args: I) -> Result<String, ToolError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command(tool);
        cmd.args(args);
        run(&mut cmd).map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Like [`Tools::run`] but returns the output whatever the exit status (for tests expecting
    /// a failure).
    pub fn output<I, S>(&self, tool: &str, args: I) -> Result<Output, ToolError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command(tool);
        cmd.args(args);
        cmd.output().map_err(|source| ToolError::Spawn {
            command: describe(&cmd),
            source,
        })
    }

    /// `kubernetes-validate --strict` over the rendered manifests in `file`: `None` when every
    /// object passes, else the tool's report (stdout and stderr).
    pub fn validate_strict(&self, file: &Path) -> Result<Option<String>, ToolError> {
        let out = self.output(
            "kubernetes-validate",
            [
                "--strict".as_ref(),
                "--quiet".as_ref(),
                "--no-warn".as_ref(),
                file.as_os_str(),
            ],
        )?;
        let report = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok((!out.status.success() || report.contains("ERROR")).then_some(report))
    }
}

/// Runs a prepared command; a non-zero exit is an error with both output streams.
pub fn run(cmd: &mut Command) -> Result<Output, ToolError> {
    let out = cmd.output().map_err(|source| ToolError::Spawn {
        command: describe(cmd),
        source,
    })?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(ToolError::Failed {
            command: describe(cmd),
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// The command line of `cmd`, for messages.
pub fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The non-empty documents of a rendered YAML stream, as JSON values.
pub fn documents(yaml: &str) -> Result<Vec<serde_json::Value>, ToolError> {
    let mut docs = Vec::new();
    for (index, doc) in serde_norway::Deserializer::from_str(yaml).enumerate() {
        let value = serde_json::Value::deserialize(doc)
            .map_err(|source| ToolError::Yaml { index, source })?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// `helm template` of `charts/<chart>` in the default operator namespace with each of `sets` as a
/// `--set`, as its documents.
pub fn template_in_operator_namespace(
    tools: &Tools,
    chart: &str,
    sets: &[&str],
) -> Result<Vec<serde_json::Value>, ToolError> {
    let mut args = vec![
        "template".to_owned(),
        chart.to_owned(),
        format!("charts/{chart}"),
        "--namespace".to_owned(),
        "pacto-operator-system".to_owned(),
    ];
    for set in sets {
        args.push("--set".to_owned());
        args.push((*set).to_owned());
    }
    documents(&tools.run("helm", &args)?)
}

/// The first container's args of the rendered Deployment; `None` without a Deployment.
pub fn deployment_args(docs: &[serde_json::Value]) -> Option<Vec<String>> {
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment")?;
    Some(
        deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
            .map(str::to_owned)
            .collect(),
    )
}

/// `kind/name` of a rendered object (for messages and lookups).
pub fn object_key(doc: &serde_json::Value) -> String {
    format!(
        "{}/{}",
        doc["kind"].as_str().unwrap_or("?"),
        doc["metadata"]["name"].as_str().unwrap_or("?")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_dir_prefers_the_variable_then_the_cache() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| std::ffi::OsString::from(*v))
            }
        };
        assert_eq!(
            tools_dir_with(env(&[("PACTO_CHART_TOOLS", "/t"), ("PACTO_CACHE", "/c")])),
            PathBuf::from("/t")
        );
        assert_eq!(
            tools_dir_with(env(&[("PACTO_CHART_TOOLS", ""), ("PACTO_CACHE", "/c")])),
            PathBuf::from(format!("/c/chart-tools/{TOOLS_VERSION_KEY}/bin"))
        );
        assert_eq!(
            tools_dir_with(env(&[("HOME", "/h")])),
            PathBuf::from(format!(
                "/h/.cache/pacto/chart-tools/{TOOLS_VERSION_KEY}/bin"
            ))
        );
    }

    #[test]
    fn version_key_matches_the_install_script() {
        let script = std::fs::read_to_string(repo_root().join("scripts/chart-tools.sh")).unwrap();
        assert!(
            script.contains(&format!("VERSION_KEY=\"{TOOLS_VERSION_KEY}\"")),
            "scripts/chart-tools.sh and TOOLS_VERSION_KEY disagree"
        );
    }

    #[test]
    fn documents_skip_empty_ones_and_name_bad_ones() {
        let docs = documents("---\n# only a comment\n---\nkind: A\nmetadata: {name: x}\n").unwrap();
        assert_eq!(docs.len(), 1);
        assert_eq!(object_key(&docs[0]), "A/x");
        let err = documents("a: [\n").unwrap_err();
        assert!(matches!(err, ToolError::Yaml { index: 0, .. }), "{err}");
    }
}
