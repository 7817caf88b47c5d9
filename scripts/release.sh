#!/usr/bin/env bash
# Releases one component of release/components to an OCI registry: exactly what
# .github/workflows/release.yml runs on a tag `<component>-v<version>` (docs/upgrade.md, "Releases").
#
#   scripts/release.sh COMPONENT VERSION --registry HOST[:PORT] [--plain-http] [--profile release|debug]
#                      [--platforms LIST] [--out DIR] [--no-push | --from DIR] [--sign [--sign-key KEY]]
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
#   --platforms    comma separated, of linux/amd64 and linux/arm64 (default linux/amd64; also
#                  $PACTO_RELEASE_PLATFORMS). More than one: each service image is built once per
#                  platform and pushed as one OCI image index (a multi-arch image: one tag, one digest,
#                  the node's container runtime picks its platform), and the CLI gets one archive per
#                  platform. A platform other than the build machine's is cross-compiled with Debian's
#                  cross toolchain (scripts/cross.sh; scripts/install-deps.sh --cross). The release
#                  workflow builds both (docs/images.md#architectures). With --from, give the same
#                  list as the --no-push run (a service's archive carries its platforms either way).
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
#   service  the image (scripts/stage-service-image.sh + services/<name>/Containerfile, buildah), one per
#            platform (an image index over them when there are several), its SBOM (scripts/sbom.sh,
#            CycloneDX JSON: <component>-<version>.cdx.json for linux/amd64,
#            <component>-<version>-<arch>.cdx.json for another platform), its chart packaged and
#            pushed as an OCI chart
#   chart    the chart packaged and pushed as an OCI chart
#   cli      pacto and kubectl-pacto in pacto-<version>-<target>.tar.gz per platform (target: the Rust
#            target, x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu), and the CLI's SBOM
# and always CHANGELOG.md (the commits touching the component's paths since its previous tag) and
# SHA256SUMS over every file (but the image's OCI archive of --no-push, which is not a release
# asset); after a push, DIGESTS: one line `<pushed reference> <digest>` for each image and chart
# (what a chart's `image.digest` pins, docs/images.md; a multi-arch image's is its index's). The
# binaries carry the commit and its time (PACTO_BUILD_COMMIT, SOURCE_DATE_EPOCH: `/version`,
# `pacto version`), and the image and archives
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

log() { echo "release: $*" >&2; }
die() { printf "release: error: %b\n" "$*" >&2; exit 1; }
usage="usage: scripts/release.sh COMPONENT VERSION --registry HOST[:PORT] [--plain-http] [--profile release|debug] [--platforms LIST] [--out DIR] [--no-push | --from DIR] [--sign [--sign-key KEY]]"

# `scripts/release.sh --version-of COMPONENT`: the version its files carry (what a tag must name).
if [ "${1:-}" = --version-of ]; then
  [ "$#" -eq 2 ] || die "usage: scripts/release.sh --version-of COMPONENT"
  set -- "$2" 0.0.0 --registry none --version-of
fi
[ "$#" -ge 2 ] || die "$usage"
COMPONENT="$1" VERSION="$2"
shift 2
REGISTRY="" PLAIN=0 PROFILE=release OUT="" PUSH=1 VERSION_OF=0 FROM="" SIGN="${PACTO_RELEASE_SIGN:-0}" SIGN_KEY=""
PLATFORMS="${PACTO_RELEASE_PLATFORMS:-linux/amd64}"
while [ "$#" -gt 0 ]; do
  case "$1" in
    --registry) REGISTRY="${2:-}"; shift 2 || die "--registry needs a value" ;;
    --plain-http) PLAIN=1; shift ;;
    --profile) PROFILE="${2:-}"; shift 2 || die "--profile needs a value" ;;
    --platforms) PLATFORMS="${2:-}"; shift 2 || die "--platforms needs a value" ;;
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
IFS=, read -r -a platforms <<<"$PLATFORMS"
[ "${#platforms[@]}" -gt 0 ] || die "--platforms is empty"
for p in "${platforms[@]}"; do
  case "$p" in linux/amd64 | linux/arm64) ;; *) die "--platforms: '$p' is not linux/amd64 or linux/arm64" ;; esac
