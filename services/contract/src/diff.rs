//! What a new version of a contract changes, and the version bump that implies
//! (docs/design/contract.md#diff).
//!
//! [`diff_contracts`] compares two parsed contracts together with their bundle files. It is pure:
//! it reads nothing but its arguments and never fails; a file it cannot read or parse is compared
//! as absent. Every [`Change`] has a path, a kind (added, removed, changed), a class (breaking,
//! non-breaking, informational), the bump it needs and a one-line reason; the rules are the
//! "Diff" section of the design note. `docs/` is ignored; `sbom/` is compared informationally.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::bundle::BundleFiles;
use crate::model::{Capability, Configuration, Contract, Dependency, Interface, Policy};
use crate::reference::{OCI_SCHEME, Reference};
use crate::version::{Constraint, Version};

/// A version bump, from none to major; ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bump {
    /// No new version needed.
    None,
    /// A patch release.
    Patch,
    /// A minor release.
    Minor,
    /// A major release.
    Major,
}

impl Bump {
    /// The lowercase name (`none`, `patch`, `minor`, `major`).
    pub fn as_str(self) -> &'static str {
        match self {
            Bump::None => "none",
            Bump::Patch => "patch",
            Bump::Minor => "minor",
            Bump::Major => "major",
        }
    }
}

/// How a change affects the contract's consumers and deployers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Something that worked with the old contract may fail with the new one (needs a major
    /// release).
    Breaking,
    /// The contract changed compatibly (a minor or a patch release).
    NonBreaking,
    /// Reported only; needs no release.
    Informational,
}

impl Class {
    /// The kebab-case name (`breaking`, `non-breaking`, `informational`).
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Breaking => "breaking",
            Class::NonBreaking => "non-breaking",
            Class::Informational => "informational",
        }
    }
}

/// What happened at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Added,
    Removed,
    Changed,
}

/// The part of the contract a change belongs to, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Section {
    Service,
    Interfaces,
    Configurations,
    Dependencies,
    Capabilities,
    Workload,
    State,
    Policies,
    Readiness,
    Metadata,
    Extensions,
    Sbom,
}

impl Section {
    /// The section's title in text output.
    pub fn title(self) -> &'static str {
        match self {
            Section::Service => "Service",
            Section::Interfaces => "Interfaces",
            Section::Configurations => "Configurations",
            Section::Dependencies => "Dependencies",
            Section::Capabilities => "Capabilities",
            Section::Workload => "Workload",
            Section::State => "State",
            Section::Policies => "Policies",
            Section::Readiness => "Readiness",
            Section::Metadata => "Metadata",
            Section::Extensions => "Extensions",
            Section::Sbom => "SBOM",
        }
    }
}

/// Values longer than this (compact JSON) are left out of a change.
pub const MAX_VALUE_CHARS: usize = 120;

/// One difference between the two contracts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub section: Section,
    /// Where: `interfaces["api"].type`, `configurations["runtime"].schema.properties.port`.
    pub path: String,
    pub kind: ChangeKind,
    pub class: Class,
    /// The release this change needs on its own.
    pub bump: Bump,
    /// One line: why the change has its class.
    pub reason: String,
    /// The old value, when small (at most [`MAX_VALUE_CHARS`] characters of compact JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    /// The new value, when small.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

/// How `service.version` moved, on `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VersionStep {
    /// One of the versions is not semver; it covers no change.
    Unparseable,
    /// The new version is lower; it covers no change.
    Downgrade,
    /// The same version; it covers only changes that need no release.
    Unchanged,
    /// Same `major.minor.patch`, different pre-release (or a pre-release made final): a
    /// pre-release promises no compatibility, so it covers every change.
    Prerelease,
    Patch,
    Minor,
    Major,
}

impl VersionStep {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            VersionStep::Unparseable => "unparseable",
            VersionStep::Downgrade => "downgrade",
            VersionStep::Unchanged => "unchanged",
            VersionStep::Prerelease => "prerelease",
            VersionStep::Patch => "patch",
            VersionStep::Minor => "minor",
            VersionStep::Major => "major",
        }
    }
}

/// `service.version` on both sides and what the step covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionChange {
    pub old: String,
    pub new: String,
    pub step: VersionStep,
    /// Whether the step covers the implied bump.
    pub sufficient: bool,
    /// When it does not: the lowest release after `old` that would (`None` if `old` is not
    /// semver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggested: Option<String>,
}

/// The result of [`diff_contracts`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContractDiff {
    /// Every change, sorted by section, then path, then kind.
    pub changes: Vec<Change>,
    /// The bump the changes imply: the largest of their bumps (`none` without changes).
    pub bump: Bump,
    pub version: VersionChange,
}

/// Counts of changes by class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub breaking: usize,
    pub non_breaking: usize,
    pub informational: usize,
}

impl ContractDiff {
    /// Counts of changes by class.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for c in &self.changes {
            match c.class {
                Class::Breaking => s.breaking += 1,
                Class::NonBreaking => s.non_breaking += 1,
                Class::Informational => s.informational += 1,
            }
        }
        s
    }

    /// True when there are changes whose class is breaking.
    pub fn has_breaking(&self) -> bool {
        self.changes.iter().any(|c| c.class == Class::Breaking)
    }
}

/// One operand: the parsed contract and the bundle files it references.
#[derive(Debug, Clone, Copy)]
pub struct DiffSide<'a> {
    pub contract: &'a Contract,
    pub files: &'a BundleFiles,
}

/// Compares `old` with `new` (docs/design/contract.md#diff).
pub fn diff_contracts(old: DiffSide<'_>, new: DiffSide<'_>) -> ContractDiff {
    let mut d = Differ {
        old,
        new,
        out: Vec::new(),
    };
    d.service();
    d.interfaces();
    d.configurations();
    d.dependencies();
    d.capabilities();
    d.workload_and_state();
    d.policies();
    d.readiness();
    d.free_form(
        Section::Metadata,
        "metadata",
        old.contract.metadata.as_ref(),
        new.contract.metadata.as_ref(),
    );
    d.free_form(
        Section::Extensions,
        "extensions",
        old.contract.extensions.as_ref(),
        new.contract.extensions.as_ref(),
    );
    d.sbom();
    let mut changes = d.out;
    changes.sort_by(|a, b| (a.section, &a.path, a.kind).cmp(&(b.section, &b.path, b.kind)));
    let bump = changes.iter().map(|c| c.bump).max().unwrap_or(Bump::None);
    let version = version_change(
        &old.contract.service.version,
        &new.contract.service.version,
        bump,
    );
    ContractDiff {
        changes,
        bump,
        version,
    }
}

