//! Lenient semver parsing, Masterminds-style constraints and highest-tag selection.

use pacto_contract::version::{
    Constraint, ConstraintError, PreId, SelectError, Version, VersionError, select_highest_tag,
};
use proptest::prelude::*;

/// (input, predicate on the error).
type ErrCase = (&'static str, fn(&VersionError) -> bool);

fn v(s: &str) -> Version {
    Version::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn lenient_versions_parse() {
    let cases = [
        ("1.2.3", (1, 2, 3)),
        ("v1.2.3", (1, 2, 3)),
        ("1.2", (1, 2, 0)),
        ("v2", (2, 0, 0)),
        ("0", (0, 0, 0)),
        ("0.0.0", (0, 0, 0)),
        ("10.20.30", (10, 20, 30)),
        ("1.0.0-alpha.1", (1, 0, 0)),
        ("1.0.0+build.5", (1, 0, 0)),
        ("1-rc.1", (1, 0, 0)),
        ("1.0.0-x-y-z.--", (1, 0, 0)),
        ("1.0.0+001", (1, 0, 0)),
    ];
    for (input, (ma, mi, pa)) in cases {
        let parsed = v(input);
        assert_eq!(
            (parsed.major, parsed.minor, parsed.patch),
            (ma, mi, pa),
            "{input}"
        );
    }
    assert_eq!(
        v("1.0.0-alpha.1").pre,
        vec![PreId::Alpha("alpha".into()), PreId::Numeric(1)]
    );
    assert_eq!(v("1.0.0+build.5").build, vec!["build", "5"]);
    assert_eq!(v("v1.2").to_string(), "1.2.0");
    assert_eq!(v("1.2.3-rc.1+b.2").to_string(), "1.2.3-rc.1+b.2");
}

#[test]
fn malformed_versions_are_rejected_with_precise_errors() {
    let cases: &[ErrCase] = &[
        ("", |e| matches!(e, VersionError::Empty)),
        ("v", |e| matches!(e, VersionError::Empty)),
        ("01.2.3", |e| {
            matches!(e, VersionError::LeadingZero { part: "major", .. })
        }),
        ("1.02.3", |e| {
            matches!(e, VersionError::LeadingZero { part: "minor", .. })
        }),
        ("1.2.03", |e| {
            matches!(e, VersionError::LeadingZero { part: "patch", .. })
        }),
        ("1.2.3-01", |e| {
            matches!(
                e,
                VersionError::LeadingZero {
                    part: "pre-release identifier",
                    ..
                }
            )
        }),
        ("1.2.3.4", |e| {
            matches!(e, VersionError::TooManyParts { .. })
        }),
        ("1..3", |e| {
            matches!(e, VersionError::NotANumber { part: "minor", .. })
        }),
        ("1.2.", |e| {
            matches!(e, VersionError::NotANumber { part: "patch", .. })
        }),
        ("latest", |e| {
            matches!(e, VersionError::UnexpectedCharacter { .. })
        }),
        ("V1.2.3", |e| {
            matches!(e, VersionError::UnexpectedCharacter { .. })
        }),
        ("1.2.3-", |e| {
            matches!(e, VersionError::InvalidIdentifier { .. })
        }),
        ("1.2.3-a..b", |e| {
            matches!(e, VersionError::InvalidIdentifier { .. })
        }),
        ("1.2.3+", |e| {
            matches!(e, VersionError::InvalidIdentifier { .. })
        }),
        ("1.2.3+a_b", |e| {
            matches!(e, VersionError::InvalidIdentifier { .. })
        }),
        ("1.x", |e| {
            matches!(e, VersionError::UnexpectedCharacter { .. })
        }),
        ("99999999999999999999", |e| {
            matches!(e, VersionError::Overflow { .. })
        }),
        (" 1.2.3", |e| {
            matches!(e, VersionError::UnexpectedCharacter { .. })
        }),
    ];
    for (input, check) in cases {
        let err = Version::parse(input).expect_err(input);
        assert!(check(&err), "{input}: unexpected error {err:?}");
        assert!(!err.to_string().is_empty());
    }
}

#[test]
fn precedence_follows_semver() {
    // The SemVer 2.0 precedence example chain.
    let chain = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.1.0",
        "2.0.0",
    ];
    for pair in chain.windows(2) {
        assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
    }
    assert_eq!(v("1.0.0+a"), v("1.0.0+b"));
    assert_eq!(v("v1.2"), v("1.2.0"));
}

fn check(constraint: &str, yes: &[&str], no: &[&str]) {
    let c = Constraint::parse(constraint).unwrap_or_else(|e| panic!("{constraint}: {e}"));
    for s in yes {
        assert!(c.matches(&v(s)), "{constraint} should match {s}");
    }
    for s in no {
        assert!(!c.matches(&v(s)), "{constraint} should not match {s}");
    }
}

#[test]
fn exact_and_wildcards() {
    check(
        "1.2.3",
        &["1.2.3", "v1.2.3", "1.2.3+b"],
        &["1.2.4", "1.2.3-rc.1"],
    );
    check("=1.2.3", &["1.2.3"], &["1.2.2"]);
    check("1.2", &["1.2.0", "1.2.9"], &["1.3.0", "1.1.9"]);
    check("1.2.x", &["1.2.0", "1.2.99"], &["1.3.0"]);
    check("1.X", &["1.0.0", "1.9.9"], &["2.0.0", "0.9.0"]);
    check("1.*", &["1.5.0"], &["2.0.0"]);
    check("1", &["1.0.0", "1.99.0"], &["2.0.0"]);
    check("*", &["0.0.0", "9.9.9"], &["1.0.0-rc.1"]);
    check("x", &["3.0.0"], &[]);
}

#[test]
fn comparison_operators() {
    check("!=1.2.3", &["1.2.4", "1.2.2"], &["1.2.3"]);
    check("!=1.2", &["1.3.0", "2.2.0"], &["1.2.5"]);
    check(">1.2.3", &["1.2.4", "2.0.0"], &["1.2.3", "1.0.0"]);
    check(">1.2", &["1.3.0", "2.0.0"], &["1.2.9"]);
    check(">1", &["2.0.0"], &["1.9.9"]);
    check("<1.2.3", &["1.2.2", "0.1.0"], &["1.2.3"]);
    check("<1.2", &["1.1.9"], &["1.2.0"]);
    check(">=1.2.3", &["1.2.3", "1.3.0"], &["1.2.2"]);
    check("=>1.2.3", &["1.2.3"], &["1.2.2"]);
    check("<=1.2.3", &["1.2.3", "1.0.0"], &["1.2.4"]);
    check("=<1.2.3", &["1.2.3"], &["1.2.4"]);
    check("<=1.2", &["1.2.9", "0.1.0"], &["1.3.0"]);
    check("<=1", &["1.9.9"], &["2.0.0"]);
}

#[test]
fn tilde_and_caret() {
    check("~1.2.3", &["1.2.3", "1.2.9"], &["1.3.0", "1.2.2"]);
    check("~>1.2.3", &["1.2.3", "1.2.9"], &["1.3.0"]);
    check("~1.2", &["1.2.0", "1.2.9"], &["1.3.0"]);
    check("~1", &["1.0.0", "1.9.0"], &["2.0.0"]);
    check("~1.x", &["1.9.0"], &["2.0.0"]);
    check("~*", &["0.1.0", "5.0.0"], &[]);
    check("^1.2.3", &["1.2.3", "1.9.9"], &["2.0.0", "1.2.2"]);
    check("^1.2", &["1.2.0", "1.9.0"], &["2.0.0", "1.1.0"]);
    check("^1", &["1.0.0", "1.9.0"], &["2.0.0"]);
    check("^0.2.3", &["0.2.3", "0.2.9"], &["0.3.0", "0.2.2"]);
    check("^0.2", &["0.2.0", "0.2.9"], &["0.3.0"]);
    check("^0.0.3", &["0.0.3"], &["0.0.4", "0.0.2"]);
    check("^0.0", &["0.0.0", "0.0.9"], &["0.1.0"]);
    check("^0", &["0.0.0", "0.9.9"], &["1.0.0"]);
    check("^*", &["0.0.1", "7.0.0"], &[]);
    check("^ 1.2.3", &["1.5.0"], &["2.0.0"]);
}

#[test]
fn and_or_and_hyphen_ranges() {
    check(">=1.2, <2.0.0", &["1.2.0", "1.9.9"], &["2.0.0", "1.1.0"]);
    check(">= 1.2 , < 2", &["1.5.0"], &["2.0.0"]);
    check(">=1.2 <2", &["1.5.0"], &["2.1.0"]);
    check("^1.0 || ^3.0", &["1.5.0", "3.1.0"], &["2.0.0", "4.0.0"]);
    check(
        "<1.0.0 || >=2.0.0, <3",
        &["0.5.0", "2.5.0"],
        &["1.5.0", "3.0.0"],
    );
    check("1.2 - 1.4.5", &["1.2.0", "1.4.5"], &["1.4.6", "1.1.9"]);
    check("1.2.3 - 2", &["1.2.3", "2.9.9"], &["3.0.0"]);
    check("1 - 2.3", &["1.0.0", "2.3.9"], &["2.4.0"]);
}

#[test]
fn prerelease_exclusion_rule() {
    // A constraint without a pre-release excludes pre-release versions...
    check("^2.0.0", &["2.3.0"], &["2.4.0-beta.1", "3.0.0-rc.1"]);
    check(">=1.0.0", &["1.0.0"], &["1.2.0-rc.1"]);
    // ...one with a pre-release admits them (in its group).
    check(">=1.0.0-0", &["1.2.0-rc.1", "1.0.0"], &[]);
    check(
        "^2.4.0-beta.1",
        &["2.4.0-beta.1", "2.4.0-beta.2", "2.4.0"],
        &["2.4.0-alpha"],
    );
    check(
        ">=1.0.0-0, <2.0.0 || ^3.0.0",
        &["1.5.0-rc.1", "3.1.0"],
        &["3.1.0-rc.1"],
    );
}

#[test]
fn malformed_constraints_are_rejected() {
    let bad = [
        "", "  ", "||", "^1.0 ||", ">=", "~>", "1.x.3", "01.2", "1.2.3.4", "latest", "^1.0,,<2",
        "1.2 -", "- 1.2", ">=1.0 -", "!1.0", "1.2 - ^2",
    ];
    for input in bad {
        let err = Constraint::parse(input).expect_err(input);
        assert!(!err.to_string().is_empty(), "{input}");
    }
    assert!(matches!(
        Constraint::parse("1.x.3"),
        Err(ConstraintError::NumberAfterWildcard { .. })
    ));
    assert!(matches!(
        Constraint::parse(""),
        Err(ConstraintError::Empty {
            what: "constraint",
            ..
        })
    ));
    assert!(matches!(
        Constraint::parse("^01"),
        Err(ConstraintError::Version {
            source: VersionError::LeadingZero { .. },
            ..
        })
    ));
}

#[test]
fn highest_tag_spec_example() {
    let tags = ["1.0.0", "2.0.0", "2.3.0", "2.4.0-beta.1", "3.0.0", "latest"];
    let caret = Constraint::parse("^2.0.0").expect("valid");
    assert_eq!(select_highest_tag(tags, Some(&caret)), Ok("2.3.0"));
    assert_eq!(select_highest_tag(tags, None), Ok("3.0.0"));
}

#[test]
fn highest_tag_prereleases_compete_without_constraint() {
    assert_eq!(
        select_highest_tag(["1.9.9", "2.0.0-rc.1"], None),
        Ok("2.0.0-rc.1")
    );
}

#[test]
fn highest_tag_returns_original_spelling_and_breaks_ties() {
    assert_eq!(select_highest_tag(["v2.3.0", "2.2.0"], None), Ok("v2.3.0"));
    assert_eq!(select_highest_tag(["v1.2.3", "1.2.3"], None), Ok("1.2.3"));
    assert_eq!(select_highest_tag(["1.2.3", "v1.2.3"], None), Ok("1.2.3"));
    assert_eq!(select_highest_tag(["v1.2", "v1.2.0"], None), Ok("v1.2"));
    assert_eq!(
        select_highest_tag(["1.2.3+b", "1.2.3+a"], None),
        Ok("1.2.3+a")
    );
}

#[test]
fn highest_tag_errors() {
    assert_eq!(
        select_highest_tag(["latest", "main"], None),
        Err(SelectError::NoSemverTags)
    );
    assert_eq!(
        select_highest_tag(std::iter::empty::<&str>(), None),
        Err(SelectError::NoSemverTags)
    );
    let c = Constraint::parse("^5").expect("valid");
    assert_eq!(
        select_highest_tag(["1.0.0", "latest"], Some(&c)),
        Err(SelectError::NoMatchingVersion {
            constraint: "^5".into()
        })
    );
}

fn arb_version() -> impl Strategy<Value = Version> {
    (
        0u64..20,
        0u64..20,
        0u64..20,
        proptest::option::of(prop_oneof![
            Just("alpha"),
            Just("rc.1"),
            Just("0"),
            Just("beta.2")
        ]),
    )
        .prop_map(|(a, b, c, pre)| {
            let s = match pre {
                Some(p) => format!("{a}.{b}.{c}-{p}"),
                None => format!("{a}.{b}.{c}"),
            };
            Version::parse(&s).expect("generated version is valid")
        })
}

proptest! {
    #[test]
    fn display_round_trips(ver in arb_version()) {
        let again = Version::parse(&ver.to_string()).expect("display output parses");
        prop_assert_eq!(&again, &ver);
        prop_assert_eq!(again.to_string(), ver.to_string());
    }

    #[test]
    fn v_prefix_is_transparent(ver in arb_version()) {
        prop_assert_eq!(Version::parse(&format!("v{ver}")).expect("parses"), ver);
    }

    #[test]
    fn caret_matches_its_expansion(c in arb_version(), x in arb_version()) {
        prop_assume!(!c.is_prerelease() && !x.is_prerelease());
        let caret = Constraint::parse(&format!("^{c}")).expect("valid");
        let upper = if c.major > 0 {
            format!("<{}.0.0", c.major + 1)
        } else if c.minor > 0 {
            format!("<0.{}.0", c.minor + 1)
        } else {
            format!("<0.0.{}", c.patch + 1)
        };
        let expanded = Constraint::parse(&format!(">={c}, {upper}")).expect("valid");
        prop_assert_eq!(caret.matches(&x), expanded.matches(&x));
    }

    #[test]
    fn tilde_matches_its_expansion(c in arb_version(), x in arb_version()) {
        prop_assume!(!c.is_prerelease() && !x.is_prerelease());
        let tilde = Constraint::parse(&format!("~{c}")).expect("valid");
        let expanded =
            Constraint::parse(&format!(">={c} <{}.{}.0", c.major, c.minor + 1)).expect("valid");
        prop_assert_eq!(tilde.matches(&x), expanded.matches(&x));
    }

    #[test]
    fn highest_tag_is_the_maximum(vs in proptest::collection::vec(arb_version(), 1..20)) {
        let tags: Vec<String> = vs.iter().map(ToString::to_string).collect();
        let best = select_highest_tag(tags.iter().map(String::as_str), None).expect("non-empty");
        let best = Version::parse(best).expect("a tag");
        prop_assert!(vs.iter().all(|x| *x <= best));
    }

    #[test]
    fn parsing_never_panics(s in "\\PC{0,24}") {
        let _ = Version::parse(&s);
        let _ = Constraint::parse(&s);
    }
}
