//! OCI reference parsing, validation and normalisation.

use pacto_contract::reference::{
    DEFAULT_REGISTRY, Reference, ReferenceError, is_valid_tag, normalize_registry_host,
    validate_digest,
};
use proptest::prelude::*;

/// (input, registry, repository, tag, digest).
type Case<'a> = (&'a str, &'a str, &'a str, Option<&'a str>, Option<&'a str>);
/// (input, predicate on the error).
type ErrCase = (&'static str, fn(&ReferenceError) -> bool);

const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn ok(input: &str) -> Reference {
    Reference::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"))
}

#[test]
fn parses_the_three_forms() {
    // (input, registry, repository, tag, digest)
    let digest_ref = format!("oci://ghcr.io/org/x@{D}");
    let both = format!("ghcr.io/org/x:1.0@{D}");
    let cases: Vec<Case<'_>> = vec![
        ("oci://ghcr.io/org/x", "ghcr.io", "org/x", None, None),
        (
            "oci://ghcr.io/org/x:1.2.3",
            "ghcr.io",
            "org/x",
            Some("1.2.3"),
            None,
        ),
        (&digest_ref, "ghcr.io", "org/x", None, Some(D)),
        (&both, "ghcr.io", "org/x", Some("1.0"), Some(D)),
        (
            "localhost:5000/a/b/c:v1",
            "localhost:5000",
            "a/b/c",
            Some("v1"),
            None,
        ),
        ("127.0.0.1:5000/svc", "127.0.0.1:5000", "svc", None, None),
        ("localhost/svc:1", "localhost", "svc", Some("1"), None),
        ("[::1]:5000/svc:1", "[::1]:5000", "svc", Some("1"), None),
        (
            "registry.example.com/team/my_svc-pacto",
            "registry.example.com",
            "team/my_svc-pacto",
            None,
            None,
        ),
        (
            "reg.io/a__b/c.d/e---f",
            "reg.io",
            "a__b/c.d/e---f",
            None,
            None,
        ),
    ];
    for (input, registry, repository, tag, digest) in cases {
        let r = ok(input);
        assert_eq!(r.registry(), registry, "{input}");
        assert_eq!(r.repository(), repository, "{input}");
        assert_eq!(r.tag(), tag, "{input}");
        assert_eq!(r.digest(), digest, "{input}");
        assert_eq!(r.has_explicit_version(), tag.is_some() || digest.is_some());
    }
}

#[test]
fn docker_hub_normalisation() {
    let r = ok("nginx:1.25");
    assert_eq!(
        (r.registry(), r.repository()),
        (DEFAULT_REGISTRY, "library/nginx")
    );
    let r = ok("oci://docker.io/nginx");
    assert_eq!(
        (r.registry(), r.repository()),
        (DEFAULT_REGISTRY, "library/nginx")
    );
    let r = ok("org/app:2");
    assert_eq!(
        (r.registry(), r.repository()),
        (DEFAULT_REGISTRY, "org/app")
    );
    assert_eq!(ok("docker.io/org/app"), ok("index.docker.io/org/app"));
    assert_eq!(
        normalize_registry_host("https://index.docker.io/v1/"),
        DEFAULT_REGISTRY
    );
    assert_eq!(normalize_registry_host("docker.io"), DEFAULT_REGISTRY);
    assert_eq!(normalize_registry_host("oci://ghcr.io/org/x:1"), "ghcr.io");
    assert_eq!(
        normalize_registry_host("http://127.0.0.1:5000"),
        "127.0.0.1:5000"
    );
}

#[test]
fn display_and_transformations() {
    let r = ok("oci://ghcr.io/org/x:1.2.3");
    assert_eq!(r.to_string(), "ghcr.io/org/x:1.2.3");
    assert_eq!(r.to_oci_string(), "oci://ghcr.io/org/x:1.2.3");
    assert_eq!(r.repository_url(), "ghcr.io/org/x");
    let pinned = r.with_digest(D).expect("valid digest");
    assert_eq!(
        pinned.to_string(),
        format!("ghcr.io/org/x@{D}"),
        "digest pinning drops the tag"
    );
    assert_eq!(r.without_version().to_string(), "ghcr.io/org/x");
    assert_eq!(
        pinned.with_tag("v2").expect("valid").to_string(),
        "ghcr.io/org/x:v2"
    );
    assert!(matches!(
        r.with_tag("+bad"),
        Err(ReferenceError::InvalidTag { .. })
    ));
    assert!(matches!(
        r.with_digest("sha256:xyz"),
        Err(ReferenceError::InvalidDigest { .. })
    ));
    // A port is not a tag.
    let port = ok("oci://localhost:5000/x");
    assert_eq!(port.tag(), None);
    assert_eq!(port.to_string(), "localhost:5000/x");
}

#[test]
fn scheme_rules() {
    assert!(matches!(
        Reference::parse_oci("ghcr.io/org/x:1"),
        Err(ReferenceError::MissingScheme { .. })
    ));
    assert!(matches!(
        Reference::parse_oci("https://ghcr.io/org/x"),
        Err(ReferenceError::UnsupportedScheme { scheme, .. }) if scheme == "https"
    ));
    assert!(matches!(
        Reference::parse("file://x/y"),
        Err(ReferenceError::UnsupportedScheme { .. })
    ));
    assert_eq!(ok("oci://ghcr.io/o/x:1"), ok("ghcr.io/o/x:1"));
    assert_eq!(
        Reference::parse_url_encoded("oci%3A%2F%2Fghcr.io%2Fo%2Fx%3A1").expect("decodes"),
        ok("ghcr.io/o/x:1")
    );
    assert!(matches!(
        Reference::parse_url_encoded("ghcr.io/o/x%2"),
        Err(ReferenceError::BadPercentEncoding { .. })
    ));
}