/// The step from `old` to `new` and whether it covers `required`. Under major version zero a
/// minor step covers breaking changes and a patch step covers minor ones (the `0.y.z` rule of
/// the design note).
pub fn version_change(old: &str, new: &str, required: Bump) -> VersionChange {
    let step = match (Version::parse(old), Version::parse(new)) {
        (Ok(o), Ok(n)) => {
            let (ot, nt) = ((o.major, o.minor, o.patch), (n.major, n.minor, n.patch));
            match nt.cmp(&ot) {
                Ordering::Less => VersionStep::Downgrade,
                Ordering::Equal if o == n => VersionStep::Unchanged,
                Ordering::Equal if n < o => VersionStep::Downgrade,
                Ordering::Equal => VersionStep::Prerelease,
                Ordering::Greater if nt.0 > ot.0 => VersionStep::Major,
                Ordering::Greater if nt.1 > ot.1 => VersionStep::Minor,
                Ordering::Greater => VersionStep::Patch,
            }
        }
        _ => VersionStep::Unparseable,
    };
    let zero = Version::parse(old).is_ok_and(|o| o.major == 0);
    let covered = match step {
        VersionStep::Unparseable | VersionStep::Downgrade | VersionStep::Unchanged => Bump::None,
        VersionStep::Prerelease | VersionStep::Major => Bump::Major,
        VersionStep::Minor if zero => Bump::Major,
        VersionStep::Minor => Bump::Minor,
        VersionStep::Patch if zero => Bump::Minor,
        VersionStep::Patch => Bump::Patch,
    };
    let sufficient = covered >= required;
    let suggested = match Version::parse(old) {
        Ok(o) if !sufficient => {
            let (major, minor, patch) = (o.major, o.minor, o.patch);
            let next = match (required, zero) {
                (Bump::Major, false) => (major.saturating_add(1), 0, 0),
                (Bump::Major, true) | (Bump::Minor, false) => (major, minor.saturating_add(1), 0),
                _ => (major, minor, patch.saturating_add(1)),
            };
            Some(format!("{}.{}.{}", next.0, next.1, next.2))
        }
        _ => None,
    };
    VersionChange {
        old: old.to_owned(),
        new: new.to_owned(),
        step,
        sufficient,
        suggested,
    }
}

