#!/usr/bin/env bash
# Stages the build context of a service image (services/<component>/Containerfile): a FROM-scratch root
# file system holding only the binary and what it needs at run time.
#
#   scripts/stage-service-image.sh [--strip-debug] [--sysroot DIR] BINARY CONTEXT
#
# --strip-debug drops the binary's debug sections (the line tables the workspace profiles keep) from
# the copy in the image: about 160 MiB -> 28 MiB for a release build; backtraces then name functions
# but no file:line.
# --sysroot DIR  BINARY was cross-compiled (scripts/cross.sh) against the C library in DIR, a Debian
#                cross sysroot such as /usr/aarch64-linux-gnu (package libc6-dev-arm64-cross): its
#                libraries are found from the binary's own ELF headers (readelf: the loader it names,
#                its DT_NEEDED entries) in DIR/lib instead of by ldd, and placed where that
#                architecture's loader looks (/lib/<triple>/, the loader at the path the binary
#                names); stripping uses <triple>-strip (docs/images.md#architectures).
#
# CONTEXT/rootfs/ gets:
#   /usr/local/bin/<binary name>             the binary
#   every library `ldd BINARY` lists, and the dynamic loader, at the paths ldd prints
#                                            (with --sysroot: as said above)
#   /etc/ssl/certs/ca-certificates.crt       the host's CA bundle (for TLS to outside endpoints)
#   /etc/passwd, /etc/group                  root and nonroot (65532:65532), nothing else
#   /etc/nsswitch.conf                       files, then DNS, for host names
#   /tmp                                     empty, mode 1777
# CONTEXT is emptied first. Works for static binaries too (no libraries then). Used by
# scripts/node-images.sh and usable as is by a release pipeline (see docs/images.md).
set -euo pipefail

die() { printf "stage-service-image: error: %b\n" "$*" >&2; exit 1; }

strip_debug=0 sysroot=""
while [ "$#" -gt 2 ]; do
  case "$1" in
    --strip-debug) strip_debug=1; shift ;;
    --sysroot) sysroot="${2:-}"; shift 2 ;;
    *) break ;;
  esac
done
[ "$#" -eq 2 ] || die "usage: scripts/stage-service-image.sh [--strip-debug] [--sysroot DIR] BINARY CONTEXT"
strip_cmd=strip
if [ -n "$sysroot" ]; then
  [ -d "$sysroot/lib" ] || die "--sysroot: no directory '$sysroot/lib' (Debian: libc6-dev-arm64-cross, scripts/install-deps.sh --cross)"
  command -v readelf >/dev/null 2>&1 || die "--sysroot needs readelf (Debian: binutils)"
  strip_cmd="$(basename "$sysroot")-strip"
fi
bin="$1"
ctx="$2"
if [ ! -f "$bin" ] || [ ! -x "$bin" ]; then die "no executable at '$bin' (build it first: cargo build -p <crate>)"; fi
[ -n "$sysroot" ] || command -v ldd >/dev/null 2>&1 || die "ldd is not installed (Debian: libc-bin)"
certs=/etc/ssl/certs/ca-certificates.crt
[ -f "$certs" ] || die "no CA bundle at $certs (Debian: ca-certificates)"

rm -rf "$ctx"
root="$ctx/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp"
chmod 1777 "$root/tmp"
if [ "$strip_debug" = 1 ]; then
  command -v "$strip_cmd" >/dev/null 2>&1 || die "--strip-debug needs $strip_cmd (Debian: binutils, or the cross binutils)"
  "$strip_cmd" --strip-debug -o "$root/usr/local/bin/$(basename "$bin")" "$bin"
else
  cp "$bin" "$root/usr/local/bin/$(basename "$bin")"
fi

# Each file copied from the build machine, as "<path in the image> <path on the build machine>", for
# scripts/sbom.sh (which Debian package owns it).
: >"$ctx/sources"
copy_lib() { # copy_lib HOST_PATH IMAGE_PATH
  mkdir -p "$root$(dirname "$2")"
  cp -L "$1" "$root$2"
  echo "$2 $(readlink -f "$1")" >>"$ctx/sources"
}

if [ -n "$sysroot" ]; then
  # The loader the binary names (PT_INTERP) and its DT_NEEDED libraries, one level: the Rust
  # binaries need only glibc's libraries and libgcc_s, which need nothing beyond each other.
  interp="$(readelf -lW "$bin" | sed -n 's/.*\[Requesting program interpreter: \(.*\)\]$/\1/p')"
  if [ -n "$interp" ]; then
    triple="$(basename "$sysroot")"
    [ -f "$sysroot/lib/$(basename "$interp")" ] || die "the loader $interp of $bin is not in $sysroot/lib"
    copy_lib "$sysroot/lib/$(basename "$interp")" "$interp"
    while read -r lib; do
      [ -f "$sysroot/lib/$lib" ] || die "$bin needs $lib, which is not in $sysroot/lib"
      copy_lib "$sysroot/lib/$lib" "/lib/$triple/$lib"
    done < <(readelf -dW "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p' | sort -u)
  fi
# `ldd` lines: "libx.so => /path/libx.so (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)", "linux-vdso.so.1 (...)"
# or, for a static binary, "not a dynamic executable" (exit 1).
elif deps=$(ldd "$bin" 2>/dev/null); then
  if grep -q 'not found' <<<"$deps"; then die "ldd cannot resolve every library of $bin:\n$deps"; fi
  while read -r lib; do
    [ -n "$lib" ] || continue
    copy_lib "$lib" "$lib"
  done < <(sed -n -e 's/^.*=> \(\/[^ ]*\) (0x.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p' <<<"$deps" | sort -u)
fi

cp "$certs" "$root/etc/ssl/certs/ca-certificates.crt"
echo "/etc/ssl/certs/ca-certificates.crt $certs" >>"$ctx/sources"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
  >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
