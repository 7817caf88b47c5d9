//! When a Pacto is reconciled again: after its check interval; sooner when a pending absence
//! spans its stabilization window; with a doubling backoff (capped by the interval) after a
//! backend failure.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use pacto_api::{MIN_CHECK_INTERVAL_SECONDS, Pacto};

use crate::model::{Resolution, Runtime};
use crate::reconcile::memo::PactoKey;

/// First retry delay after a backend failure; doubled per consecutive failure, capped by the
/// Pacto's check interval.
pub const BACKOFF_BASE: Duration = Duration::from_secs(5);

/// Slack after a window's due instant, so the next Observe judges it at or after the instant.
const WINDOW_DUE_SLACK: Duration = Duration::from_millis(200);

/// Consecutive backend failures per Pacto.
#[derive(Debug, Default)]
pub struct Backoff(Mutex<HashMap<PactoKey, u32>>);

impl Backoff {
    /// The delay before the next pass of `pacto`, and whether this pass met a backend failure.
    pub fn next(
        &self,
        pacto: &Pacto,
        key: PactoKey,
        resolution: &Resolution,
        runtime: Option<&Runtime>,
    ) -> (Duration, bool) {
        let interval = check_interval(pacto);
        let failed = backend_failed(resolution, runtime);
        let mut failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let delay = if failed {
            let n = failures.entry(key).or_insert(0);
            let delay = BACKOFF_BASE
                .saturating_mul(1u32 << (*n).min(10))
                .min(interval);
            *n = n.saturating_add(1);
            delay
        } else {
            failures.remove(&key);
            window_due(runtime).map_or(interval, |due| due.min(interval))
        };
        (delay, failed)
    }
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
        let backoff = Backoff::default();
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
        let backoff = Backoff::default();
        let p = pacto(86_400);
        let last = (0..40)
            .map(|_| backoff.next(&p, key("orders"), &down(), None).0)
            .last()
            .unwrap();
        assert_eq!(last, BACKOFF_BASE * 1024);
    }

    #[test]
    fn a_pass_without_failure_resets_the_backoff_of_that_pacto_only() {
        let backoff = Backoff::default();
        let p = pacto(300);
        for _ in 0..3 {
            backoff.next(&p, key("orders"), &down(), None);
            backoff.next(&p, key("billing"), &down(), None);
        }
        // A healthy pass waits the check interval and forgets the failures.
        assert_eq!(
            backoff.next(&p, key("orders"), &fine(), None),
            (Duration::from_mins(5), false)
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
}