/// A value for [`Change::old`]/[`Change::new`] if it is small.
fn small(v: &Value) -> Option<Value> {
    let text = serde_json::to_string(v).ok()?;
    (text.chars().count() <= MAX_VALUE_CHARS).then(|| v.clone())
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `prefix["name"]`, the way policy origins are written (docs/design/contract.md#layer-3).
fn keyed(prefix: &str, name: &str) -> String {
    format!("{prefix}[{name:?}]")
}

/// The class a bump implies: major is breaking, none informational, the rest non-breaking.
fn class_of(bump: Bump) -> Class {
    match bump {
        Bump::Major => Class::Breaking,
        Bump::None => Class::Informational,
        Bump::Minor | Bump::Patch => Class::NonBreaking,
    }
}

struct Differ<'a> {
    old: DiffSide<'a>,
    new: DiffSide<'a>,
    out: Vec<Change>,
}

impl Differ<'_> {
    #[allow(
        clippy::too_many_arguments,
        reason = "one flat record; a builder would only rename the fields"
    )]
    fn push(
        &mut self,
        section: Section,
        path: String,
        kind: ChangeKind,
        bump: Bump,
        reason: impl Into<String>,
        old: Option<&Value>,
        new: Option<&Value>,
    ) {
        self.out.push(Change {
            section,
            path,
            kind,
            class: class_of(bump),
            bump,
            reason: reason.into(),
            old: old.and_then(small),
            new: new.and_then(small),
        });
    }

    fn changed(
        &mut self,
        section: Section,
        path: String,
        bump: Bump,
        reason: impl Into<String>,
        old: &Value,
        new: &Value,
    ) {
        self.push(
            section,
            path,
            ChangeKind::Changed,
            bump,
            reason,
            Some(old),
            Some(new),
        );
    }

    fn service(&mut self) {
        let (o, n) = (&self.old.contract.service, &self.new.contract.service);
        if o.name != n.name {
            self.changed(
                Section::Service,
                "service.name".into(),
                Bump::Major,
                "another service: everything that names the old one must change",
                &Value::from(o.name.clone()),
                &Value::from(n.name.clone()),
            );
        }
        if o.owner != n.owner {
            let (ov, nv) = (to_value(&o.owner), to_value(&n.owner));
            self.push(
                Section::Service,
                "service.owner".into(),
                presence(o.owner.is_some(), n.owner.is_some()),
                Bump::Patch,
                "ownership changed",
                Some(&ov).filter(|v| !v.is_null()),
                Some(&nv).filter(|v| !v.is_null()),
            );
        }
    }

    /// The entries of a keyed list (docs/design/contract.md#diff): matched by key, not
    /// position; an entry only in `old` is one `removed` change, one only in `new` the change
    /// `added` says, and `both` compares an entry on both sides.
    #[allow(
        clippy::too_many_arguments,
        reason = "the section's rules, each a plain value; a struct would only rename them"
    )]
    fn keyed_entries<T: Serialize>(
        &mut self,
        section: Section,
        prefix: &str,
        old: &BTreeMap<String, &T>,
        new: &BTreeMap<String, &T>,
        removed: (Bump, &str),
        added: impl Fn(&T) -> (Bump, &'static str),
        mut both: impl FnMut(&mut Self, &str, &T, &T),
    ) {
        for name in union(old, new) {
            let path = keyed(prefix, &name);
            match (old.get(&name), new.get(&name)) {
                (Some(o), None) => self.push(
                    section,
                    path,
                    ChangeKind::Removed,
                    removed.0,
                    removed.1,
                    Some(&to_value(o)),
                    None,
                ),
                (None, Some(n)) => {
                    let (bump, reason) = added(n);
                    self.push(
                        section,
                        path,
                        ChangeKind::Added,
                        bump,
                        reason,
                        None,
                        Some(&to_value(n)),
                    );
                }
                (Some(o), Some(n)) => both(self, &path, o, n),
                (None, None) => {}
            }
        }
    }

    fn interfaces(&mut self) {
        let (was, now) = (self.old.contract, self.new.contract);
        self.keyed_entries(
            Section::Interfaces,
            "interfaces",
            &by_key(&was.interfaces, |i| i.name.clone()),
            &by_key(&now.interfaces, |i| i.name.clone()),
            (Bump::Major, "interface removed: its consumers lose it"),
            |_| (Bump::Minor, "interface added"),
            Self::interface,
        );
    }

    fn interface(&mut self, path: &str, o: &Interface, n: &Interface) {
        if o.kind != n.kind {
            self.changed(
                Section::Interfaces,
                format!("{path}.type"),
                Bump::Major,
                "interface type (protocol) changed: its consumers speak the old one",
                &Value::from(o.kind.clone()),
                &Value::from(n.kind.clone()),
            );
        }
        let vis = |i: &Interface| i.visibility.clone().unwrap_or_else(|| "internal".into());
        let (ov, nv) = (vis(o), vis(n));
        if ov != nv {
            let (bump, reason) = if nv == "internal" {
                (
                    Bump::Major,
                    "interface made internal: outside consumers lose it",
                )
            } else {
                (Bump::Minor, "interface made public")
            };
            self.changed(
                Section::Interfaces,
                format!("{path}.visibility"),
                bump,
                reason,
                &Value::from(ov),
                &Value::from(nv),
            );
        }
        let od = document(self.old.files, &o.reference);
        let nd = document(self.new.files, &n.reference);
        if od != nd {
            self.changed(
                Section::Interfaces,
                format!("{path}.ref"),
                Bump::Minor,
                "interface document changed; its compatibility is not analysed, review it",
                &Value::from(o.reference.clone()),
                &Value::from(n.reference.clone()),
            );
        } else if o.reference != n.reference {
            self.changed(
                Section::Interfaces,
                format!("{path}.ref"),
                Bump::None,
                "interface document moved, content unchanged",
                &Value::from(o.reference.clone()),
                &Value::from(n.reference.clone()),
            );
        }
    }

    fn configurations(&mut self) {
        let (was, now) = (self.old.contract, self.new.contract);
        self.keyed_entries(
            Section::Configurations,
            "configurations",
            &by_key(&was.configurations, |c| c.name.clone()),
            &by_key(&now.configurations, |c| c.name.clone()),
            (
                Bump::Major,
                "configuration removed: deployers that bind or override it are refused",
            ),
            |n| {
                if n.required {
                    (
                        Bump::Major,
                        "required configuration added: deployers that do not provide it break",
                    )
                } else {
                    (Bump::Minor, "optional configuration added")
                }
            },
            Self::configuration,
        );
    }

    fn configuration(&mut self, path: &str, was: &Configuration, now: &Configuration) {
        if was.required != now.required {
            let (bump, reason) = if now.required {
                (
                    Bump::Major,
                    "configuration made required: deployers that do not provide it break",
                )
            } else {
                (Bump::Minor, "configuration made optional")
            };
            self.changed(
                Section::Configurations,
                format!("{path}.required"),
                bump,
                reason,
                &Value::from(was.required),
                &Value::from(now.required),
            );
        }
        match (&was.schema, &now.schema, &was.reference, &now.reference) {
            (Some(os), Some(ns), _, _) => {
                let old_schema = json_file(self.old.files, os);
                let new_schema = json_file(self.new.files, ns);
                if old_schema == new_schema && os != ns {
                    self.changed(
                        Section::Configurations,
                        format!("{path}.schema"),
                        Bump::None,
                        "schema file moved, content unchanged",
                        &Value::from(os.clone()),
                        &Value::from(ns.clone()),
                    );
                }
                let root = format!("{path}.schema");
                match (old_schema, new_schema) {
                    (Some(before), Some(after)) => self.schema(&root, &before, &after),
                    (before, after) if before != after => self.changed(
                        Section::Configurations,
                        root,
                        Bump::Major,
                        "schema file unreadable on one side; treated as breaking",
                        &Value::from(os.clone()),
                        &Value::from(ns.clone()),
                    ),
                    _ => {}
                }
            }
            (None, None, Some(or), Some(nr)) if or == nr => {}
            _ => {
                let source =
                    |c: &Configuration| serde_json::json!({"schema": c.schema, "ref": c.reference});
                self.changed(
                    Section::Configurations,
                    format!("{path}.ref"),
                    Bump::Major,
                    "schema source changed (another ref, or between ref and a local schema); not compared, treated as breaking",
                    &source(was),
                    &source(now),
                );
            }
        }
        let empty = Map::new();
        let ov = was.values.as_ref().unwrap_or(&empty);
        let nv = now.values.as_ref().unwrap_or(&empty);
        for key in ov.keys().chain(nv.keys()).collect::<BTreeSet<_>>() {
            let at = format!("{path}.values.{key}");
            match (ov.get(key), nv.get(key)) {
                (before, after) if before == after => {}
                (before, after) => self.push(
                    Section::Configurations,
                    at,
                    presence(before.is_some(), after.is_some()),
                    Bump::Patch,
                    "value declared by the contract changed",
                    before,
                    after,
                ),
            }
        }
    }

    /// Compares two JSON Schemas: does every instance the old one accepted still pass?
    fn schema(&mut self, path: &str, old: &Value, new: &Value) {
        if old == new {
            return;
        }
        let sec = Section::Configurations;
        let (Value::Object(was), Value::Object(now)) = (old, new) else {
            let (bump, reason) = match (old, new) {
                (_, Value::Bool(true)) => (Bump::Minor, "schema now accepts anything"),
                (Value::Bool(true), _) => (Bump::Major, "schema now restricts values it accepted"),
                _ => (Bump::Major, "schema replaced; treated as breaking"),
            };
            self.changed(sec, path.into(), bump, reason, old, new);
            return;
        };
        let keys: BTreeSet<&String> = was.keys().chain(now.keys()).collect();
        for key in keys {
            let (before, after) = (was.get(key), now.get(key));
            if before == after {
                continue;
            }
            let at = format!("{path}.{key}");
            match key.as_str() {
                "type" => self.schema_type(&at, before, after),
                "properties" => self.properties(path, was, now),
                "required" => self.required(&at, before, after),
                "enum" => self.schema_enum(&at, before, after),
                "additionalProperties" | "unevaluatedProperties" | "items" => match (before, after)
                {
                    (Some(x), Some(y)) => self.schema(&at, x, y),
                    (None, Some(y)) => self.schema(&at, &Value::Bool(true), y),
                    (Some(x), None) => self.schema(&at, x, &Value::Bool(true)),
                    (None, None) => {}
                },
                "$defs" | "definitions" => self.definitions(&at, before, after),
                "minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties"
                | "minContains" => self.bound(&at, before, after, true),
                "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties"
                | "maxContains" => self.bound(&at, before, after, false),
                "uniqueItems" => {
                    let on = |v: Option<&Value>| v.and_then(Value::as_bool).unwrap_or(false);
                    let (bump, reason) = if on(after) {
                        (Bump::Major, "items must now be unique")
                    } else {
                        (Bump::Minor, "items no longer need to be unique")
                    };
                    self.push(
                        sec,
                        at,
                        presence(before.is_some(), after.is_some()),
                        bump,
                        reason,
                        before,
                        after,
                    );
                }
                "default" => self.push(
                    sec,
                    at,
                    presence(before.is_some(), after.is_some()),
                    Bump::Minor,
                    "default changed: deployers relying on it get the new value",
                    before,
                    after,
                ),
                // Formats are annotations here (docs/design/contract.md#layer-1), like the rest.
                "format" | "title" | "description" | "examples" | "$comment" | "deprecated"
                | "readOnly" | "writeOnly" => self.push(
                    sec,
                    at,
                    presence(before.is_some(), after.is_some()),
                    Bump::None,
                    "annotation changed",
                    before,
                    after,
                ),
                "const" | "pattern" | "multipleOf" | "contentEncoding" | "contentMediaType" => {
                    let (bump, reason) = if after.is_none() {
                        (Bump::Minor, "constraint removed")
                    } else if before.is_none() {
                        (
                            Bump::Major,
                            "constraint added: values it refuses are now rejected",
                        )
                    } else {
                        (
                            Bump::Major,
                            "constraint changed: values it refuses are now rejected",
                        )
                    };
                    self.push(
                        sec,
                        at,
                        presence(before.is_some(), after.is_some()),
                        bump,
                        reason,
                        before,
                        after,
                    );
                }
                _ => self.push(
                    sec,
                    at,
                    presence(before.is_some(), after.is_some()),
                    Bump::Major,
                    format!("keyword {key:?} changed; not analysed, treated as breaking"),
                    before,
                    after,
                ),
            }
        }
    }

    fn schema_type(&mut self, path: &str, a: Option<&Value>, b: Option<&Value>) {
        let types = |v: Option<&Value>| -> Option<BTreeSet<String>> {
            match v? {
                Value::String(s) => Some(BTreeSet::from([s.clone()])),
                Value::Array(items) => Some(
                    items
                        .iter()
                        .filter_map(|i| i.as_str().map(str::to_owned))
                        .collect(),
                ),
                _ => Some(BTreeSet::new()),
            }
        };
        // Absent `type` accepts every type.
        let accepts = |set: &Option<BTreeSet<String>>, t: &str| {
            set.as_ref()
                .is_none_or(|s| s.contains(t) || (t == "integer" && s.contains("number")))
        };
        let (old, new) = (types(a), types(b));
        let lost: Vec<&String> = old.iter().flatten().filter(|t| !accepts(&new, t)).collect();
        let (bump, reason) = if old.is_none() {
            (
                Bump::Major,
                "type constraint added: values of other types are rejected".to_owned(),
            )
        } else if !lost.is_empty() {
            let lost: Vec<&str> = lost.iter().map(|s| s.as_str()).collect();
            (
                Bump::Major,
                format!("type narrowed: {} values are rejected", lost.join(", ")),
            )
        } else {
            (Bump::Minor, "type widened".to_owned())
        };
        self.push(
            Section::Configurations,
            path.into(),
            presence(a.is_some(), b.is_some()),
            bump,
            reason,
            a,
            b,
        );
    }

    fn properties(&mut self, path: &str, was: &Map<String, Value>, now: &Map<String, Value>) {
        let empty = Map::new();
        let props = |m: &Map<String, Value>| -> Map<String, Value> {
            m.get("properties")
                .and_then(Value::as_object)
                .unwrap_or(&empty)
                .clone()
        };
        let (op, np) = (props(was), props(now));
        let newly_required = names(now.get("required"))
            .difference(&names(was.get("required")))
            .cloned()
            .collect::<BTreeSet<_>>();
        for key in op.keys().chain(np.keys()).collect::<BTreeSet<_>>() {
            let at = format!("{path}.properties.{key}");
            match (op.get(key), np.get(key)) {
                (Some(before), None) => self.push(
                    Section::Configurations,
                    at,
                    ChangeKind::Removed,
                    Bump::Major,
                    "property removed: values that set it are rejected or silently ignored",
                    Some(before),
                    None,
                ),
                // A new required property is reported once, by `required`.
                (None, Some(_)) if newly_required.contains(key.as_str()) => {}
                (None, Some(after)) => self.push(
                    Section::Configurations,
                    at,
                    ChangeKind::Added,
                    Bump::Minor,
                    "optional property added",
                    None,
                    Some(after),
                ),
                (Some(before), Some(after)) => self.schema(&at, before, after),
                (None, None) => {}
            }
        }
    }

    fn required(&mut self, path: &str, a: Option<&Value>, b: Option<&Value>) {
        let (old, new) = (names(a), names(b));
        for name in new.difference(&old) {
            self.push(
                Section::Configurations,
                format!("{path}.{name}"),
                ChangeKind::Added,
                Bump::Major,
                format!("property {name:?} is now required: values without it are rejected"),
                None,
                None,
            );
        }
        for name in old.difference(&new) {
            self.push(
                Section::Configurations,
                format!("{path}.{name}"),
                ChangeKind::Removed,
                Bump::Minor,
                format!("property {name:?} is no longer required"),
                None,
                None,
            );
        }
    }

    fn schema_enum(&mut self, path: &str, a: Option<&Value>, b: Option<&Value>) {
        let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned();
        let (old, new) = (list(a), list(b));
        let (bump, reason) = match (&old, &new) {
            (None, _) => (
                Bump::Major,
                "enum added: other values are rejected".to_owned(),
            ),
            (_, None) => (Bump::Minor, "enum removed".to_owned()),
            (Some(o), Some(n)) => {
                let removed: Vec<String> = o
                    .iter()
                    .filter(|v| !n.contains(v))
                    .map(Value::to_string)
                    .collect();
                if removed.is_empty() {
                    (Bump::Minor, "enum values added".to_owned())
                } else {
                    (
                        Bump::Major,
                        format!("enum values removed: {} rejected", removed.join(", ")),
                    )
                }
            }
        };
        self.push(
            Section::Configurations,
            path.into(),
            presence(a.is_some(), b.is_some()),
            bump,
            reason,
            a,
            b,
        );
    }

    fn bound(&mut self, path: &str, a: Option<&Value>, b: Option<&Value>, lower: bool) {
        let num = |v: Option<&Value>| v.and_then(Value::as_f64);
        let (bump, reason) = match (num(a), num(b)) {
            (None, Some(_)) if a.is_none() => (
                Bump::Major,
                "constraint added: values outside it are rejected",
            ),
            (Some(_), None) if b.is_none() => (Bump::Minor, "constraint removed"),
            (Some(x), Some(y)) if (lower && y > x) || (!lower && y < x) => (
                Bump::Major,
                "constraint tightened: values it accepted are rejected",
            ),
            (Some(_), Some(_)) => (Bump::Minor, "constraint loosened"),
            _ => (
                Bump::Major,
                "constraint changed; not analysed, treated as breaking",
            ),
        };
        self.push(
            Section::Configurations,
            path.into(),
            presence(a.is_some(), b.is_some()),
            bump,
            reason,
            a,
            b,
        );
    }

    fn definitions(&mut self, path: &str, before: Option<&Value>, after: Option<&Value>) {
        let empty = Map::new();
        let (was, now) = (
            before.and_then(Value::as_object).unwrap_or(&empty),
            after.and_then(Value::as_object).unwrap_or(&empty),
        );
        for key in was.keys().chain(now.keys()).collect::<BTreeSet<_>>() {
            let at = format!("{path}.{key}");
            match (was.get(key), now.get(key)) {
                (Some(x), Some(y)) => self.schema(&at, x, y),
                // Only a `$ref` makes a definition count; a changed `$ref` is reported itself.
                (x, y) => self.push(
                    Section::Configurations,
                    at,
                    presence(x.is_some(), y.is_some()),
                    Bump::None,
                    "definition added or removed (a changed $ref is reported where it is)",
                    x,
                    y,
                ),
            }
        }
    }

    fn dependencies(&mut self) {
        let (was, now) = (self.old.contract, self.new.contract);
        self.keyed_entries(
            Section::Dependencies,
            "dependencies",
            &by_key(&was.dependencies, |d| d.name.clone()),
            &by_key(&now.dependencies, |d| d.name.clone()),
            (
                Bump::Minor,
                "dependency removed: deployers no longer need to provide it",
            ),
            |n| {
                if n.required {
                    (
                        Bump::Major,
                        "required dependency added: deployers that do not provide it break",
                    )
                } else {
                    (Bump::Minor, "optional dependency added")
                }
            },
            Self::dependency,
        );
    }

    fn dependency(&mut self, path: &str, was: &Dependency, now: &Dependency) {
        let sec = Section::Dependencies;
        if was.required != now.required {
            let (bump, reason) = if now.required {
                (
                    Bump::Major,
                    "dependency made required: deployers that do not provide it break",
                )
            } else {
                (Bump::Minor, "dependency made optional")
            };
            self.changed(
                sec,
                format!("{path}.required"),
                bump,
                reason,
                &Value::from(was.required),
                &Value::from(now.required),
            );
        }
        if was.reference != now.reference {
            let (bump, reason) = if repository(&was.reference) == repository(&now.reference) {
                (
                    Bump::Patch,
                    "pinned tag or digest of the same contract changed",
                )
            } else {
                (
                    Bump::Major,
                    "dependency points at another contract: deployers provide the old one",
                )
            };
            self.changed(
                sec,
                format!("{path}.ref"),
                bump,
                reason,
                &Value::from(was.reference.clone()),
                &Value::from(now.reference.clone()),
            );
        }
        if was.compatibility != now.compatibility {
            let (bump, reason) = compare_constraints(&was.compatibility, &now.compatibility);
            self.changed(
                sec,
                format!("{path}.compatibility"),
                bump,
                reason,
                &Value::from(was.compatibility.clone()),
                &Value::from(now.compatibility.clone()),
            );
        }
    }

    fn capabilities(&mut self) {
        let key = |c: &Capability| c.assertion_key().to_owned();
        let (was, now) = (self.old.contract, self.new.contract);
        self.keyed_entries(
            Section::Capabilities,
            "capabilities",
            &by_key(&was.capabilities, key),
            &by_key(&now.capabilities, key),
            (
                Bump::Major,
                "capability removed: what relies on it (probes, scrapers) loses it",
            ),
            |_| (Bump::Minor, "capability added"),
            Self::capability,
        );
    }

    fn capability(&mut self, path: &str, o: &Capability, n: &Capability) {
        if o.binding == n.binding {
            return;
        }
        let (ob, nb) = (to_value(&o.binding), to_value(&n.binding));
        let (bump, reason) = if o.binding.is_none() {
            (Bump::Minor, "capability binding added")
        } else if n.binding.is_none() {
            (
                Bump::Major,
                "capability binding removed: it can no longer be checked where it was",
            )
        } else {
            self.fields(
                Section::Capabilities,
                &format!("{path}.binding"),
                &ob,
                &nb,
                Bump::Major,
                "capability binding changed: probes of the old interface or path fail",
            );
            return;
        };
        self.push(
            Section::Capabilities,
            format!("{path}.binding"),
            presence(o.binding.is_some(), n.binding.is_some()),
            bump,
            reason,
            Some(&ob).filter(|v| !v.is_null()),
            Some(&nb).filter(|v| !v.is_null()),
        );
    }

    fn workload_and_state(&mut self) {
        let (o, n) = (self.old.contract, self.new.contract);
        if o.workload != n.workload {
            let (ov, nv) = (to_value(&o.workload), to_value(&n.workload));
            self.push(
                Section::Workload,
                "workload".into(),
                presence(o.workload.is_some(), n.workload.is_some()),
                Bump::Major,
                "workload kind changed: deployments made for the old kind no longer match",
                Some(&ov).filter(|v| !v.is_null()),
                Some(&nv).filter(|v| !v.is_null()),
            );
        }
        match (&o.state, &n.state) {
            (Some(a), Some(b)) => {
                let fields = [
                    ("state.type", &a.kind, &b.kind),
                    (
                        "state.persistence.scope",
                        &a.persistence.scope,
                        &b.persistence.scope,
                    ),
                    (
                        "state.persistence.durability",
                        &a.persistence.durability,
                        &b.persistence.durability,
                    ),
                ];
                for (path, x, y) in fields {
                    if x != y {
                        self.changed(
                            Section::State,
                            path.into(),
                            Bump::Major,
                            "state model changed: the storage deployers provide no longer fits",
                            &Value::from(x.clone()),
                            &Value::from(y.clone()),
                        );
                    }
                }
                if a.data_criticality != b.data_criticality {
                    self.changed(
                        Section::State,
                        "state.dataCriticality".into(),
                        Bump::Patch,
                        "data criticality changed",
                        &Value::from(a.data_criticality.clone()),
                        &Value::from(b.data_criticality.clone()),
                    );
                }
            }
            (a, b) if a != b => self.push(
                Section::State,
                "state".into(),
                presence(a.is_some(), b.is_some()),
                Bump::Major,
                "state declaration added or removed: the storage deployers provide no longer fits",
                a.as_ref().map(to_value).as_ref(),
                b.as_ref().map(to_value).as_ref(),
            ),
            _ => {}
        }
    }

    fn policies(&mut self) {
        let old = by_key(&self.old.contract.policies, |p| p.name.clone());
        let new = by_key(&self.new.contract.policies, |p| p.name.clone());
        let reason = "policies govern the contract document, not its consumers";
        for name in union(&old, &new) {
            let path = keyed("policies", &name);
            let (o, n) = (old.get(&name), new.get(&name));
            let same = match (o, n) {
                (Some(a), Some(b)) => {
                    a.reference == b.reference
                        && a.target == b.target
                        && policy_schema(self.old.files, a) == policy_schema(self.new.files, b)
                }
                _ => false,
            };
            if !same {
                self.push(
                    Section::Policies,
                    path,
                    presence(o.is_some(), n.is_some()),
                    Bump::Patch,
                    reason,
                    o.map(to_value).as_ref(),
                    n.map(to_value).as_ref(),
                );
            }
        }
    }

    fn readiness(&mut self) {
        let (was, now) = (&self.old.contract.readiness, &self.new.contract.readiness);
        let reason = "readiness assessment changed";
        let (before, after) = match (was, now) {
            (Some(before), Some(after)) => (before, after),
            (before, after) if before != after => {
                self.push(
                    Section::Readiness,
                    "readiness".into(),
                    presence(before.is_some(), after.is_some()),
                    Bump::Patch,
                    reason,
                    before.as_ref().map(to_value).as_ref(),
                    after.as_ref().map(to_value).as_ref(),
                );
                return;
            }
            _ => return,
        };
        let scalars = [
            (
                "readiness.expires",
                to_value(&before.expires),
                to_value(&after.expires),
            ),
            (
                "readiness.minScore",
                to_value(&before.min_score),
                to_value(&after.min_score),
            ),
            (
                "readiness.partialCredit",
                to_value(&before.partial_credit),
                to_value(&after.partial_credit),
            ),
            (
                "readiness.history",
                to_value(&before.history),
                to_value(&after.history),
            ),
        ];
        for (path, x, y) in scalars {
            if x != y {
                self.push(
                    Section::Readiness,
                    path.into(),
                    presence(!x.is_null(), !y.is_null()),
                    Bump::Patch,
                    reason,
                    Some(&x).filter(|v| !v.is_null()),
                    Some(&y).filter(|v| !v.is_null()),
                );
            }
        }
        let old = by_key(&before.claims, |c| c.id.clone());
        let new = by_key(&after.claims, |c| c.id.clone());
        for id in union(&old, &new) {
            let (x, y) = (old.get(&id), new.get(&id));
            if let (Some(x), Some(y)) = (x, y) {
                self.fields(
                    Section::Readiness,
                    &keyed("readiness.claims", &id),
                    &to_value(x),
                    &to_value(y),
                    Bump::Patch,
                    reason,
                );
            } else if x != y {
                self.push(
                    Section::Readiness,
                    keyed("readiness.claims", &id),
                    presence(x.is_some(), y.is_some()),
                    Bump::Patch,
                    reason,
                    x.map(to_value).as_ref(),
                    y.map(to_value).as_ref(),
                );
            }
        }
    }

    /// One change per differing top-level field of two objects.
    fn fields(
        &mut self,
        section: Section,
        path: &str,
        old: &Value,
        new: &Value,
        bump: Bump,
        reason: &str,
    ) {
        let empty = Map::new();
        let (o, n) = (
            old.as_object().unwrap_or(&empty),
            new.as_object().unwrap_or(&empty),
        );
        for key in o.keys().chain(n.keys()).collect::<BTreeSet<_>>() {
            let (a, b) = (o.get(key), n.get(key));
            if a != b {
                self.push(
                    section,
                    format!("{path}.{key}"),
                    presence(a.is_some(), b.is_some()),
                    bump,
                    reason,
                    a,
                    b,
                );
            }
        }
    }

    fn free_form(
        &mut self,
        section: Section,
        root: &str,
        o: Option<&Map<String, Value>>,
        n: Option<&Map<String, Value>>,
    ) {
        let empty = Map::new();
        let (o, n) = (o.unwrap_or(&empty), n.unwrap_or(&empty));
        for key in o.keys().chain(n.keys()).collect::<BTreeSet<_>>() {
            let (a, b) = (o.get(key), n.get(key));
            if a != b {
                self.push(
                    section,
                    format!("{root}.{key}"),
                    presence(a.is_some(), b.is_some()),
                    Bump::Patch,
                    format!("{root} changed"),
                    a,
                    b,
                );
            }
        }
    }

    /// `sbom/*.spdx.json` and `sbom/*.cdx.json` (top level only): informational, by package
    /// when both sides parse, else by file.
    fn sbom(&mut self) {
        let (old, new) = (sbom_files(self.old.files), sbom_files(self.new.files));
        for file in union(&old, &new) {
            let path = keyed("sbom", &file);
            match (old.get(&file), new.get(&file)) {
                (Some(a), Some(b)) if a == b => {}
                (Some(a), Some(b)) => match (packages(&file, a), packages(&file, b)) {
                    (Some(pa), Some(pb)) => {
                        for name in union(&pa, &pb) {
                            let (x, y) = (pa.get(&name), pb.get(&name));
                            if x != y {
                                self.push(
                                    Section::Sbom,
                                    format!("{path}.packages[{name:?}]"),
                                    presence(x.is_some(), y.is_some()),
                                    Bump::None,
                                    "software bill of materials changed",
                                    x.map(|v| Value::from(v.clone())).as_ref(),
                                    y.map(|v| Value::from(v.clone())).as_ref(),
                                );
                            }
                        }
                    }
                    _ => self.push(
                        Section::Sbom,
                        path,
                        ChangeKind::Changed,
                        Bump::None,
                        "software bill of materials changed",
                        None,
                        None,
                    ),
                },
                (a, b) => self.push(
                    Section::Sbom,
                    path,
                    presence(a.is_some(), b.is_some()),
                    Bump::None,
                    "software bill of materials file added or removed",
                    None,
                    None,
                ),
            }
        }
    }
}

