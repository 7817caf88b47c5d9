//! Contract bundles: the files of a contract directory held in memory, deterministic tar+gzip
//! packing and limit-checked extraction (docs/design/contract.md#bundles).
//!
//! Packing (docs/design/contract.md#bundle-packing): entries in lexical walk order (directory entry first, then its contents,
//! siblings sorted by name), directories `0755`, files `0644`, mtime 0, uid/gid 0, empty
//! user/group names, `/`-separated names without `./`. The gzip stream has no name and mtime 0,
//! so identical bundles give identical bytes with this implementation. Directories are derived
//! from the file paths, so empty directories are not carried.
//!
//! Extraction (docs/design/contract.md#bundle-extraction) reads the stream once and counts every byte that leaves the decompressor,
//! never trusting header sizes: at most [`Limits::max_file_bytes`] per file,
//! [`Limits::max_total_bytes`] of file content, [`Limits::max_entries`] entries, and a bounded
//! decompressed stream (so a gzip bomb stops early). Absolute paths, `..` components, symbolic
//! and hard links, device files and FIFOs are refused, each with its own error variant.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// What [`BundleFiles::held_bytes`] counts per file besides its name and content: a B-tree
/// map entry's share and two allocation headers.
const HELD_OVERHEAD: usize = 96;

/// The name of the contract document at the root of every bundle.
pub const CONTRACT_FILE: &str = "pacto.yaml";
/// The fixed policy schema path of a referenced bundle without its own `policies[]` (here, not
/// in `policy`, so that [`files_used_by`] needs no import of it: modules point one way).
pub const FALLBACK_POLICY_SCHEMA: &str = "policy/schema.json";
/// The ignore file read from the bundle root when packing a directory.
const IGNORE_FILE: &str = ".pactoignore";

/// Manifest media type of a bundle artifact (an OCI image manifest, no `artifactType`).
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Docker v2 schema 2 manifest media type, accepted on pull.
pub const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Config descriptor media type written by `pacto push`.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.docker.container.image.v1+json";
/// The media type of the single bundle layer.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.pacto.bundle.layer.v1.tar+gzip";
/// Config label carrying `service.name`.
pub const LABEL_NAME: &str = "io.pacto.name";
/// Config label carrying `service.version`.
pub const LABEL_VERSION: &str = "io.pacto.version";
/// Config label carrying `pactoVersion`.
pub const LABEL_PACTO_VERSION: &str = "io.pacto.pactoVersion";

/// Size and count limits for reading a bundle (defaults from docs/design/contract.md#bundle-extraction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest single file, in bytes.
    pub max_file_bytes: u64,
    /// Largest sum of file sizes, in bytes.
    pub max_total_bytes: u64,
    /// Most entries (files, directories and anything else) in an archive or directory.
    pub max_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 10 * 1024 * 1024,
            max_total_bytes: 50 * 1024 * 1024,
            max_entries: 10_000,
        }
    }
}

impl Limits {
    /// The most decompressed bytes an archive within these limits can need: the file content
    /// plus, per entry, a header, a long-name header pair and padding, plus the end blocks.
    pub fn max_stream_bytes(&self) -> u64 {
        self.max_total_bytes
            .saturating_add((self.max_entries as u64).saturating_mul(4 * 512))
            .saturating_add(64 * 1024)
    }
}