done
[ "$(printf '%s\n' "${platforms[@]}" | sort -u | wc -l)" = "${#platforms[@]}" ] || die "--platforms names a platform twice"
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
host_triple=""
if [ -z "$FROM" ] && [ "$KIND" != chart ]; then host_triple="$(rustc -vV | sed -n 's/^host: //p')"; fi
triple_of() { "$REPO/scripts/cross.sh" triple "$1"; }
arch_of() { echo "${1#linux/}"; }
# Where cargo leaves the binaries of Rust target $1: target/<profile> for the build machine's own
# (so a rehearsal reuses the test build), target/<triple>/<profile> for a cross build.
bin_dir_of() { if [ "$1" = "$host_triple" ]; then echo "$target_dir/$PROFILE"; else echo "$target_dir/$1/$PROFILE"; fi; }
if [ -z "$FROM" ] && { [ "$KIND" = service ] || [ "$KIND" = cli ]; }; then
  for platform in "${platforms[@]}"; do
    triple="$(triple_of "$platform")"
    if [ "$triple" = "$host_triple" ]; then
      log "cargo build -p $CRATE ($PROFILE)"
      (cd "$REPO" && cargo build --locked "${cargo_profile[@]}" -p "$CRATE") || die "cargo build -p $CRATE failed"
    else
      "$REPO/scripts/cross.sh" check "$triple" >&2 || die "cannot build for $platform here"
      log "cargo build -p $CRATE --target $triple ($PROFILE, scripts/cross.sh)"
      (cd "$REPO" && "$REPO/scripts/cross.sh" run "$triple" cargo build --locked "${cargo_profile[@]}" --target "$triple" -p "$CRATE") \
        || die "cargo build -p $CRATE --target $triple failed"
    fi
  done
fi

# `image_manifests SOURCE DIGEST`: one line "<platform> <manifest digest> <pushed size>" per image
# under DIGEST (the image itself, or each image an index lists), read from SOURCE: the OCI archive
# a --no-push run saved, or "registry" (the registry the image was pushed to).
image_manifests() {
  PACTO_SRC="$1" PACTO_DIGEST="$2" PACTO_URL="$curl_scheme://$REGISTRY/v2/$PREFIX/$COMPONENT/manifests" python3 - <<'EOF'
import json, os, tarfile, urllib.request
src, top, url = os.environ["PACTO_SRC"], os.environ["PACTO_DIGEST"], os.environ["PACTO_URL"]
ACCEPT = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json"
archive = tarfile.open(src) if src != "registry" else None
def blob(digest):
    if archive:
        return json.load(archive.extractfile("blobs/sha256/" + digest.split(":", 1)[1]))
    return json.load(urllib.request.urlopen(urllib.request.Request(f"{url}/{digest}", headers={"Accept": ACCEPT})))
def size(m):
    return m["config"]["size"] + sum(l["size"] for l in m["layers"])
doc = blob(top)
if "manifests" in doc:
    for d in doc["manifests"]:
        p = d.get("platform", {})
        print(f'{p.get("os", "?")}/{p.get("architecture", "?")} {d["digest"]} {size(blob(d["digest"]))}')
else:
    cfg = doc["config"]["digest"]
    plat = "?"
    if archive:
        c = blob(cfg)
        plat = f'{c.get("os", "?")}/{c.get("architecture", "?")}'
    print(f"{plat} {top} {size(doc)}")
EOF
}

