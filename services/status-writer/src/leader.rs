//! Leader election with a `coordination.k8s.io/v1` Lease: only the holder reconciles (status
//! writes, events, revisions, the revision mirror). The timeline, what is cancelled on loss and
//! why at most one replica writes: docs/design/status.md#leader-election.
//!
//! Pure parts: [`Observed`] (when this replica last saw the Lease record change, on its own
//! monotonic clock), [`decide`] (take, renew or wait, from the Lease read and how long it has
//! been unchanged) and [`Term`] (the holder's local deadline: when to retry a renewal, how long a
//! Lease call may take, when to stop). [`run_elected`] performs the Lease reads and writes, each
//! bounded by a timeout.
//!
//! Expiry is never judged by comparing the holder's `renewTime` (its wall clock) with ours: with
//! clocks more than the margin apart that gives two writers, or none for as long as the skew. A
//! candidate takes another replica's Lease once the record has not changed for its lease
//! duration as observed here, as client-go does (docs/design/status.md#clock-skew).

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use metrics::{counter, gauge};
use pacto_runtime::CancellationToken;
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::metrics::{LEADER, LEADER_TERMS_TOTAL};

/// Lease settings (docs/design/status.md#leader-election).
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// How long a lease is valid without renewal: another replica may take it once it has seen
    /// the record unchanged for this long, on its own monotonic clock.
    pub lease_duration: Duration,
    /// The holder's local deadline: when it could not renew for this long it stops all work,
    /// even without an answer from the API server. Shorter than `lease_duration`.
    pub renew_deadline: Duration,
    /// Between two renewals of the holder and two attempts of a candidate; also the longest a
    /// single Lease call may take. Shorter than `renew_deadline`.
    pub retry_period: Duration,
}

/// The durations of a [`LeaseConfig`] do not give the holder time to stop before a successor
/// may start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "leader election needs retry period ({retry:?}) < renew deadline ({deadline:?}) < lease \
     duration ({lease:?}), and a lease duration of at least one second"
)]
pub struct LeaseTimingError {
    /// `--leader-election-retry-period`.
    pub retry: Duration,
    /// `--leader-election-renew-deadline`.
    pub deadline: Duration,
    /// `--leader-election-lease-duration`.
    pub lease: Duration,
}

impl LeaseConfig {
    /// Checks retry period < renew deadline < lease duration (docs/design/status.md#leader-election).
    pub fn check(&self) -> Result<(), LeaseTimingError> {
        let ordered = !self.retry_period.is_zero()
            && self.retry_period < self.renew_deadline
            && self.renew_deadline < self.lease_duration
            && self.lease_duration >= Duration::from_secs(1);
        if ordered {
            Ok(())
        } else {
            Err(LeaseTimingError {
                retry: self.retry_period,
                deadline: self.renew_deadline,
                lease: self.lease_duration,
            })
        }
    }
}

/// What a replica should do with the lease it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds a valid lease: take it (a transition).
    Acquire,
    /// We hold it: renew.
    Renew,
    /// Someone else holds a valid lease: wait.
    Wait,
}

/// What this replica last saw of the Lease record, and since when, on its own monotonic clock.
/// A record that differs from the last one seen (another resourceVersion, or another spec: a
/// renewal, a new holder) restarts the clock; one that stays the same lets it run. Nothing of the
/// record's timestamps is compared with the local clock.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// `(resourceVersion, spec)` of the last record read, and the local instant it was first
    /// seen in this form. `None`: no record seen yet, or there was none.
    last: Option<(Option<String>, Option<LeaseSpec>, Instant)>,
}

impl Observed {
    /// Notes the record read at `now` (`None`: there is none) and returns how long it has been
    /// unchanged as seen here: zero for a record seen for the first time or changed since.
    pub fn note(&mut self, lease: Option<&Lease>, now: Instant) -> Duration {
        let Some(lease) = lease else {
            self.last = None;
            return Duration::ZERO;
        };
        let version = lease.metadata.resource_version.as_ref();
        match &self.last {
            Some((v, spec, since))
                if v.as_ref() == version && spec.as_ref() == lease.spec.as_ref() =>
            {
                now.saturating_duration_since(*since)
            }
            _ => {
                self.last = Some((version.cloned(), lease.spec.clone(), now));
                Duration::ZERO
            }
        }
    }
}

