#!/usr/bin/env bash
# Releases one component of release/components to an OCI registry: exactly what
# .github/workflows/release.yml runs on a tag `<component>-v<version>` (docs/upgrade.md, "Releases").
#
#   scripts/release.sh COMPONENT VERSION --registry HOST[:PORT] [--plain-http] [--profile release|debug]
#                      [--out DIR] [--no-push]
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
#   --no-push      build everything, push nothing
#
#   scripts/release.sh --version-of COMPONENT    prints the version the component's files carry
#
# What a component gets, by kind:
#   service  the image (scripts/stage-service-image.sh + services/<name>/Containerfile, buildah, linux/amd64),
#            its SBOM (scripts/sbom.sh, CycloneDX JSON), its chart packaged and pushed as an OCI chart
#   chart    the chart packaged and pushed as an OCI chart
#   cli      pacto and kubectl-pacto in pacto-<version>-<target>.tar.gz, and the CLI's SBOM
# and always CHANGELOG.md (the commits touching the component's paths since its previous tag) and
# SHA256SUMS over every file. The binaries carry the commit and its time (PACTO_BUILD_COMMIT,
# SOURCE_DATE_EPOCH: `/version`, `pacto version`), and the image and archives are stamped with the
# commit time, so a rebuild of the same commit gives the same files.
#
# The last lines on stderr list every artifact with its size (an image: its digest and the size of
# its compressed layers and config as pushed). Needs: cargo, buildah, helm (scripts/chart-tools.sh),
# git, curl, python3; registry credentials, if any, from `buildah login` and `helm registry login`.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${PACTO_RELEASE_PREFIX:-trianalab/pacto-operator-rs}"
TARGET_TRIPLE="x86_64-unknown-linux-gnu"

log() { echo "release: $*" >&2; }
die() { printf "release: error: %b\n" "$*" >&2; exit 1; }
usage="usage: scripts/release.sh COMPONENT VERSION --registry HOST[:PORT] [--plain-http] [--profile release|debug] [--out DIR] [--no-push]"

# `scripts/release.sh --version-of COMPONENT`: the version its files carry (what a tag must name).
if [ "${1:-}" = --version-of ]; then
  [ "$#" -eq 2 ] || die "usage: scripts/release.sh --version-of COMPONENT"
  set -- "$2" 0.0.0 --registry none --version-of
fi
[ "$#" -ge 2 ] || die "$usage"
COMPONENT="$1" VERSION="$2"
shift 2
REGISTRY="" PLAIN=0 PROFILE=release OUT="" PUSH=1 VERSION_OF=0
while [ "$#" -gt 0 ]; do
  case "$1" in
    --registry) REGISTRY="${2:-}"; shift 2 || die "--registry needs a value" ;;
    --plain-http) PLAIN=1; shift ;;
    --profile) PROFILE="${2:-}"; shift 2 || die "--profile needs a value" ;;
    --out) OUT="${2:-}"; shift 2 || die "--out needs a value" ;;
    --no-push) PUSH=0; shift ;;
    --version-of) VERSION_OF=1; shift ;;
    *) die "unknown argument '$1' ($usage)" ;;
  esac
done
[ -n "$REGISTRY" ] || die "--registry is required ($usage)"
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
if [ "$KIND" != chart ]; then need cargo "the Rust toolchain"; fi
if [ "$KIND" = service ]; then need buildah "scripts/install-deps.sh --node"; fi
HELM=""
if [ "$CHART" != - ]; then
  HELM="$(command -v helm || true)"
  [ -n "$HELM" ] || HELM="$("$REPO/scripts/chart-tools.sh")/helm"
fi

COMMIT="$(git -C "$REPO" rev-parse HEAD)"
EPOCH="$(git -C "$REPO" log -1 --format=%ct HEAD)"
export PACTO_BUILD_COMMIT="$COMMIT" SOURCE_DATE_EPOCH="$EPOCH"
OUT="${OUT:-$REPO/dist/$COMPONENT-$VERSION}"
rm -rf "$OUT"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/pacto-release.XXXXXX")"
cleanup() { rm -rf "$WORK" 2>/dev/null || true; }
trap cleanup EXIT
tls=(); helm_tls=(); curl_scheme=https
if [ "$PLAIN" = 1 ]; then tls=(--tls-verify=false); helm_tls=(--plain-http); curl_scheme=http; fi
summary=()
size_of() { numfmt --to=iec --suffix=B "$(stat -c %s "$1")"; }
artifact() { summary+=("$(printf '%-72s %9s' "$(basename "$1")" "$(size_of "$1")")"); }
started=$SECONDS
log "$COMPONENT $VERSION ($KIND) at ${COMMIT:0:12}, $PROFILE profile, to $REGISTRY/$PREFIX"

