#!/usr/bin/env bash
# Builds every container image the project's test node needs, without any registry, as one
# docker-archive per image (see docs/images.md):
#   ghcr.io/trianalab/pacto-operator-rs/<component>:<appVersion>   the five services, named as the charts
#                                                                  default (services/<component>/Containerfile)
#   localhost/pause:3.10                    the pod sandbox (images/pause)
#   localhost/coredns:<version>             the minimal CoreDNS of scripts/k8s-binaries.sh --node (images/coredns)
#   localhost/busybox:1.35                  busybox-static with its applets (images/busybox)
#   localhost/pacto-sample-http:0.1         an HTTP workload with /healthz, /readyz, /metrics (images/sample-http)
#
#   scripts/node-images.sh [--profile debug|release] [--out DIR] [--load SOCKET] [--node-only]
#
#   --profile  cargo profile of the service binaries (default debug); they are built with `cargo build`
#              (honouring CARGO_TARGET_DIR); release images get the binaries without debug sections
#              (scripts/stage-service-image.sh --strip-debug), debug images keep their line tables
#   --out      where the archives go (default $PACTO_CACHE/images, PACTO_CACHE defaulting to ~/.cache/pacto)
#   --load     also import every archive into the containerd at SOCKET, namespace k8s.io (`ctr images import`)
#   --node-only  only the node images (pause, coredns, busybox, sample-http), not the services: the
#              deployed tier pulls those from a registry scripts/release.sh pushed them to
#
# Prints the archive paths on stdout, one per line; a table of images and sizes goes to stderr. Each
# archive is named after the image and a hash of its Containerfile and staged context, so an unchanged
# image is not rebuilt (the older archive of a changed image is removed; runs on one --out directory
# take turns through a lock). buildah runs with its own storage in a temporary directory, removed on
# exit, so nothing is left in /var/lib/containers. Needs: scripts/install-deps.sh --node, cargo, Go.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PACTO_CACHE:-${HOME:-/root}/.cache/pacto}"
# The services with an image: the `service` lines of release/components.
mapfile -t COMPONENTS < <(awk '$1 !~ /^#/ && NF == 5 && $2 == "service" { print $1 }' "$REPO/release/components")
IMAGE_REPOSITORY="ghcr.io/trianalab/pacto-operator-rs"
BUSYBOX=/bin/busybox

log() { echo "node-images: $*" >&2; }
die() { printf "node-images: error: %b\n" "$*" >&2; exit 1; }

PROFILE=debug
OUT=""
LOAD=""
NODE_ONLY=0
while [ "$#" -gt 0 ]; do
  case "$1" in
    --profile) PROFILE="${2:-}"; shift 2 || die "--profile needs a value" ;;
    --out) OUT="${2:-}"; shift 2 || die "--out needs a value" ;;
    --load) LOAD="${2:-}"; shift 2 || die "--load needs a value" ;;
    --node-only) NODE_ONLY=1; shift ;;
    *) die "unknown argument '$1' (usage: scripts/node-images.sh [--profile debug|release] [--out DIR] [--load SOCKET] [--node-only])" ;;
  esac
done
case "$PROFILE" in
  debug) cargo_profile=(); stage_flags=() ;;
  release) cargo_profile=(--release); stage_flags=(--strip-debug) ;;
  *) die "--profile must be debug or release, not '$PROFILE'" ;;
esac
OUT="${OUT:-$CACHE/images}"
if [ "$NODE_ONLY" = 1 ]; then COMPONENTS=(); fi

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' is not installed ($2)"; }
need buildah "scripts/install-deps.sh --node"
need gcc "scripts/install-deps.sh --node"
need cargo "the Rust toolchain"
need ldd "Debian: libc-bin"
need sha256sum "Debian: coreutils"
"$BUSYBOX" --list-full >/dev/null 2>&1 || die "no busybox at $BUSYBOX (scripts/install-deps.sh --node)"
if [ -n "$LOAD" ]; then
  need ctr "scripts/install-deps.sh --node"
  [ -S "$LOAD" ] || die "--load: no containerd socket at '$LOAD'"
fi

mkdir -p "$OUT"
# One run at a time per output directory: a run replaces the archives of the images it changed.
exec 9>"$OUT/.lock"
flock 9
WORK="$(mktemp -d "${TMPDIR:-/tmp}/pacto-node-images.XXXXXX")"
cleanup() { rm -rf "$WORK" 2>/dev/null || true; }
trap cleanup EXIT
bah() { buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs "$@"; }

# ---------------------------------------------------------------- binaries
k8s_bin="$("$REPO/scripts/k8s-binaries.sh" --node)" || die "scripts/k8s-binaries.sh --node failed"
coredns_bin="$(readlink -f "$k8s_bin/coredns")"
coredns_version="$(basename "$(dirname "$coredns_bin")")"

packages=()
for c in "${COMPONENTS[@]}"; do packages+=(-p "pacto-$c"); done
if [ "${#packages[@]}" -gt 0 ]; then
  log "cargo build of the ${#COMPONENTS[@]} services ($PROFILE profile)"
  (cd "$REPO" && cargo build --locked "${cargo_profile[@]}" "${packages[@]}") || die "cargo build of the services failed"
