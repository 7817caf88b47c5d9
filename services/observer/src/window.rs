//! Stabilization windows (docs/design/observation.md#stabilization-windows): time-based negative streaks.
//!
//! Only **absences** are windowed (zero Ready endpoints of an interface, an unreachable
//! dependency, an active-probe 404 of the health capability, a bound ConfigMap/Secret that is not
//! found). Mismatches never pass through here: they are immediate. The persisted windows come in
//! with the request, [`Windows::apply`] updates them per reading, and [`Windows::finish`] prunes
//! them to the declared assertions and returns them sorted by (kind, subject), so an unchanged
//! state produces an identical list. Time is an argument everywhere: nothing here reads a clock.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use pacto_engine::Timestamp;

/// The default of `--stabilization-window`.
pub const DEFAULT_STABILIZATION_WINDOW: Duration = Duration::from_mins(2);

/// The dimensions with windows. Declared in the lexical order of their names, so the derived
/// `Ord` sorts like the strings (`capability` < `configuration` < `dependency` < `interface`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WindowKind {
    /// A capability (`health`), keyed by its assertion key.
    Capability,
    /// A configuration, keyed by its name.
    Configuration,
    /// A dependency, keyed by its name.
    Dependency,
    /// An interface, keyed by its name.
    Interface,
}

impl WindowKind {
    /// The persisted name (`status.observationWindows[].kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Capability => "capability",
            Self::Configuration => "configuration",
            Self::Dependency => "dependency",
            Self::Interface => "interface",
        }
    }

    /// Parses the persisted name.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "capability" => Some(Self::Capability),
            "configuration" => Some(Self::Configuration),
            "dependency" => Some(Self::Dependency),
            "interface" => Some(Self::Interface),
            _ => None,
        }
    }
}