fn presence(old: bool, new: bool) -> ChangeKind {
    match (old, new) {
        (false, true) => ChangeKind::Added,
        (true, false) => ChangeKind::Removed,
        _ => ChangeKind::Changed,
    }
}

fn by_key<T>(items: &[T], key: impl Fn(&T) -> String) -> BTreeMap<String, &T> {
    // Duplicate names are a validation error; the first one wins here.
    let mut out = BTreeMap::new();
    for item in items {
        out.entry(key(item)).or_insert(item);
    }
    out
}

fn union<A, B>(a: &BTreeMap<String, A>, b: &BTreeMap<String, B>) -> BTreeSet<String> {
    a.keys().chain(b.keys()).cloned().collect()
}

fn names(v: Option<&Value>) -> BTreeSet<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A bundle file parsed as JSON.
fn json_file(files: &BundleFiles, path: &str) -> Option<Value> {
    serde_json::from_slice(crate::bundle::read_file(files, path)?).ok()
}

/// An interface document as the validator reads it (YAML for `.yaml`/`.yml`, else JSON), so
/// that formatting alone is no change; the raw bytes when it does not parse.
fn document(files: &BundleFiles, path: &str) -> Option<Result<Value, Vec<u8>>> {
    let bytes = crate::bundle::read_file(files, path)?;
    let yaml = std::path::Path::new(path)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    let parsed = if yaml {
        crate::parse::parse_yaml(bytes).ok()
    } else {
        serde_json::from_slice(bytes).ok()
    };
    Some(parsed.ok_or_else(|| bytes.to_vec()))
}

