//! Lenient semantic versions, Masterminds-style version constraints and "highest semver tag"
//! selection (docs/design/contract.md#references-and-versions).
//!
//! # Version grammar
//!
//! ```text
//! version    := ["v"] number ["." number ["." number]] ["-" pre] ["+" build]
//! number     := "0" | [1-9][0-9]*                 (fits in u64; leading zeros are rejected)
//! pre        := pre-ident ("." pre-ident)*
//! pre-ident  := "0" | [1-9][0-9]* | [0-9A-Za-z-]* containing a non-digit   (non-empty)
//! build      := [0-9A-Za-z-]+ ("." [0-9A-Za-z-]+)*
//! ```
//!
//! Omitted minor/patch numbers are zero (`v2` is `2.0.0`). A fourth numeric part (`1.2.3.4`) is
//! rejected. Only a lowercase `v` prefix is accepted. Precedence follows SemVer 2.0: numbers,
//! then a version with a pre-release sorts before the same version without one; pre-release
//! identifiers compare numerically when both are numeric, numeric ones sort before alphanumeric
//! ones, and a shorter list sorts first when all shared identifiers are equal. Build metadata is
//! ignored for precedence *and* equality (`1.0.0+a == 1.0.0+b`).
//!
//! # Constraint grammar (Masterminds semver v3 style)
//!
//! ```text
//! constraint := group ("||" group)*                       OR of groups
//! group      := range | comparator ((","|ws) comparator)*  AND of comparators
//! range      := cversion ws+ "-" ws+ cversion               hyphen range: ">= a, <= b"
//! comparator := [op] ws* cversion
//! op         := "=" | "!=" | ">" | "<" | ">=" | "=>" | "<=" | "=<" | "~" | "~>" | "^"
//! cversion   := ["v"] part ["." part ["." part]] ["-" pre] ["+" build]
//! part       := number | "x" | "X" | "*"
//! ```
//!
//! A part that is a wildcard or is omitted makes the comparator "wild" from that position on;
//! every part after a wildcard must also be a wildcard (`1.x.3` is rejected). Semantics, with
//! `c` the comparator version with wildcards replaced by zero:
//!
//! | comparator | meaning |
//! |---|---|
//! | `1.2.3`, `=1.2.3` | exactly 1.2.3 (build ignored) |
//! | `1.2`, `1.2.x`, `=1.2` | `>=1.2.0 <1.3.0` |
//! | `1`, `1.x`, `1.*` | `>=1.0.0 <2.0.0` |
//! | `*`, `x` | any version |
//! | `!=1.2.3` / `!=1.2` / `!=1` | not that version / not in 1.2.x / not in 1.x |
//! | `>1.2.3` | greater than 1.2.3 |
//! | `>1.2` / `>1` | minor greater than 2 within major 1, or a greater major / a greater major |
//! | `>=1.2.3`, `=>1.2.3` | greater than or equal to `c` |
//! | `<1.2.3`, `<1.2` | less than `c` (`<1.2` is `<1.2.0`) |
//! | `<=1.2.3`, `=<` | less than or equal; `<=1.2` is `<1.3.0`, `<=1` is `<2.0.0` |
//! | `~1.2.3`, `~>1.2.3` | `>=1.2.3 <1.3.0` |
//! | `~1.2`, `~1.2.x` | `>=1.2.0 <1.3.0` |
//! | `~1`, `~1.x` | `>=1.0.0 <2.0.0` |
//! | `^1.2.3` | `>=1.2.3 <2.0.0` |
//! | `^0.2.3` / `^0.2` | `>=0.2.3 <0.3.0` / `>=0.2.0 <0.3.0` |
//! | `^0.0.3` / `^0.0` / `^0` | `>=0.0.3 <0.0.4` / `>=0.0.0 <0.1.0` / `>=0.0.0 <1.0.0` |
//! | `~*`, `^*` | any version |
//! | `1.2 - 1.4.5` | `>=1.2.0, <=1.4.5` (the right side follows the `<=` wildcard rule) |
//!
//! **Pre-release exclusion rule**: a version carrying a pre-release satisfies a group only if at
//! least one comparator of that group itself names a pre-release (`>=1.0.0-0` admits
//! `1.2.0-rc.1`; `^1.0.0` does not). An empty constraint string is an error here; callers that
//! treat an empty `compatibility` specially check for it first.
//!
//! # Highest tag
//!
//! [`select_highest_tag`] keeps the tags that parse as versions, filters them by an optional
//! constraint, and returns the **original spelling** of the highest. Equal versions (e.g.
//! `1.2.3` and `v1.2.3`) are ordered deterministically (docs/design/contract.md#references-and-versions): the spelling without `v` wins,
//! then the lexicographically smaller tag.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