/// Why a bundle could not be read, extracted, packed or written.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The bundle directory could not be read.
    #[error("reading bundle directory {path}")]
    ReadDir {
        /// The path being read.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A file of the bundle directory could not be read.
    #[error("reading bundle file {path}")]
    ReadFile {
        /// The path being read.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A directory path in the bundle directory is not valid UTF-8.
    #[error("bundle path {path} is not valid UTF-8")]
    NonUtf8Path {
        /// The offending path (lossy).
        path: String,
    },
    /// The bundle directory contains a symbolic link (bundles carry regular files only).
    #[error(
        "bundle directory contains a symbolic link at {path} (only regular files and directories are allowed)"
    )]
    SymlinkInDir {
        /// The link's bundle-relative path.
        path: String,
    },
    /// The bundle directory contains a socket, FIFO or device.
    #[error(
        "bundle directory contains a special file at {path} (only regular files and directories are allowed)"
    )]
    SpecialFileInDir {
        /// The file's bundle-relative path.
        path: String,
    },
    /// No `pacto.yaml` at the bundle root.
    #[error("not a valid Pacto bundle: pacto.yaml not found at the bundle root")]
    MissingContract,
    /// The archive is not valid gzip/tar.
    #[error("corrupt bundle archive")]
    Corrupt {
        /// The decoding error.
        #[source]
        source: io::Error,
    },
    /// The decompressed stream exceeds what the limits allow (for example a gzip bomb).
    #[error("bundle archive expands beyond {limit} bytes")]
    StreamTooLarge {
        /// The decompressed-stream limit.
        limit: u64,
    },
    /// An entry name is not valid UTF-8.
    #[error("bundle entry name is not valid UTF-8: {name:?}")]
    NonUtf8EntryName {
        /// The name, lossily decoded.
        name: String,
    },
    /// An entry name is absolute.
    #[error("bundle entry {path:?} has an absolute path")]
    AbsolutePath {
        /// The entry name.
        path: String,
    },
    /// An entry name contains a `..` component.
    #[error("bundle entry {path:?} contains a \"..\" path component")]
    ParentTraversal {
        /// The entry name.
        path: String,
    },
    /// A symbolic or hard link entry.
    #[error("bundle entry {path:?} is a {kind} to {target:?}; links are not allowed in bundles")]
    Link {
        /// The entry name.
        path: String,
        /// `symbolic link` or `hard link`.
        kind: &'static str,
        /// The link target as written in the archive.
        target: String,
    },
    /// A device, FIFO or other special entry.
    #[error("bundle entry {path:?} is a {kind}; only regular files and directories are allowed")]
    SpecialFile {
        /// The entry name.
        path: String,
        /// What kind of entry it is.
        kind: &'static str,
    },
    /// Too many entries.
    #[error("bundle has more than {limit} entries")]
    TooManyEntries {
        /// The limit.
        limit: usize,
    },
    /// One file is larger than allowed.
    #[error("bundle file {path:?} is larger than {limit} bytes")]
    FileTooLarge {
        /// The entry name.
        path: String,
        /// The limit.
        limit: u64,
    },
    /// The files together are larger than allowed.
    #[error("bundle files total more than {limit} bytes")]
    TotalTooLarge {
        /// The limit.
        limit: u64,
    },
    /// The same file appears twice.
    #[error("bundle entry {path:?} appears more than once")]
    DuplicateEntry {
        /// The entry name.
        path: String,
    },
    /// The archive could not be written.
    #[error("writing bundle archive")]
    Pack {
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A path held by the bundle cannot be written safely below a directory.
    #[error("bundle path {path:?} is not a safe relative path")]
    UnsafePath {
        /// The path.
        path: String,
    },
    /// Writing the bundle to a directory failed.
    #[error("writing bundle file {path}")]
    WriteFile {
        /// The destination path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The destination contains a symbolic link where the bundle writes.
    #[error("refusing to write through symbolic link {path}")]
    DestinationSymlink {
        /// The link found in the destination.
        path: PathBuf,
    },
}

impl BundleError {
    /// A short, low-cardinality label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            BundleError::ReadDir { .. } | BundleError::ReadFile { .. } => "read",
            BundleError::NonUtf8Path { .. } | BundleError::NonUtf8EntryName { .. } => "non_utf8",
            BundleError::SymlinkInDir { .. } | BundleError::Link { .. } => "link",
            BundleError::SpecialFileInDir { .. } | BundleError::SpecialFile { .. } => {
                "special_file"
            }
            BundleError::MissingContract => "missing_contract",
            BundleError::Corrupt { .. } => "corrupt",
            BundleError::StreamTooLarge { .. } => "stream_too_large",
            BundleError::AbsolutePath { .. } => "absolute_path",
            BundleError::ParentTraversal { .. } => "parent_traversal",
            BundleError::TooManyEntries { .. } => "too_many_entries",
            BundleError::FileTooLarge { .. } => "file_too_large",
            BundleError::TotalTooLarge { .. } => "total_too_large",
            BundleError::DuplicateEntry { .. } => "duplicate_entry",
            BundleError::Pack { .. } => "pack",
            BundleError::UnsafePath { .. } => "unsafe_path",
            BundleError::WriteFile { .. } | BundleError::DestinationSymlink { .. } => "write",
        }
    }

    /// The bundle-relative path of the entry the error is about, when it names one: the file
    /// that is too large, the link, the unsafe name, or `pacto.yaml` when it is missing. `None`
    /// for errors about the archive as a whole (corrupt stream, totals) and for local I/O.
    pub fn entry(&self) -> Option<&str> {
        match self {
            BundleError::MissingContract => Some(CONTRACT_FILE),
            BundleError::SymlinkInDir { path }
            | BundleError::SpecialFileInDir { path }
            | BundleError::NonUtf8EntryName { name: path }
            | BundleError::AbsolutePath { path }
            | BundleError::ParentTraversal { path }
            | BundleError::Link { path, .. }
            | BundleError::SpecialFile { path, .. }
            | BundleError::FileTooLarge { path, .. }
            | BundleError::DuplicateEntry { path }
            | BundleError::UnsafePath { path } => Some(path),
            BundleError::ReadDir { .. }
            | BundleError::ReadFile { .. }
            | BundleError::NonUtf8Path { .. }
            | BundleError::Corrupt { .. }
            | BundleError::StreamTooLarge { .. }
            | BundleError::TooManyEntries { .. }
            | BundleError::TotalTooLarge { .. }
            | BundleError::Pack { .. }
            | BundleError::WriteFile { .. }
            | BundleError::DestinationSymlink { .. } => None,
        }
    }
}

