//! Rendering of the CustomResourceDefinitions into the checked-in chart `charts/pacto-crds`.

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use crate::{NodeRuntimeObservation, Pacto, PactoRevision};

/// The command that regenerates the files (printed by the drift test).
pub const REGENERATE_COMMAND: &str = "cargo run -p pacto-api --bin crdgen";

const HEADER: &str = "# Generated from services/api (crate pacto-api) by `cargo run -p pacto-api --bin crdgen`.\n# Do not edit by hand: change the Rust types and regenerate.\n";

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum CrdgenError {
    /// A CRD could not be serialised to YAML.
    #[error("rendering {file} as YAML failed")]
    Yaml {
        /// File being rendered.
        file: String,
        /// Serializer error.
        #[source]
        source: serde_norway::Error,
    },
    /// A file could not be written.
    #[error("writing {} failed", path.display())]
    Write {
        /// Target path.
        path: PathBuf,
        /// I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The three CRDs, in a fixed order, with descriptions reflowed for `kubectl explain`.
pub fn crds() -> Vec<CustomResourceDefinition> {
    [
        Pacto::crd(),
        PactoRevision::crd(),
        NodeRuntimeObservation::crd(),
    ]
    .into_iter()
    .map(|mut crd| {
        for version in &mut crd.spec.versions {
            if let Some(schema) = version
                .schema
                .as_mut()
                .and_then(|v| v.open_api_v3_schema.as_mut())
            {
                reflow_descriptions(schema);
            }
        }
        crd
    })
    .collect()
}

/// Doc comments are wrapped at 100 columns; join wrapped lines (keeping paragraph breaks)
/// so descriptions read as prose.
fn reflow_descriptions(schema: &mut JSONSchemaProps) {
    if let Some(description) = schema.description.as_mut() {
        *description = description
            .split("\n\n")
            .map(|paragraph| {
                paragraph
                    .lines()
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n\n");
    }
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        reflow_descriptions(child);
    }
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(item)) => reflow_descriptions(item),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => {
            items.iter_mut().for_each(reflow_descriptions);
        }
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(extra)) = schema.additional_properties.as_mut() {
        reflow_descriptions(extra);
    }
    for list in [&mut schema.all_of, &mut schema.any_of, &mut schema.one_of] {
        list.iter_mut().flatten().for_each(reflow_descriptions);
    }
}

/// `(file name, YAML)` for every CRD, as checked in under `templates/` of the chart.
pub fn render() -> Result<Vec<(String, String)>, CrdgenError> {
    crds()
        .into_iter()
        .map(|mut crd| {
            let file = file_name(&crd);
            // Helm must not delete the CRDs (and with them every Pacto) on uninstall.
            crd.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert("helm.sh/resource-policy".into(), "keep".into());
            let yaml = serde_norway::to_string(&crd).map_err(|source| CrdgenError::Yaml {
                file: file.clone(),
                source,
            })?;
            Ok((file, format!("{HEADER}{yaml}")))
        })
        .collect()
}

/// The file a CRD is written to, kubebuilder's naming: `<group>_<plural>.yaml`.
fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// The checked-in CRD files (in [`default_output_dir`]), one per CRD of [`crds`]: what a test's
/// control plane installs to serve the Pacto kinds as the chart does.
pub fn checked_in_paths() -> Vec<PathBuf> {
    let dir = default_output_dir();
    crds().iter().map(|crd| dir.join(file_name(crd))).collect()
}

/// The chart directory holding the generated YAML, relative to this crate.
pub fn default_output_dir() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // services/api -> repository root
    let root = crate_dir.ancestors().nth(2).unwrap_or(crate_dir);
    root.join("charts/pacto-crds/templates")
}

/// Writes every rendered CRD into `dir` (created if missing). Returns the written paths.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>, CrdgenError> {
    std::fs::create_dir_all(dir).map_err(|source| CrdgenError::Write {
        path: dir.to_owned(),
        source,
    })?;
    let mut written = Vec::new();
    for (file, yaml) in render()? {
        let path = dir.join(file);
        std::fs::write(&path, yaml).map_err(|source| CrdgenError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}