/// Why a version string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The input was empty (after an optional `v`).
    #[error("version is empty")]
    Empty,
    /// A numeric part was missing or not a number.
    #[error("version {input:?}: {part} is not a number")]
    NotANumber {
        /// The whole input.
        input: String,
        /// `major`, `minor` or `patch`.
        part: &'static str,
    },
    /// A numeric part had a leading zero.
    #[error("version {input:?}: {part} has a leading zero")]
    LeadingZero {
        /// The whole input.
        input: String,
        /// `major`, `minor`, `patch` or `pre-release identifier`.
        part: &'static str,
    },
    /// A numeric part does not fit in 64 bits.
    #[error("version {input:?}: {part} is too large")]
    Overflow {
        /// The whole input.
        input: String,
        /// `major`, `minor`, `patch` or `pre-release identifier`.
        part: &'static str,
    },
    /// More than three numeric parts.
    #[error("version {input:?} has more than three numeric parts")]
    TooManyParts {
        /// The whole input.
        input: String,
    },
    /// A pre-release or build identifier was empty or had a character outside `[0-9A-Za-z-]`.
    #[error("version {input:?}: invalid {section} identifier {ident:?}")]
    InvalidIdentifier {
        /// The whole input.
        input: String,
        /// `pre-release` or `build`.
        section: &'static str,
        /// The offending identifier.
        ident: String,
    },
    /// Characters after the version that fit no part of the grammar.
    #[error("version {input:?}: unexpected character {found:?}")]
    UnexpectedCharacter {
        /// The whole input.
        input: String,
        /// The first unexpected character.
        found: char,
    },
}

/// Why a constraint string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    /// The constraint (or one `||` group, or one comparator) is empty.
    #[error("constraint {input:?}: empty {what}")]
    Empty {
        /// The whole input.
        input: String,
        /// `constraint`, `group` or `comparator`.
        what: &'static str,
    },
    /// A comparator's version is malformed.
    #[error("constraint {input:?}: comparator {comparator:?}")]
    Version {
        /// The whole input.
        input: String,
        /// The offending comparator.
        comparator: String,
        /// What is wrong with its version.
        #[source]
        source: VersionError,
    },
    /// A number followed a wildcard (`1.x.3`).
    #[error("constraint {input:?}: comparator {comparator:?}: a number follows a wildcard")]
    NumberAfterWildcard {
        /// The whole input.
        input: String,
        /// The offending comparator.
        comparator: String,
    },
    /// A hyphen range whose sides are not two versions.
    #[error("constraint {input:?}: malformed hyphen range {range:?}")]
    BadRange {
        /// The whole input.
        input: String,
        /// The offending range text.
        range: String,
    },
}

/// Why no tag could be selected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// No tag parses as a semantic version.
    #[error("no semver tags found")]
    NoSemverTags,
    /// Semver tags exist but none satisfies the constraint.
    #[error("no tags satisfy constraint {constraint:?}")]
    NoMatchingVersion {
        /// The constraint text as given.
        constraint: String,
    },
}