fn policy_schema(files: &BundleFiles, p: &Policy) -> Option<Value> {
    json_file(files, p.schema.as_deref()?)
}

/// An OCI reference without its tag and digest; a local reference as written.
fn repository(reference: &str) -> String {
    if reference.starts_with(OCI_SCHEME)
        && let Ok(r) = Reference::parse_oci(reference)
    {
        return r.without_version().to_oci_string();
    }
    reference.to_owned()
}

fn sbom_files(files: &BundleFiles) -> BTreeMap<String, &[u8]> {
    files
        .iter()
        .filter(|(path, _)| {
            path.strip_prefix("sbom/").is_some_and(|name| {
                !name.contains('/') && (name.ends_with(".spdx.json") || name.ends_with(".cdx.json"))
            })
        })
        .map(|(path, bytes)| (path.to_owned(), bytes))
        .collect()
}

/// Package name → version of an SPDX 2.3 (`packages[].name/versionInfo`) or CycloneDX 1.5
/// (`components[].group/name/version`) document.
fn packages(file: &str, bytes: &[u8]) -> Option<BTreeMap<String, String>> {
    let doc: Value = serde_json::from_slice(bytes).ok()?;
    let (list, version_key) = if file.ends_with(".spdx.json") {
        (doc.get("packages")?.as_array()?, "versionInfo")
    } else {
        (doc.get("components")?.as_array()?, "version")
    };
    let mut out = BTreeMap::new();
    for p in list {
        let mut name = p.get("name")?.as_str()?.to_owned();
        if let Some(group) = p
            .get("group")
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
        {
            name = format!("{group}/{name}");
        }
        let version = p
            .get(version_key)
            .and_then(Value::as_str)
            .unwrap_or_default();
        out.insert(name, version.to_owned());
    }
    Some(out)
}