#[test]
fn errors_name_the_offending_part() {
    let cases: &[ErrCase] = &[
        ("oci://", |e| matches!(e, ReferenceError::Empty)),
        ("", |e| matches!(e, ReferenceError::Empty)),
        ("ghcr.io/", |e| {
            matches!(e, ReferenceError::MissingRepository { .. })
        }),
        (
            "ghcr.io/Org/x",
            |e| matches!(e, ReferenceError::InvalidRepository { component, .. } if component == "Org"),
        ),
        ("ghcr.io/org//x", |e| {
            matches!(e, ReferenceError::InvalidRepository { .. })
        }),
        ("ghcr.io/org/-x", |e| {
            matches!(e, ReferenceError::InvalidRepository { .. })
        }),
        ("ghcr.io/org/x.", |e| {
            matches!(e, ReferenceError::InvalidRepository { .. })
        }),
        ("ghcr.io/org/a___b", |e| {
            matches!(e, ReferenceError::InvalidRepository { .. })
        }),
        ("ghcr.io/org/a._b", |e| {
            matches!(e, ReferenceError::InvalidRepository { .. })
        }),
        (
            "ghcr.io/org/x:",
            |e| matches!(e, ReferenceError::InvalidTag { tag, .. } if tag.is_empty()),
        ),
        ("ghcr.io/org/x:-1", |e| {
            matches!(e, ReferenceError::InvalidTag { .. })
        }),
        ("ghcr.io/org/x:1.0.0+build", |e| {
            matches!(e, ReferenceError::InvalidTag { .. })
        }),
        (
            "ghcr.io/org/x@sha256:abc",
            |e| matches!(e, ReferenceError::InvalidDigest { reason, .. } if reason.contains("length")),
        ),
        (
            "ghcr.io/org/x@md5:0123",
            |e| matches!(e, ReferenceError::InvalidDigest { reason, .. } if reason.contains("algorithm")),
        ),
        ("ghcr.io/org/x@sha256", |e| {
            matches!(e, ReferenceError::InvalidDigest { .. })
        }),
        (
            "host:99999/x",
            |e| matches!(e, ReferenceError::InvalidRegistry { reason, .. } if reason.contains("port")),
        ),
        ("host:/x", |e| {
            matches!(e, ReferenceError::InvalidRegistry { .. })
        }),
        ("bad_host.io/x", |e| {
            matches!(e, ReferenceError::InvalidRegistry { .. })
        }),
        ("[::1/x", |e| {
            matches!(e, ReferenceError::InvalidRegistry { .. })
        }),
    ];
    for (input, check) in cases {
        let err = Reference::parse(input).expect_err(input);
        assert!(check(&err), "{input}: {err:?}");
        assert!(!err.to_string().is_empty());
    }
    let upper = format!("ghcr.io/x@sha256:{}", "A".repeat(64));
    assert!(matches!(
        Reference::parse(&upper),
        Err(ReferenceError::InvalidDigest { reason, .. }) if reason.contains("lowercase")
    ));
}

#[test]
fn tags_and_digests() {
    assert!(is_valid_tag("latest"));
    assert!(is_valid_tag("_x"));
    assert!(is_valid_tag("v1.2.3-rc.1"));
    assert!(is_valid_tag(&"a".repeat(128)));
    assert!(!is_valid_tag(&"a".repeat(129)));
    assert!(!is_valid_tag(".x"));
    assert!(!is_valid_tag("a/b"));
    assert!(validate_digest(D).is_ok());
    assert!(validate_digest(&format!("sha512:{}", "f".repeat(128))).is_ok());
    assert!(validate_digest("sha256:").is_err());
}

fn component() -> impl Strategy<Value = String> {
    "[a-z0-9]{1,6}([._-][a-z0-9]{1,6}){0,2}"
}

proptest! {
    #[test]
    fn display_round_trips(
        host in "[a-z]{1,8}\\.(io|com)(:[1-9][0-9]{0,3})?",
        path in proptest::collection::vec(component(), 1..4),
        tag in proptest::option::of("[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}"),
        digest in proptest::option::of("[0-9a-f]{64}"),
    ) {
        let mut s = format!("oci://{host}/{}", path.join("/"));
        if let Some(t) = &tag { s.push(':'); s.push_str(t); }
        if let Some(d) = &digest { s.push_str("@sha256:"); s.push_str(d); }
        let r = Reference::parse_oci(&s).expect("generated reference is valid");
        prop_assert_eq!(r.to_oci_string(), s.clone());
        prop_assert_eq!(Reference::parse(&r.to_string()).expect("display parses"), r);
    }

    #[test]
    fn parsing_never_panics(s in "\\PC{0,40}") {
        let _ = Reference::parse(&s);
        let _ = Reference::parse_oci(&s);
        let _ = Reference::parse_url_encoded(&s);
    }
}