/// Decides from the current lease spec (`None`: no lease object yet) and how long this replica
/// has seen the record unchanged ([`Observed::note`]). Another holder's Lease has expired once
/// it has been unchanged for the lease duration it carries; its `renewTime` is not compared with
/// anything (it is the holder's clock).
pub fn decide(spec: Option<&LeaseSpec>, identity: &str, unchanged_for: Duration) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder == identity {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::Acquire;
    }
    let duration =
        Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0));
    if unchanged_for < duration {
        Decision::Wait
    } else {
        Decision::Acquire
    }
}

/// The lease spec after `decision` by `identity` at `now`.
pub fn next_spec(
    current: Option<&LeaseSpec>,
    decision: Decision,
    config: &LeaseConfig,
    now: Timestamp,
) -> LeaseSpec {
    let mut spec = current.cloned().unwrap_or_default();
    spec.holder_identity = Some(config.identity.clone());
    spec.lease_duration_seconds =
        Some(i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX));
    spec.renew_time = Some(MicroTime(now));
    if decision == Decision::Acquire {
        spec.acquire_time = Some(MicroTime(now));
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    spec
}

/// One attempt to acquire or renew. Returns whether we hold the lease afterwards (`false`:
/// another replica holds a valid lease, or won a concurrent update). `observed` carries what
/// this replica saw of the record across attempts.
pub async fn try_hold(
    api: &Api<Lease>,
    config: &LeaseConfig,
    observed: &mut Observed,
) -> Result<bool, kube::Error> {
    let existing = api.get_opt(&config.name).await?;
    let unchanged_for = observed.note(existing.as_ref(), Instant::now());
    let decision = decide(
        existing.as_ref().and_then(|l| l.spec.as_ref()),
        &config.identity,
        unchanged_for,
    );
    if decision == Decision::Wait {
        return Ok(false);
    }
    // The times written are informational (kubectl, `pacto status`): no replica compares them
    // with its own clock.
    let now = Timestamp::now();
    let spec = next_spec(
        existing.as_ref().and_then(|l| l.spec.as_ref()),
        decision,
        config,
        now,
    );
    let result = match existing {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(config.name.clone()),
                    namespace: Some(config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            api.create(&PostParams::default(), &lease).await.map(|_| ())
        }
        Some(mut lease) => {
            // Replace carries resourceVersion: a concurrent writer makes this a 409.
            lease.spec = Some(spec);
            api.replace(&config.name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        }
    };
    match result {
        Ok(()) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}

/// How one Lease call (read and write) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// We hold the Lease: acquired or renewed.
    Held,
    /// Another replica holds a valid Lease (or won the update): a definite answer.
    Taken,
    /// No answer: an API error or the call's timeout. Transient until the local deadline.
    Failed,
}

/// What the holder does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Still leading: the next attempt after this pause.
    Retry(Duration),
    /// Stop all work now (the Lease is taken, or the local deadline passed).
    Stop,
}

/// The holder's term: its last renewal, measured on the local monotonic clock at the moment the
/// successful attempt started (never later than the `renewTime` it wrote), and the local
/// deadline that follows from it (docs/design/status.md#leader-election).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    renewed: Instant,
    renew_deadline: Duration,
    retry_period: Duration,
}

impl Term {
    /// A term acquired by an attempt that started at `started`.
    pub fn new(started: Instant, config: &LeaseConfig) -> Self {
        Self {
            renewed: started,
            renew_deadline: config.renew_deadline,
            retry_period: config.retry_period,
        }
    }

    /// The instant at which the holder stops writing unless it renewed before.
    pub fn deadline(&self) -> Instant {
        self.renewed + self.renew_deadline
    }

    /// How long the next Lease call may take if it starts at `now`: the retry period, cut to
    /// what is left before the deadline; `None` when the deadline has passed.
    pub fn call_budget(&self, now: Instant) -> Option<Duration> {
        let left = self.deadline().checked_duration_since(now)?;
        (!left.is_zero()).then(|| left.min(self.retry_period))
    }

