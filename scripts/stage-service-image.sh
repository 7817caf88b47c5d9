#!/usr/bin/env bash
# Stages the build context of a service image (services/<component>/Containerfile): a FROM-scratch root
# file system holding only the binary and what it needs at run time.
#
#   scripts/stage-service-image.sh [--strip-debug] BINARY CONTEXT
#
# --strip-debug drops the binary's debug sections (the line tables the workspace profiles keep) from
# the copy in the image: about 160 MiB -> 28 MiB for a release build; backtraces then name functions
# but no file:line.
#
# CONTEXT/rootfs/ gets:
#   /usr/local/bin/<binary name>             the binary
#   every library `ldd BINARY` lists, and the dynamic loader, at the paths ldd prints
#   /etc/ssl/certs/ca-certificates.crt       the host's CA bundle (for TLS to outside endpoints)
#   /etc/passwd, /etc/group                  root and nonroot (65532:65532), nothing else
#   /etc/nsswitch.conf                       files, then DNS, for host names
#   /tmp                                     empty, mode 1777
# CONTEXT is emptied first. Works for static binaries too (no libraries then). Used by
# scripts/node-images.sh and usable as is by a release pipeline (see docs/images.md).
set -euo pipefail

die() { printf "stage-service-image: error: %b\n" "$*" >&2; exit 1; }

strip_debug=0
if [ "${1:-}" = --strip-debug ]; then strip_debug=1; shift; fi
[ "$#" -eq 2 ] || die "usage: scripts/stage-service-image.sh [--strip-debug] BINARY CONTEXT"
bin="$1"
ctx="$2"
if [ ! -f "$bin" ] || [ ! -x "$bin" ]; then die "no executable at '$bin' (build it first: cargo build -p <crate>)"; fi
command -v ldd >/dev/null 2>&1 || die "ldd is not installed (Debian: libc-bin)"
certs=/etc/ssl/certs/ca-certificates.crt
[ -f "$certs" ] || die "no CA bundle at $certs (Debian: ca-certificates)"

rm -rf "$ctx"
root="$ctx/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp"
chmod 1777 "$root/tmp"
if [ "$strip_debug" = 1 ]; then
  command -v strip >/dev/null 2>&1 || die "--strip-debug needs strip (Debian: binutils)"
  strip --strip-debug -o "$root/usr/local/bin/$(basename "$bin")" "$bin"
else
  cp "$bin" "$root/usr/local/bin/$(basename "$bin")"
fi

# `ldd` lines: "libx.so => /path/libx.so (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)", "linux-vdso.so.1 (...)"
# or, for a static binary, "not a dynamic executable" (exit 1).
if deps=$(ldd "$bin" 2>/dev/null); then
  if grep -q 'not found' <<<"$deps"; then die "ldd cannot resolve every library of $bin:\n$deps"; fi
  while read -r lib; do
    [ -n "$lib" ] || continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done < <(sed -n -e 's/^.*=> \(\/[^ ]*\) (0x.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p' <<<"$deps" | sort -u)
fi

cp "$certs" "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
  >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
