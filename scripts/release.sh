#!/usr/bin/env bash
# Releases one component of release/components to an OCI registry: exactly what
# .github/workflows/release.yml runs on a tag `<component>-v<version>` (docs/upgrade.md, "Releases").
#
#   scripts/release.sh COMPONENT VERSION --registry HOST[:PORT] [--plain-http] [--profile release|debug]
#                      [--out DIR] [--no-push | --from DIR] [--sign [--sign-key KEY]]
#
#   COMPONENT      a name in release/components (observer, crds, cli, ...)
#   VERSION        must be the version the component's files carry (crate `version`, chart
#                  `version`/`appVersion`); a tag that disagrees with the files fails here
#   --registry     where images and charts go: images as HOST/PREFIX/<component>:VERSION, charts as
#                  oci://HOST/PREFIX/charts/<chart>:VERSION (PREFIX: $PACTO_RELEASE_PREFIX, default
#                  trianalab/pacto-operator-rs, so --registry ghcr.io gives the names the charts default to)
#   --plain-http   the registry speaks HTTP (a local rehearsal registry)
#   --profile      cargo profile of the binaries (default release; the rehearsal in scripts/test.sh uses
#                  debug to reuse the test build). Release images get binaries without debug sections.
#   --out          the artifacts' directory (default dist/<component>-<version>, emptied first)
#   --no-push      build everything, push nothing; a service's image is saved in the artifacts as
#                  <component>-<version>.oci.tar (an OCI archive) for a later --from
#   --from DIR     build nothing: push the artifacts an earlier --no-push left in DIR (the image from
#                  its OCI archive, byte for byte, with skopeo; the packaged chart), then sign them if
#                  asked; DIR is also the output directory. The release workflow builds in one job
#                  without registry credentials and pushes with --from in another.
#   --sign         after pushing, sign every image and chart by digest with cosign and attach to each
#                  an in-toto attestation of its provenance (an SLSA v1 predicate: commit, component,
#                  version, workflow run), and to each image its SBOM (CycloneDX); sign SHA256SUMS too
#                  (SHA256SUMS.sigstore.json). Keyless by default: cosign takes the identity of the
#                  GitHub Actions workflow from its OIDC token (the push job's `id-token: write`) and
#                  records the signatures in the public transparency log. Also PACTO_RELEASE_SIGN=1.
#   --sign-key KEY sign with the cosign key pair KEY (COSIGN_PASSWORD from the environment) instead,
#                  without the transparency log: a rehearsal against a local registry (tests)
#
#   scripts/release.sh --version-of COMPONENT    prints the version the component's files carry
#
# What a component gets, by kind:
#   service  the image (scripts/stage-service-image.sh + services/<name>/Containerfile, buildah, linux/amd64),
#            its SBOM (scripts/sbom.sh, CycloneDX JSON), its chart packaged and pushed as an OCI chart
#   chart    the chart packaged and pushed as an OCI chart
#   cli      pacto and kubectl-pacto in pacto-<version>-<target>.tar.gz, and the CLI's SBOM
# and always CHANGELOG.md (the commits touching the component's paths since its previous tag) and
# SHA256SUMS over every file (but the image's OCI archive of --no-push, which is not a release
# asset); after a push, DIGESTS: one line `<pushed reference> <digest>` for each image and chart
# (what a chart's `image.digest` pins, docs/images.md). The binaries carry the commit and its time
# (PACTO_BUILD_COMMIT, SOURCE_DATE_EPOCH: `/version`, `pacto version`), and the image and archives
# are stamped with the commit time, so a rebuild of the same commit gives the same files.
#
# The last lines on stderr list every artifact with its size (an image: its digest and the size of
# its compressed layers and config as pushed). Needs: cargo, buildah, helm (scripts/chart-tools.sh),
# git, curl, python3; with --from skopeo instead of cargo and buildah; with --sign cosign. Registry
# credentials, if any, from `buildah login` / `skopeo login`, `helm registry login` and `cosign login`.
# PACTO_BUILDAH overrides the buildah command (e.g. "sudo buildah" where rootless buildah cannot run).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${PACTO_RELEASE_PREFIX:-trianalab/pacto-operator-rs}"
TARGET_TRIPLE="x86_64-unknown-linux-gnu"