    /// The step after an attempt that started at `started` ended at `now` with `outcome`.
    /// A failed renewal is retried (sooner than the retry period when the deadline is closer)
    /// until the deadline: one transient error does not end the term.
    pub fn after(&mut self, started: Instant, outcome: Outcome, now: Instant) -> Step {
        match outcome {
            Outcome::Taken => Step::Stop,
            Outcome::Held => {
                self.renewed = self.renewed.max(started);
                match self.call_budget(now) {
                    Some(_) => Step::Retry(self.retry_period),
                    None => Step::Stop,
                }
            }
            Outcome::Failed => match self.call_budget(now) {
                // Try again soon: a second of pause at most, never past the deadline.
                Some(left) => Step::Retry(
                    left.min(self.retry_period / 2)
                        .max(Duration::from_millis(1)),
                ),
                None => Step::Stop,
            },
        }
    }
}

/// One attempt bounded by `budget`: a call without an answer in time is [`Outcome::Failed`].
async fn attempt(
    api: &Api<Lease>,
    config: &LeaseConfig,
    observed: &mut Observed,
    budget: Duration,
) -> Outcome {
    match tokio::time::timeout(budget, try_hold(api, config, observed)).await {
        Ok(Ok(true)) => Outcome::Held,
        Ok(Ok(false)) => Outcome::Taken,
        Ok(Err(error)) => {
            tracing::warn!(%error, lease = %config.name, "lease call failed");
            Outcome::Failed
        }
        Err(_) => {
            tracing::warn!(lease = %config.name, timeout = ?budget, "lease call timed out");
            Outcome::Failed
        }
    }
}

/// Runs `work` only while holding the lease, until `shutdown`. `work` gets a token that is
/// cancelled when the term ends (the Lease is taken, or the local deadline passes without a
/// renewal) and must stop all writing at once when it is; it is started again when the lease
/// is regained. Returns after `work` has stopped and the Lease has been released.
pub async fn run_elected<F, Fut>(
    client: Client,
    config: LeaseConfig,
    shutdown: CancellationToken,
    mut work: F,
) where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut observed = Observed::default();
    gauge!(LEADER).set(0.0);
    'terms: loop {
        // Candidate: one bounded attempt per retry period.
        let started = Instant::now();
        if attempt(&api, &config, &mut observed, config.retry_period).await != Outcome::Held {
            tokio::select! {
                () = shutdown.cancelled() => break 'terms,
                () = tokio::time::sleep_until(started + config.retry_period) => continue 'terms,
            }
        }
        let mut term = Term::new(started, &config);
        tracing::info!(lease = %config.name, identity = %config.identity, "became leader");
        counter!(LEADER_TERMS_TOTAL).increment(1);
        gauge!(LEADER).set(1.0);
        let token = shutdown.child_token();
        // The term's work, awaited below before the next term: a task of the term, not of
        // the runtime (docs/design/architecture.md#runtime).
        let task = tokio::spawn(
            work(token.clone()).instrument(tracing::info_span!("task", task = "leader-term")),
        );
        // Holder: renew until taken, past the deadline, or shut down.
        let mut next = Instant::now() + config.retry_period;
        let lost = loop {
            tokio::select! {
                () = shutdown.cancelled() => break false,
                () = tokio::time::sleep_until(next.min(term.deadline())) => {}
            }
            let started = Instant::now();
            let Some(budget) = term.call_budget(started) else {
                break true;
            };
            let outcome = tokio::select! {
                () = shutdown.cancelled() => break false,
                outcome = attempt(&api, &config, &mut observed, budget) => outcome,
            };
            match term.after(started, outcome, Instant::now()) {
                Step::Retry(pause) => next = Instant::now() + pause,
                Step::Stop => break true,
            }
        };
        if lost {
            tracing::warn!(
                lease = %config.name,
                identity = %config.identity,
                "lost the lease (taken, or not renewed before the local deadline); stopping all work"
            );
        }
        token.cancel();
        if let Err(error) = task.await {
            tracing::warn!(%error, "leader work failed");
        }
        gauge!(LEADER).set(0.0);
        if !lost {
            release(&api, &config).await;
            break 'terms;
        }
        // Lost: wait one retry period before contending again.
        tokio::select! {
            () = shutdown.cancelled() => break 'terms,
            () = tokio::time::sleep(config.retry_period) => {}
        }
    }
}

