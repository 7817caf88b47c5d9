//! The one backoff of every retry in the Pacto services (docs/design/architecture.md#backoff).
//!
//! [`Backoff`] waits [`delay`]`(min, cap, n)` after the `n`-th consecutive failure (counting
//! from 0): `min` doubling per failure, never above `cap`, optionally with jitter (up to the same
//! delay again, the shape of the gRPC and registry call retries). A success resets it. It logs a
//! failing streak once: the first failure at `warn` with its cause, the repeats at `debug`, and
//! the end of the streak at `info` when it has a recovery line ([`Backoff::on_recovery`]).
//!
//! [`retrying`] runs a session (a stream, a renewal loop) again and again with a backoff until
//! its token is cancelled; [`spawn_retrying`] spawns it.

use std::borrow::Cow;
use std::fmt::Display;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// The wait after the `failures`-th consecutive failure (0 for the first one): `min` doubled
/// `failures` times, never more than `cap` (the cap wins over a larger `min`). Saturating: no
/// count of failures overflows. Every backoff of the services computes its delay here, including
/// the per-Pacto requeue, which keeps its own failure counts (docs/design/architecture.md#backoff).
pub fn delay(min: Duration, cap: Duration, failures: u32) -> Duration {
    let factor = 1u32.checked_shl(failures).unwrap_or(u32::MAX);
    min.saturating_mul(factor).min(cap)
}

/// How a [`Backoff`] logs a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Level {
    /// The first failure of a streak at `warn`, the repeats at `debug`.
    Streak,
    /// Every failure at `debug` (a retry whose outage is reported elsewhere).
    Debug,
}

/// A doubling backoff with a failing streak (see the module documentation).
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    cap: Duration,
    jitter: bool,
    /// Consecutive failures (or ends) since the last success.
    failures: u32,
    /// Whether a failure was logged since the last success.
    failing: bool,
    /// The `task` field of the log lines.
    name: Cow<'static, str>,
    level: Level,
    failure: Option<Cow<'static, str>>,
    recovery: Option<Cow<'static, str>>,
}

impl Backoff {
    /// A backoff from `min` doubling up to `cap` (a `min` above `cap` is lowered to it), without
    /// jitter, logging its streaks under the name `retry` until [`Backoff::named`].
    pub fn new(min: Duration, cap: Duration) -> Self {
        Self {
            min: min.min(cap),
            cap,
            jitter: false,
            failures: 0,
            failing: false,
            name: Cow::Borrowed("retry"),
            level: Level::Streak,
            failure: None,
            recovery: None,
        }
    }

    /// Adds up to the same delay again at random to every wait (after the cap), so that clients
    /// that failed together do not retry together.
    #[must_use]
    pub fn with_jitter(mut self) -> Self {
        self.jitter = true;
        self
    }

    /// The `task` field of the log lines: what is being retried.
    #[must_use]
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = name.into();
        self
    }

    /// The message of the failure lines (by default `<name> failed; retrying with backoff`).
    #[must_use]
    pub fn on_failure(mut self, message: impl Into<Cow<'static, str>>) -> Self {
        self.failure = Some(message.into());
        self
    }

    /// The `info` line that ends a failing streak (none by default).
    #[must_use]
    pub fn on_recovery(mut self, message: impl Into<Cow<'static, str>>) -> Self {
        self.recovery = Some(message.into());
        self
    }

    /// Logs every failure at `debug` only, for a retry whose outage shows elsewhere.
    #[must_use]
    pub fn quietly(mut self) -> Self {
        self.level = Level::Debug;
        self
    }

    /// The first delay.
    pub fn min(&self) -> Duration {
        self.min
    }

    /// The longest delay (before jitter).
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// Consecutive failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Whether a failure was recorded since the last success.
    pub fn is_failing(&self) -> bool {
        self.failing
    }

    /// The next wait, counting one more failure, without logging (a retry that logs its own
    /// lines, or a session that ended without failing).
    pub fn next_delay(&mut self) -> Duration {
        let base = delay(self.min, self.cap, self.failures);
        self.failures = self.failures.saturating_add(1);
        if self.jitter {
            base.saturating_add(base.mul_f64(unit_random()))
        } else {
            base
        }
    }

    /// Records a failure caused by `cause` and returns the wait before the next attempt. The
    /// first failure of a streak is logged at `warn`, the others at `debug`.
    pub fn failed(&mut self, cause: &dyn Display) -> Duration {
        let retry_in = self.next_delay();
        let task = &*self.name;
        let message: Cow<'_, str> = self.failure.as_deref().map_or_else(
            || Cow::Owned(format!("{task} failed; retrying with backoff")),
            Cow::Borrowed,
        );
        if self.failing || self.level == Level::Debug {
            tracing::debug!(task, error = %cause, ?retry_in, "{message}");
        } else {
            tracing::warn!(task, error = %cause, ?retry_in, "{message}");
        }
        self.failing = true;
        retry_in
    }

    /// A success: the next failure waits `min` again. Ends a failing streak, with the recovery
    /// line if there is one; returns whether a streak ended.
    pub fn succeeded(&mut self) -> bool {
        let ended = self.failing;
        if ended && let Some(message) = &self.recovery {
            tracing::info!(task = &*self.name, "{message}");
        }
        self.reset();
        ended
    }

    /// Forgets the failures without logging.
    pub fn reset(&mut self) {
        self.failures = 0;
        self.failing = false;
    }

    /// The waits of successive failures, without logging: the schedule of a retry loop that
    /// counts its own attempts (`backon`'s `Retryable::retry` takes it with `.take(n)`).
    pub fn delays(mut self) -> impl Iterator<Item = Duration> + Send + Sync + Unpin {
        std::iter::from_fn(move || Some(self.next_delay()))
    }
}

