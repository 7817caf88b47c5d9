//! The kernel side of collection: loads and attaches the sockwatch program and drains its ring
//! buffer (docs/design/node-agent.md#kernel-program).
//!
//! This module needs no `unsafe`: the ring buffer is polled by the agent (every 100 ms) instead
//! of being registered with the async runtime, so aya's safe API suffices
//! (docs/design/node-agent.md#unsafe).

pub mod record;

use std::path::Path;

use aya::{
    Btf, Ebpf, EbpfLoader, Endianness,
    maps::{Array, MapData, RingBuf},
    programs::BtfTracePoint,
};

use crate::facts::{CollectionError, EventSource, SocketEvent};

/// The compiled program: built from `libbpf-programs/` by build.rs, or the committed prebuilt
/// object when clang is missing.
pub static SOCKWATCH_OBJ: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/sockwatch.bpf.o"));

/// Where the running kernel publishes its BTF.
pub const DEFAULT_BTF_PATH: &str = "/sys/kernel/btf/vmlinux";

/// The size of the `EVENTS` ring buffer (`max_entries` in sockwatch.bpf.c).
pub const RING_BYTES: usize = 1 << 20;
/// How many records the ring buffer holds: each is [`record::RECORD_LEN`] bytes after an 8-byte
/// header (docs/design/node-agent.md#kernel-program).
pub const RING_RECORDS: usize = RING_BYTES / (record::RECORD_LEN + 8);

const PROGRAM: &str = "on_state";
const TRACEPOINT: &str = "inet_sock_set_state";

/// The attached program and its two maps. Dropping it detaches the program (links are file
/// descriptors; nothing is pinned, nothing outlives the process).
pub struct Collector {
    events: RingBuf<MapData>,
    drops: Array<MapData, u64>,
    malformed: u64,
    // Declared last so that the maps close before the object that owns the program.
    ebpf: Ebpf,
}

impl Collector {
    /// Checks the kernel's BTF at `btf_path`, then loads and attaches the program.
    ///
    /// The BTF is parsed explicitly first: aya would otherwise skip the CO-RE relocations
    /// silently when BTF is missing, and the program would read wrong offsets.
    pub fn start(btf_path: &Path) -> Result<Collector, CollectionError> {
        let btf = Btf::parse_file(btf_path, Endianness::default()).map_err(|e| {
            CollectionError::BtfUnavailable {
                path: btf_path.display().to_string(),
                message: chain(&e),
            }
        })?;
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&btf))
            .load(SOCKWATCH_OBJ)
            .map_err(|e| CollectionError::LoadFailed(chain(&e)))?;
        let program: &mut BtfTracePoint = ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| {
                CollectionError::LoadFailed(format!("program {PROGRAM} missing from the object"))
            })?
            .try_into()
            .map_err(|e| CollectionError::LoadFailed(chain(&e)))?;
        program
            .load(TRACEPOINT, &btf)
            .map_err(|e| CollectionError::LoadFailed(chain(&e)))?;
        program
            .attach()
            .map_err(|e| CollectionError::AttachFailed(chain(&e)))?;
        let events = take_map(&mut ebpf, "EVENTS")
            .and_then(|m| RingBuf::try_from(m).map_err(|e| chain(&e)))
            .map_err(CollectionError::LoadFailed)?;
        let drops = take_map(&mut ebpf, "DROPS")
            .and_then(|m| Array::try_from(m).map_err(|e| chain(&e)))
            .map_err(CollectionError::LoadFailed)?;
        Ok(Collector {
            events,
            drops,
            malformed: 0,
            ebpf,
        })
    }

    /// Records that could not be parsed since start (a format mismatch; never expected).
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// The program's accumulated run time in nanoseconds and run count, when the kernel keeps
    /// them (only while BPF statistics are enabled: `kernel.bpf_stats_enabled=1` or an
    /// `enable_stats` descriptor held open). `None` when they cannot be read or are off.
    pub fn program_stats(&self) -> Option<(u64, u64)> {
        let info = self.ebpf.program(PROGRAM)?.info().ok()?;
        let (time, count) = (info.run_time(), info.run_count());
        if count == 0 && time.is_zero() {
            return None;
        }
        Some((u64::try_from(time.as_nanos()).unwrap_or(u64::MAX), count))
    }
}

impl EventSource for Collector {
    fn drain(&mut self, out: &mut Vec<SocketEvent>) {
        while let Some(item) = self.events.next() {
            match record::parse(&item) {
                Ok(event) => out.push(event),
                Err(_) => self.malformed += 1,
            }
        }
    }

    fn drops(&self) -> u64 {
        self.drops.get(&0, 0).unwrap_or(0)
    }
}

fn take_map(ebpf: &mut Ebpf, name: &str) -> Result<aya::maps::Map, String> {
    ebpf.take_map(name)
        .ok_or_else(|| format!("map {name} missing from the object"))
}

/// An error and its causes on one line (aya puts the kernel's own message in the causes).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(bpf_built_from_source)]
    #[test]
    fn prebuilt_object_matches_the_sources() {
        assert!(
            SOCKWATCH_OBJ
                == include_bytes!("../../libbpf-programs/prebuilt/sockwatch.bpf.o").as_slice(),
            "libbpf-programs/prebuilt/sockwatch.bpf.o is stale: copy $OUT_DIR/sockwatch.bpf.o over it \
             (cargo build -p pacto-node-agent, then find target -name sockwatch.bpf.o)"
        );
    }

    #[test]
    fn a_missing_btf_file_is_btf_unavailable_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vmlinux");
        let Err(err) = Collector::start(&path) else {
            panic!("started without BTF")
        };
        assert_eq!(err.reason(), "BTFUnavailable");
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
        std::fs::write(&path, b"").unwrap();
        let Err(err) = Collector::start(&path) else {
            panic!("started with empty BTF")
        };
        assert_eq!(err.reason(), "BTFUnavailable", "{err}");
    }
}
