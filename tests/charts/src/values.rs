//! The chart values files and schema lookups the docs tests share: every chart's `values.yaml` and
//! every helmfile environment file, a dotted-path lookup in them, and a field lookup in a CRD's
//! OpenAPI schema.

use std::fs;
use std::path::PathBuf;

use serde_json::Value;

use crate::repo_root;

/// Why the values files could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ValuesError {
    /// A directory or file could not be read.
    #[error("reading {path}")]
    Read {
        /// What was read.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not YAML.
    #[error("parsing {path}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        #[source]
        source: serde_norway::Error,
    },
    /// Fewer files than the charts have: a wrong root.
    #[error("no chart values files found under {0}")]
    NoneFound(PathBuf),
}

fn read_dir(path: &PathBuf) -> Result<Vec<PathBuf>, ValuesError> {
    let read = |source| ValuesError::Read {
        path: path.clone(),
        source,
    };
    fs::read_dir(path)
        .map_err(read)?
        .map(|e| e.map(|e| e.path()).map_err(read))
        .collect()
}

/// Every `charts/<chart>/values.yaml` and `charts/environments/*.yaml`, with its path.
pub fn values_files() -> Result<Vec<(String, Value)>, ValuesError> {
    let root = repo_root().join("charts");
    let mut files = Vec::new();
    for dir in read_dir(&root)? {
        let candidates = if dir.file_name().is_some_and(|n| n == "environments") {
            read_dir(&dir)?
        } else {
            vec![dir.join("values.yaml")]
        };
        for path in candidates {
            if path.extension().is_some_and(|e| e == "yaml") && path.is_file() {
                let text = fs::read_to_string(&path).map_err(|source| ValuesError::Read {
                    path: path.clone(),
                    source,
                })?;
                let value: Value =
                    serde_norway::from_str(&text).map_err(|source| ValuesError::Parse {
                        path: path.clone(),
                        source,
                    })?;
                files.push((path.display().to_string(), value));
            }
        }
    }
    if files.len() <= 2 {
        return Err(ValuesError::NoneFound(root));
    }
    Ok(files)
}

/// Whether the dotted `path` (`nodeAgent.enabled`) is present in `value`.
pub fn has_path(value: &Value, path: &str) -> bool {
    path.split('.')
        .try_fold(value, |v, key| v.get(key))
        .is_some()
}

/// Whether `path` (`status.findings.evidenceRefs.collector`) is a field of the OpenAPI `schema`,
/// descending through arrays.
pub fn schema_has(schema: &Value, path: &[&str]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return true;
    };
    let mut node = schema;
    while node["type"] == "array" {
        node = &node["items"];
    }
    node["properties"]
        .get(*first)
        .is_some_and(|child| schema_has(child, rest))
}