/// Normalises a bundle-relative path (`./`, `.` and `..` components) and reads it. A path that
/// escapes the bundle root or is absolute is treated as missing.
pub fn read_file<'a>(fs: &'a BundleFiles, path: &str) -> Option<&'a [u8]> {
    fs.get(&normalize_path(path)?)
}

/// The key [`read_file`] looks `path` up by: `./`, `.` and `..` components resolved; `None` for
/// an absolute path or one that escapes the bundle root.
pub fn normalize_path(path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

/// The files of a bundle that validation, policy resolution and a resolve's answer can read,
/// given its contract: `pacto.yaml`, `policy/schema.json` (read when the bundle serves as a
/// policy), and the files named by `interfaces[].ref`, `configurations[].schema` and
/// `policies[].schema` (docs/design/resolution.md#memory: the rest is dropped after extraction).
pub fn files_used_by(contract: &crate::model::Contract) -> BTreeSet<String> {
    let named = contract
        .interfaces
        .iter()
        .map(|i| i.reference.as_str())
        .chain(
            contract
                .configurations
                .iter()
                .filter_map(|c| c.schema.as_deref()),
        )
        .chain(contract.policies.iter().filter_map(|p| p.schema.as_deref()));
    [CONTRACT_FILE, FALLBACK_POLICY_SCHEMA]
        .into_iter()
        .map(str::to_owned)
        .chain(named.filter_map(normalize_path))
        .collect()
}

/// The files of a bundle, keyed by normalised relative path (`/`-separated, no leading `./`,
/// no `..` components). Iteration order is sorted by path, which packing relies on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BundleFiles {
    files: BTreeMap<String, Vec<u8>>,
}

impl BundleFiles {
    /// An empty bundle.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a file. `path` must already be normalised (see the type docs).
    pub fn insert(&mut self, path: impl Into<String>, bytes: impl Into<Vec<u8>>) {
        self.files.insert(path.into(), bytes.into());
    }

    /// The bytes of the file at `path`, if present. Leading `./` is ignored.
    pub fn get(&self, path: &str) -> Option<&[u8]> {
        let path = path.trim_start_matches("./");
        self.files.get(path).map(Vec::as_slice)
    }

    /// The bytes of `pacto.yaml`, if present.
    pub fn contract(&self) -> Option<&[u8]> {
        self.get(CONTRACT_FILE)
    }