/// One pre-release identifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PreId {
    /// A purely numeric identifier.
    Numeric(u64),
    /// An identifier with at least one non-digit.
    Alpha(String),
}

impl PartialOrd for PreId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PreId {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PreId::Numeric(a), PreId::Numeric(b)) => a.cmp(b),
            (PreId::Numeric(_), PreId::Alpha(_)) => Ordering::Less,
            (PreId::Alpha(_), PreId::Numeric(_)) => Ordering::Greater,
            (PreId::Alpha(a), PreId::Alpha(b)) => a.cmp(b),
        }
    }
}

impl fmt::Display for PreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreId::Numeric(n) => write!(f, "{n}"),
            PreId::Alpha(s) => f.write_str(s),
        }
    }
}

/// A parsed semantic version. Equality, hashing and ordering ignore build metadata.
#[derive(Debug, Clone)]
pub struct Version {
    /// Major number.
    pub major: u64,
    /// Minor number (0 when omitted).
    pub minor: u64,
    /// Patch number (0 when omitted).
    pub patch: u64,
    /// Pre-release identifiers (empty for a release).
    pub pre: Vec<PreId>,
    /// Build metadata identifiers.
    pub build: Vec<String>,
}

impl Version {
    /// A release version `major.minor.patch`.
    pub fn new(major: u64, minor: u64, patch: u64) -> Self {
        Self {
            major,
            minor,
            patch,
            pre: Vec::new(),
            build: Vec::new(),
        }
    }

    /// Parses a version with the lenient grammar of the module docs.
    pub fn parse(input: &str) -> Result<Self, VersionError> {
        let parsed = parse_parts(input, false)?;
        Ok(Version {
            major: parsed.nums[0].unwrap_or(0),
            minor: parsed.nums[1].unwrap_or(0),
            patch: parsed.nums[2].unwrap_or(0),
            pre: parsed.pre,
            build: parsed.build,
        })
    }

    /// True when the version carries a pre-release.
    pub fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }

    fn precedence(&self, other: &Self) -> Ordering {
        self.major
            .cmp(&other.major)
            .then(self.minor.cmp(&other.minor))
            .then(self.patch.cmp(&other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self.pre.cmp(&other.pre),
            })
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.precedence(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl Hash for Version {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.major.hash(state);
        self.minor.hash(state);
        self.patch.hash(state);
        self.pre.hash(state);
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.precedence(other)
    }
}

impl FromStr for Version {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Version::parse(s)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            f.write_str("-")?;
            for (i, id) in self.pre.iter().enumerate() {
                if i > 0 {
                    f.write_str(".")?;
                }
                write!(f, "{id}")?;
            }
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build.join("."))?;
        }
        Ok(())
    }
}

/// The result of the shared scanner: up to three numeric parts (`None` when omitted or a
/// wildcard), where the first wildcard was, and the pre-release/build sections.
struct Parts {
    nums: [Option<u64>; 3],
    /// Index (0..3) of the first omitted-or-wildcard part, 3 when all three are numbers.
    wild_from: usize,
    pre: Vec<PreId>,
    build: Vec<String>,
}

const PART_NAMES: [&str; 3] = ["major", "minor", "patch"];

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

fn parse_number(input: &str, text: &str, part: &'static str) -> Result<u64, VersionError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VersionError::NotANumber {
            input: input.to_owned(),
            part,
        });
    }
    if text.len() > 1 && text.starts_with('0') {
        return Err(VersionError::LeadingZero {
            input: input.to_owned(),
            part,
        });
    }
    text.parse::<u64>().map_err(|_| VersionError::Overflow {
        input: input.to_owned(),
        part,
    })
}

fn parse_idents(
    input: &str,
    text: &str,
    section: &'static str,
) -> Result<Vec<String>, VersionError> {
    text.split('.')
        .map(|id| {
            if id.is_empty() || !id.chars().all(is_ident_char) {
                Err(VersionError::InvalidIdentifier {
                    input: input.to_owned(),
                    section,
                    ident: id.to_owned(),
                })
            } else {
                Ok(id.to_owned())
            }
        })
        .collect()
}

