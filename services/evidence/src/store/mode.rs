//! The referrer modes (docs/design/evidence-store.md#modes).

/// How a subject's referrers are listed and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReferrersMode {
    /// The registry's Referrers API (`GET /v2/<repo>/referrers/<digest>`).
    Api,
    /// The OCI 1.1 referrers tag schema: an image index under tag `sha256-<hex>` of the
    /// subject, maintained by the store (the registry answered 404 on the Referrers API).
    TagSchema,
}

impl ReferrersMode {
    /// Both modes.
    pub const ALL: [Self; 2] = [Self::Api, Self::TagSchema];

    /// `api` or `tag-schema` (metric label and `/ready` detail).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::TagSchema => "tag-schema",
        }
    }
}
