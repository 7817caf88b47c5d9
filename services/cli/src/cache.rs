//! The local bundle cache (docs/design/contract.md#cli-cache): `$XDG_CACHE_HOME/pacto/oci` or
//! `~/.cache/pacto/oci`. An entry is the digest-pinned reference with every `:` replaced by `/`
//! and holds `bundle.tar.gz` (the layer bytes) and `ref.json`
//! `{"ref": "...", "digest": "sha256:…", "layerDigest": "sha256:…"}`, written through a staging
//! directory and a rename. Only digest-pinned pulls are cached, so a moved tag is never served
//! stale; the layer digest is re-checked on every read.

use std::path::{Path, PathBuf};

use pacto_contract::bundle::{BundleFiles, Limits};
use pacto_contract::reference::Reference;
use pacto_oci::PulledBundle;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

#[derive(Debug, Serialize, Deserialize)]
struct RefJson {
    #[serde(rename = "ref")]
    reference: String,
    digest: String,
    #[serde(rename = "layerDigest")]
    layer_digest: String,
}

/// The cache root, if a cache or home directory is known.
pub fn root() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("pacto").join("oci"))
}

fn entry_dir(root: &Path, pinned: &Reference) -> Option<PathBuf> {
    pinned.digest()?;
    let key = pinned.to_string().replace(':', "/");
    if key
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return None;
    }
    Some(root.join(key))
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A cached bundle for a digest-pinned reference, if present and intact.
pub fn read(root: &Path, pinned: &Reference, limits: &Limits) -> Option<PulledBundle> {
    let dir = entry_dir(root, pinned)?;
    let meta: RefJson = serde_json::from_slice(&std::fs::read(dir.join("ref.json")).ok()?).ok()?;
    if Some(meta.digest.as_str()) != pinned.digest() {
        return None;
    }
    let layer = std::fs::read(dir.join("bundle.tar.gz")).ok()?;
    if sha256(&layer) != meta.layer_digest {
        tracing::debug!(dir = %dir.display(), "cache entry corrupt; ignoring");
        return None;
    }
    let files = BundleFiles::from_tar_gz(layer.as_slice(), limits).ok()?;
    Some(PulledBundle {
        reference: pinned.clone(),
        digest: meta.digest,
        files,
        layer,
        labels: std::collections::BTreeMap::new(),
    })
}

/// Stores a pulled bundle (best effort: failures are logged, never fatal).
pub fn write(root: &Path, pulled: &PulledBundle) {
    let Some(dir) = entry_dir(root, &pulled.reference) else {
        return;
    };
    if dir.join("ref.json").is_file() {
        return;
    }
    let result = (|| -> std::io::Result<()> {
        let parent = dir.parent().unwrap_or(root);
        std::fs::create_dir_all(parent)?;
        let staging = parent.join(format!(
            ".staging-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir(&staging)?;
        std::fs::write(staging.join("bundle.tar.gz"), &pulled.layer)?;
        let meta = RefJson {
            reference: pulled.reference.to_string(),
            digest: pulled.digest.clone(),
            layer_digest: sha256(&pulled.layer),
        };
        std::fs::write(staging.join("ref.json"), serde_json::to_vec(&meta)?)?;
        if let Err(e) = std::fs::rename(&staging, &dir) {
            // Another process may have won the race; either way the staging dir goes.
            let _ = std::fs::remove_dir_all(&staging);
            if !dir.join("ref.json").is_file() {
                return Err(e);
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        tracing::debug!(error = %e, dir = %dir.display(), "could not write cache entry");
    }
}