log() { echo "release: $*" >&2; }
die() { printf "release: error: %b\n" "$*" >&2; exit 1; }
usage="usage: scripts/release.sh COMPONENT VERSION --registry HOST[:PORT] [--plain-http] [--profile release|debug] [--out DIR] [--no-push | --from DIR] [--sign [--sign-key KEY]]"

# `scripts/release.sh --version-of COMPONENT`: the version its files carry (what a tag must name).
if [ "${1:-}" = --version-of ]; then
  [ "$#" -eq 2 ] || die "usage: scripts/release.sh --version-of COMPONENT"
  set -- "$2" 0.0.0 --registry none --version-of
fi
[ "$#" -ge 2 ] || die "$usage"
COMPONENT="$1" VERSION="$2"
shift 2
REGISTRY="" PLAIN=0 PROFILE=release OUT="" PUSH=1 VERSION_OF=0 FROM="" SIGN="${PACTO_RELEASE_SIGN:-0}" SIGN_KEY=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --registry) REGISTRY="${2:-}"; shift 2 || die "--registry needs a value" ;;
    --plain-http) PLAIN=1; shift ;;
    --profile) PROFILE="${2:-}"; shift 2 || die "--profile needs a value" ;;
    --out) OUT="${2:-}"; shift 2 || die "--out needs a value" ;;
    --no-push) PUSH=0; shift ;;
    --from) FROM="${2:-}"; shift 2 || die "--from needs a directory" ;;
    --sign) SIGN=1; shift ;;
    --sign-key) SIGN_KEY="${2:-}"; SIGN=1; shift 2 || die "--sign-key needs a key file" ;;
    --version-of) VERSION_OF=1; shift ;;
    *) die "unknown argument '$1' ($usage)" ;;
  esac
done
[ -n "$REGISTRY" ] || die "--registry is required ($usage)"
case "$SIGN" in 0|1) ;; *) die "PACTO_RELEASE_SIGN must be 0 or 1, not '$SIGN'" ;; esac
if [ -n "$FROM" ]; then
  [ "$PUSH" = 1 ] || die "--from pushes what an earlier --no-push built; it cannot be combined with --no-push"
  [ -z "$OUT" ] || die "--from DIR is also the output directory; --out does not apply"
  [ -d "$FROM" ] || die "--from: no directory '$FROM'"
fi
[ "$SIGN" = 0 ] || [ "$PUSH" = 1 ] || die "--sign signs what is pushed; it cannot be combined with --no-push"
[ -z "$SIGN_KEY" ] || [ -f "$SIGN_KEY" ] || die "--sign-key: no key file '$SIGN_KEY'"
case "$PROFILE" in
  release) cargo_profile=(--release); stage_flags=(--strip-debug) ;;
  debug) cargo_profile=(); stage_flags=() ;;
  *) die "--profile must be release or debug, not '$PROFILE'" ;;
esac
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "version '$VERSION' is not semver (MAJOR.MINOR.PATCH[-PRE])"
# A release never ships the committed kernel object in place of one built from source: with this
# set, the node agent's build fails when clang is missing (services/node-agent/build.rs).
[ "${SOCKWATCH_REQUIRE_CLANG:-1}" = 1 ] \
  || die "SOCKWATCH_REQUIRE_CLANG=$SOCKWATCH_REQUIRE_CLANG: a release builds the node agent's kernel program from source, so clang is required"
export SOCKWATCH_REQUIRE_CLANG=1

# ---------------------------------------------------------------- the component
line="$(awk -v n="$COMPONENT" '$1 !~ /^#/ && NF == 5 && $1 == n' "$REPO/release/components")"
[ -n "$line" ] || die "no component '$COMPONENT' in release/components (components: $(awk '$1 !~ /^#/ && NF == 5 { print $1 }' "$REPO/release/components" | paste -sd' '))"
read -r _ KIND CRATE CHART PATHS <<<"$line"
IFS=, read -r -a paths <<<"$PATHS"

