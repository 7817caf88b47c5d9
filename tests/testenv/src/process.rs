//! Child processes that can never outlive the test.
//!
//! Every server (etcd, kube-apiserver, kube-controller-manager, Prometheus, ...) is started in its own
//! process group, with its output sent to a log file. Two mechanisms stop it:
//!
//! 1. [`ManagedProcess`]'s `Drop` kills the whole process group (`SIGKILL`) and reaps the child. `Drop`
//!    runs on normal return and during unwinding after a panic.
//! 2. A *watchdog* covers the cases where `Drop` never runs (the test process is killed, aborts, or
//!    the value lives in a `static` that is never dropped). The watchdog is a tiny `/bin/sh` process in
//!    its own process group whose standard input is a pipe whose only writer is the test process.
//!    When the test process exits for any reason the kernel closes that pipe, the watchdog's `read`
//!    returns end-of-file, and it kills the server's process group and removes the given
//!    directories. No polling, no `unsafe` (`prctl(PR_SET_PDEATHSIG)` would need it, and the
//!    workspace forbids unsafe code).

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// Errors while starting or supervising a child process.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("creating log file {path}")]
    LogFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting {program}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the watchdog for {program}")]
    Watchdog {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// A running child process in its own process group, killed with its group on drop.
pub struct ManagedProcess {
    name: String,
    child: Child,
    log: PathBuf,
    // Held only so the pipe closes when the whole test process goes away.
    watchdog_pipe: Option<ChildStdin>,
    watchdog: Option<Child>,
}

impl std::fmt::Debug for ManagedProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagedProcess")
            .field("name", &self.name)
            .field("pid", &self.child.id())
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

impl ManagedProcess {
    /// Spawns `command` in a new process group with stdout and stderr appended to `log`, plus a
    /// watchdog that kills the group (and removes `cleanup_dirs`) if this process dies.
    pub fn spawn(
        name: &str,
        mut command: Command,
        log: &Path,
        cleanup_dirs: &[&Path],
    ) -> Result<Self, ProcessError> {
        let out = File::create(log).map_err(|source| ProcessError::LogFile {
            path: log.to_owned(),
            source,
        })?;
        let err = out.try_clone().map_err(|source| ProcessError::LogFile {
            path: log.to_owned(),
            source,
        })?;
        command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let child = command.spawn().map_err(|source| ProcessError::Spawn {
            program: name.to_owned(),
            source,
        })?;
        let mut process = Self {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
            watchdog_pipe: None,
            watchdog: None,
        };
        let (pipe, watchdog) =
            spawn_watchdog(process.child.id(), cleanup_dirs).map_err(|source| {
                ProcessError::Watchdog {
                    program: name.to_owned(),
                    source,
                }
            })?;
        process.watchdog_pipe = Some(pipe);
        process.watchdog = Some(watchdog);
        Ok(process)
    }

    /// The child's process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file receiving the child's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `max_bytes` of the child's log, for error messages.
    pub fn log_tail(&self, max_bytes: usize) -> String {
        log_tail(&self.log, max_bytes)
    }

    /// `Some(status)` when the child has already exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills the process group and waits for the child.
    pub fn stop(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.wait();
        // The watchdog is not needed any more. Kill it rather than closing its pipe, so that it does
        // not remove directories that their owner (a TempDir) is about to remove anyway, or that
        // other processes of the same environment still use.
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        self.watchdog_pipe = None;
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A managed process that exited while it should run: its name, exit status and log tail.
#[derive(Debug, thiserror::Error)]
#[error("{name} exited during start-up ({status}); last log lines:\n{log}")]
pub struct Exited {
    pub name: String,
    pub status: String,
    pub log: String,
}

/// The first of the named `processes` (`None` entries are not started) that has exited.
pub fn first_exited<'a>(
    processes: impl IntoIterator<Item = (&'a str, &'a mut Option<ManagedProcess>)>,
) -> Option<Exited> {
    processes.into_iter().find_map(|(name, process)| {
        let process = process.as_mut()?;
        let status = process.exited()?;
        Some(Exited {
            name: name.to_owned(),
            status: status.to_string(),
            log: process.log_tail(4000),
        })
    })
}

/// The last `max_bytes` of a file (lossy UTF-8), or a note that it cannot be read.
pub fn log_tail(path: &Path, max_bytes: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let start = bytes.len().saturating_sub(max_bytes);
            String::from_utf8_lossy(&bytes[start..]).into_owned()
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

fn kill_group(pgid: u32) {
    // The shell's `kill` builtin (no procps needed); a negative pid addresses the process group.
    let _ = Command::new("/bin/sh")
        .args([
            "-c",
            r#"kill -s KILL -- "-$1""#,
            "kill-group",
            &pgid.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Starts the watchdog shell: it blocks reading its stdin; at end-of-file (this process closed the
/// pipe or died) it kills process group `pgid` and removes `cleanup_dirs`.
fn spawn_watchdog(pgid: u32, cleanup_dirs: &[&Path]) -> std::io::Result<(ChildStdin, Child)> {
    let script = r#"pg="$1"; shift
while read -r _; do :; done
kill -s KILL -- "-$pg" 2>/dev/null
for d in "$@"; do rm -rf -- "$d" 2>/dev/null; done
exit 0"#;
    let mut command = Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(script)
        .arg("pacto-testenv-watchdog")
        .arg(pgid.to_string())
        .args(cleanup_dirs)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = command.spawn()?;
    let pipe = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("watchdog stdin was not piped"))?;
    Ok((pipe, child))
}

/// Waits until `check` returns `Some`, polling every `interval`, up to `timeout`.
pub async fn wait_for<T, F, Fut>(timeout: Duration, interval: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sleep.log");
        let pidfile = dir.path().join("grandchild.pid");
        let mut cmd = Command::new("/bin/sh");
        // The grandchild would survive a plain kill of the shell; the group kill must reach it.
        cmd.arg("-c")
            .arg(format!("sleep 300 & echo $! > {}; wait", pidfile.display()));
        let p = ManagedProcess::spawn("sleeper", cmd, &log, &[]).unwrap();
        let pid = p.pid();
        let mut grandchild = None;
        for _ in 0..200 {
            if let Ok(s) = std::fs::read_to_string(&pidfile)
                && let Ok(n) = s.trim().parse::<u32>()
            {
                grandchild = Some(n);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let grandchild = grandchild.expect("grandchild pid written");
        assert!(Path::new(&format!("/proc/{grandchild}")).exists());
        drop(p);
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        // The grandchild was re-parented when killed; give the kernel a moment to reap it.
        let mut gone = false;
        for _ in 0..200 {
            let stat = std::fs::read_to_string(format!("/proc/{grandchild}/stat"));
            if stat.map_or(true, |s| s.contains(") Z ")) {
                gone = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(gone, "grandchild {grandchild} still running");
    }
}