IMAGE=""
if [ "$KIND" = service ]; then
  IMAGE="$REGISTRY/$PREFIX/$COMPONENT:$VERSION"
  archive="$OUT/$COMPONENT-$VERSION.oci.tar"
  multi=0
  if [ "${#platforms[@]}" -gt 1 ]; then multi=1; fi
  # The SBOM of one platform's image (its libraries differ: glibc for amd64 or arm64).
  sbom_of() {
    if [ "$1" = linux/amd64 ]; then echo "$OUT/$COMPONENT-$VERSION.cdx.json"; else echo "$OUT/$COMPONENT-$VERSION-$(arch_of "$1").cdx.json"; fi
  }
  if [ -z "$FROM" ]; then
    bah() { "${buildah_cmd[@]}" --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs "$@"; }
    if [ "$multi" = 1 ]; then bah manifest create "$IMAGE" >/dev/null || die "buildah manifest create $IMAGE failed"; fi
    for platform in "${platforms[@]}"; do
      triple="$(triple_of "$platform")"
      sysroot="$("$REPO/scripts/cross.sh" sysroot "$triple")"
      ctx="$WORK/ctx-$(arch_of "$platform")"
      "$REPO/scripts/stage-service-image.sh" "${stage_flags[@]}" ${sysroot:+--sysroot "$sysroot"} \
        "$(bin_dir_of "$triple")/$CRATE" "$ctx"
      # One platform: the image is the release's image. Several: each is built under a local name
      # and added to the index that carries the release's name.
      ref="$IMAGE"
      if [ "$multi" = 1 ]; then ref="localhost/pacto-release/$COMPONENT:$VERSION-$(arch_of "$platform")"; fi
      # FROM scratch with one COPY: no instruction runs, so another platform needs no emulation.
      bah bud --quiet --format oci --timestamp "$EPOCH" --platform "$platform" \
        -f "$REPO/services/$COMPONENT/Containerfile" -t "$ref" "$ctx" >/dev/null \
        || die "buildah bud failed for $ref ($platform)"
      if [ "$multi" = 1 ]; then
        bah manifest add "$IMAGE" "containers-storage:$ref" >/dev/null || die "adding $ref to the index $IMAGE failed"
      fi
      "$REPO/scripts/sbom.sh" "$CRATE" "$VERSION" "$ctx/rootfs" >"$(sbom_of "$platform")" || die "SBOM of $CRATE ($platform) failed"
    done
    if [ "$multi" = 1 ]; then
      # The index and its images are saved as one OCI archive (the --no-push artifact, or a
      # scratch file) and pushed from it as --from does, so the pushed digests are the archive's.
      saved="$archive"
      if [ "$PUSH" = 1 ]; then saved="$WORK/index.oci.tar"; fi
      bah manifest push --quiet --all --format oci "$IMAGE" "oci-archive:$saved:$IMAGE" \
        || die "saving the index $IMAGE to $saved failed"
      if [ "$PUSH" = 1 ]; then
        need skopeo "Debian: skopeo (scripts/install-deps.sh)"
        skopeo copy --quiet --all --preserve-digests "${skopeo_tls[@]}" --digestfile "$WORK/digest" \
          "oci-archive:$saved" "docker://$IMAGE" || die "pushing the index $IMAGE failed"
      fi
    elif [ "$PUSH" = 1 ]; then
      bah push --quiet "${tls[@]}" --digestfile "$WORK/digest" "$IMAGE" "docker://$IMAGE" \
        || die "pushing $IMAGE failed"
    else
      # The image as built, for a later `--from` push (byte for byte: same digest as a push here).
      bah push --quiet "$IMAGE" "oci-archive:$archive:$IMAGE" || die "saving $IMAGE to $archive failed"
    fi
  else
    for platform in "${platforms[@]}"; do built "$(sbom_of "$platform")"; done
    built "$archive"
    # --all: an index goes with every image it lists (a single image is copied as before).
    skopeo copy --quiet --all --preserve-digests "${skopeo_tls[@]}" --digestfile "$WORK/digest" \
      "oci-archive:$archive" "docker://$IMAGE" \
      || die "pushing $IMAGE from $archive failed"
  fi
  for platform in "${platforms[@]}"; do artifact "$(sbom_of "$platform")"; done
  if [ -f "$archive" ]; then artifact "$archive"; fi
  if [ "$PUSH" = 1 ]; then
    digest="$(cat "$WORK/digest")"
    repo="$REGISTRY/$PREFIX/$COMPONENT"
    # The pushed size per image (config + compressed layers), from the archive or the registry.
    from_archive=registry
    if [ -f "$archive" ]; then from_archive="$archive"; elif [ -f "$WORK/index.oci.tar" ]; then from_archive="$WORK/index.oci.tar"; fi
    manifests="$(image_manifests "$from_archive" "$digest" 2>/dev/null || true)"
    if [ "$multi" = 1 ]; then
      summary+=("$(printf '%-72s %9s  %s' "$IMAGE (index)" "" "$digest")")
      for platform in "${platforms[@]}"; do
        read -r _ pdigest size <<<"$(awk -v p="$platform" '$1 == p' <<<"$manifests" | head -1)"
        [ -n "${pdigest:-}" ] || die "the index $IMAGE ($digest) lists no $platform image:\n$manifests"
        summary+=("$(printf '%-72s %9s  %s' "  $platform" "$(numfmt --to=iec --suffix=B "$size")" "$pdigest")")
        pushed+=("$repo@$pdigest sbom $(sbom_of "$platform")")
      done
      pushed=("$repo@$digest index -" "${pushed[@]}")
    else
      size="$(awk 'NR == 1 { print $3 }' <<<"$manifests")"
      summary+=("$(printf '%-72s %9s  %s' "$IMAGE" "$(numfmt --to=iec --suffix=B "${size:-0}")" "$digest")")
      pushed+=("$repo@$digest image $(sbom_of "${platforms[0]}")")
    fi
    digests+=("$IMAGE $digest")
  else
    summary+=("$(printf '%-72s %9s' "$IMAGE" "(not pushed)")")
  fi