fi
target_dir="${CARGO_TARGET_DIR:-$REPO/target}"
case "$target_dir" in /*) ;; *) target_dir="$REPO/$target_dir" ;; esac

mkdir -p "$WORK/c"
for prog in pause sample-http; do
  gcc -Os -static -s -Wall -Wextra -Werror -o "$WORK/c/$prog" "$REPO/images/$prog/$prog.c" \
    || die "gcc failed for images/$prog/$prog.c"
done

# ---------------------------------------------------------------- contexts
# busybox root file system: the binary, one symlink per applet, users, /tmp
busybox_rootfs() {
  local root="$1" applet
  mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/root" "$root/home/nonroot"
  chmod 1777 "$root/tmp"
  cp "$BUSYBOX" "$root/bin/busybox"
  while read -r applet; do
    if [ -z "$applet" ] || [ "$applet" = bin/busybox ]; then continue; fi
    mkdir -p "$root/$(dirname "$applet")"
    ln -sf /bin/busybox "$root/$applet"
  done < <("$BUSYBOX" --list-full)
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nnonroot:x:65532:65532:nonroot:/home/nonroot:/bin/sh\n' \
    >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\nnonroot:x:65532:\n' >"$root/etc/group"
  chown 65532:65532 "$root/home/nonroot"
}

# Hash of a Containerfile, the image reference and a context (modes and contents; times and owners
# normalised).
content_key() {
  local ref="$1" file="$2" ctx="$3"
  { printf '%s\n' "$ref"; cat "$file"
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$ctx" -cf - .
  } | sha256sum | cut -c1-16
}

built=()
summary=()
# build_image REF CONTAINERFILE CONTEXT
build_image() {
  local ref="$1" file="$2" ctx="$3" slug key archive old t0
  slug="$(echo "${ref##*/}" | tr ':' '-')"
  key="$(content_key "$ref" "$file" "$ctx")"
  archive="$OUT/$slug-$key.tar"
  if [ -s "$archive" ]; then
    log "$ref: unchanged ($archive)"
  else
    t0=$(date +%s)
    bah bud --quiet --format docker --timestamp 0 -f "$file" -t "$ref" "$ctx" >/dev/null \
      || die "buildah bud failed for $ref ($file)"
    rm -f "$archive.tmp"
    bah push --quiet "$ref" "docker-archive:$archive.tmp:$ref" || die "buildah push to $archive failed for $ref"
    bah rmi "$ref" >/dev/null || true
    mv "$archive.tmp" "$archive"
    for old in "$OUT/$slug"-*.tar; do [ "$old" = "$archive" ] || rm -f "$old"; done
    log "$ref: built in $(( $(date +%s) - t0 )) s"
  fi
  built+=("$archive")
  summary+=("$(printf '%-58s %8s  %s' "$ref" "$(du -h "$archive" | cut -f1)" "$(basename "$archive")")")
}

for c in "${COMPONENTS[@]}"; do
  chart="$REPO/charts/pacto-$c/Chart.yaml"
  version="$(sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$/\1/p' "$chart")"
  [ -n "$version" ] || die "no appVersion in $chart"
  binary="$target_dir/$PROFILE/pacto-$c"
  "$REPO/scripts/stage-service-image.sh" "${stage_flags[@]}" "$binary" "$WORK/ctx/$c"
  build_image "$IMAGE_REPOSITORY/$c:$version" "$REPO/services/$c/Containerfile" "$WORK/ctx/$c"
done

mkdir -p "$WORK/ctx/pause"
cp "$WORK/c/pause" "$WORK/ctx/pause/pause"
build_image localhost/pause:3.10 "$REPO/images/pause/Containerfile" "$WORK/ctx/pause"

mkdir -p "$WORK/ctx/coredns/rootfs/etc"
cp "$coredns_bin" "$WORK/ctx/coredns/rootfs/coredns"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
  >"$WORK/ctx/coredns/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$WORK/ctx/coredns/rootfs/etc/group"
build_image "localhost/coredns:$coredns_version" "$REPO/images/coredns/Containerfile" "$WORK/ctx/coredns"

busybox_rootfs "$WORK/ctx/busybox/rootfs"
build_image localhost/busybox:1.35 "$REPO/images/busybox/Containerfile" "$WORK/ctx/busybox"

busybox_rootfs "$WORK/ctx/sample-http/rootfs"
mkdir -p "$WORK/ctx/sample-http/rootfs/usr/local/bin"
cp "$WORK/c/sample-http" "$WORK/ctx/sample-http/rootfs/usr/local/bin/sample-http"
build_image localhost/pacto-sample-http:0.1 "$REPO/images/sample-http/Containerfile" "$WORK/ctx/sample-http"

if [ -n "$LOAD" ]; then
  for a in "${built[@]}"; do
    ctr -a "$LOAD" -n k8s.io images import "$a" >/dev/null || die "ctr images import of $a into $LOAD failed"
  done
  log "imported ${#built[@]} images into $LOAD (namespace k8s.io)"
fi

printf '%s\n' "${summary[@]}" >&2
printf '%s\n' "${built[@]}"