impl fmt::Display for WindowKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The identity of a window: `(kind, subject)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowKey {
    /// The dimension.
    pub kind: WindowKind,
    /// The assertion name (capability: its assertion key).
    pub subject: String,
}

impl WindowKey {
    /// Convenience constructor.
    pub fn new(kind: WindowKind, subject: impl Into<String>) -> Self {
        Self {
            kind,
            subject: subject.into(),
        }
    }
}

impl fmt::Display for WindowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.subject)
    }
}

/// One persisted negative streak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Its identity.
    pub key: WindowKey,
    /// When the streak began.
    pub first_observed_negative_at: Timestamp,
}

/// What a positive/negative reading becomes after stabilization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stabilized {
    /// A positive reading: report it, the streak (if any) ends.
    Positive,
    /// A negative reading inside the window: report `Insufficient`.
    InWindow,
    /// A negative streak at least as long as the window: report the negative.
    Confirmed,
}

/// The pure stabilization function `stabilize(existing, negative, now, window)`: the new state of
/// the window entry and the verdict for this reading.
///
/// - positive → `Positive`, the entry is removed;
/// - first negative → the entry starts at `now`, `InWindow`;
/// - negative with `now - first < window` → the entry is kept, `InWindow`;
/// - negative with `now - first ≥ window` → the entry is kept, `Confirmed`.
///
/// A streak that starts in the future (clock skew between replicas) counts as just begun.
pub fn stabilize(
    existing: Option<Timestamp>,
    negative: bool,
    now: Timestamp,
    window: Duration,
) -> (Option<Timestamp>, Stabilized) {
    if !negative {
        return (None, Stabilized::Positive);
    }
    let Some(first) = existing else {
        return (Some(now), Stabilized::InWindow);
    };
    let elapsed = now
        .as_datetime()
        .signed_duration_since(*first.as_datetime())
        .to_std()
        .unwrap_or(Duration::ZERO);
    if elapsed >= window {
        (Some(first), Stabilized::Confirmed)
    } else {
        (Some(first), Stabilized::InWindow)
    }
}

/// The windows of one Observe call: the persisted entries, updated reading by reading.
#[derive(Debug, Clone)]
pub struct Windows {
    entries: BTreeMap<WindowKey, Timestamp>,
    now: Timestamp,
    window: Duration,
}

impl Windows {
    /// Starts from the persisted windows. A key given twice keeps its earliest start.
    pub fn new(
        persisted: impl IntoIterator<Item = Window>,
        now: Timestamp,
        window: Duration,
    ) -> Self {
        let mut entries: BTreeMap<WindowKey, Timestamp> = BTreeMap::new();
        for w in persisted {
            entries
                .entry(w.key)
                .and_modify(|t| *t = (*t).min(w.first_observed_negative_at))
                .or_insert(w.first_observed_negative_at);
        }
        Self {
            entries,
            now,
            window,
        }
    }

    /// Applies one positive (`negative == false`) or negative reading for `key`.
    pub fn apply(&mut self, key: &WindowKey, negative: bool) -> Stabilized {
        let (entry, verdict) = stabilize(
            self.entries.get(key).copied(),
            negative,
            self.now,
            self.window,
        );
        match entry {
            Some(first) => {
                self.entries.insert(key.clone(), first);
            }
            None => {
                self.entries.remove(key);
            }
        }
        verdict
    }

    /// The earliest instant after [`Self::now`] at which a declared entry's streak spans the
    /// window (it is still pending now); `None` when no streak is pending.
    pub fn next_due(&self, declared: &BTreeSet<WindowKey>) -> Option<Timestamp> {
        let window = chrono::Duration::from_std(self.window).ok()?;
        self.entries
            .iter()
            .filter(|(key, _)| declared.contains(key))
            .filter_map(|(_, first)| first.as_datetime().checked_add_signed(window))
            .map(Timestamp::from)
            .filter(|due| *due > self.now)
            .min()
    }

    /// The windows to persist: entries whose key is not declared are pruned; the rest sorted by
    /// (kind, subject).
    pub fn finish(self, declared: &BTreeSet<WindowKey>) -> Vec<Window> {
        self.entries
            .into_iter()
            .filter(|(key, _)| declared.contains(key))
            .map(|(key, first_observed_negative_at)| Window {
                key,
                first_observed_negative_at,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_unix(1_780_000_000 + seconds, 0).unwrap_or_default()
    }

    const W: Duration = DEFAULT_STABILIZATION_WINDOW;

    #[test]
    fn next_due_is_the_earliest_pending_streak_end() {
        let key = |s: &str| WindowKey::new(WindowKind::Interface, s);
        let persisted = [("a", 0), ("b", -60), ("c", -500), ("gone", -10)].map(|(s, t)| Window {
            key: key(s),
            first_observed_negative_at: at(t),
        });
        let declared: BTreeSet<_> = ["a", "b", "c"].map(key).into_iter().collect();
        let windows = Windows::new(persisted, at(0), W);
        // b (started 60 s ago) is due in 60 s; c is already confirmed; gone is not declared.
        assert_eq!(windows.next_due(&declared), Some(at(60)));
        let confirmed = Windows::new(
            [Window {
                key: key("c"),
                first_observed_negative_at: at(-500),
            }],
            at(0),
            W,
        );
        assert_eq!(confirmed.next_due(&declared), None);
        assert_eq!(Windows::new([], at(0), W).next_due(&declared), None);
    }

    #[test]
    fn stabilize_table() {
        struct Case {
            name: &'static str,
            existing: Option<i64>,
            negative: bool,
            now: i64,
            entry: Option<i64>,
            verdict: Stabilized,
        }
        let cases = [
            Case {
                name: "positive without streak",
                existing: None,
                negative: false,
                now: 0,
                entry: None,
                verdict: Stabilized::Positive,
            },
            Case {
                name: "positive ends a streak",
                existing: Some(0),
                negative: false,
                now: 500,
                entry: None,
                verdict: Stabilized::Positive,
            },
            Case {
                name: "first negative starts the streak now",
                existing: None,
                negative: true,
                now: 10,
                entry: Some(10),
                verdict: Stabilized::InWindow,
            },
            Case {
                name: "negative inside the window",
                existing: Some(0),
                negative: true,
                now: 119,
                entry: Some(0),
                verdict: Stabilized::InWindow,
            },
            Case {
                name: "negative exactly at the window",
                existing: Some(0),
                negative: true,
                now: 120,
                entry: Some(0),
                verdict: Stabilized::Confirmed,
            },
            Case {
                name: "negative beyond the window keeps the entry",
                existing: Some(0),
                negative: true,
                now: 10_000,
                entry: Some(0),
                verdict: Stabilized::Confirmed,
            },
            Case {
                name: "streak starting in the future counts as just begun",
                existing: Some(300),
                negative: true,
                now: 0,
                entry: Some(300),
                verdict: Stabilized::InWindow,
            },
        ];
        for case in cases {
            let got = stabilize(case.existing.map(at), case.negative, at(case.now), W);
            assert_eq!(got, (case.entry.map(at), case.verdict), "{}", case.name);
        }
    }

    #[test]
    fn zero_window_confirms_on_the_first_negative_after_start() {
        assert_eq!(
            stabilize(None, true, at(0), Duration::ZERO),
            (Some(at(0)), Stabilized::InWindow)
        );
        assert_eq!(
            stabilize(Some(at(0)), true, at(0), Duration::ZERO),
            (Some(at(0)), Stabilized::Confirmed)
        );
    }

    #[test]
    fn windows_update_prune_and_sort() {
        let persisted = vec![
            Window {
                key: WindowKey::new(WindowKind::Interface, "zeta"),
                first_observed_negative_at: at(0),
            },
            Window {
                key: WindowKey::new(WindowKind::Interface, "alpha"),
                first_observed_negative_at: at(5),
            },
            // duplicate key: the earliest start wins
            Window {
                key: WindowKey::new(WindowKind::Interface, "alpha"),
                first_observed_negative_at: at(1),
            },
            Window {
                key: WindowKey::new(WindowKind::Dependency, "gone"),
                first_observed_negative_at: at(0),
            },
            Window {
                key: WindowKey::new(WindowKind::Configuration, "cfg"),
                first_observed_negative_at: at(0),
            },
        ];
        let mut windows = Windows::new(persisted, at(200), W);
        let alpha = WindowKey::new(WindowKind::Interface, "alpha");
        let zeta = WindowKey::new(WindowKind::Interface, "zeta");
        let cfg = WindowKey::new(WindowKind::Configuration, "cfg");
        let health = WindowKey::new(WindowKind::Capability, "health");
        assert_eq!(windows.apply(&alpha, true), Stabilized::Confirmed);
        assert_eq!(windows.apply(&zeta, false), Stabilized::Positive);
        assert_eq!(windows.apply(&health, true), Stabilized::InWindow);
        // cfg gets no reading (e.g. Failed): its streak survives
        let declared: BTreeSet<WindowKey> = [alpha.clone(), zeta, cfg.clone(), health.clone()]
            .into_iter()
            .collect();
        let out = windows.finish(&declared);
        let keys: Vec<String> = out.iter().map(|w| w.key.to_string()).collect();
        assert_eq!(
            keys,
            ["capability/health", "configuration/cfg", "interface/alpha"],
            "sorted by (kind, subject), undeclared dependency/gone pruned, zeta cleared"
        );
        assert_eq!(out[0].first_observed_negative_at, at(200));
        assert_eq!(out[1].first_observed_negative_at, at(0));
        assert_eq!(out[2].first_observed_negative_at, at(1));
    }

    #[test]
    fn kind_names_round_trip_and_sort_like_strings() {
        let mut kinds = [
            WindowKind::Interface,
            WindowKind::Capability,
            WindowKind::Dependency,
            WindowKind::Configuration,
        ];
        kinds.sort();
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        for kind in kinds {
            assert_eq!(WindowKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(WindowKind::parse("workload"), None);
    }
}