/// A uniform value in `[0, 1)`, from the standard library's randomly keyed hasher (jitter needs
/// no better randomness).
fn unit_random() -> f64 {
    use std::hash::{BuildHasher, RandomState};
    let bits = RandomState::new().hash_one(()) >> 11;
    // 53 random bits: exact in an f64.
    #[allow(clippy::cast_precision_loss)]
    let value = bits as f64 / (1u64 << 53) as f64;
    value
}

/// The handle a session of [`retrying`] reports its progress through.
#[derive(Debug, Clone)]
pub struct Session {
    backoff: Arc<Mutex<Backoff>>,
}

impl Session {
    /// The session works (a stream opened, a message acknowledged, a renewal written): the
    /// backoff resets, and after a failing streak its recovery line is logged once.
    pub fn healthy(&self) {
        self.backoff
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .succeeded();
    }
}

/// Runs `connect` again and again until `stop` is cancelled (also while a session runs or
/// waits). A session is `connect`'s future: it ends with `Ok(())` (the peer closed it: retried
/// after the backoff delay, logged at `debug`) or fails with `Err` (retried after the delay,
/// logged through the backoff's streak). The backoff is reset by the session itself, through
/// [`Session::healthy`], when it did what a session is for, so a session that opens and breaks
/// at once keeps doubling the delay while one that worked for a while starts again from the
/// minimum (docs/design/architecture.md#backoff). `name` names the backoff's log lines.
pub async fn retrying<F, Fut, E>(
    name: &'static str,
    backoff: Backoff,
    stop: CancellationToken,
    mut connect: F,
) where
    F: FnMut(Session) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    let backoff = Arc::new(Mutex::new(backoff.named(name)));
    loop {
        let session = Session {
            backoff: Arc::clone(&backoff),
        };
        let ended = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            ended = connect(session) => ended,
        };
        if stop.is_cancelled() {
            return;
        }
        let wait = {
            let mut backoff = backoff.lock().unwrap_or_else(PoisonError::into_inner);
            match ended {
                Ok(()) => {
                    let retry_in = backoff.next_delay();
                    tracing::debug!(task = name, ?retry_in, "session ended; reconnecting");
                    retry_in
                }
                Err(error) => backoff.failed(&error),
            }
        };
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Spawns [`retrying`] on the current runtime.
pub fn spawn_retrying<F, Fut, E>(
    name: &'static str,
    backoff: Backoff,
    stop: CancellationToken,
    connect: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut(Session) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    tokio::spawn(retrying(name, backoff, stop, connect))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn the_delay_doubles_from_min_to_cap_without_overflow() {
        let (min, cap) = (Duration::from_secs(1), Duration::from_secs(5));
        let waits: Vec<u64> = (0..6).map(|n| delay(min, cap, n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5, 5]);
        assert_eq!(
            delay(min, Duration::MAX, 40),
            Duration::from_secs(u64::from(u32::MAX))
        );
        assert_eq!(delay(Duration::from_secs(9), cap, 0), cap, "the cap wins");
        assert_eq!(delay(Duration::MAX, Duration::MAX, u32::MAX), Duration::MAX);
    }

    #[test]
    fn a_backoff_doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let waits: Vec<u64> = (0..5).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        assert_eq!(b.failures(), 5);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_secs(1));
        // A minimum above the cap is lowered to it.
        let mut short = Backoff::new(Duration::from_secs(1), Duration::from_millis(300));
        assert_eq!(short.next_delay(), Duration::from_millis(300));
    }

    #[test]
    fn jitter_adds_at_most_the_delay_again() {
        let (min, cap) = (Duration::from_millis(100), Duration::from_secs(5));
        let mut b = Backoff::new(min, cap).with_jitter();
        let mut varied = false;
        let mut last = None;
        for n in 0..12 {
            let base = delay(min, cap, n);
            let wait = b.next_delay();
            assert!(
                wait >= base && wait < base * 2,
                "{n}: {wait:?} for {base:?}"
            );
            varied |= last.is_some_and(|l: Duration| l != wait);
            last = Some(wait);
        }
        assert!(varied, "the jitter is random");
        let plain: Vec<Duration> = Backoff::new(min, cap).delays().take(3).collect();
        assert_eq!(plain, [min, min * 2, min * 4]);
    }

    /// A writer of log lines into memory.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        /// Logs of this thread go here, at `debug`, until the guard is dropped.
        fn install(&self) -> tracing::subscriber::DefaultGuard {
            let writer = self.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::DEBUG)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::set_default(subscriber)
        }

        fn text(&self) -> String {
            let bytes = self
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            String::from_utf8(bytes).expect("UTF-8 log")
        }
    }

    /// Log lines written while `f` runs, as text, at `debug`.
    fn logged(f: impl FnOnce()) -> String {
        let sink = Sink::default();
        let guard = sink.install();
        f();
        drop(guard);
        sink.text()
    }

    fn levels(log: &str, message: &str) -> Vec<&'static str> {
        log.lines()
            .filter(|l| l.contains(message))
            .map(|l| {
                ["WARN", "DEBUG", "INFO"]
                    .into_iter()
                    .find(|level| l.contains(level))
                    .unwrap_or("?")
            })
            .collect()
    }

    #[test]
    fn a_streak_is_logged_once_at_warn_and_its_end_once_at_info() {
        let log = logged(|| {
            let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5))
                .named("heartbeat")
                .on_failure("could not renew")
                .on_recovery("renewed again");
            assert!(!b.succeeded(), "no streak to end");
            for _ in 0..3 {
                b.failed(&"refused");
            }
            assert!(b.is_failing());
            assert!(b.succeeded());
            assert!(!b.succeeded(), "the streak ended once");
            b.failed(&"refused again");
        });
        assert_eq!(
            levels(&log, "could not renew"),
            ["WARN", "DEBUG", "DEBUG", "WARN"]
        );
        assert_eq!(levels(&log, "renewed again"), ["INFO"]);
        assert!(log.contains("error=refused"), "{log}");
        assert!(
            log.contains("task=\"heartbeat\"") || log.contains("task=heartbeat"),
            "{log}"
        );
    }

    #[test]
    fn a_quiet_backoff_logs_at_debug_only() {
        let log = logged(|| {
            let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5)).quietly();
            b.failed(&"down");
            b.failed(&"down");
        });
        assert_eq!(
            levels(&log, "retry failed; retrying with backoff"),
            ["DEBUG", "DEBUG"]
        );
    }

    /// The `retry_in` values of the log lines, in milliseconds.
    fn waits(log: &str) -> Vec<u64> {
        log.lines()
            .filter_map(|l| l.split("retry_in=").nth(1))
            .map(|rest| {
                let ms = rest.split("ms").next().expect("a duration in ms");
                ms.parse().expect("whole milliseconds")
            })
            .collect()
    }

    #[tokio::test]
    async fn sessions_are_retried_with_the_backoff_until_stopped() {
        let sink = Sink::default();
        let _guard = sink.install();
        let stop = CancellationToken::new();
        let attempts = AtomicU32::new(0);
        let began = tokio::time::Instant::now();
        let unit = Duration::from_millis(20);
        retrying(
            "test session",
            Backoff::new(unit, unit * 4).on_recovery("working again"),
            stop.clone(),
            |session: Session| {
                let n = attempts.fetch_add(1, Ordering::SeqCst);
                let stop = stop.clone();
                async move {
                    match n {
                        // Two failures, then a session that works and ends, then failures.
                        2 => {
                            session.healthy();
                            Ok(())
                        }
                        0..6 => Err("refused"),
                        _ => {
                            stop.cancel();
                            Ok(())
                        }
                    }
                }
            },
        )
        .await;
        let log = sink.text();
        // The session that worked reset the doubling; its end waits the minimum.
        assert_eq!(waits(&log), [20, 40, 20, 40, 80, 80], "{log}");
        assert_eq!(
            levels(&log, "test session failed"),
            ["WARN", "DEBUG", "WARN", "DEBUG", "DEBUG"]
        );
        assert_eq!(levels(&log, "working again"), ["INFO"]);
        assert_eq!(levels(&log, "session ended"), ["DEBUG"]);
        assert_eq!(attempts.load(Ordering::SeqCst), 7);
        assert!(began.elapsed() >= unit * 14, "each wait was waited out");
    }

    #[tokio::test]
    async fn a_stop_ends_a_running_session_and_a_wait() {
        let stop = CancellationToken::new();
        let started = Arc::new(tokio::sync::Notify::new());
        let failed = Arc::new(tokio::sync::Notify::new());
        let running = spawn_retrying(
            "forever",
            Backoff::new(Duration::from_secs(1), Duration::from_secs(1)),
            stop.clone(),
            {
                let started = Arc::clone(&started);
                move |_session| {
                    started.notify_one();
                    std::future::pending::<Result<(), String>>()
                }
            },
        );
        let waiting = spawn_retrying(
            "failing",
            Backoff::new(Duration::from_hours(1), Duration::from_hours(1)),
            stop.clone(),
            {
                let failed = Arc::clone(&failed);
                move |_session| {
                    failed.notify_one();
                    async { Err("down") }
                }
            },
        );
        // Both are under way: one in its session, the other in (or about to enter) its wait.
        started.notified().await;
        failed.notified().await;
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), async {
            running.await.expect("joined");
            waiting.await.expect("joined");
        })
        .await
        .expect("both ended at the stop, long before the hour-long wait");
    }
}
