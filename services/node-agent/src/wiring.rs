//! Where the binary gets its kernel collector and host scanner. The library never calls these:
//! `run` takes the source and the scanner as parameters, so tests pass scripted ones.

use std::path::{Path, PathBuf};

use crate::facts::{CollectionError, EventSource, HostScanner, HostView};

/// Starts the kernel collector (BTF check → load → attach).
pub fn kernel_source(btf_path: &Path) -> Result<Box<dyn EventSource>, CollectionError> {
    // MERGE: kernel::Collector::start
    let _ = btf_path;
    Err(CollectionError::LoadFailed(
        "kernel collector not linked in this build".to_owned(),
    ))
}

/// The host scanner over `/proc` and the cgroup v2 mount.
pub fn host_scanner(proc_root: PathBuf, cgroup_root: PathBuf) -> Box<dyn HostScanner> {
    // MERGE: host::ProcScanner::new
    let _ = (proc_root, cgroup_root);
    Box::new(EmptyScanner)
}

/// Placeholder scanner: sees nothing.
struct EmptyScanner;

impl HostScanner for EmptyScanner {
    fn scan(&mut self, _with_sockets: bool) -> std::io::Result<HostView> {
        Ok(HostView::default())
    }
}
