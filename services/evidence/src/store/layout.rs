//! The paged referrers tag-schema index (docs/design/evidence-store.md#paged-tag-index): the
//! subject's `sha256-<hex>` index lists other tools' referrers as they were written, our
//! newest records directly (the tail) and our older records through pages, each an image index
//! pushed once by digest listing [`DEFAULT_PAGE_RECORDS`] record descriptors (level 1) or as
//! many pages of the level below. A commit then rewrites an index of fewer than
//! [`DEFAULT_PAGE_RECORDS`] entries per level instead of one entry per record.
//!
//! The index is read and written as JSON values, so that other tools' entries keep every field
//! (annotations included) and the index's own fields other than `manifests` are kept.

use pacto_oci::{ArtifactDescriptor, OCI_INDEX_MEDIA_TYPE};
use serde_json::{Map, Value};

/// The `artifactType` of a page of records (an image index listing record descriptors).
pub const PAGE_ARTIFACT_TYPE: &str = "application/vnd.pacto.evidence.page.v1+json";
/// Entries per page unless configured otherwise (`StoreOptions::page_records`): records in a
/// page of level 1, pages of the level below in the others.
pub const DEFAULT_PAGE_RECORDS: usize = 16;
/// Most levels of pages read below the tag index (a deeper page is invalid): 16 entries a page
/// reach 16^8 records, far beyond the retention.
pub const MAX_PAGE_DEPTH: usize = 8;

/// A page of ours: its descriptor (as listed), the records it lists itself, the pages it lists
/// (read recursively) and every record under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Page {
    pub descriptor: ArtifactDescriptor,
    pub direct: Vec<ArtifactDescriptor>,
    pub children: Vec<Page>,
    pub records: Vec<ArtifactDescriptor>,
}

impl Page {
    /// 1 for a page of records, one more than its pages' otherwise.
    pub fn level(&self) -> usize {
        1 + self.children.iter().map(Page::level).max().unwrap_or(0)
    }

    /// A page listing `entries` (records, or pages of one level) of `subject`, and its bytes.
    pub fn new(subject: &ArtifactDescriptor, records: Vec<ArtifactDescriptor>) -> (Self, Vec<u8>) {
        let (bytes, descriptor) = page(subject, &records);
        (
            Self {
                descriptor,
                records: records.clone(),
                direct: records,
                children: Vec::new(),
            },
            bytes,
        )
    }

    /// A page listing `children` (pages) of `subject`, and its bytes.
    pub fn of_pages(subject: &ArtifactDescriptor, children: Vec<Page>) -> (Self, Vec<u8>) {
        let entries: Vec<ArtifactDescriptor> =
            children.iter().map(|p| p.descriptor.clone()).collect();
        let (bytes, descriptor) = page(subject, &entries);
        let records = children
            .iter()
            .flat_map(|p| p.records.iter().cloned())
            .collect();
        (
            Self {
                descriptor,
                direct: Vec::new(),
                children,
                records,
            },
            bytes,
        )
    }

    /// This page and every page under it.
    pub fn walk<'a>(&'a self, out: &mut Vec<&'a Page>) {
        out.push(self);
        for c in &self.children {
            c.walk(out);
        }
    }
}

/// Whether a listed descriptor claims to be a page.
pub(crate) fn is_page(d: &ArtifactDescriptor) -> bool {
    d.artifact_type.as_deref() == Some(PAGE_ARTIFACT_TYPE)
}

/// A referrers tag index as read: its own fields and each entry with its typed descriptor.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawIndex {
    /// Every field of the index but `manifests`.
    pub fields: Map<String, Value>,
    /// Each listed entry: the typed descriptor and the entry as written.
    pub entries: Vec<(ArtifactDescriptor, Value)>,
}

impl RawIndex {
    /// Parses an index; the reason when it is not a JSON object or an entry is not a
    /// descriptor.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|e| format!("not JSON (line {}, column {})", e.line(), e.column()))?;
        let Value::Object(mut fields) = value else {
            return Err("not a JSON object".to_owned());
        };
        let manifests = match fields.remove("manifests") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list,
            Some(_) => return Err("manifests is not an array".to_owned()),
        };
        let mut entries = Vec::with_capacity(manifests.len());
        for (i, entry) in manifests.into_iter().enumerate() {
            let d: ArtifactDescriptor = serde_json::from_value(entry.clone())
                .map_err(|e| format!("manifests[{i}]: {e}"))?;
            entries.push((d, entry));
        }
        Ok(Self { fields, entries })
    }

    /// The index text listing `entries` (as written) with this index's other fields kept;
    /// `schemaVersion` and `mediaType` are set.
    pub fn bytes_with(&self, entries: Vec<Value>) -> Vec<u8> {
        let mut fields = self.fields.clone();
        fields.insert("schemaVersion".to_owned(), Value::from(2));
        fields.insert("mediaType".to_owned(), Value::from(OCI_INDEX_MEDIA_TYPE));
        fields.insert("manifests".to_owned(), Value::Array(entries));
        serde_json::to_vec(&Value::Object(fields)).unwrap_or_default()
    }
}