    /// All files in sorted path order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files.iter().map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when the bundle holds no file.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Sum of all file sizes in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.files.values().map(|v| v.len() as u64).sum()
    }

    /// The memory the bundle holds: every file buffer's capacity, every name, and a per-file
    /// overhead for the map entry and the two allocations' headers.
    pub fn held_bytes(&self) -> u64 {
        self.files
            .iter()
            .map(|(name, bytes)| (name.capacity() + bytes.capacity() + HELD_OVERHEAD) as u64)
            .sum()
    }

    /// Keeps only the files at `paths` (normalised keys, see [`normalize_path`]) and gives the
    /// kept buffers' unused capacity back to the allocator.
    pub fn retain_paths(&mut self, paths: &BTreeSet<String>) {
        self.files.retain(|name, _| paths.contains(name));
        for bytes in self.files.values_mut() {
            bytes.shrink_to_fit();
        }
    }

    /// Reads a bundle directory: every regular file below `dir`, minus the default ignores
    /// (`.git/`, `.pactoignore`, `.DS_Store`) and the patterns of `dir/.pactoignore`
    /// (`pacto.yaml` is never ignored). Symbolic links and special files are refused.
    /// `pacto.yaml` must exist at the root.
    pub fn from_dir(dir: &Path, limits: &Limits) -> Result<Self, BundleError> {
        let bundle = Self::read_dir(dir, limits)?;
        if bundle.contract().is_none() {
            return Err(BundleError::MissingContract);
        }
        Ok(bundle)
    }

    /// Like [`BundleFiles::from_dir`] but without requiring `pacto.yaml` (for directories
    /// referenced as policy bundles, which may carry only `policy/schema.json`).
    pub fn read_dir(dir: &Path, limits: &Limits) -> Result<Self, BundleError> {
        let ignore = IgnoreRules::load(dir)?;
        let mut bundle = BundleFiles::new();
        let mut entries = 0usize;
        let mut total = 0u64;
        let mut walker = walkdir::WalkDir::new(dir)
            .follow_links(false)
            .sort_by_file_name()
            .min_depth(1)
            .into_iter();
        while let Some(item) = walker.next() {
            let item = item.map_err(|e| {
                let path = e.path().unwrap_or(dir).to_path_buf();
                BundleError::ReadDir {
                    path,
                    source: e.into(),
                }
            })?;
            let rel = item
                .path()
                .strip_prefix(dir)
                .unwrap_or(item.path())
                .components()
                .map(|c| {
                    c.as_os_str().to_str().map(str::to_owned).ok_or_else(|| {
                        BundleError::NonUtf8Path {
                            path: item.path().to_string_lossy().into_owned(),
                        }
                    })
                })
                .collect::<Result<Vec<_>, _>>()?
                .join("/");
            let file_type = item.file_type();
            if ignore.is_ignored(&rel, file_type.is_dir()) {
                if file_type.is_dir() {
                    walker.skip_current_dir();
                }
                continue;
            }
            entries += 1;
            if entries > limits.max_entries {
                return Err(BundleError::TooManyEntries {
                    limit: limits.max_entries,
                });
            }
            if file_type.is_dir() {
                continue;
            }
            if file_type.is_symlink() {
                return Err(BundleError::SymlinkInDir { path: rel });
            }
            if !file_type.is_file() {
                return Err(BundleError::SpecialFileInDir { path: rel });
            }
            let read_err = |source| BundleError::ReadFile {
                path: item.path().to_path_buf(),
                source,
            };
            let file = fs::File::open(item.path()).map_err(read_err)?;
            let mut bytes = Vec::new();
            file.take(limits.max_file_bytes + 1)
                .read_to_end(&mut bytes)
                .map_err(read_err)?;
            if bytes.len() as u64 > limits.max_file_bytes {
                return Err(BundleError::FileTooLarge {
                    path: rel,
                    limit: limits.max_file_bytes,
                });
            }
            total += bytes.len() as u64;
            if total > limits.max_total_bytes {
                return Err(BundleError::TotalTooLarge {
                    limit: limits.max_total_bytes,
                });
            }
            bundle.files.insert(rel, bytes);
        }
        Ok(bundle)
    }

    /// Paths in tar order: lexical walk order with a directory entry (ending in `/`) before
    /// its contents.
    fn tar_order(&self) -> Vec<(String, Option<&[u8]>)> {
        let mut dirs: BTreeSet<Vec<&str>> = BTreeSet::new();
        let mut items: Vec<(Vec<&str>, Option<&[u8]>)> = Vec::new();
        for (path, bytes) in &self.files {
            let parts: Vec<&str> = path.split('/').collect();
            for end in 1..parts.len() {
                dirs.insert(parts[..end].to_vec());
            }
            items.push((parts, Some(bytes.as_slice())));
        }
        items.extend(dirs.into_iter().map(|d| (d, None)));
        // Component-wise ordering is the walk order: "a" < "a/b" < "a-c".
        items.sort_by(|a, b| a.0.cmp(&b.0));
        items
            .into_iter()
            .map(|(parts, bytes)| {
                let mut name = parts.join("/");
                if bytes.is_none() {
                    name.push('/');
                }
                (name, bytes)
            })
            .collect()
    }

    /// The deterministic, uncompressed tar of the bundle.
    pub fn to_tar(&self) -> Result<Vec<u8>, BundleError> {
        let mut builder = tar::Builder::new(Vec::new());
        builder.mode(tar::HeaderMode::Deterministic);
        for (name, bytes) in self.tar_order() {
            let mut header = tar::Header::new_ustar();
            header.set_mtime(0);
            header.set_uid(0);
            header.set_gid(0);
            // Empty user and group names (a fresh header already has them zeroed).
            if let Some(data) = bytes {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(0o644);
                header.set_size(data.len() as u64);
                builder
                    .append_data(&mut header, &name, data)
                    .map_err(|source| BundleError::Pack { source })?;
            } else {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_size(0);
                builder
                    .append_data(&mut header, &name, io::empty())
                    .map_err(|source| BundleError::Pack { source })?;
            }
        }
        builder
            .into_inner()
            .map_err(|source| BundleError::Pack { source })
    }

    /// The deterministic tar+gzip of the bundle (the layer content and the `pacto pack` file).
    pub fn to_tar_gz(&self) -> Result<Vec<u8>, BundleError> {
        gzip(&self.to_tar()?)
    }

    /// Extracts a gzip-compressed tar with `limits`. Requires `pacto.yaml` at the root.
    pub fn from_tar_gz<R: Read>(reader: R, limits: &Limits) -> Result<Self, BundleError> {
        Self::from_tar(flate2::read::MultiGzDecoder::new(reader), limits)
    }

    /// Extracts an uncompressed tar with `limits`. Requires `pacto.yaml` at the root.
    pub fn from_tar<R: Read>(reader: R, limits: &Limits) -> Result<Self, BundleError> {
        let cap = limits.max_stream_bytes();
        let mut counted = CountingReader {
            inner: reader,
            read: 0,
            cap,
            exceeded: false,
        };
        let result = read_entries(&mut counted, limits);
        let bundle = match result {
            Err(_) if counted.exceeded => return Err(BundleError::StreamTooLarge { limit: cap }),
            other => other?,
        };
        // Drain what follows the end-of-archive blocks so that trailing data is bounded and
        // the gzip trailer (CRC, length) is verified.
        match io::copy(&mut counted, &mut io::sink()) {
            Ok(_) => {}
            Err(_) if counted.exceeded => return Err(BundleError::StreamTooLarge { limit: cap }),
            Err(source) => return Err(BundleError::Corrupt { source }),
        }
        if bundle.contract().is_none() {
            return Err(BundleError::MissingContract);
        }
        Ok(bundle)
    }

    /// Writes every file below `dir` (created if missing), refusing to follow symbolic links
    /// that already exist in the destination. Existing files are overwritten.
    pub fn write_to_dir(&self, dir: &Path) -> Result<(), BundleError> {
        fs::create_dir_all(dir).map_err(|source| BundleError::WriteFile {
            path: dir.to_path_buf(),
            source,
        })?;
        for (path, bytes) in &self.files {
            let Some(parts) = safe_components(path) else {
                return Err(BundleError::UnsafePath { path: path.clone() });
            };
            let mut target = dir.to_path_buf();
            for (i, part) in parts.iter().enumerate() {
                target.push(part);
                match fs::symlink_metadata(&target) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        return Err(BundleError::DestinationSymlink { path: target });
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        if i + 1 < parts.len() {
                            fs::create_dir(&target).map_err(|source| BundleError::WriteFile {
                                path: target.clone(),
                                source,
                            })?;
                        }
                    }
                    Err(source) => {
                        return Err(BundleError::WriteFile {
                            path: target,
                            source,
                        });
                    }
                }
            }
            let write = || -> io::Result<()> {
                let mut f = fs::File::create(&target)?;
                f.write_all(bytes)?;
                f.sync_all()
            };
            write().map_err(|source| BundleError::WriteFile {
                path: target.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

/// gzip-compresses `bytes` deterministically (fast level, no name, mtime 0).
pub fn gzip(bytes: &[u8]) -> Result<Vec<u8>, BundleError> {
    let mut encoder = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::fast());
    encoder
        .write_all(bytes)
        .map_err(|source| BundleError::Pack { source })?;
    encoder
        .finish()
        .map_err(|source| BundleError::Pack { source })
}

/// Splits a stored path into safe components, or `None` if it is absolute, empty or has
/// `.`/`..`/empty components.
fn safe_components(path: &str) -> Option<Vec<&str>> {
    if path.is_empty() || path.starts_with('/') || path.contains('\\') || path.contains('\0') {
        return None;
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == "..")
    {
        return None;
    }
    Some(parts)
}

/// Normalises an archive entry name: strips `./` and empty components, refuses absolute paths
/// and `..`. `None` means the entry names the root (`.` or empty) and is skipped.
fn normalize_entry_name(name: &str) -> Result<Option<String>, BundleError> {
    if name.starts_with('/') {
        return Err(BundleError::AbsolutePath {
            path: name.to_owned(),
        });
    }
    let mut parts = Vec::new();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(BundleError::ParentTraversal {
                    path: name.to_owned(),
                });
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        Ok(None)
    } else {
        Ok(Some(parts.join("/")))
    }
}