/// Whether a compatibility constraint was narrowed (breaking), widened (minor), both (breaking)
/// or only rewritten (informational). Both constraints are evaluated at every version either
/// names and the versions around it, which are where the answer can change.
pub fn compare_constraints(old: &str, new: &str) -> (Bump, String) {
    let (Ok(o), Ok(n)) = (Constraint::parse(old), Constraint::parse(new)) else {
        return (
            Bump::Major,
            "constraint does not parse on one side; treated as breaking".into(),
        );
    };
    let candidates = candidates(&format!("{old} {new}"));
    let refused = candidates
        .iter()
        .find(|v| o.matches(v) && !n.matches(v))
        .map(|v| format!("{}.{}.{}", v.major, v.minor, v.patch));
    let accepted = candidates
        .iter()
        .find(|v| !o.matches(v) && n.matches(v))
        .map(|v| format!("{}.{}.{}", v.major, v.minor, v.patch));
    match (refused, accepted) {
        (None, None) => (
            Bump::None,
            "constraint rewritten; it allows the same versions".into(),
        ),
        (None, Some(a)) => (
            Bump::Minor,
            format!("constraint widened: {a} is now allowed"),
        ),
        (Some(r), None) => (
            Bump::Major,
            format!("constraint narrowed: {r} is no longer allowed"),
        ),
        (Some(r), Some(a)) => (
            Bump::Major,
            format!("constraint moved: {r} is no longer allowed ({a} now is)"),
        ),
    }
}

/// At most this many distinct versions named in two constraints are sampled around.
const MAX_NAMED_VERSIONS: usize = 256;