fn parse_pre(input: &str, text: &str) -> Result<Vec<PreId>, VersionError> {
    parse_idents(input, text, "pre-release")?
        .into_iter()
        .map(|id| {
            if id.bytes().all(|b| b.is_ascii_digit()) {
                parse_number(input, &id, "pre-release identifier").map(PreId::Numeric)
            } else {
                Ok(PreId::Alpha(id))
            }
        })
        .collect()
}

/// Scans `input` (trimmed of nothing: callers trim). With `allow_wild`, parts may be `x`, `X`
/// or `*`, and every part after a wildcard must be a wildcard too (checked by the caller via
/// `wild_from` and the returned flag).
fn parse_parts(input: &str, allow_wild: bool) -> Result<Parts, VersionError> {
    let body = input.strip_prefix('v').unwrap_or(input);
    if body.is_empty() {
        return Err(VersionError::Empty);
    }
    // Split off build metadata first (it may contain '-'), then the pre-release.
    let (core_pre, build) = match body.split_once('+') {
        Some((a, b)) => (a, Some(b)),
        None => (body, None),
    };
    let (core, pre) = match core_pre.split_once('-') {
        Some((a, b)) => (a, Some(b)),
        None => (core_pre, None),
    };
    if let Some(bad) = core.chars().find(|&c| {
        !(c.is_ascii_digit() || c == '.' || (allow_wild && matches!(c, 'x' | 'X' | '*')))
    }) {
        return Err(VersionError::UnexpectedCharacter {
            input: input.to_owned(),
            found: bad,
        });
    }
    let pieces: Vec<&str> = core.split('.').collect();
    if pieces.len() > 3 {
        return Err(VersionError::TooManyParts {
            input: input.to_owned(),
        });
    }
    let mut nums = [None; 3];
    let mut wild_from = pieces.len();
    for (i, piece) in pieces.iter().enumerate() {
        if allow_wild && matches!(*piece, "x" | "X" | "*") {
            wild_from = wild_from.min(i);
            continue;
        }
        nums[i] = Some(parse_number(input, piece, PART_NAMES[i])?);
    }
    let pre = match pre {
        Some(p) => parse_pre(input, p)?,
        None => Vec::new(),
    };
    let build = match build {
        Some(b) => parse_idents(input, b, "build")?,
        None => Vec::new(),
    };
    Ok(Parts {
        nums,
        wild_from,
        pre,
        build,
    })
}

/// A comparison operator of a comparator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    Tilde,
    Caret,
}

/// Which parts of a comparator version are wildcards (or omitted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wild {
    /// `1.2.3`: no wildcard.
    None,
    /// `1.2`, `1.2.x`: the patch is free.
    Patch,
    /// `1`, `1.x`: minor and patch are free.
    Minor,
    /// `*`, `x`: everything is free.
    All,
}

#[derive(Debug, Clone)]
struct Comparator {
    op: Op,
    version: Version,
    wild: Wild,
}

/// Comparator operators, longest first so that prefixes match correctly.
const OPS: [(&str, Op); 11] = [
    ("!=", Op::Ne),
    (">=", Op::Ge),
    ("=>", Op::Ge),
    ("<=", Op::Le),
    ("=<", Op::Le),
    ("~>", Op::Tilde),
    ("=", Op::Eq),
    (">", Op::Gt),
    ("<", Op::Lt),
    ("~", Op::Tilde),
    ("^", Op::Caret),
];