fi

if [ "$KIND" = cli ]; then
  for platform in "${platforms[@]}"; do
    triple="$(triple_of "$platform")"
    name="pacto-$VERSION-$triple"
    if [ -z "$FROM" ]; then
      mkdir -p "$WORK/$name"
      strip_cmd=strip
      sysroot="$("$REPO/scripts/cross.sh" sysroot "$triple")"
      if [ -n "$sysroot" ]; then strip_cmd="$(basename "$sysroot")-strip"; fi
      for b in pacto kubectl-pacto; do
        if [ "$PROFILE" = release ]; then
          "$strip_cmd" --strip-debug -o "$WORK/$name/$b" "$(bin_dir_of "$triple")/$b"
        else
          cp "$(bin_dir_of "$triple")/$b" "$WORK/$name/$b"
        fi
      done
      cp "$REPO/README.md" "$WORK/$name/"
      tar --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner -C "$WORK" -cf - "$name" \
        | gzip -n -9 >"$OUT/$name.tar.gz"
    fi
    built "$OUT/$name.tar.gz"
    artifact "$OUT/$name.tar.gz"
  done
  if [ -z "$FROM" ]; then
    "$REPO/scripts/sbom.sh" "$CRATE" "$VERSION" >"$OUT/pacto-$VERSION.cdx.json" || die "SBOM of $CRATE failed"
  fi
  built "$OUT/pacto-$VERSION.cdx.json"
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
    pushed+=("$REGISTRY/$PREFIX/charts/$CHART@$digest chart -")
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
  # Entries: "<ref> image|chart|index|sbom <SBOM file or ->". An image or a chart is signed and gets
  # its provenance (an image also its SBOM); an index is signed with every image it lists
  # (--recursive) and gets the provenance; each image of an index gets its own platform's SBOM.
  for entry in "${pushed[@]}"; do
    read -r ref kind sbom <<<"$entry"
    what=""
    case "$kind" in
      image | chart | index)
        recursive=()
        if [ "$kind" = index ]; then recursive=(--recursive); fi
        cosign_run sign "${cosign_args[@]}" "${key_args[@]}" "${recursive[@]}" "$ref"
        cosign_run attest "${cosign_args[@]}" "${key_args[@]}" --type slsaprovenance1 --predicate "$WORK/provenance.json" "$ref"
        what="signature${recursive:+ (with each image it lists)}, provenance" ;;
    esac
    if [ "$sbom" != - ]; then
      cosign_run attest "${cosign_args[@]}" "${key_args[@]}" --type cyclonedx --predicate "$sbom" "$ref"
      what+="${what:+, }SBOM"
    fi
    if [ "$kind" = sbom ]; then what="SBOM (signature: with its index)"; fi
    summary+=("$(printf '%-72s %s' "$ref" "signed: $what")")
  done
  cosign_run sign-blob --yes "${key_args[@]}" --bundle "$OUT/SHA256SUMS.sigstore.json" "$OUT/SHA256SUMS"
  artifact "$OUT/SHA256SUMS.sigstore.json"
fi

log "$COMPONENT $VERSION released in $((SECONDS - started)) s; artifacts in $OUT:"
printf '  %s\n' "${summary[@]}" >&2
