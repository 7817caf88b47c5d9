//! Progress of registry transfers on stderr (`pacto push`, `pull`, `validate oci://…`).
//!
//! Three modes ([`Mode::detect`]): `--quiet` prints nothing; stderr not a terminal (piped,
//! redirected, CI logs) prints one summary line per step, as a log would want; stderr a
//! terminal also draws a live line for each blob transfer that takes longer than a moment
//! (`PACTO_PROGRESS_DELAY`, default 300 ms; `0s` always draws): bytes so far, the total, the
//! percentage and the rate, redrawn at most every 100 ms and replaced by the summary line when the
//! transfer ends. The registry client sends an upload whole, so an upload's live line shows the
//! size and the time so far, and its rate once it is done.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pacto_oci::Progress;

/// The environment variable holding how long a transfer runs before its live line appears.
pub const DELAY_ENV: &str = "PACTO_PROGRESS_DELAY";
/// The default of [`DELAY_ENV`].
pub const DEFAULT_DELAY: Duration = Duration::from_millis(300);
/// The shortest time between two redraws of a live line.
const REDRAW: Duration = Duration::from_millis(100);

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Nothing (`--quiet`).
    Quiet,
    /// One line per step (stderr is not a terminal).
    Lines,
    /// Lines, plus a live line for transfers that take a while (stderr is a terminal).
    Terminal,
}

impl Mode {
    /// The mode for these flags and this stderr.
    pub fn detect(quiet: bool, stderr_is_terminal: bool) -> Self {
        match (quiet, stderr_is_terminal) {
            (true, _) => Self::Quiet,
            (false, false) => Self::Lines,
            (false, true) => Self::Terminal,
        }
    }
}

/// `1234` → `1.2 KiB` (binary units, one decimal; bytes as they are below 1 KiB).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    #[allow(clippy::cast_precision_loss, reason = "a display value")]
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `bytes` over `elapsed` as `<human>/s` (`-` before any time passed).
pub fn rate(bytes: u64, elapsed: Duration) -> String {
    let seconds = elapsed.as_secs_f64();
    if seconds <= 0.0 {
        return "-".to_owned();
    }
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a display value"
    )]
    let per_second = (bytes as f64 / seconds) as u64;
    format!("{}/s", human_bytes(per_second))
}

/// The live line of a download: `pulling layer  1.2 MiB / 3.4 MiB  35%  850.0 KiB/s`.
pub fn download_line(what: &str, received: u64, total: u64, elapsed: Duration) -> String {
    let percent = received
        .saturating_mul(100)
        .checked_div(total)
        .unwrap_or(100);
    format!(
        "pulling {what}  {} / {}  {percent}%  {}",
        human_bytes(received),
        human_bytes(total),
        rate(received, elapsed)
    )
}

/// The live line of an upload: `pushing layer  3.4 MiB  2.1 s`.
pub fn upload_line(what: &str, bytes: u64, elapsed: Duration) -> String {
    format!(
        "pushing {what}  {}  {:.1} s",
        human_bytes(bytes),
        elapsed.as_secs_f64()
    )
}

/// ` in 1.2 s, 3.4 MiB/s`: how long a transfer of `bytes` took, for its summary line.
pub fn timing(bytes: u64, took: Duration) -> String {
    format!(" in {:.1} s, {}", took.as_secs_f64(), rate(bytes, took))
}

/// The delay of [`DELAY_ENV`] (`None` when unset; an unreadable value is refused naming it).
pub fn delay_from_env(value: Option<&str>) -> Result<Duration, String> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(DEFAULT_DELAY),
        Some(v) => parse_delay(v)
            .ok_or_else(|| format!("{DELAY_ENV}={v:?}: not a duration such as 300ms or 0s")),
    }
}

/// `<integer>ms` or `<integer>s`.
fn parse_delay(text: &str) -> Option<Duration> {
    if let Some(ms) = text.strip_suffix("ms") {
        return ms.parse().ok().map(Duration::from_millis);
    }
    text.strip_suffix('s')?
        .parse()
        .ok()
        .map(Duration::from_secs)
}