impl Comparator {
    fn parse(input: &str, text: &str) -> Result<Self, ConstraintError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(ConstraintError::Empty {
                input: input.to_owned(),
                what: "comparator",
            });
        }
        let (op, rest) = OPS
            .iter()
            .find_map(|(sym, op)| text.strip_prefix(sym).map(|rest| (*op, rest)))
            .unwrap_or((Op::Eq, text));
        let vtext = rest.trim_start();
        let parts = parse_parts(vtext, true).map_err(|source| ConstraintError::Version {
            input: input.to_owned(),
            comparator: text.to_owned(),
            source,
        })?;
        if parts.nums[parts.wild_from.min(3)..]
            .iter()
            .any(Option::is_some)
        {
            return Err(ConstraintError::NumberAfterWildcard {
                input: input.to_owned(),
                comparator: text.to_owned(),
            });
        }
        let wild = match parts.wild_from {
            0 => Wild::All,
            1 => Wild::Minor,
            2 => Wild::Patch,
            _ => Wild::None,
        };
        Ok(Comparator {
            op,
            version: Version {
                major: parts.nums[0].unwrap_or(0),
                minor: parts.nums[1].unwrap_or(0),
                patch: parts.nums[2].unwrap_or(0),
                pre: parts.pre,
                build: parts.build,
            },
            wild,
        })
    }

    /// Whether `v` satisfies this comparator, the pre-release rule already applied by the group.
    fn matches(&self, v: &Version) -> bool {
        let c = &self.version;
        let same_major = v.major == c.major;
        let same_minor = same_major && v.minor == c.minor;
        match self.op {
            Op::Eq => match self.wild {
                Wild::None => v == c,
                Wild::All => true,
                Wild::Minor => v >= c && same_major,
                Wild::Patch => v >= c && same_minor,
            },
            Op::Ne => match self.wild {
                Wild::None => v != c,
                Wild::All => false,
                Wild::Minor => !same_major,
                Wild::Patch => !same_minor,
            },
            Op::Gt => match self.wild {
                Wild::None | Wild::All => v > c,
                Wild::Minor => v.major > c.major,
                Wild::Patch => v.major > c.major || (same_major && v.minor > c.minor),
            },
            Op::Lt => v < c,
            Op::Ge => v >= c,
            Op::Le => match self.wild {
                Wild::None => v <= c,
                Wild::All => true,
                Wild::Minor => v.major <= c.major,
                Wild::Patch => v.major < c.major || (same_major && v.minor <= c.minor),
            },
            Op::Tilde => match self.wild {
                Wild::All => true,
                Wild::Minor => v >= c && same_major,
                Wild::None | Wild::Patch => v >= c && same_minor,
            },
            Op::Caret => {
                if self.wild == Wild::All {
                    return true;
                }
                if v < c {
                    return false;
                }
                if c.major > 0 || self.wild == Wild::Minor {
                    same_major
                } else if c.minor > 0 || self.wild == Wild::Patch {
                    same_minor
                } else {
                    same_minor && v.patch == c.patch
                }
            }
        }
    }
}

/// A parsed constraint: an OR of AND-groups of comparators.
#[derive(Debug, Clone)]
pub struct Constraint {
    text: String,
    groups: Vec<Vec<Comparator>>,
}

impl Constraint {
    /// Parses a constraint with the grammar of the module docs.
    pub fn parse(input: &str) -> Result<Self, ConstraintError> {
        if input.trim().is_empty() {
            return Err(ConstraintError::Empty {
                input: input.to_owned(),
                what: "constraint",
            });
        }
        let mut groups = Vec::new();
        for group in input.split("||") {
            groups.push(parse_group(input, group)?);
        }
        Ok(Constraint {
            text: input.to_owned(),
            groups,
        })
    }

    /// The constraint text as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `v` satisfies the constraint (any group satisfied; within a group, every
    /// comparator, with the pre-release exclusion rule of the module docs).
    pub fn matches(&self, v: &Version) -> bool {
        self.groups.iter().any(|group| {
            if v.is_prerelease() && !group.iter().any(|c| c.version.is_prerelease()) {
                return false;
            }
            group.iter().all(|c| c.matches(v))
        })
    }
}

