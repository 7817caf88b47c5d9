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

fn check_interval(pacto: &Pacto) -> Duration {
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
}
