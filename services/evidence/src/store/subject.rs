//! Evidence subjects (docs/design/evidence-store.md#subjects): the contract manifests evidence
//! is stored against, `oci://<registry>/<repository>@sha256:<64 lowercase hex>`.

use std::fmt;

use pacto_oci::Repository;

/// One configured subject: a contract manifest pinned by digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Subject {
    registry: String,
    repository: String,
    digest: String,
}

/// Why a subject reference is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubjectError {
    /// It does not start with `oci://`.
    #[error("{value:?}: must start with oci://")]
    Scheme {
        /// The value.
        value: String,
    },
    /// There is no `@sha256:<hex>` digest.
    #[error("{value:?}: must be pinned by digest (…@sha256:<64 lowercase hex>)")]
    MissingDigest {
        /// The value.
        value: String,
    },
    /// The digest is not `sha256:` with 64 lowercase hex characters.
    #[error("{value:?}: digest {digest:?} is not sha256:<64 lowercase hex>")]
    BadDigest {
        /// The value.
        value: String,
        /// The digest part.
        digest: String,
    },
    /// Nothing before the first `/`, or no `/` at all.
    #[error("{value:?}: missing registry or repository (oci://<registry>/<repository>@<digest>)")]
    MissingRepository {
        /// The value.
        value: String,
    },
    /// A repository path component is not `[a-z0-9]` with inner `.`, `_`, `-`.
    #[error(
        "{value:?}: repository component {component:?} must be lowercase letters and digits, \
         with '.', '_' or '-' only between them"
    )]
    BadComponent {
        /// The value.
        value: String,
        /// The component.
        component: String,
    },
}

fn component_ok(c: &str) -> bool {
    let bytes = c.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(&f), Some(&l)) => {
            alnum(f) && alnum(l) && bytes.iter().all(|&b| alnum(b) || b"._-".contains(&b))
        }
        _ => false,
    }
}

impl Subject {
    /// Parses `oci://<registry>/<repository>@sha256:<64 lowercase hex>` (the grammar of
    /// docs/design/evidence-store.md#subjects).
    pub fn parse(value: &str) -> Result<Self, SubjectError> {
        let owned = || value.to_owned();
        let rest = value
            .strip_prefix("oci://")
            .ok_or_else(|| SubjectError::Scheme { value: owned() })?;
        let (path, digest) = rest
            .split_once('@')
            .ok_or_else(|| SubjectError::MissingDigest { value: owned() })?;
        let hex = digest
            .strip_prefix("sha256:")
            .filter(|h| {
                h.len() == 64
                    && h.bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            })
            .ok_or_else(|| SubjectError::BadDigest {
                value: owned(),
                digest: digest.to_owned(),
            })?;
        let (registry, repository) = path
            .split_once('/')
            .filter(|(r, p)| !r.is_empty() && !p.is_empty())
            .ok_or_else(|| SubjectError::MissingRepository { value: owned() })?;
        if let Some(bad) = repository.split('/').find(|c| !component_ok(c)) {
            return Err(SubjectError::BadComponent {
                value: owned(),
                component: bad.to_owned(),
            });
        }
        Ok(Self {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            digest: format!("sha256:{hex}"),
        })
    }

    /// `host[:port]`.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository path.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// `sha256:<hex>`.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// `oci://<registry>/<repository>@<digest>` (upstream's `Ref()`).
    pub fn reference(&self) -> String {
        format!(
            "oci://{}/{}@{}",
            self.registry, self.repository, self.digest
        )
    }

    /// `<registry>/<repository>` cut before the last `/` (the bare registry for a
    /// single-segment repository).
    pub fn domain(&self) -> String {
        let full = format!("{}/{}", self.registry, self.repository);
        match full.rfind('/') {
            Some(at) => full[..at].to_owned(),
            None => full,
        }
    }

    /// The repository as the registry client names it.
    pub fn oci_repository(&self) -> Repository {
        Repository::new(self.registry.clone(), self.repository.clone())
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reference())
    }
}

impl std::str::FromStr for Subject {
    type Err = SubjectError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// The configured subjects: non-empty, deduplicated in configuration order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects(Vec<Subject>);

/// Why a subject list is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubjectsError {
    /// The list is empty.
    #[error("no evidence subject configured (at least one oci://…@sha256:… is required)")]
    NoSubjects,
    /// One entry is malformed (the whole list is refused).
    #[error("subject {index}")]
    Entry {
        /// Its position (0-based) in the configuration.
        index: usize,
        /// Why.
        #[source]
        source: SubjectError,
    },
}

