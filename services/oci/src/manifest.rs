//! The bundle artifact's manifest and config JSON (docs/design/contract.md#bundle-packing).

use std::collections::BTreeMap;

use pacto_contract::bundle::{
    CONFIG_MEDIA_TYPE, LABEL_NAME, LABEL_PACTO_VERSION, LABEL_VERSION, LAYER_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
};
use serde::{Deserialize, Serialize};

/// Service metadata written into the config labels on push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleMeta {
    /// `service.name`.
    pub name: String,
    /// `service.version`.
    pub version: String,
    /// `pactoVersion`.
    pub pacto_version: String,
}

/// A content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type of the referenced content.
    pub media_type: String,
    /// Digest (`sha256:…`).
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
}

/// An OCI image manifest (also reads Docker schema 2 manifests, which share the shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    /// Always 2.
    pub schema_version: u32,
    /// The manifest media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The config descriptor.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
}

impl ImageManifest {
    /// The manifest `pacto push` writes: one config, one bundle layer, no `artifactType`, no
    /// annotations.
    pub fn bundle(config: (&str, u64), layer: (&str, u64)) -> Self {
        ImageManifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
            config: Descriptor {
                media_type: CONFIG_MEDIA_TYPE.to_owned(),
                digest: config.0.to_owned(),
                size: config.1,
            },
            layers: vec![Descriptor {
                media_type: LAYER_MEDIA_TYPE.to_owned(),
                digest: layer.0.to_owned(),
                size: layer.1,
            }],
        }
    }

    /// Serialises to compact JSON.
    pub fn to_json(&self) -> Vec<u8> {
        // Serialising plain structs of strings and integers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses a manifest; the error names what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let manifest: ImageManifest =
            serde_json::from_slice(bytes).map_err(|e| format!("not an image manifest: {e}"))?;
        if manifest.schema_version != 2 {
            return Err(format!(
                "unsupported schemaVersion {}",
                manifest.schema_version
            ));
        }
        Ok(manifest)
    }
}

#[derive(Debug, Serialize, Deserialize, Default)]
struct ContainerConfig {
    #[serde(rename = "Labels", default)]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RootFs {
    #[serde(rename = "type")]
    kind: String,
    diff_ids: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, Default)]
struct HistoryEntry {}

/// The image config carrying the `io.pacto.*` labels.
#[derive(Debug, Serialize, Deserialize)]
pub struct BundleConfig {
    architecture: String,
    created: String,
    history: Vec<HistoryEntry>,
    os: String,
    rootfs: RootFs,
    config: ContainerConfig,
}

impl BundleConfig {
    /// The config for a bundle whose uncompressed tar has digest `diff_id`.
    pub fn new(meta: &BundleMeta, diff_id: &str) -> Self {
        let labels = BTreeMap::from([
            (LABEL_NAME.to_owned(), meta.name.clone()),
            (LABEL_VERSION.to_owned(), meta.version.clone()),
            (LABEL_PACTO_VERSION.to_owned(), meta.pacto_version.clone()),
        ]);
        BundleConfig {
            architecture: String::new(),
            created: "0001-01-01T00:00:00Z".to_owned(),
            history: vec![HistoryEntry {}],
            os: String::new(),
            rootfs: RootFs {
                kind: "layers".to_owned(),
                diff_ids: vec![diff_id.to_owned()],
            },
            config: ContainerConfig { labels },
        }
    }

    /// Serialises to compact JSON.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The labels of any image config JSON (empty if it has none or is not JSON).
    pub fn labels_from_json(bytes: &[u8]) -> BTreeMap<String, String> {
        #[derive(Deserialize)]
        struct Any {
            #[serde(default)]
            config: Option<ContainerConfig>,
        }
        serde_json::from_slice::<Any>(bytes)
            .ok()
            .and_then(|a| a.config)
            .map(|c| c.labels)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_shape_matches_spec() {
        let m = ImageManifest::bundle(("sha256:c", 10), ("sha256:l", 20));
        let v: serde_json::Value = serde_json::from_slice(&m.to_json()).expect("json");
        assert_eq!(v["schemaVersion"], 2);
        assert_eq!(v["mediaType"], MANIFEST_MEDIA_TYPE);
        assert_eq!(v["config"]["mediaType"], CONFIG_MEDIA_TYPE);
        assert_eq!(v["layers"][0]["mediaType"], LAYER_MEDIA_TYPE);
        assert!(v.get("artifactType").is_none());
        assert!(v.get("annotations").is_none());
        assert_eq!(ImageManifest::parse(&m.to_json()).expect("parses"), m);
    }

    #[test]
    fn config_carries_labels() {
        let meta = BundleMeta {
            name: "svc".into(),
            version: "1.2.3".into(),
            pacto_version: "2.0".into(),
        };
        let json = BundleConfig::new(&meta, "sha256:d").to_json();
        let labels = BundleConfig::labels_from_json(&json);
        assert_eq!(labels[LABEL_NAME], "svc");
        assert_eq!(labels[LABEL_VERSION], "1.2.3");
        assert_eq!(labels[LABEL_PACTO_VERSION], "2.0");
        let v: serde_json::Value = serde_json::from_slice(&json).expect("json");
        assert_eq!(v["rootfs"]["diff_ids"][0], "sha256:d");
        assert!(BundleConfig::labels_from_json(b"not json").is_empty());
    }
}