fn corrupt(source: io::Error) -> BundleError {
    BundleError::Corrupt { source }
}

fn read_entries<R: Read>(reader: R, limits: &Limits) -> Result<BundleFiles, BundleError> {
    let mut archive = tar::Archive::new(reader);
    let mut bundle = BundleFiles::new();
    let mut count = 0usize;
    let mut total = 0u64;
    for entry in archive.entries().map_err(corrupt)? {
        let entry = entry.map_err(corrupt)?;
        count += 1;
        if count > limits.max_entries {
            return Err(BundleError::TooManyEntries {
                limit: limits.max_entries,
            });
        }
        let raw = entry.path_bytes();
        let name = std::str::from_utf8(&raw).map_err(|_| BundleError::NonUtf8EntryName {
            name: String::from_utf8_lossy(&raw).into_owned(),
        })?;
        let name = name.to_owned();
        let path = normalize_entry_name(&name)?;
        let entry_type = entry.header().entry_type();
        let link_target = || {
            entry
                .link_name_bytes()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        };
        match entry_type {
            tar::EntryType::Regular => {}
            tar::EntryType::Directory => continue,
            tar::EntryType::Symlink => {
                return Err(BundleError::Link {
                    path: name,
                    kind: "symbolic link",
                    target: link_target(),
                });
            }
            tar::EntryType::Link => {
                return Err(BundleError::Link {
                    path: name,
                    kind: "hard link",
                    target: link_target(),
                });
            }
            tar::EntryType::Char => {
                return Err(BundleError::SpecialFile {
                    path: name,
                    kind: "character device",
                });
            }
            tar::EntryType::Block => {
                return Err(BundleError::SpecialFile {
                    path: name,
                    kind: "block device",
                });
            }
            tar::EntryType::Fifo => {
                return Err(BundleError::SpecialFile {
                    path: name,
                    kind: "FIFO",
                });
            }
            _ => {
                return Err(BundleError::SpecialFile {
                    path: name,
                    kind: "unsupported entry type",
                });
            }
        }
        let Some(path) = path else {
            continue;
        };
        let declared = entry.header().size().map_err(corrupt)?;
        if declared > limits.max_file_bytes {
            return Err(BundleError::FileTooLarge {
                path,
                limit: limits.max_file_bytes,
            });
        }
        let mut bytes = Vec::new();
        entry
            .take(limits.max_file_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(corrupt)?;
        if bytes.len() as u64 > limits.max_file_bytes {
            return Err(BundleError::FileTooLarge {
                path,
                limit: limits.max_file_bytes,
            });
        }
        total += bytes.len() as u64;
        if total > limits.max_total_bytes {
            return Err(BundleError::TotalTooLarge {
                limit: limits.max_total_bytes,
            });
        }
        if bundle.files.contains_key(&path) {
            return Err(BundleError::DuplicateEntry { path });
        }
        bundle.files.insert(path, bytes);
    }
    Ok(bundle)
}

/// A reader that fails once more than `cap` bytes have passed through it.
struct CountingReader<R> {
    inner: R,
    read: u64,
    cap: u64,
    exceeded: bool,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.exceeded {
            return Err(io::Error::other("decompressed size limit exceeded"));
        }
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.cap {
            self.exceeded = true;
            return Err(io::Error::other("decompressed size limit exceeded"));
        }
        Ok(n)
    }
}