/// A descriptor as an index entry.
pub(crate) fn entry(d: &ArtifactDescriptor) -> Value {
    serde_json::to_value(d).unwrap_or(Value::Null)
}

/// A page listing `records` (or pages), attached to `subject`: (bytes, its descriptor in the
/// tag index).
fn page(
    subject: &ArtifactDescriptor,
    records: &[ArtifactDescriptor],
) -> (Vec<u8>, ArtifactDescriptor) {
    let manifests: Vec<Value> = records.iter().map(entry).collect();
    let mut fields = Map::new();
    fields.insert("schemaVersion".to_owned(), Value::from(2));
    fields.insert("mediaType".to_owned(), Value::from(OCI_INDEX_MEDIA_TYPE));
    fields.insert("artifactType".to_owned(), Value::from(PAGE_ARTIFACT_TYPE));
    fields.insert("manifests".to_owned(), Value::Array(manifests));
    let mut s = Map::new();
    s.insert(
        "mediaType".to_owned(),
        Value::from(subject.media_type.clone()),
    );
    s.insert("digest".to_owned(), Value::from(subject.digest.clone()));
    s.insert("size".to_owned(), Value::from(subject.size));
    fields.insert("subject".to_owned(), Value::Object(s));
    let bytes = serde_json::to_vec(&Value::Object(fields)).unwrap_or_default();
    let descriptor = ArtifactDescriptor {
        media_type: OCI_INDEX_MEDIA_TYPE.to_owned(),
        digest: pacto_oci::sha256_digest(&bytes),
        size: bytes.len() as u64,
        artifact_type: Some(PAGE_ARTIFACT_TYPE.to_owned()),
    };
    (bytes, descriptor)
}

/// Reads a page's entries (records and pages); the reason when it is not a page of
/// `subject_digest`.
pub(crate) fn read_page(
    bytes: &[u8],
    subject_digest: &str,
) -> Result<Vec<ArtifactDescriptor>, String> {
    let index = RawIndex::parse(bytes)?;
    if index.fields.get("artifactType").and_then(Value::as_str) != Some(PAGE_ARTIFACT_TYPE) {
        return Err(format!("artifactType is not {PAGE_ARTIFACT_TYPE}"));
    }
    let subject = index
        .fields
        .get("subject")
        .and_then(|s| s.get("digest"))
        .and_then(Value::as_str);
    if subject != Some(subject_digest) {
        return Err(format!(
            "subject.digest is {subject:?}, not the subject {subject_digest}"
        ));
    }
    Ok(index.entries.into_iter().map(|(d, _)| d).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(digest: &str) -> ArtifactDescriptor {
        ArtifactDescriptor {
            media_type: "application/vnd.oci.image.manifest.v1+json".into(),
            digest: digest.into(),
            size: 500,
            artifact_type: Some("x".into()),
        }
    }

    #[test]
    fn an_index_rewrite_keeps_annotations_and_other_fields() {
        let text = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","annotations":{"a":"b"},"manifests":[{"mediaType":"m","digest":"sha256:1","size":3,"annotations":{"org.example":"kept"},"platform":{"os":"linux"}}]}"#;
        let index = RawIndex::parse(text).expect("parse");
        assert_eq!(index.entries.len(), 1);
        assert_eq!(index.entries[0].0.digest, "sha256:1");
        let mut entries: Vec<Value> = index.entries.iter().map(|(_, v)| v.clone()).collect();
        entries.push(entry(&d("sha256:2")));
        let back: Value = serde_json::from_slice(&index.bytes_with(entries)).expect("json");
        assert_eq!(back["annotations"]["a"], "b");
        assert_eq!(back["manifests"][0]["annotations"]["org.example"], "kept");
        assert_eq!(back["manifests"][0]["platform"]["os"], "linux");
        assert_eq!(back["manifests"][1]["digest"], "sha256:2");
        assert!(RawIndex::parse(b"[]").is_err());
        assert!(RawIndex::parse(br#"{"manifests":[1]}"#).is_err());
    }

    #[test]
    fn a_page_reads_back_and_names_its_subject() {
        let subject = d("sha256:s");
        let (p, bytes) = Page::new(&subject, vec![d("sha256:1"), d("sha256:2")]);
        let descriptor = p.descriptor.clone();
        assert!(is_page(&descriptor));
        assert_eq!(p.level(), 1);
        let (top, _) = Page::of_pages(&subject, vec![p]);
        assert_eq!(top.level(), 2);
        assert_eq!(top.records.len(), 2);
        assert_eq!(descriptor.size, bytes.len() as u64);
        let records = read_page(&bytes, "sha256:s").expect("page");
        assert_eq!(records, vec![d("sha256:1"), d("sha256:2")]);
        assert!(read_page(&bytes, "sha256:other").is_err());
        assert!(read_page(br#"{"manifests":[]}"#, "sha256:s").is_err());
    }
}