crate_version() { # the [package] version of workspace crate $1
  local manifest
  manifest="$(grep -l "^name = \"$1\"\$" "$REPO"/services/*/Cargo.toml | head -1)"
  [ -n "$manifest" ] || die "no crate '$1' under services/"
  sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$manifest" | head -1
}
chart_field() { # field $2 of charts/$1/Chart.yaml
  sed -n "s/^$2:[[:space:]]*\"\{0,1\}\([^\"[:space:]]*\)\"\{0,1\}[[:space:]]*\$/\1/p" "$REPO/charts/$1/Chart.yaml"
}
if [ "$CRATE" != - ]; then
  files_version="$(crate_version "$CRATE")"
  [ -n "$files_version" ] || die "$CRATE has no version of its own in its Cargo.toml"
else
  files_version="$(chart_field "$CHART" version)"
fi
if [ "$VERSION_OF" = 1 ]; then echo "$files_version"; exit 0; fi
[ "$files_version" = "$VERSION" ] \
  || die "$COMPONENT: the files carry version $files_version, not $VERSION (bump the crate and chart first)"
if [ "$CHART" != - ]; then
  for f in version appVersion; do
    [ "$(chart_field "$CHART" "$f")" = "$VERSION" ] || die "charts/$CHART/Chart.yaml: $f is $(chart_field "$CHART" "$f"), not $VERSION"
  done
fi

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' is not installed ($2)"; }
need git "Debian: git"
need curl "Debian: curl"
if [ -z "$FROM" ]; then
  if [ "$KIND" != chart ]; then need cargo "the Rust toolchain"; fi
  read -r -a buildah_cmd <<<"${PACTO_BUILDAH:-buildah}"
  if [ "$KIND" = service ]; then need "${buildah_cmd[-1]}" "scripts/install-deps.sh --node"; fi
elif [ "$KIND" = service ]; then
  need skopeo "Debian: skopeo (scripts/install-deps.sh)"
fi
if [ "$SIGN" = 1 ]; then need cosign "scripts/cosign.sh builds the pinned one; put its directory on PATH"; fi
HELM=""
if [ "$CHART" != - ]; then
  HELM="$(command -v helm || true)"
  [ -n "$HELM" ] || HELM="$("$REPO/scripts/chart-tools.sh")/helm"
fi

COMMIT="$(git -C "$REPO" rev-parse HEAD)"
EPOCH="$(git -C "$REPO" log -1 --format=%ct HEAD)"
export PACTO_BUILD_COMMIT="$COMMIT" SOURCE_DATE_EPOCH="$EPOCH"
if [ -n "$FROM" ]; then
  OUT="$(cd "$FROM" && pwd)"
  rm -f "$OUT/DIGESTS" "$OUT/SHA256SUMS" "$OUT/SHA256SUMS.sigstore.json"
else
  OUT="${OUT:-$REPO/dist/$COMPONENT-$VERSION}"
  rm -rf "$OUT"
  mkdir -p "$OUT"
  OUT="$(cd "$OUT" && pwd)"
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/pacto-release.XXXXXX")"
cleanup() { rm -rf "$WORK" 2>/dev/null || true; }
trap cleanup EXIT
tls=(); helm_tls=(); skopeo_tls=(); curl_scheme=https
if [ "$PLAIN" = 1 ]; then tls=(--tls-verify=false); helm_tls=(--plain-http); skopeo_tls=(--dest-tls-verify=false); curl_scheme=http; fi
summary=()
size_of() { numfmt --to=iec --suffix=B "$(stat -c %s "$1")"; }
artifact() { summary+=("$(printf '%-72s %9s' "$(basename "$1")" "$(size_of "$1")")"); }
started=$SECONDS
log "$COMPONENT $VERSION ($KIND) at ${COMMIT:0:12}, $PROFILE profile, to $REGISTRY/$PREFIX"

# ---------------------------------------------------------------- changelog
if [ -z "$FROM" ]; then
  previous="$(git -C "$REPO" tag --list "$COMPONENT-v*" | sed "s/^$COMPONENT-v//" | grep -vx "$VERSION" \
    | sort -V | tail -1 || true)"
  {
    echo "## $COMPONENT $VERSION ($(date -u -d "@$EPOCH" +%Y-%m-%d))"
    echo
    if [ -n "$previous" ]; then range="$COMPONENT-v$previous..HEAD"; echo "Changes since $previous:"; else range=HEAD; echo "First release. Changes:"; fi
    echo
    git -C "$REPO" log --no-merges --format='- %s (%h)' "$range" -- "${paths[@]}" | head -200
  } >"$OUT/CHANGELOG.md"
fi
# An artifact a --from push needs, or an error naming the directory.
built() { [ -f "$1" ] || die "--from $OUT: no $(basename "$1") (is it the output of a --no-push run of $COMPONENT $VERSION?)"; }
built "$OUT/CHANGELOG.md"
artifact "$OUT/CHANGELOG.md"

# What was pushed, for DIGESTS and for signing: "<reference as pushed> <digest>" and
# "<repository>@<digest> <SBOM file or ->".
digests=() pushed=()

# ---------------------------------------------------------------- binaries, image, SBOM
target_dir="${CARGO_TARGET_DIR:-$REPO/target}"
case "$target_dir" in /*) ;; *) target_dir="$REPO/$target_dir" ;; esac
if [ -z "$FROM" ] && { [ "$KIND" = service ] || [ "$KIND" = cli ]; }; then
  log "cargo build -p $CRATE ($PROFILE)"
  (cd "$REPO" && cargo build --locked "${cargo_profile[@]}" -p "$CRATE") || die "cargo build -p $CRATE failed"
fi

IMAGE=""
if [ "$KIND" = service ]; then
  IMAGE="$REGISTRY/$PREFIX/$COMPONENT:$VERSION"
  sbom="$OUT/$COMPONENT-$VERSION.cdx.json"
  archive="$OUT/$COMPONENT-$VERSION.oci.tar"
  if [ -z "$FROM" ]; then
    "$REPO/scripts/stage-service-image.sh" "${stage_flags[@]}" "$target_dir/$PROFILE/$CRATE" "$WORK/ctx"
    bah() { "${buildah_cmd[@]}" --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs "$@"; }
    bah bud --quiet --format oci --timestamp "$EPOCH" --platform linux/amd64 \
      -f "$REPO/services/$COMPONENT/Containerfile" -t "$IMAGE" "$WORK/ctx" >/dev/null \
      || die "buildah bud failed for $IMAGE"
    "$REPO/scripts/sbom.sh" "$CRATE" "$VERSION" "$WORK/ctx/rootfs" >"$sbom" || die "SBOM of $CRATE failed"
    if [ "$PUSH" = 1 ]; then
      bah push --quiet "${tls[@]}" --digestfile "$WORK/digest" "$IMAGE" "docker://$IMAGE" \
        || die "pushing $IMAGE failed"
    else
      # The image as built, for a later `--from` push (byte for byte: same digest as a push here).
      bah push --quiet "$IMAGE" "oci-archive:$archive:$IMAGE" || die "saving $IMAGE to $archive failed"
    fi
  else
    built "$sbom"
    built "$archive"
    skopeo copy --quiet --preserve-digests "${skopeo_tls[@]}" --digestfile "$WORK/digest" \
      "oci-archive:$archive" "docker://$IMAGE" \
      || die "pushing $IMAGE from $archive failed"
  fi
  artifact "$sbom"
  if [ -f "$archive" ]; then artifact "$archive"; fi
  if [ "$PUSH" = 1 ]; then
    digest="$(cat "$WORK/digest")"
    # The pushed size: config + compressed layers, from the registry's manifest.
    size="$(curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
      "$curl_scheme://$REGISTRY/v2/$PREFIX/$COMPONENT/manifests/$digest" 2>/dev/null \
      | python3 -c 'import json,sys; m=json.load(sys.stdin); print(m["config"]["size"]+sum(l["size"] for l in m["layers"]))' \
      2>/dev/null || echo 0)"
    summary+=("$(printf '%-72s %9s  %s' "$IMAGE" "$(numfmt --to=iec --suffix=B "$size")" "$digest")")
    digests+=("$IMAGE $digest")
    pushed+=("$REGISTRY/$PREFIX/$COMPONENT@$digest $sbom")
  else
    summary+=("$(printf '%-72s %9s' "$IMAGE" "(not pushed)")")
  fi
fi

if [ "$KIND" = cli ]; then
  name="pacto-$VERSION-$TARGET_TRIPLE"
  if [ -z "$FROM" ]; then
    mkdir -p "$WORK/$name"
    for b in pacto kubectl-pacto; do
      if [ "$PROFILE" = release ]; then
        strip --strip-debug -o "$WORK/$name/$b" "$target_dir/$PROFILE/$b"
      else
        cp "$target_dir/$PROFILE/$b" "$WORK/$name/$b"
      fi
    done
    cp "$REPO/README.md" "$WORK/$name/"
    tar --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner -C "$WORK" -cf - "$name" \
      | gzip -n -9 >"$OUT/$name.tar.gz"
    "$REPO/scripts/sbom.sh" "$CRATE" "$VERSION" >"$OUT/pacto-$VERSION.cdx.json" || die "SBOM of $CRATE failed"
  fi
  built "$OUT/$name.tar.gz"
  built "$OUT/pacto-$VERSION.cdx.json"
  artifact "$OUT/$name.tar.gz"
  artifact "$OUT/pacto-$VERSION.cdx.json"
fi

# ---------------------------------------------------------------- chart
if [ "$CHART" != - ]; then
  if [ -z "$FROM" ]; then
    "$HELM" package "$REPO/charts/$CHART" --version "$VERSION" --app-version "$VERSION" -d "$OUT" >/dev/null \
      || die "helm package charts/$CHART failed"
  fi
  built "$OUT/$CHART-$VERSION.tgz"
  artifact "$OUT/$CHART-$VERSION.tgz"
  if [ "$PUSH" = 1 ]; then
    "$HELM" push "$OUT/$CHART-$VERSION.tgz" "oci://$REGISTRY/$PREFIX/charts" "${helm_tls[@]}" >"$WORK/helm-push" 2>&1 \
      || die "helm push of $CHART failed:\n$(cat "$WORK/helm-push")"
    digest="$(sed -n 's/^Digest: //p' "$WORK/helm-push")"
    [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "helm push of $CHART printed no digest:\n$(cat "$WORK/helm-push")"
    summary+=("$(printf '%-72s %9s  %s' "oci://$REGISTRY/$PREFIX/charts/$CHART:$VERSION" \
      "$(size_of "$OUT/$CHART-$VERSION.tgz")" "$digest")")
    digests+=("oci://$REGISTRY/$PREFIX/charts/$CHART:$VERSION $digest")
    pushed+=("$REGISTRY/$PREFIX/charts/$CHART@$digest -")
  fi
fi

if [ "${#digests[@]}" -gt 0 ]; then
  printf '%s\n' "${digests[@]}" >"$OUT/DIGESTS"
  artifact "$OUT/DIGESTS"
fi
# Over the files a GitHub release carries (the image's OCI archive is not one: the image is in the registry).
(cd "$OUT" && find . -maxdepth 1 -type f ! -name SHA256SUMS ! -name '*.sigstore.json' ! -name '*.oci.tar' -printf '%P\n' \
  | sort | xargs sha256sum >SHA256SUMS)
artifact "$OUT/SHA256SUMS"

# ---------------------------------------------------------------- signatures and attestations
if [ "$SIGN" = 1 ]; then
  cosign_args=(--yes)
  if [ "$PLAIN" = 1 ]; then cosign_args+=(--allow-http-registry --allow-insecure-registry); fi
  # Keyless (the workflow's OIDC identity, recorded in the transparency log) unless a key is given.
  key_args=()
  if [ -n "$SIGN_KEY" ]; then key_args=(--key "$SIGN_KEY" --tlog-upload=false); fi
  cosign_run() { # cosign ARGS…, its output shown only when it fails
    cosign "$@" >"$WORK/cosign.log" 2>&1 || die "cosign $1 failed ($*):\n$(cat "$WORK/cosign.log")"
  }
  # The SLSA v1 provenance predicate (https://slsa.dev/provenance/v1) every pushed artifact gets;
  # the subject (the digest) is filled in by `cosign attest`.
  PACTO_PROV_COMPONENT="$COMPONENT" PACTO_PROV_VERSION="$VERSION" PACTO_PROV_COMMIT="$COMMIT" \
  PACTO_PROV_EPOCH="$EPOCH" PACTO_PROV_PROFILE="$PROFILE" PACTO_PROV_REGISTRY="$REGISTRY/$PREFIX" \
    python3 - >"$WORK/provenance.json" <<'EOF'
import datetime, json, os
e = os.environ.get
server, repo = e("GITHUB_SERVER_URL", ""), e("GITHUB_REPOSITORY", "")
on_github = bool(server and repo and e("GITHUB_RUN_ID"))
source = f"git+{server}/{repo}" if on_github else "git+file://local"
print(json.dumps({
    "buildDefinition": {
        "buildType": "https://github.com/trianalab/pacto-operator-rs/blob/main/docs/images.md#provenance",
        "externalParameters": {
            "component": e("PACTO_PROV_COMPONENT"),
            "version": e("PACTO_PROV_VERSION"),
            "registry": e("PACTO_PROV_REGISTRY"),
            "workflow": {"ref": e("GITHUB_REF", ""), "repository": f"{server}/{repo}" if on_github else "",
                         "path": ".github/workflows/release.yml" if on_github else ""},
        },
        "internalParameters": {"profile": e("PACTO_PROV_PROFILE"), "sourceDateEpoch": int(e("PACTO_PROV_EPOCH"))},
        "resolvedDependencies": [{"uri": f"{source}@{e('GITHUB_REF', 'HEAD')}",
                                  "digest": {"gitCommit": e("PACTO_PROV_COMMIT")}}],
    },
    "runDetails": {
        "builder": {"id": f"{server}/{e('GITHUB_WORKFLOW_REF', repo)}" if on_github else "local:scripts/release.sh"},
        "metadata": {
            "invocationId": f"{server}/{repo}/actions/runs/{e('GITHUB_RUN_ID')}/attempts/{e('GITHUB_RUN_ATTEMPT', '1')}"
            if on_github else "local",
            "startedOn": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    },
}, indent=2))
EOF
  for entry in "${pushed[@]}"; do
    read -r ref sbom <<<"$entry"
    cosign_run sign "${cosign_args[@]}" "${key_args[@]}" "$ref"
    cosign_run attest "${cosign_args[@]}" "${key_args[@]}" --type slsaprovenance1 --predicate "$WORK/provenance.json" "$ref"
    what="signature, provenance"
    if [ "$sbom" != - ]; then
      cosign_run attest "${cosign_args[@]}" "${key_args[@]}" --type cyclonedx --predicate "$sbom" "$ref"
      what+=", SBOM"
    fi
    summary+=("$(printf '%-72s %s' "$ref" "signed: $what")")
  done
  cosign_run sign-blob --yes "${key_args[@]}" --bundle "$OUT/SHA256SUMS.sigstore.json" "$OUT/SHA256SUMS"
  artifact "$OUT/SHA256SUMS.sigstore.json"
fi

log "$COMPONENT $VERSION released in $((SECONDS - started)) s; artifacts in $OUT:"
printf '  %s\n' "${summary[@]}" >&2