# ---------------------------------------------------------------- changelog
previous="$(git -C "$REPO" tag --list "$COMPONENT-v*" | sed "s/^$COMPONENT-v//" | grep -vx "$VERSION" \
  | sort -V | tail -1 || true)"
{
  echo "## $COMPONENT $VERSION ($(date -u -d "@$EPOCH" +%Y-%m-%d))"
  echo
  if [ -n "$previous" ]; then range="$COMPONENT-v$previous..HEAD"; echo "Changes since $previous:"; else range=HEAD; echo "First release. Changes:"; fi
  echo
  git -C "$REPO" log --no-merges --format='- %s (%h)' "$range" -- "${paths[@]}" | head -200
} >"$OUT/CHANGELOG.md"
artifact "$OUT/CHANGELOG.md"

# ---------------------------------------------------------------- binaries, image, SBOM
target_dir="${CARGO_TARGET_DIR:-$REPO/target}"
case "$target_dir" in /*) ;; *) target_dir="$REPO/$target_dir" ;; esac
if [ "$KIND" = service ] || [ "$KIND" = cli ]; then
  log "cargo build -p $CRATE ($PROFILE)"
  (cd "$REPO" && cargo build --locked "${cargo_profile[@]}" -p "$CRATE") || die "cargo build -p $CRATE failed"
fi

IMAGE=""
if [ "$KIND" = service ]; then
  IMAGE="$REGISTRY/$PREFIX/$COMPONENT:$VERSION"
  "$REPO/scripts/stage-service-image.sh" "${stage_flags[@]}" "$target_dir/$PROFILE/$CRATE" "$WORK/ctx"
  bah() { buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs "$@"; }
  bah bud --quiet --format oci --timestamp "$EPOCH" --platform linux/amd64 \
    -f "$REPO/services/$COMPONENT/Containerfile" -t "$IMAGE" "$WORK/ctx" >/dev/null \
    || die "buildah bud failed for $IMAGE"
  "$REPO/scripts/sbom.sh" "$CRATE" "$VERSION" "$WORK/ctx/rootfs" >"$OUT/$COMPONENT-$VERSION.cdx.json" \
    || die "SBOM of $CRATE failed"
  artifact "$OUT/$COMPONENT-$VERSION.cdx.json"
  if [ "$PUSH" = 1 ]; then
    bah push --quiet "${tls[@]}" --digestfile "$WORK/digest" "$IMAGE" "docker://$IMAGE" \
      || die "pushing $IMAGE failed"
    digest="$(cat "$WORK/digest")"
    # The pushed size: config + compressed layers, from the registry's manifest.
    size="$(curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
      "$curl_scheme://$REGISTRY/v2/$PREFIX/$COMPONENT/manifests/$digest" \
      | python3 -c 'import json,sys; m=json.load(sys.stdin); print(m["config"]["size"]+sum(l["size"] for l in m["layers"]))' \
      || echo 0)"
    summary+=("$(printf '%-72s %9s  %s' "$IMAGE" "$(numfmt --to=iec --suffix=B "$size")" "$digest")")
  else
    summary+=("$(printf '%-72s %9s' "$IMAGE" "(not pushed)")")
  fi
fi

if [ "$KIND" = cli ]; then
  name="pacto-$VERSION-$TARGET_TRIPLE"
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
  artifact "$OUT/$name.tar.gz"
  "$REPO/scripts/sbom.sh" "$CRATE" "$VERSION" >"$OUT/pacto-$VERSION.cdx.json" || die "SBOM of $CRATE failed"
  artifact "$OUT/pacto-$VERSION.cdx.json"
fi

# ---------------------------------------------------------------- chart
if [ "$CHART" != - ]; then
  "$HELM" package "$REPO/charts/$CHART" --version "$VERSION" --app-version "$VERSION" -d "$OUT" >/dev/null \
    || die "helm package charts/$CHART failed"
  artifact "$OUT/$CHART-$VERSION.tgz"
  if [ "$PUSH" = 1 ]; then
    "$HELM" push "$OUT/$CHART-$VERSION.tgz" "oci://$REGISTRY/$PREFIX/charts" "${helm_tls[@]}" >"$WORK/helm-push" 2>&1 \
      || die "helm push of $CHART failed:\n$(cat "$WORK/helm-push")"
    summary+=("$(printf '%-72s %9s  %s' "oci://$REGISTRY/$PREFIX/charts/$CHART:$VERSION" \
      "$(size_of "$OUT/$CHART-$VERSION.tgz")" "$(sed -n 's/^Digest: //p' "$WORK/helm-push")")")
  fi
fi

(cd "$OUT" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%P\n' | sort | xargs sha256sum >SHA256SUMS)
artifact "$OUT/SHA256SUMS"
log "$COMPONENT $VERSION released in $((SECONDS - started)) s; artifacts in $OUT:"
printf '  %s\n' "${summary[@]}" >&2