/// Releases the Lease if we still hold it, so that a successor need not wait for its expiry.
async fn release(api: &Api<Lease>, config: &LeaseConfig) {
    let released = async {
        let Ok(Some(mut lease)) = api.get_opt(&config.name).await else {
            return;
        };
        let ours = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            == Some(config.identity.as_str());
        if !ours {
            return;
        }
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
        }
        if let Err(error) = api
            .replace(&config.name, &PostParams::default(), &lease)
            .await
        {
            tracing::debug!(%error, "could not release the lease");
        }
    };
    if tokio::time::timeout(config.retry_period, released)
        .await
        .is_err()
    {
        tracing::debug!("releasing the lease timed out");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_787_000_000 + s).unwrap()
    }

    fn held_by(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(at(renewed))),
            ..LeaseSpec::default()
        }
    }

    fn config() -> LeaseConfig {
        LeaseConfig {
            name: "l".into(),
            namespace: "n".into(),
            identity: "a".into(),
            lease_duration: Duration::from_secs(6),
            renew_deadline: Duration::from_secs(4),
            retry_period: Duration::from_secs(1),
        }
    }

    #[test]
    fn decisions() {
        let s = Duration::from_secs;
        assert_eq!(decide(None, "a", s(0)), Decision::Acquire);
        assert_eq!(decide(Some(&held_by("a", 0)), "a", s(100)), Decision::Renew);
        // Another holder's Lease (15 s): valid until unchanged for 15 s as seen here.
        assert_eq!(decide(Some(&held_by("b", 0)), "a", s(0)), Decision::Wait);
        assert_eq!(decide(Some(&held_by("b", 0)), "a", s(14)), Decision::Wait);
        assert_eq!(
            decide(Some(&held_by("b", 0)), "a", s(15)),
            Decision::Acquire
        );
        assert_eq!(decide(Some(&held_by("", 0)), "a", s(0)), Decision::Acquire);
    }

    fn lease(version: &str, spec: LeaseSpec) -> Lease {
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(version.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        }
    }

    #[test]
    fn expiry_follows_the_local_clock_from_the_last_change_whatever_the_holder_wrote() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // The holder's clock is an hour behind ours (renewTime far in the past), or an hour
        // ahead: neither matters, only whether the record keeps changing.
        for skew in [-3600, 3600] {
            let mut observed = Observed::default();
            let mut version = 1;
            let read = |observed: &mut Observed, renewed: i64, version: u32, at: Duration| {
                let record = lease(&version.to_string(), held_by("b", skew + renewed));
                let unchanged = observed.note(Some(&record), t0 + at);
                decide(record.spec.as_ref(), "a", unchanged)
            };
            // First sight: a full lease duration to wait, whatever the renewTime says.
            assert_eq!(read(&mut observed, 0, version, s(0)), Decision::Wait);
            // Renewed every 2 s for a minute: never expired.
            for n in 1..30u32 {
                version += 1;
                let at = s(2 * u64::from(n));
                assert_eq!(
                    read(&mut observed, 2 * i64::from(n), version, at),
                    Decision::Wait,
                    "skew {skew}, at {at:?}"
                );
            }
            // The holder stops renewing at 58 s: the same record until 73 s, expired from then on.
            assert_eq!(read(&mut observed, 58, version, s(72)), Decision::Wait);
            assert_eq!(read(&mut observed, 58, version, s(73)), Decision::Acquire);
        }
    }

    #[test]
    fn any_change_of_the_record_restarts_the_clock() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut observed = Observed::default();
        let first = lease("7", held_by("b", 0));
        assert_eq!(observed.note(Some(&first), t0), s(0));
        assert_eq!(observed.note(Some(&first), t0 + s(9)), s(9));
        // Another resourceVersion (any write), with the same spec.
        let rewritten = lease("8", held_by("b", 0));
        assert_eq!(observed.note(Some(&rewritten), t0 + s(10)), s(0));
        // Another spec (a renewal) under the same resourceVersion (a server without them).
        let renewed = lease("8", held_by("b", 5));
        assert_eq!(observed.note(Some(&renewed), t0 + s(11)), s(0));
        assert_eq!(observed.note(Some(&renewed), t0 + s(20)), s(9));
        // The Lease deleted, then back as it was: seen anew.
        assert_eq!(observed.note(None, t0 + s(21)), s(0));
        assert_eq!(observed.note(Some(&renewed), t0 + s(22)), s(0));
    }

    #[test]
    fn transitions_are_counted() {
        let config = LeaseConfig {
            lease_duration: Duration::from_secs(15),
            ..config()
        };
        let spec = next_spec(Some(&held_by("b", 0)), Decision::Acquire, &config, at(20));
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_transitions, Some(1));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(20))));
        let renewed = next_spec(Some(&spec), Decision::Renew, &config, at(25));
        assert_eq!(renewed.lease_transitions, Some(1));
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(20))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(25))));
    }

    #[test]
    fn durations_must_leave_the_holder_time_to_stop() {
        assert_eq!(config().check(), Ok(()));
        let equal = LeaseConfig {
            renew_deadline: Duration::from_secs(6),
            ..config()
        };
        assert!(equal.check().is_err(), "deadline == lease duration");
        let slow_retry = LeaseConfig {
            retry_period: Duration::from_secs(4),
            ..config()
        };
        assert!(slow_retry.check().is_err(), "retry == deadline");
        let zero = LeaseConfig {
            retry_period: Duration::ZERO,
            ..config()
        };
        assert!(zero.check().is_err());
    }

    #[test]
    fn lease_calls_never_outlive_the_local_deadline() {
        let t0 = Instant::now();
        let term = Term::new(t0, &config());
        assert_eq!(term.deadline(), t0 + Duration::from_secs(4));
        assert_eq!(term.call_budget(t0), Some(Duration::from_secs(1)));
        assert_eq!(
            term.call_budget(t0 + Duration::from_millis(3_600)),
            Some(Duration::from_millis(400))
        );
        assert_eq!(term.call_budget(t0 + Duration::from_secs(4)), None);
        assert_eq!(term.call_budget(t0 + Duration::from_secs(9)), None);
    }

    #[test]
    fn one_transient_error_is_retried_within_the_deadline_and_a_renewal_extends_it() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut term = Term::new(t0, &config());
        // A renewal at 1 s fails (error or timeout at 2 s): retried soon, the term goes on.
        assert_eq!(
            term.after(t0 + s(1), Outcome::Failed, t0 + s(2)),
            Step::Retry(Duration::from_millis(500))
        );
        // The retry succeeds: the deadline moves to 4 s after that attempt's start.
        assert_eq!(
            term.after(t0 + s(3), Outcome::Held, t0 + s(3)),
            Step::Retry(s(1))
        );
        assert_eq!(term.deadline(), t0 + s(7));
        // A late answer to an older attempt never moves the deadline back.
        term.after(t0 + s(2), Outcome::Held, t0 + s(3));
        assert_eq!(term.deadline(), t0 + s(7));
    }

    #[test]
    fn the_term_ends_at_the_deadline_or_when_the_lease_is_taken() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut term = Term::new(t0, &config());
        // Failures until the deadline: the last retry comes before it, then the term ends.
        assert_eq!(
            term.after(
                t0 + s(3),
                Outcome::Failed,
                t0 + Duration::from_millis(3_800)
            ),
            Step::Retry(Duration::from_millis(200))
        );
        assert_eq!(
            term.after(t0 + s(3), Outcome::Failed, t0 + s(4)),
            Step::Stop
        );
        // An answer that arrives after the deadline does not revive the term.
        let mut late = Term::new(t0, &config());
        assert_eq!(late.after(t0 + s(3), Outcome::Held, t0 + s(8)), Step::Stop);
        // Another holder: stop at once, whatever the deadline.
        let mut taken = Term::new(t0, &config());
        assert_eq!(taken.after(t0, Outcome::Taken, t0), Step::Stop);
        // The stop comes well before a successor may take the Lease: the margin is
        // lease duration - renew deadline.
        assert!(config().lease_duration >= config().renew_deadline + s(2));
    }
}