impl Subjects {
    /// Parses every entry; duplicates keep their first position. One bad entry fails the list.
    pub fn parse<S: AsRef<str>>(values: &[S]) -> Result<Self, SubjectsError> {
        let mut out: Vec<Subject> = Vec::new();
        for (index, value) in values.iter().enumerate() {
            let subject = Subject::parse(value.as_ref())
                .map_err(|source| SubjectsError::Entry { index, source })?;
            if !out.contains(&subject) {
                out.push(subject);
            }
        }
        if out.is_empty() {
            return Err(SubjectsError::NoSubjects);
        }
        Ok(Self(out))
    }

    /// The subjects in configuration order.
    pub fn iter(&self) -> std::slice::Iter<'_, Subject> {
        self.0.iter()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true (the list is non-empty by construction).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The subject a ContractRef names exactly (registry, repository and digest), if any.
    pub fn find(&self, contract_ref: &str) -> Option<&Subject> {
        self.0.iter().find(|s| s.reference() == contract_ref)
    }

    /// The subjects as a slice.
    pub fn as_slice(&self) -> &[Subject] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a Subjects {
    type Item = &'a Subject;
    type IntoIter = std::slice::Iter<'a, Subject>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn grammar_and_derived_values() {
        let s = Subject::parse(&format!("oci://reg.example:5000/team/svc@{D}")).unwrap();
        assert_eq!(s.registry(), "reg.example:5000");
        assert_eq!(s.repository(), "team/svc");
        assert_eq!(
            s.reference(),
            format!("oci://reg.example:5000/team/svc@{D}")
        );
        assert_eq!(s.domain(), "reg.example:5000/team");
        let single = Subject::parse(&format!("oci://reg/svc@{D}")).unwrap();
        assert_eq!(single.domain(), "reg");
    }

    #[test]
    fn bad_subjects_name_the_problem() {
        let cases = [
            (format!("reg/svc@{D}"), "must start with oci://"),
            ("oci://reg/svc:1.0".to_owned(), "pinned by digest"),
            ("oci://reg/svc@sha256:ABC".to_owned(), "is not sha256"),
            (
                format!("oci://reg/svc@{}", D.to_uppercase()),
                "is not sha256",
            ),
            (format!("oci://reg@{D}"), "missing registry"),
            (format!("oci:///svc@{D}"), "missing registry"),
            (format!("oci://reg/Svc@{D}"), "component \"Svc\""),
            (format!("oci://reg/a//b@{D}"), "component \"\""),
            (format!("oci://reg/-a@{D}"), "component \"-a\""),
            (format!("oci://reg/a.@{D}"), "component \"a.\""),
            (format!("oci://reg/svc:1@{D}"), "component \"svc:1\""),
            (format!("oci://reg/svc@sha512:{}", &D[7..]), "is not sha256"),
        ];
        for (value, want) in cases {
            let err = Subject::parse(&value).expect_err(&value).to_string();
            assert!(err.contains(want), "{value}: {err}");
        }
        assert!(Subject::parse(&format!("oci://reg/a-b_c.d/e9@{D}")).is_ok());
    }

    #[test]
    fn lists_dedup_in_order_and_fail_on_one_bad_entry() {
        let a = format!("oci://reg/a@{D}");
        let b = format!("oci://reg/b@{D}");
        let list = Subjects::parse(&[b.clone(), a.clone(), b.clone()]).unwrap();
        let refs: Vec<String> = list.iter().map(Subject::reference).collect();
        assert_eq!(refs, [b.clone(), a.clone()]);
        assert_eq!(list.find(&a).map(Subject::repository), Some("a"));
        assert_eq!(
            Subjects::parse::<String>(&[]).unwrap_err(),
            SubjectsError::NoSubjects
        );
        let err = Subjects::parse(&[a, "oci://reg/B@x".to_owned()]).unwrap_err();
        assert!(
            pacto_contract::error_chain(&err).starts_with("subject 1: \"oci://reg/B@x\""),
            "{err}"
        );
    }
}