/// `.pactoignore` rules: a subset of gitignore. Blank lines and `#` comments are skipped; a
/// leading `!` re-includes; a trailing `/` matches directories only; a pattern with a `/`
/// elsewhere is anchored at the bundle root, otherwise it matches the name at any depth;
/// `*` and `?` do not cross `/`, `**` does. The last matching rule wins.
struct IgnoreRules {
    rules: Vec<IgnoreRule>,
}

struct IgnoreRule {
    pattern: String,
    negate: bool,
    dir_only: bool,
    anchored: bool,
}

impl IgnoreRules {
    fn load(dir: &Path) -> Result<Self, BundleError> {
        let path = dir.join(IGNORE_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(BundleError::ReadFile { path, source }),
        };
        let rules = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|line| {
                let (negate, line) = match line.strip_prefix('!') {
                    Some(rest) => (true, rest),
                    None => (false, line),
                };
                let (dir_only, line) = match line.strip_suffix('/') {
                    Some(rest) => (true, rest),
                    None => (false, line),
                };
                let anchored = line.contains('/');
                IgnoreRule {
                    pattern: line.trim_start_matches('/').to_owned(),
                    negate,
                    dir_only,
                    anchored,
                }
            })
            .collect();
        Ok(IgnoreRules { rules })
    }

    fn is_ignored(&self, rel: &str, is_dir: bool) -> bool {
        if rel == CONTRACT_FILE {
            return false;
        }
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if (is_dir && name == ".git") || name == IGNORE_FILE || name == ".DS_Store" {
            return true;
        }
        let mut ignored = false;
        for rule in &self.rules {
            if rule.dir_only && !is_dir {
                continue;
            }
            let subject = if rule.anchored { rel } else { name };
            if glob_match(rule.pattern.as_bytes(), subject.as_bytes()) {
                ignored = !rule.negate;
            }
        }
        ignored
    }
}

