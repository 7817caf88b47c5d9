//! Where the binary gets its kernel collector and host scanner. The library never calls these:
//! `run` takes the source and the scanner as parameters, so tests pass scripted ones.

use std::path::{Path, PathBuf};

use crate::facts::{CollectionError, EventSource, HostScanner};

/// Starts the kernel collector (BTF check → load → attach).
pub fn kernel_source(btf_path: &Path) -> Result<Box<dyn EventSource>, CollectionError> {
    crate::kernel::Collector::start(btf_path).map(|c| Box::new(c) as Box<dyn EventSource>)
}

/// The host scanner over `/proc` and the cgroup v2 mount.
pub fn host_scanner(proc_root: PathBuf, cgroup_root: PathBuf) -> Box<dyn HostScanner> {
    Box::new(crate::host::ProcScanner::new(proc_root, cgroup_root))
}