/// Release versions around every version named in `text` (the first [`MAX_NAMED_VERSIONS`]
/// distinct ones), ascending.
fn candidates(text: &str) -> Vec<Version> {
    let mut named: BTreeSet<(u64, u64, u64)> = BTreeSet::new();
    for token in text.split(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'x' | 'X' | '*'))) {
        if !token.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let mut parts = token
            .split('.')
            .map(|p| p.parse::<u64>().unwrap_or(0))
            .chain(std::iter::repeat(0));
        named.insert((
            parts.next().unwrap_or(0),
            parts.next().unwrap_or(0),
            parts.next().unwrap_or(0),
        ));
        if named.len() >= MAX_NAMED_VERSIONS {
            break;
        }
    }
    let mut triples: BTreeSet<(u64, u64, u64)> =
        BTreeSet::from([(0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 0, 0)]);
    for (a, b, c) in named {
        let around = |x: u64| [0, x.saturating_sub(1), x, x.saturating_add(1), 999];
        for major in [a.saturating_sub(1), a, a.saturating_add(1)] {
            for minor in around(b) {
                for patch in around(c) {
                    triples.insert((major, minor, patch));
                }
            }
        }
    }
    triples
        .into_iter()
        .map(|(a, b, c)| Version::new(a, b, c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn contract(doc: Value) -> Contract {
        serde_json::from_value(doc).expect("contract")
    }

    fn base() -> Value {
        json!({
            "pactoVersion": "2.0",
            "service": {"name": "orders", "version": "1.0.0"},
            "interfaces": [{"name": "api", "type": "openapi", "ref": "api.yaml"}],
            "configurations": [{"name": "runtime", "required": true, "schema": "schema.json"}],
            "dependencies": [{"name": "db", "ref": "oci://r.example.com/db:1.0.0",
                              "required": true, "compatibility": "^1.2.0"}],
            "capabilities": [{"type": "health",
                              "binding": {"type": "http", "interface": "api", "path": "/healthz"}}],
            "workload": "service"
        })
    }

    fn files(schema: &Value) -> BundleFiles {
        let mut f = BundleFiles::new();
        f.insert("api.yaml", b"openapi: 3.0.0\n".to_vec());
        f.insert("schema.json", serde_json::to_vec(schema).expect("json"));
        f
    }

    fn schema() -> Value {
        json!({"type": "object",
               "properties": {"port": {"type": "integer", "minimum": 1},
                              "mode": {"enum": ["a", "b"]}},
               "required": ["port"]})
    }

    /// Diffs `base()` against `base()` changed by `edit`, with the schema changed by `edit_schema`.
    fn diff_with(
        edit: impl FnOnce(&mut Value),
        edit_schema: impl FnOnce(&mut Value),
    ) -> ContractDiff {
        let old = contract(base());
        let mut doc = base();
        edit(&mut doc);
        let new = contract(doc);
        let mut s = schema();
        edit_schema(&mut s);
        let (fo, fnew) = (files(&schema()), files(&s));
        diff_contracts(
            DiffSide {
                contract: &old,
                files: &fo,
            },
            DiffSide {
                contract: &new,
                files: &fnew,
            },
        )
    }

    fn only(d: &ContractDiff) -> &Change {
        assert_eq!(d.changes.len(), 1, "{:#?}", d.changes);
        &d.changes[0]
    }

    #[test]
    fn identical_contracts_have_no_changes_and_need_no_bump() {
        let d = diff_with(|_| {}, |_| {});
        assert!(d.changes.is_empty());
        assert_eq!(d.bump, Bump::None);
        assert!(d.version.sufficient);
        assert_eq!(d.version.step, VersionStep::Unchanged);
    }

    #[test]
    fn interfaces_removed_or_retyped_break_added_are_minor() {
        let d = diff_with(|c| c["interfaces"] = json!([]), |_| {});
        let c = only(&d);
        assert_eq!(
            (c.kind, c.class, c.bump),
            (ChangeKind::Removed, Class::Breaking, Bump::Major)
        );
        assert_eq!(c.path, r#"interfaces["api"]"#);
        let d = diff_with(|c| c["interfaces"][0]["type"] = json!("grpc"), |_| {});
        assert_eq!(only(&d).path, r#"interfaces["api"].type"#);
        assert_eq!(only(&d).class, Class::Breaking);
        let d = diff_with(
            |c| {
                c["interfaces"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "events", "type": "asyncapi", "ref": "api.yaml"}));
            },
            |_| {},
        );
        assert_eq!(
            (only(&d).kind, only(&d).bump),
            (ChangeKind::Added, Bump::Minor)
        );
        assert!(
            !d.version.sufficient,
            "1.0.0 → 1.0.0 does not cover a minor change"
        );
    }

    #[test]
    fn schema_changes_that_reject_old_values_break() {
        let breaking = [
            diff_with(|_| {}, |s| s["required"] = json!(["port", "mode"])),
            diff_with(|_| {}, |s| s["properties"]["port"]["minimum"] = json!(10)),
            diff_with(|_| {}, |s| s["properties"]["mode"]["enum"] = json!(["a"])),
            diff_with(
                |_| {},
                |s| s["properties"]["port"]["type"] = json!("string"),
            ),
            diff_with(
                |_| {},
                |s| {
                    s["properties"].as_object_mut().unwrap().remove("mode");
                },
            ),
            diff_with(|_| {}, |s| s["additionalProperties"] = json!(false)),
            diff_with(
                |_| {},
                |s| s["properties"]["mode"]["pattern"] = json!("^a$"),
            ),
            diff_with(|_| {}, |s| s["oneOf"] = json!([{"required": ["mode"]}])),
        ];
        for d in &breaking {
            let c = only(d);
            assert_eq!((c.class, c.bump), (Class::Breaking, Bump::Major), "{c:#?}");
            assert!(
                c.path.starts_with(r#"configurations["runtime"].schema."#),
                "{}",
                c.path
            );
        }
        assert_eq!(
            only(&breaking[0]).path,
            r#"configurations["runtime"].schema.required.mode"#
        );
        let loosening = [
            diff_with(|_| {}, |s| s["required"] = json!([])),
            diff_with(|_| {}, |s| s["properties"]["port"]["minimum"] = json!(0)),
            diff_with(
                |_| {},
                |s| s["properties"]["mode"]["enum"] = json!(["a", "b", "c"]),
            ),
            diff_with(
                |_| {},
                |s| s["properties"]["port"]["type"] = json!("number"),
            ),
            diff_with(
                |_| {},
                |s| s["properties"]["extra"] = json!({"type": "string"}),
            ),
        ];
        for d in &loosening {
            let c = only(d);
            assert_eq!(
                (c.class, c.bump),
                (Class::NonBreaking, Bump::Minor),
                "{c:#?}"
            );
        }
        // A new property that is also required is one breaking change, not two.
        let d = diff_with(
            |_| {},
            |s| {
                s["properties"]["region"] = json!({"type": "string"});
                s["required"] = json!(["port", "region"]);
            },
        );
        assert_eq!(
            only(&d).path,
            r#"configurations["runtime"].schema.required.region"#
        );
        // Annotations need no release.
        let d = diff_with(
            |_| {},
            |s| s["properties"]["port"]["description"] = json!("TCP"),
        );
        assert_eq!(only(&d).class, Class::Informational);
        assert_eq!(d.bump, Bump::None);
    }

    #[test]
    fn configurations_made_required_or_added_required_break() {
        let d = diff_with(
            |c| c["configurations"][0]["required"] = json!(false),
            |_| {},
        );
        assert_eq!(only(&d).bump, Bump::Minor);
        let d = diff_with(
            |c| {
                c["configurations"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "extra", "required": true, "schema": "schema.json"}));
            },
            |_| {},
        );
        assert_eq!(
            (only(&d).kind, only(&d).class),
            (ChangeKind::Added, Class::Breaking)
        );
        let d = diff_with(|c| c["configurations"] = json!([]), |_| {});
        assert_eq!(only(&d).class, Class::Breaking);
    }

    #[test]
    fn dependencies_follow_the_documented_rules() {
        let d = diff_with(
            |c| c["dependencies"][0]["compatibility"] = json!("~1.2.0"),
            |_| {},
        );
        let c = only(&d);
        assert_eq!(c.class, Class::Breaking);
        assert_eq!(c.reason, "constraint narrowed: 1.3.0 is no longer allowed");
        let d = diff_with(
            |c| c["dependencies"][0]["compatibility"] = json!(">=1.0.0"),
            |_| {},
        );
        assert_eq!(only(&d).bump, Bump::Minor);
        let d = diff_with(
            |c| c["dependencies"][0]["compatibility"] = json!(">= 1.2.0, < 2.0.0"),
            |_| {},
        );
        assert_eq!(only(&d).class, Class::Informational);
        let d = diff_with(|c| c["dependencies"] = json!([]), |_| {});
        assert_eq!(
            (only(&d).kind, only(&d).bump),
            (ChangeKind::Removed, Bump::Minor)
        );
        let d = diff_with(
            |c| c["dependencies"][0]["ref"] = json!("oci://r.example.com/db:1.1.0"),
            |_| {},
        );
        assert_eq!(only(&d).bump, Bump::Patch);
        let d = diff_with(
            |c| c["dependencies"][0]["ref"] = json!("oci://r.example.com/other:1.0.0"),
            |_| {},
        );
        assert_eq!(only(&d).bump, Bump::Major);
        let d = diff_with(
            |c| {
                c["dependencies"].as_array_mut().unwrap().push(json!({
                    "name": "cache", "ref": "oci://r.example.com/cache:1.0.0",
                    "required": true, "compatibility": "^1.0.0"}));
            },
            |_| {},
        );
        assert_eq!(only(&d).class, Class::Breaking);
    }

    #[test]
    fn capabilities_workload_and_state() {
        let d = diff_with(
            |c| c["capabilities"][0]["binding"]["path"] = json!("/health"),
            |_| {},
        );
        assert_eq!(only(&d).path, r#"capabilities["health"].binding.path"#);
        assert_eq!(only(&d).class, Class::Breaking);
        let d = diff_with(|c| c["capabilities"] = json!([]), |_| {});
        assert_eq!(only(&d).class, Class::Breaking);
        let d = diff_with(|c| c["workload"] = json!("job"), |_| {});
        assert_eq!(only(&d).class, Class::Breaking);
        let d = diff_with(|c| c["metadata"] = json!({"tier": "1"}), |_| {});
        assert_eq!(
            (only(&d).path.as_str(), only(&d).bump),
            ("metadata.tier", Bump::Patch)
        );
    }

    /// JSON values leaning towards the schema keywords the diff interprets.
    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "[a-z]{0,3}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            let key = prop_oneof![
                Just("type".to_owned()),
                Just("properties".to_owned()),
                Just("required".to_owned()),
                Just("enum".to_owned()),
                Just("minimum".to_owned()),
                Just("maxLength".to_owned()),
                Just("items".to_owned()),
                Just("additionalProperties".to_owned()),
                Just("$defs".to_owned()),
                "[a-z]{1,3}",
            ];
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map(key, inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any two schema files, values and metadata: a diff, never a panic; equal inputs give
        /// no change.
        #[test]
        fn arbitrary_schemas_and_values_never_panic(
            a in arb_json(),
            b in arb_json(),
            old_constraint in "[ 0-9.^~<>=|*x,-]{0,12}",
            new_constraint in "[ 0-9.^~<>=|*x,-]{0,12}",
        ) {
            let mut old_doc = base();
            old_doc["metadata"] = json!({"m": a.clone()});
            old_doc["configurations"][0]["values"] = json!({"v": a.clone()});
            old_doc["dependencies"][0]["compatibility"] = json!(old_constraint);
            let mut new_doc = base();
            new_doc["metadata"] = json!({"m": b.clone()});
            new_doc["configurations"][0]["values"] = json!({"v": b.clone()});
            new_doc["dependencies"][0]["compatibility"] = json!(new_constraint);
            let (old, new) = (contract(old_doc), contract(new_doc));
            let (fa, fb) = (files(&a), files(&b));
            let d = diff_contracts(
                DiffSide { contract: &old, files: &fa },
                DiffSide { contract: &new, files: &fb },
            );
            proptest::prop_assert!(d.changes.iter().all(|c| !c.path.is_empty()));
            let same = diff_contracts(
                DiffSide { contract: &old, files: &fa },
                DiffSide { contract: &old, files: &fa },
            );
            proptest::prop_assert!(same.changes.is_empty());
        }
    }

    #[test]
    fn constraints_are_compared_by_the_versions_they_allow() {
        let cmp = |o, n| compare_constraints(o, n).0;
        assert_eq!(cmp("^1.2.0", "1.2.0 - 1.9.9"), Bump::Major);
        assert_eq!(cmp("~1.2", ">=1.2.0, <1.3.0"), Bump::None);
        assert_eq!(cmp("^1.0.0", "^1.0.0 || ^2.0.0"), Bump::Minor);
        assert_eq!(cmp("^1.0.0 || ^2.0.0", "^2.0.0"), Bump::Major);
        assert_eq!(cmp("^0.2.3", "^0.2.0"), Bump::Minor);
        assert_eq!(cmp("1.x", "*"), Bump::Minor);
        assert_eq!(cmp(">= 2.0.0, < 4.0.0", ">= 3.0.0, < 5.0.0"), Bump::Major);
        assert_eq!(
            compare_constraints("^1.0.0", "not a constraint").0,
            Bump::Major
        );
        let huge = format!("{}.0.0", u64::MAX);
        assert_eq!(cmp(&huge, &huge), Bump::None);
        assert_eq!(
            version_change(&huge, &huge, Bump::Major).suggested,
            Some(format!("{}.0.0", u64::MAX))
        );
    }

    #[test]
    fn version_steps_and_what_they_cover() {
        let v = |o, n, r| version_change(o, n, r);
        assert!(!v("1.0.0", "1.1.0", Bump::Major).sufficient);
        assert_eq!(
            v("1.4.2", "1.5.0", Bump::Major).suggested.as_deref(),
            Some("2.0.0")
        );
        assert_eq!(
            v("0.4.2", "0.4.3", Bump::Major).suggested.as_deref(),
            Some("0.5.0")
        );
        assert_eq!(v("1.4.2", "2.0.0", Bump::Major).suggested, None);
        assert!(v("1.0.0", "2.0.0", Bump::Major).sufficient);
        assert!(v("1.0.0", "1.0.1", Bump::Patch).sufficient);
        assert!(!v("1.0.0", "1.0.1", Bump::Minor).sufficient);
        assert!(v("1.0.0", "1.0.0", Bump::None).sufficient);
        assert_eq!(v("1.2.0", "1.1.0", Bump::None).step, VersionStep::Downgrade);
        assert!(!v("1.2.0", "1.1.0", Bump::Patch).sufficient);
        // Major version zero: a minor step covers breaking changes.
        assert!(v("0.3.0", "0.4.0", Bump::Major).sufficient);
        assert!(v("0.3.0", "0.3.1", Bump::Minor).sufficient);
        assert!(!v("0.3.0", "0.3.1", Bump::Major).sufficient);
        // Pre-releases of the same version promise nothing.
        assert_eq!(
            v("2.0.0-rc.1", "2.0.0-rc.2", Bump::Major).step,
            VersionStep::Prerelease
        );
        assert!(v("2.0.0-rc.1", "2.0.0", Bump::Major).sufficient);
        assert_eq!(v("x", "1.0.0", Bump::None).step, VersionStep::Unparseable);
    }

    #[test]
    fn sbom_is_informational_by_package_and_docs_are_ignored() {
        let c = contract(base());
        let mut a = files(&schema());
        let mut b = files(&schema());
        a.insert(
            "sbom/app.spdx.json",
            br#"{"packages":[{"name":"openssl","versionInfo":"3.0.1"}]}"#.to_vec(),
        );
        b.insert(
            "sbom/app.spdx.json",
            br#"{"packages":[{"name":"openssl","versionInfo":"3.0.2"},{"name":"zlib","versionInfo":"1.3"}]}"#
                .to_vec(),
        );
        b.insert("docs/readme.md", b"new docs".to_vec());
        let d = diff_contracts(
            DiffSide {
                contract: &c,
                files: &a,
            },
            DiffSide {
                contract: &c,
                files: &b,
            },
        );
        let paths: Vec<(&str, ChangeKind)> = d
            .changes
            .iter()
            .map(|c| (c.path.as_str(), c.kind))
            .collect();
        assert_eq!(
            paths,
            [
                (
                    r#"sbom["sbom/app.spdx.json"].packages["openssl"]"#,
                    ChangeKind::Changed
                ),
                (
                    r#"sbom["sbom/app.spdx.json"].packages["zlib"]"#,
                    ChangeKind::Added
                ),
            ]
        );
        assert_eq!(d.bump, Bump::None);
    }
}
