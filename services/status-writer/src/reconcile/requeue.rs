//! When a Pacto is reconciled again: at the next instant of its own phase in its check interval
//! (docs/design/status.md#requeue-spreading); sooner when a pending absence spans its
//! stabilization window; with a doubling backoff (capped by the interval) after a backend failure
//! or a failed pass (a Kubernetes API error), reset by the next clean pass.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::jiff::Timestamp;
use pacto_api::{MIN_CHECK_INTERVAL_SECONDS, Pacto};
use pacto_runtime::backoff;

use crate::model::{Resolution, Runtime};
use crate::reconcile::memo::PactoKey;

/// First retry delay after a backend failure or a failed pass; doubled per consecutive failure,
/// capped by the Pacto's check interval.
pub const BACKOFF_BASE: Duration = Duration::from_secs(5);

/// Doublings at most: beyond, the delay stays at `BACKOFF_BASE * 2^10` (under an interval that
/// long).
const MAX_DOUBLINGS: u32 = 10;

/// The longest retry delay whatever the interval: `BACKOFF_BASE * 2^MAX_DOUBLINGS`.
const BACKOFF_MAX: Duration = BACKOFF_BASE.saturating_mul(1 << MAX_DOUBLINGS);

/// Slack after a window's due instant, so the next Observe judges it at or after the instant.
const WINDOW_DUE_SLACK: Duration = Duration::from_millis(200);

/// Consecutive failures per Pacto: passes that met a backend failure, and passes that failed
/// (a Kubernetes API error, retried by the controller's `error_policy`). One streak for both:
/// only a clean pass ends it. The delay of a streak is the shared backoff's
/// ([`backoff::delay`], docs/design/architecture.md#backoff), counted per Pacto.
#[derive(Debug, Default)]
pub struct FailureStreaks(Mutex<HashMap<PactoKey, u32>>);

impl FailureStreaks {
    /// The delay before the next pass of `pacto`, whose pass went through (its writes were
    /// made), and whether this pass met a backend failure. A clean pass resets the streak.
    pub fn next(
        &self,
        pacto: &Pacto,
        key: PactoKey,
        resolution: &Resolution,
        runtime: Option<&Runtime>,
    ) -> (Duration, bool) {
        let interval = check_interval(pacto);
        let failed = backend_failed(resolution, runtime);
        let delay = if failed {
            self.failed(key, interval)
        } else {
            self.forget(&key);
            window_due(runtime).map_or_else(
                || periodic_delay(interval, phase(pacto, interval), unix_millis()),
                |due| due.min(interval),
            )
        };
        (delay, failed)
    }

    /// The delay before retrying a pass of `pacto` that failed (a Kubernetes API error): the
    /// same doubling streak as backend failures, so an API server that keeps refusing is asked
    /// less and less often, at most once per check interval (docs/design/status.md#requeue).
    pub fn pass_failed(&self, pacto: &Pacto, key: PactoKey) -> Duration {
        self.failed(key, check_interval(pacto))
    }

    /// Forgets the streak of `key` (a clean pass, or the Pacto was deleted).
    pub fn forget(&self, key: &PactoKey) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    /// Keeps only the streaks of the Pactos `keep` accepts (after a relist).
    pub fn retain(&self, keep: impl Fn(&PactoKey) -> bool) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|key, _| keep(key));
    }

    /// Counts one more failure of `key`; the delay before its next pass:
    /// `BACKOFF_BASE * 2^(failures before this one)`, capped by `interval` and by
    /// [`BACKOFF_MAX`].
    fn failed(&self, key: PactoKey, interval: Duration) -> Duration {
        let mut failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let n = failures.entry(key).or_insert(0);
        let delay = backoff::delay(BACKOFF_BASE, interval.min(BACKOFF_MAX), *n);
        *n = n.saturating_add(1);
        delay
    }
}