/// Glob match: `**` matches anything, `*` anything but `/`, `?` one non-`/` byte.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.first() {
        None => text.is_empty(),
        Some(b'*') if pattern.get(1) == Some(&b'*') => {
            let rest = &pattern[2..];
            let rest = rest.strip_prefix(b"/").unwrap_or(rest);
            (0..=text.len()).any(|i| glob_match(rest, &text[i..]))
        }
        Some(b'*') => {
            let rest = &pattern[1..];
            let mut i = 0;
            loop {
                if glob_match(rest, &text[i..]) {
                    return true;
                }
                if i == text.len() || text[i] == b'/' {
                    return false;
                }
                i += 1;
            }
        }
        Some(b'?') => {
            text.first().is_some_and(|&c| c != b'/') && glob_match(&pattern[1..], &text[1..])
        }
        Some(&c) => text.first() == Some(&c) && glob_match(&pattern[1..], &text[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_rules() {
        assert!(glob_match(b"*.md", b"README.md"));
        assert!(!glob_match(b"*.md", b"docs/README.md"));
        assert!(glob_match(b"docs/**", b"docs/a/b.md"));
        assert!(glob_match(b"**/x.txt", b"a/b/x.txt"));
        assert!(glob_match(b"a?c", b"abc"));
        assert!(!glob_match(b"a?c", b"a/c"));
    }

    #[test]
    fn entry_names_normalise() {
        assert_eq!(
            normalize_entry_name("./a//b/./c").expect("valid"),
            Some("a/b/c".to_owned())
        );
        assert_eq!(normalize_entry_name("./").expect("valid"), None);
        assert!(matches!(
            normalize_entry_name("a/../b"),
            Err(BundleError::ParentTraversal { .. })
        ));
        assert!(matches!(
            normalize_entry_name("/etc/passwd"),
            Err(BundleError::AbsolutePath { .. })
        ));
    }
}
