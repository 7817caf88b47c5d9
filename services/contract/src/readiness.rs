//! Readiness assessment, 2.0 claim/status model (docs/design/contract.md#readiness).
//!
//! Arithmetic is f64 in the operation order of docs/design/contract.md#readiness with rounding half away from zero
//! (`f64::round`, like Go's `math.Round`; never banker's rounding). Because the inputs are
//! binary floats, a "decimal" half is only a half when the product is exactly representable:
//! `10 × 0.35 = 3.5` rounds to 4, but `90 × 0.35 = 31.499999999999996` rounds to 31, and
//! `50 × 0.55 = 27.500000000000004` rounds to 28. These results are tested below.
//!
//! Expiry is UTC and inclusive through the whole `expires` day; an expiry that is not a
//! canonical `YYYY-MM-DD` fails closed (expired). An expired assessment scores 0 and never
//! passes, whatever `minScore` is.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::model::{ClaimStatus, Readiness, Revision};
use crate::rules::parse_canonical_date;

/// Default `minScore`.
const DEFAULT_MIN_SCORE: i64 = 100;
/// Default `partialCredit`.
const DEFAULT_PARTIAL_CREDIT: f64 = 0.5;

/// Why the gate is unmet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GateFailure {
    /// The assessment expired (operator reason `Expired`).
    Expired,
    /// The score is below `minScore` (operator reason `BelowMinScore`).
    BelowMinScore,
}

impl GateFailure {
    /// The operator condition reason.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Expired => "Expired",
            Self::BelowMinScore => "BelowMinScore",
        }
    }
}

/// The scored view of one claim.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimAssessment {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    pub status: String,
    pub evidence: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub weight: i64,
    pub earned_weight: i64,
    pub excluded: bool,
}

/// The result of [`assess`] (mirrored in the operator's `status.readiness`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Assessment {
    pub score: i64,
    pub min_score: i64,
    pub passing: bool,
    pub total_weight: i64,
    pub earned_weight: i64,
    pub expires: String,
    pub expired: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub days_remaining: Option<i64>,
    pub done_count: u32,
    pub partial_count: u32,
    pub not_done_count: u32,
    pub deferred_count: u32,
    pub claims: Vec<ClaimAssessment>,
    pub revisions: Vec<Revision>,
}

impl Assessment {
    /// `None` when passing, else why not (expiry wins over the score).
    pub fn gate_failure(&self) -> Option<GateFailure> {
        if self.passing {
            None
        } else if self.expired {
            Some(GateFailure::Expired)
        } else {
            Some(GateFailure::BelowMinScore)
        }
    }

    /// The CLI's `READINESS_GATE_UNMET` message, or `None` when passing:
    /// `"<assessment expired|score below gate>: score S, minScore M (d done, p partial, n not-done, x deferred)"`.
    pub fn gate_message(&self) -> Option<String> {
        let head = match self.gate_failure()? {
            GateFailure::Expired => "assessment expired",
            GateFailure::BelowMinScore => "score below gate",
        };
        Some(format!(
            "{head}: score {}, minScore {} ({} done, {} partial, {} not-done, {} deferred)",
            self.score,
            self.min_score,
            self.done_count,
            self.partial_count,
            self.not_done_count,
            self.deferred_count
        ))
    }
}

/// Round half away from zero.
fn round_half_away(x: f64) -> i64 {
    x.round() as i64
}

/// Whether `expires` has passed at `now` (inclusive through the whole day, UTC), and the whole
/// days remaining otherwise. A non-canonical date fails closed: `(true, None)`.
pub fn expiry(expires: &str, now: DateTime<Utc>) -> (bool, Option<i64>) {
    let Some(day) = parse_canonical_date(expires) else {
        return (true, None);
    };
    let today: NaiveDate = now.date_naive();
    if today > day {
        (true, None)
    } else {
        (false, Some((day - today).num_days()))
    }
}