impl FromStr for Constraint {
    type Err = ConstraintError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Constraint::parse(s)
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn parse_group(input: &str, group: &str) -> Result<Vec<Comparator>, ConstraintError> {
    let trimmed = group.trim();
    if trimmed.is_empty() {
        return Err(ConstraintError::Empty {
            input: input.to_owned(),
            what: "group",
        });
    }
    // Tokenise on commas and whitespace, then re-attach operators written apart from their
    // versions (`>= 1.2`) and recognise hyphen ranges (`a - b`).
    let mut tokens: Vec<&str> = Vec::new();
    for chunk in trimmed.split(',') {
        let words: Vec<&str> = chunk.split_whitespace().collect();
        if words.is_empty() {
            return Err(ConstraintError::Empty {
                input: input.to_owned(),
                what: "comparator",
            });
        }
        tokens.extend(words);
        tokens.push(",");
    }
    tokens.pop();
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let tok = tokens[i];
        if tok == "," {
            i += 1;
            continue;
        }
        if tok == "-" {
            return Err(ConstraintError::BadRange {
                input: input.to_owned(),
                range: trimmed.to_owned(),
            });
        }
        // Hyphen range: version "-" version.
        if tokens.get(i + 1) == Some(&"-") {
            let (Some(hi), true) = (tokens.get(i + 2), is_bare_version(tok)) else {
                return Err(ConstraintError::BadRange {
                    input: input.to_owned(),
                    range: trimmed.to_owned(),
                });
            };
            if !is_bare_version(hi) {
                return Err(ConstraintError::BadRange {
                    input: input.to_owned(),
                    range: trimmed.to_owned(),
                });
            }
            out.push(Comparator::parse(input, &format!(">={tok}"))?);
            out.push(Comparator::parse(input, &format!("<={hi}"))?);
            i += 3;
            continue;
        }
        // An operator token on its own binds to the next token.
        if tok.chars().all(|c| "=!<>~^".contains(c)) {
            match tokens.get(i + 1) {
                Some(next) if *next != "," && *next != "-" => {
                    out.push(Comparator::parse(input, &format!("{tok}{next}"))?);
                    i += 2;
                    continue;
                }
                _ => {
                    return Err(ConstraintError::Empty {
                        input: input.to_owned(),
                        what: "comparator",
                    });
                }
            }
        }
        out.push(Comparator::parse(input, tok)?);
        i += 1;
    }
    Ok(out)
}

fn is_bare_version(tok: &str) -> bool {
    tok.chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || matches!(c, 'v' | 'x' | 'X' | '*'))
}

/// Selects the highest tag that parses as a version (and satisfies `constraint`, if given) and
/// returns its original spelling. Equal versions: the spelling without a `v` prefix wins, then
/// the lexicographically smaller tag.
pub fn select_highest_tag<'a, I>(
    tags: I,
    constraint: Option<&Constraint>,
) -> Result<&'a str, SelectError>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut any_semver = false;
    let mut best: Option<(Version, &'a str)> = None;
    for tag in tags {
        let Ok(version) = Version::parse(tag) else {
            continue;
        };
        any_semver = true;
        if constraint.is_some_and(|c| !c.matches(&version)) {
            continue;
        }
        let better = match &best {
            None => true,
            Some((bv, bt)) => match version.cmp(bv) {
                Ordering::Greater => true,
                Ordering::Less => false,
                Ordering::Equal => tie_key(tag) < tie_key(bt),
            },
        };
        if better {
            best = Some((version, tag));
        }
    }
    match (best, constraint) {
        (Some((_, tag)), _) => Ok(tag),
        (None, Some(c)) if any_semver => Err(SelectError::NoMatchingVersion {
            constraint: c.as_str().to_owned(),
        }),
        (None, _) => Err(SelectError::NoSemverTags),
    }
}

/// Tie-break key (docs/design/contract.md#references-and-versions): tags without `v` first, then lexicographic.
fn tie_key(tag: &str) -> (bool, &str) {
    (tag.starts_with('v'), tag)
}