/// One transfer being drawn.
#[derive(Debug)]
struct Live {
    started: Instant,
    last_draw: Option<Instant>,
    /// Stops the ticker of an upload.
    ticking: Option<Arc<AtomicBool>>,
}

#[derive(Debug)]
struct State {
    live: Option<Live>,
    /// Whether a live line is on screen (to be cleared before the next line).
    drawn: bool,
}

/// The progress reporter of one command.
#[derive(Debug, Clone)]
pub struct Reporter {
    mode: Mode,
    delay: Duration,
    state: Arc<Mutex<State>>,
}

impl Reporter {
    /// A reporter for `quiet` and the process's stderr, with the delay of [`DELAY_ENV`].
    pub fn for_stderr(quiet: bool) -> Self {
        let mode = Mode::detect(quiet, std::io::stderr().is_terminal());
        let delay = match delay_from_env(std::env::var(DELAY_ENV).ok().as_deref()) {
            Ok(delay) => delay,
            Err(message) => {
                if mode != Mode::Quiet {
                    eprintln!("warning: {message}; using {DEFAULT_DELAY:?}");
                }
                DEFAULT_DELAY
            }
        };
        Self::new(mode, delay)
    }

    /// A reporter in `mode`.
    pub fn new(mode: Mode, delay: Duration) -> Self {
        Self {
            mode,
            delay,
            state: Arc::new(Mutex::new(State {
                live: None,
                drawn: false,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Prints a summary line, replacing a live line on screen.
    fn line(state: &mut State, text: &str) {
        let mut err = std::io::stderr().lock();
        if state.drawn {
            let _ = write!(err, "\r\x1b[2K");
            state.drawn = false;
        }
        let _ = writeln!(err, "{text}");
    }

    /// Draws `text` as the live line when the transfer has run long enough and the last draw is
    /// old enough (`force` skips the redraw limit, not the delay).
    fn draw(&self, state: &mut State, text: &str, force: bool) {
        let Some(live) = state.live.as_mut() else {
            return;
        };
        let now = Instant::now();
        if now.duration_since(live.started) < self.delay {
            return;
        }
        if !force
            && live
                .last_draw
                .is_some_and(|t| now.duration_since(t) < REDRAW)
        {
            return;
        }
        live.last_draw = Some(now);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{text}");
        let _ = err.flush();
        state.drawn = true;
    }

    fn start(state: &mut State) {
        if let Some(old) = state.live.take()
            && let Some(flag) = old.ticking
        {
            flag.store(false, Ordering::SeqCst);
        }
        state.live = Some(Live {
            started: Instant::now(),
            last_draw: None,
            ticking: None,
        });
    }

    /// Ends the live transfer; returns how long it ran.
    fn finish(state: &mut State) -> Option<Duration> {
        let live = state.live.take()?;
        if let Some(flag) = live.ticking {
            flag.store(false, Ordering::SeqCst);
        }
        Some(live.started.elapsed())
    }

    /// Redraws an upload's line until it ends (uploads report no bytes on the way).
    fn tick_upload(&self, what: &'static str, bytes: u64) {
        let flag = Arc::new(AtomicBool::new(true));
        if let Some(live) = self.lock().live.as_mut() {
            live.ticking = Some(Arc::clone(&flag));
        }
        let reporter = self.clone();
        std::thread::spawn(move || {
            while flag.load(Ordering::SeqCst) {
                std::thread::sleep(REDRAW);
                let mut state = reporter.lock();
                if !flag.load(Ordering::SeqCst) {
                    break;
                }
                let elapsed = state
                    .live
                    .as_ref()
                    .map_or(Duration::ZERO, |l| l.started.elapsed());
                reporter.draw(&mut state, &upload_line(what, bytes, elapsed), true);
            }
        });
    }

    /// Reports one step.
    pub fn report(&self, progress: Progress) {
        if self.mode == Mode::Quiet {
            return;
        }
        let terminal = self.mode == Mode::Terminal;
        let mut state = self.lock();
        match progress {
            Progress::Packed { layer_bytes } => {
                Self::line(
                    &mut state,
                    &format!("packed bundle layer ({layer_bytes} bytes)"),
                );
            }
            Progress::Uploading { what, bytes } => {
                if terminal {
                    Self::start(&mut state);
                    drop(state);
                    self.tick_upload(what, bytes);
                }
            }
            Progress::BlobUploaded {
                what,
                digest,
                bytes,
            } => {
                let took = Self::finish(&mut state);
                let mut text = format!("uploaded {what} {digest} ({bytes} bytes)");
                if let Some(took) = took.filter(|t| *t >= self.delay) {
                    text.push_str(&timing(bytes, took));
                }
                Self::line(&mut state, &text);
            }
            Progress::ManifestPushed { digest } => {
                Self::line(&mut state, &format!("pushed manifest {digest}"));
            }
            Progress::ManifestFetched { digest } => {
                Self::line(&mut state, &format!("fetched manifest {digest}"));
            }
            Progress::Downloading { received, total } => {
                if terminal && state.live.is_none() {
                    Self::start(&mut state);
                }
                if received < total {
                    if terminal {
                        let elapsed = state
                            .live
                            .as_ref()
                            .map_or(Duration::ZERO, |l| l.started.elapsed());
                        self.draw(
                            &mut state,
                            &download_line("layer", received, total, elapsed),
                            false,
                        );
                    }
                    return;
                }
                let took = Self::finish(&mut state);
                let mut text = format!("downloaded layer ({received} bytes)");
                if let Some(took) = took.filter(|t| *t >= self.delay) {
                    text.push_str(&timing(received, took));
                }
                Self::line(&mut state, &text);
            }
            Progress::Extracted { files } => {
                Self::line(&mut state, &format!("extracted {files} files"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_follows_quiet_and_the_terminal() {
        assert_eq!(Mode::detect(true, true), Mode::Quiet);
        assert_eq!(Mode::detect(true, false), Mode::Quiet);
        assert_eq!(Mode::detect(false, false), Mode::Lines);
        assert_eq!(Mode::detect(false, true), Mode::Terminal);
    }

    #[test]
    fn sizes_and_rates_read_in_binary_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MiB");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024), "3.0 GiB");
        assert_eq!(rate(2048, Duration::from_secs(2)), "1.0 KiB/s");
        assert_eq!(rate(2048, Duration::ZERO), "-");
    }

    #[test]
    fn live_lines_name_the_blob_bytes_share_and_rate() {
        assert_eq!(
            download_line("layer", 512 * 1024, 2 * 1024 * 1024, Duration::from_secs(1)),
            "pulling layer  512.0 KiB / 2.0 MiB  25%  512.0 KiB/s"
        );
        assert_eq!(
            download_line("layer", 0, 0, Duration::ZERO),
            "pulling layer  0 B / 0 B  100%  -"
        );
        assert_eq!(
            upload_line("layer", 3 * 1024 * 1024, Duration::from_millis(2100)),
            "pushing layer  3.0 MiB  2.1 s"
        );
    }

    #[test]
    fn the_delay_reads_a_duration_and_refuses_anything_else_naming_the_variable() {
        assert_eq!(delay_from_env(None), Ok(DEFAULT_DELAY));
        assert_eq!(delay_from_env(Some("")), Ok(DEFAULT_DELAY));
        assert_eq!(delay_from_env(Some("0s")), Ok(Duration::ZERO));
        assert_eq!(delay_from_env(Some("2s")), Ok(Duration::from_secs(2)));
        assert_eq!(
            delay_from_env(Some("150ms")),
            Ok(Duration::from_millis(150))
        );
        for bad in ["soon", "5", "-1s", "1.5s"] {
            let error = delay_from_env(Some(bad)).unwrap_err();
            assert_eq!(
                error,
                format!("PACTO_PROGRESS_DELAY={bad:?}: not a duration such as 300ms or 0s")
            );
        }
    }
}