/// Assesses readiness at `now`. `None` ("none": no score, no gate) when readiness is absent or
/// has zero claims.
pub fn assess(readiness: Option<&Readiness>, now: DateTime<Utc>) -> Option<Assessment> {
    let r = readiness?;
    if r.claims.is_empty() {
        return None;
    }
    let min_score = r.min_score.unwrap_or(DEFAULT_MIN_SCORE);
    let partial_credit = r.partial_credit.unwrap_or(DEFAULT_PARTIAL_CREDIT);
    let (expired, days_remaining) = expiry(&r.expires, now);

    let (mut total, mut earned) = (0_i64, 0_i64);
    let (mut done, mut partial, mut not_done, mut deferred) = (0, 0, 0, 0);
    let mut claims = Vec::with_capacity(r.claims.len());
    for c in &r.claims {
        let status = c.claim_status();
        let mut claim_earned = 0;
        let excluded = status == Some(ClaimStatus::Deferred);
        if excluded {
            deferred += 1;
        } else {
            match status {
                Some(ClaimStatus::Done) => done += 1,
                Some(ClaimStatus::Partial) => partial += 1,
                _ => not_done += 1,
            }
            total += c.weight;
            if !expired {
                claim_earned = match status {
                    Some(ClaimStatus::Done) => c.weight,
                    Some(ClaimStatus::Partial) => round_half_away(c.weight as f64 * partial_credit),
                    _ => 0,
                };
            }
            earned += claim_earned;
        }
        claims.push(ClaimAssessment {
            id: c.id.clone(),
            kind: c.kind.clone(),
            category: c.category.clone(),
            status: c.status.clone(),
            evidence: c.evidence.clone(),
            description: c.description.clone(),
            weight: c.weight,
            earned_weight: claim_earned,
            excluded,
        });
    }
    let score = if total > 0 {
        round_half_away(earned as f64 / total as f64 * 100.0)
    } else {
        0
    };
    Some(Assessment {
        score,
        min_score,
        passing: !expired && score >= min_score,
        total_weight: total,
        earned_weight: earned,
        expires: r.expires.clone(),
        expired,
        days_remaining,
        done_count: done,
        partial_count: partial,
        not_done_count: not_done,
        deferred_count: deferred,
        claims,
        revisions: r.history.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Claim;

    /// A source of "now" (injectable for tests and for the operator's reconcile loop).
    trait Clock {
        fn now(&self) -> DateTime<Utc>;
    }

    /// The system clock.
    #[derive(Debug, Clone, Copy, Default)]
    struct SystemClock;

    impl Clock for SystemClock {
        fn now(&self) -> DateTime<Utc> {
            Utc::now()
        }
    }

    /// A clock frozen at one instant.
    #[derive(Debug, Clone, Copy)]
    struct FixedClock(DateTime<Utc>);

    impl Clock for FixedClock {
        fn now(&self) -> DateTime<Utc> {
            self.0
        }
    }

    /// [`assess`] with a [`Clock`].
    fn assess_with(readiness: Option<&Readiness>, clock: &dyn Clock) -> Option<Assessment> {
        assess(readiness, clock.now())
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn claim(id: &str, status: &str, weight: i64) -> Claim {
        Claim {
            id: id.into(),
            kind: "url".into(),
            status: status.into(),
            evidence: "e".into(),
            weight,
            ..Claim::default()
        }
    }

    fn readiness(
        expires: &str,
        min: Option<i64>,
        pc: Option<f64>,
        claims: Vec<Claim>,
    ) -> Readiness {
        Readiness {
            expires: expires.into(),
            min_score: min,
            partial_credit: pc,
            history: vec![],
            claims,
        }
    }

    fn worked_example() -> Readiness {
        readiness(
            "2027-03-31",
            Some(60),
            None,
            vec![
                claim("dashboard", "done", 30),
                claim("runbook", "partial", 25),
                claim("pen-test", "not-done", 20),
                claim("chaos-drill", "deferred", 25),
            ],
        )
    }

    #[test]
    fn spec_worked_example_before_expiry() {
        let r = worked_example();
        let a = assess(Some(&r), at("2027-01-10T09:00:00Z")).unwrap();
        assert_eq!(a.total_weight, 75);
        assert_eq!(a.earned_weight, 43);
        assert_eq!(a.score, 57);
        assert_eq!(a.days_remaining, Some(80));
        assert!(!a.expired);
        assert!(!a.passing);
        assert_eq!(a.gate_failure(), Some(GateFailure::BelowMinScore));
        assert_eq!(a.gate_failure().unwrap().reason(), "BelowMinScore");
        assert_eq!(
            a.gate_message().unwrap(),
            "score below gate: score 57, minScore 60 (1 done, 1 partial, 1 not-done, 1 deferred)"
        );
        assert_eq!(a.claims[1].earned_weight, 13);
        assert!(a.claims[3].excluded);
        assert_eq!(a.claims[3].earned_weight, 0);
    }

    #[test]
    fn spec_worked_example_expired_next_day() {
        let r = worked_example();
        let a = assess(Some(&r), at("2027-04-01T00:00:00Z")).unwrap();
        assert!(a.expired);
        assert_eq!(a.score, 0);
        assert_eq!(a.earned_weight, 0);
        assert_eq!(a.total_weight, 75, "total is counted even when expired");
        assert_eq!(a.days_remaining, None);
        assert_eq!(a.gate_failure(), Some(GateFailure::Expired));
        assert!(
            a.gate_message()
                .unwrap()
                .starts_with("assessment expired: score 0, minScore 60")
        );
    }

    #[test]
    fn expiry_is_inclusive_through_the_whole_day_utc() {
        let r = worked_example();
        let last = assess(Some(&r), at("2027-03-31T23:59:59.999999999Z")).unwrap();
        assert!(!last.expired);
        assert_eq!(last.days_remaining, Some(0));
        let first = assess(Some(&r), at("2027-03-31T00:00:00Z")).unwrap();
        assert_eq!(first.days_remaining, Some(0));
        // A non-UTC instant is converted: 2027-04-01T01:00+02:00 is 2027-03-31T23:00Z.
        let tz = DateTime::parse_from_rfc3339("2027-04-01T01:00:00+02:00")
            .unwrap()
            .with_timezone(&Utc);
        assert!(!assess(Some(&r), tz).unwrap().expired);
    }

    #[test]
    fn expired_fails_whatever_min_score() {
        let r = readiness("2020-01-01", Some(0), None, vec![claim("a", "done", 10)]);
        let a = assess(Some(&r), at("2026-01-01T00:00:00Z")).unwrap();
        assert!(a.expired && !a.passing && a.score == 0);
    }

    #[test]
    fn non_canonical_expiry_fails_closed() {
        for bad in [
            "2027-02-30",
            "2027-1-1",
            "2027-01-01T00:00:00Z",
            "",
            "tomorrow",
        ] {
            let r = readiness(bad, Some(0), None, vec![claim("a", "done", 10)]);
            let a = assess(Some(&r), at("2026-01-01T00:00:00Z")).unwrap();
            assert!(a.expired, "{bad}");
            assert_eq!(a.days_remaining, None);
            assert!(!a.passing);
        }
    }

    #[test]
    fn none_when_absent_or_no_claims() {
        assert!(assess(None, at("2026-01-01T00:00:00Z")).is_none());
        let r = readiness("2027-01-01", None, None, vec![]);
        assert!(assess(Some(&r), at("2026-01-01T00:00:00Z")).is_none());
    }

    #[test]
    fn all_deferred_scores_zero_and_passes_only_with_min_zero() {
        let now = at("2026-01-01T00:00:00Z");
        let r = readiness(
            "2027-01-01",
            Some(0),
            None,
            vec![claim("a", "deferred", 10)],
        );
        let a = assess(Some(&r), now).unwrap();
        assert_eq!((a.score, a.total_weight, a.deferred_count), (0, 0, 1));
        assert!(a.passing);
        let r = readiness("2027-01-01", None, None, vec![claim("a", "deferred", 10)]);
        assert!(!assess(Some(&r), now).unwrap().passing);
    }

    #[test]
    fn defaults_min_score_100_partial_credit_half() {
        let now = at("2026-01-01T00:00:00Z");
        let r = readiness("2027-01-01", None, None, vec![claim("a", "done", 10)]);
        let a = assess(Some(&r), now).unwrap();
        assert_eq!((a.score, a.min_score), (100, 100));
        assert!(a.passing);
        let r = readiness("2027-01-01", None, None, vec![claim("a", "partial", 3)]);
        let a = assess(Some(&r), now).unwrap();
        assert_eq!(a.earned_weight, 2, "3 × 0.5 = 1.5 rounds away from zero");
        assert_eq!(a.score, 67);
    }

    #[test]
    fn unknown_status_counts_as_not_done() {
        let now = at("2026-01-01T00:00:00Z");
        let r = readiness(
            "2027-01-01",
            Some(50),
            None,
            vec![claim("a", "done", 50), claim("b", "maybe", 50)],
        );
        let a = assess(Some(&r), now).unwrap();
        assert_eq!((a.not_done_count, a.score), (1, 50));
        assert!(a.passing, "score == minScore passes");
    }

    #[test]
    fn zero_weights() {
        let now = at("2026-01-01T00:00:00Z");
        let r = readiness("2027-01-01", Some(0), None, vec![claim("a", "done", 0)]);
        let a = assess(Some(&r), now).unwrap();
        assert_eq!((a.total_weight, a.score), (0, 0));
        assert!(a.passing);
    }

    #[test]
    fn partial_credit_decimal_edges() {
        // (weight, partialCredit, expected earned). f64 products: 10×0.35 = 3.5,
        // 90×0.35 = 31.499999999999996, 50×0.55 = 27.500000000000004, 30×0.35 = 10.5.
        let cases = [
            (10, 0.35, 4),
            (30, 0.35, 11),
            (50, 0.35, 18),
            (90, 0.35, 31),
            (50, 0.55, 28),
            (10, 0.45, 5),
            (10, 0.05, 1),
            (25, 0.5, 13),
            (5, 0.1, 1),
            (1, 0.5, 1),
            (0, 0.5, 0),
            (100, 1.0, 100),
            (100, 0.0, 0),
            (70, 0.35, 25),
        ];
        let now = at("2026-01-01T00:00:00Z");
        for (w, pc, want) in cases {
            let r = readiness(
                "2027-01-01",
                Some(0),
                Some(pc),
                vec![claim("a", "partial", w)],
            );
            let a = assess(Some(&r), now).unwrap();
            assert_eq!(a.earned_weight, want, "weight {w} × {pc}");
        }
    }

    #[test]
    fn score_rounds_half_away_from_zero() {
        // earned 1 of 8 → 12.5 → 13 (banker's rounding would give 12).
        let now = at("2026-01-01T00:00:00Z");
        let r = readiness(
            "2027-01-01",
            Some(13),
            None,
            vec![claim("a", "done", 1), claim("b", "not-done", 7)],
        );
        let a = assess(Some(&r), now).unwrap();
        assert_eq!(a.score, 13);
        assert!(a.passing);
        assert_eq!(round_half_away(-2.5), -3);
        assert_eq!(round_half_away(2.5), 3);
        assert_eq!(round_half_away(2.4999), 2);
    }

    #[test]
    fn clock_is_injectable() {
        let r = worked_example();
        let clock = FixedClock(at("2027-03-30T12:00:00Z"));
        let a = assess_with(Some(&r), &clock).unwrap();
        assert_eq!(a.days_remaining, Some(1));
        assert!(SystemClock.now() > at("2020-01-01T00:00:00Z"));
    }

    #[test]
    fn serialises_like_operator_status() {
        let r = worked_example();
        let a = assess(Some(&r), at("2027-01-10T09:00:00Z")).unwrap();
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(v["daysRemaining"], 80);
        assert_eq!(v["claims"][1]["earnedWeight"], 13);
        assert_eq!(v["claims"][0]["type"], "url");
        let expired = assess(Some(&r), at("2028-01-01T00:00:00Z")).unwrap();
        assert!(
            serde_json::to_value(&expired)
                .unwrap()
                .get("daysRemaining")
                .is_none()
        );
    }
}