/// The delay until the next periodic check of a Pacto whose phase in `interval` is `phase`, at
/// `now_ms` (Unix milliseconds): the first instant `T` after `now_ms` with
/// `T ≡ phase (mod interval)`, so the delay lies in `(0, interval]` and no Pacto goes longer than
/// its interval without a check. A Pacto that is only requeued keeps exactly `interval` between
/// its checks; any other trigger (a spec change, a WatchTargets notification, a restart's backlog)
/// does not move its periodic checks, which stay on the Pacto's phase, so Pactos reconciled in one
/// burst come back spread uniformly over the interval instead of in the same burst
/// (docs/design/status.md#requeue-spreading).
pub fn periodic_delay(interval: Duration, phase: u64, now_ms: u64) -> Duration {
    let period = u64::try_from(interval.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    if interval.is_zero() {
        return Duration::ZERO;
    }
    let phase = phase % period;
    let earliest = now_ms.saturating_add(1);
    // The first T ≥ earliest with T mod period == phase.
    let offset = (phase + period - earliest % period) % period;
    Duration::from_millis(earliest.saturating_add(offset) - now_ms)
}

/// The Pacto's stable phase in `interval`, in milliseconds: a hash of its namespace, name and uid
/// (a recreated Pacto of the same name gets a new phase), uniform over the interval.
pub fn phase(pacto: &Pacto, interval: Duration) -> u64 {
    let meta = &pacto.metadata;
    let mut hash = Fnv1a::default();
    for part in [&meta.namespace, &meta.name, &meta.uid] {
        hash.write(part.as_deref().unwrap_or_default().as_bytes());
        // A separator no name contains, so ("a", "bc") and ("ab", "c") differ.
        hash.write(&[0]);
    }
    let period = u64::try_from(interval.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    mix(hash.0) % period
}

/// 64-bit FNV-1a: stable across processes, releases and architectures (unlike the standard
/// library's hasher, whose algorithm is unspecified).
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// A final avalanche (the splitmix64 finalizer): FNV's low bits vary little between names that
/// differ only in their last characters (`p-1`, `p-2`, …), and the phase is taken modulo.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The Pacto's check interval (at least the minimum).
pub(crate) fn check_interval(pacto: &Pacto) -> Duration {
    let seconds = pacto
        .spec
        .check_interval_seconds()
        .max(MIN_CHECK_INTERVAL_SECONDS);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(300))
}

/// Whether a pass met a backend failure (retried with backoff rather than at the interval).
fn backend_failed(resolution: &Resolution, runtime: Option<&Runtime>) -> bool {
    matches!(resolution, Resolution::Failed(_))
        || matches!(
            runtime,
            Some(
                Runtime::ObserveFailed(_)
                    | Runtime::Reference(Err(_))
                    | Runtime::Observed {
                        evaluated: Err(_),
                        ..
                    }
            )
        )
}

/// How long until the earliest pending absence spans its stabilization window (plus a little
/// slack), when the observer reported one: observing again then confirms the absence at once
/// instead of one `checkIntervalSeconds` later (docs/design/observation.md#window-latency).
fn window_due(runtime: Option<&Runtime>) -> Option<Duration> {
    let Some(Runtime::Observed { observed, .. }) = runtime else {
        return None;
    };
    let due = observed.window_due_at.as_ref()?;
    let wait = due
        .0
        .as_millisecond()
        .saturating_sub(Timestamp::now().as_millisecond());
    Some(Duration::from_millis(u64::try_from(wait).unwrap_or(0)) + WINDOW_DUE_SLACK)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::model::{Backend, BackendFailure};

    #[test]
    fn a_pending_window_shortens_the_requeue() {
        let runtime = |due: Option<Timestamp>| Runtime::Observed {
            observed: Box::new(crate::model::Observed {
                window_due_at: due.map(Time),
                ..crate::model::Observed::default()
            }),
            evaluated: Err(BackendFailure::new(Backend::Evaluator, "irrelevant here")),
        };
        assert_eq!(window_due(None), None);
        assert_eq!(window_due(Some(&runtime(None))), None);
        let soon = Timestamp::now() + std::time::Duration::from_secs(5);
        let wait = window_due(Some(&runtime(Some(soon)))).unwrap();
        assert!(wait > Duration::from_secs(4) && wait <= Duration::from_secs(5) + WINDOW_DUE_SLACK);
        // Already due (clock skew, a slow pass): observe again right away.
        let past = Timestamp::now() - std::time::Duration::from_secs(5);
        assert_eq!(
            window_due(Some(&runtime(Some(past)))),
            Some(WINDOW_DUE_SLACK)
        );
    }

    #[test]
    fn backend_failures_are_detected() {
        let fail = BackendFailure::new(Backend::Observer, "down");
        assert!(backend_failed(&Resolution::Failed(fail.clone()), None));
        assert!(backend_failed(
            &Resolution::Unavailable {
                message: String::new(),
                policy: None
            },
            Some(&Runtime::ObserveFailed(fail))
        ));
        assert!(!backend_failed(
            &Resolution::Unavailable {
                message: String::new(),
                policy: None
            },
            None
        ));
    }

    fn pacto(interval: i32) -> Pacto {
        pacto_api::testing::PactoBuilder::inline("orders", "x")
            .check_interval(interval)
            .build()
    }

    fn key(name: &str) -> PactoKey {
        ("shop".to_owned(), name.to_owned())
    }

    fn down() -> Resolution {
        Resolution::Failed(BackendFailure::new(Backend::ContractResolver, "down"))
    }

    fn fine() -> Resolution {
        Resolution::Unavailable {
            message: String::new(),
            policy: None,
        }
    }

    fn secs(delays: &[(Duration, bool)]) -> Vec<(u64, bool)> {
        delays.iter().map(|(d, f)| (d.as_secs(), *f)).collect()
    }

    #[test]
    fn backend_failures_double_the_delay_up_to_the_check_interval() {
        let backoff = FailureStreaks::default();
        let p = pacto(60);
        let delays: Vec<_> = (0..6)
            .map(|_| backoff.next(&p, key("orders"), &down(), None))
            .collect();
        assert_eq!(
            secs(&delays),
            [
                (5, true),
                (10, true),
                (20, true),
                (40, true),
                (60, true),
                (60, true)
            ]
        );
    }

    #[test]
    fn the_doubling_stops_at_ten_steps_under_a_long_interval() {
        let backoff = FailureStreaks::default();
        let p = pacto(86_400);
        let last = (0..40)
            .map(|_| backoff.next(&p, key("orders"), &down(), None).0)
            .last()
            .unwrap();
        assert_eq!(last, BACKOFF_BASE * 1024);
    }

    #[test]
    fn a_pass_without_failure_resets_the_backoff_of_that_pacto_only() {
        let backoff = FailureStreaks::default();
        let p = pacto(300);
        for _ in 0..3 {
            backoff.next(&p, key("orders"), &down(), None);
            backoff.next(&p, key("billing"), &down(), None);
        }
        // A healthy pass waits for the Pacto's phase, at most one check interval (where in the
        // interval depends on the clock), and forgets the failures.
        let (delay, failed) = backoff.next(&p, key("orders"), &fine(), None);
        assert!(!failed);
        assert!(
            delay > Duration::ZERO && delay <= Duration::from_mins(5),
            "{delay:?}"
        );
        assert_eq!(
            backoff.next(&p, key("orders"), &down(), None),
            (BACKOFF_BASE, true)
        );
        // The other Pacto's streak went on.
        assert_eq!(
            backoff.next(&p, key("billing"), &down(), None),
            (BACKOFF_BASE * 8, true)
        );
    }

    #[test]
    fn failed_passes_and_backend_failures_are_one_streak_ended_by_a_clean_pass() {
        let backoff = FailureStreaks::default();
        let p = pacto(3600);
        let secs = |d: Duration| d.as_secs();
        assert_eq!(secs(backoff.pass_failed(&p, key("orders"))), 5);
        assert_eq!(secs(backoff.next(&p, key("orders"), &down(), None).0), 10);
        assert_eq!(secs(backoff.pass_failed(&p, key("orders"))), 20);
        // A pass that went through with a backend failure does not end the streak.
        assert_eq!(secs(backoff.next(&p, key("orders"), &down(), None).0), 40);
        assert_eq!(secs(backoff.pass_failed(&p, key("orders"))), 80);
        // A clean one does; so does forgetting a deleted Pacto.
        backoff.next(&p, key("orders"), &fine(), None);
        assert_eq!(secs(backoff.pass_failed(&p, key("orders"))), 5);
        backoff.forget(&key("orders"));
        assert_eq!(secs(backoff.pass_failed(&p, key("orders"))), 5);
        backoff.retain(|_| false);
        assert_eq!(secs(backoff.pass_failed(&p, key("orders"))), 5);
    }

    #[test]
    fn the_periodic_delay_is_never_longer_than_the_interval() {
        let interval = Duration::from_mins(5);
        let period = 300_000u64;
        for phase in [0, 1, 149_999, 150_000, 150_001, 299_999, 300_000, 1_000_000] {
            for now in [
                0u64,
                1,
                149_999,
                150_000,
                299_999,
                1_764_876_000_123,
                u64::MAX / 2,
            ] {
                let delay = periodic_delay(interval, phase, now);
                assert!(
                    delay > Duration::ZERO && delay <= interval,
                    "phase {phase}, now {now}: {delay:?}"
                );
                // It lands on the phase.
                let at = now + u64::try_from(delay.as_millis()).unwrap();
                assert_eq!(at % period, phase % period, "phase {phase}, now {now}");
            }
        }
        // Requeued on its phase, a Pacto keeps exactly one interval between checks.
        let on_phase = 1_764_876_000_000 - 1_764_876_000_000 % period + 42_000;
        assert_eq!(periodic_delay(interval, 42_000, on_phase), interval);
        // A one-second interval (impossible through the CRD minimum) and a zero one do not panic.
        assert!(periodic_delay(Duration::from_secs(1), 7, 12_345) <= Duration::from_secs(1));
        assert_eq!(periodic_delay(Duration::ZERO, 0, 5), Duration::ZERO);
    }

    fn named(name: &str, uid: &str) -> Pacto {
        let mut p = pacto(300);
        p.metadata.namespace = Some("shop".into());
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(uid.into());
        p
    }

    #[test]
    fn the_phase_is_stable_and_depends_on_namespace_name_and_uid() {
        let interval = Duration::from_mins(5);
        let a = named("orders", "u-1");
        assert_eq!(phase(&a, interval), phase(&a.clone(), interval));
        assert!(phase(&a, interval) < 300_000);
        assert_ne!(
            phase(&a, interval),
            phase(&named("orders", "u-2"), interval)
        );
        assert_ne!(
            phase(&a, interval),
            phase(&named("billing", "u-1"), interval)
        );
        // A fixed value: the phase must not change between releases (it would move every
        // Pacto's checks after an upgrade, harmless but not silent).
        assert_eq!(phase(&a, interval), PINNED_PHASE);
    }

    /// The phase of `shop/orders` with uid `u-1` in a 5-minute interval.
    const PINNED_PHASE: u64 = 255_320;

    #[test]
    fn a_burst_reconciled_at_one_instant_comes_back_spread_over_the_interval() {
        // 10,000 Pactos all reconciled in the same millisecond (a restart's backlog at its
        // worst): their next checks, per second of the interval, are never above 2x the mean.
        let interval = Duration::from_mins(5);
        let now = 1_764_876_000_123u64;
        let mut per_second = vec![0u32; 300];
        for i in 0..10_000 {
            let p = named(&format!("p-{i}"), &format!("{i:08x}-uid"));
            let delay = periodic_delay(interval, phase(&p, interval), now);
            // All within (0, 300 s]: the second that delay falls in, counting from 0.
            assert!(delay > Duration::ZERO && delay <= interval, "{delay:?}");
            let second =
                usize::try_from(delay.saturating_sub(Duration::from_millis(1)).as_secs()).unwrap();
            per_second[second] += 1;
        }
        let window = &per_second[..];
        let mean = 10_000.0 / 300.0;
        let max = f64::from(*window.iter().max().unwrap());
        assert!(max <= 2.0 * mean, "max {max} per second, mean {mean:.1}");
        // And no empty tenth of the interval: every 30 s holds 1,000 ± 15%.
        for tenth in window.chunks(30) {
            let n = tenth.iter().sum::<u32>();
            assert!((850..=1150).contains(&n), "{n} in a 30 s slice");
        }
    }

    #[test]
    fn window_due_and_backoff_requeues_are_not_spread() {
        let backoff = FailureStreaks::default();
        let p = named("orders", "u-1");
        assert_eq!(
            backoff.next(&p, key("orders"), &down(), None),
            (BACKOFF_BASE, true)
        );
        let soon = Timestamp::now() + std::time::Duration::from_secs(5);
        let runtime = Runtime::Observed {
            observed: Box::new(crate::model::Observed {
                window_due_at: Some(Time(soon)),
                ..crate::model::Observed::default()
            }),
            evaluated: Ok(crate::model::Evaluated {
                findings: Vec::new(),
                coverage: pacto_api::EvaluationCoverage::default(),
                summary: pacto_api::Summary::default(),
                status: pacto_api::ContractStatus::Compliant,
                readiness: None,
            }),
        };
        let (delay, failed) = backoff.next(&p, key("orders"), &fine(), Some(&runtime));
        assert!(!failed);
        assert!(
            delay > Duration::from_secs(4) && delay <= Duration::from_secs(5) + WINDOW_DUE_SLACK
        );
    }
}
